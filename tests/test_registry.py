"""One registry mechanism for every kind: clashes, unknown names and broken entry points, per kind."""

from __future__ import annotations

import warnings
from importlib.metadata import EntryPoint

import pytest

import compbench.registry as core
from compbench.adapters.registry import ADAPTERS
from compbench.claims import CLAIMS
from compbench.encodings import ENCODINGS
from compbench.registry import NameClashError, PluginError, Registry, UnknownNameError
from compbench.report.writers import REPORTERS
from compbench.tasks import FAMILIES

# Per kind: its registry, a valid built-in object, and an entry point value that loads but breaks the contract.
KINDS = {
    "adapter": (ADAPTERS, "kernel", "os:getcwd", "not a subclass"),
    "task family": (FAMILIES, "additive", "os:sep", "expected a function build(params)"),
    "encoding": (ENCODINGS, "onehot", "os:sep", "not a function"),
    "claim": (CLAIMS, "at_chance", "os:getcwd", "not a subclass"),
    "report writer": (REPORTERS, "md", "os:getcwd", "not a subclass"),
}


def fresh(registry: Registry) -> Registry:
    """A copy of a registry with its built-ins, loading the monkeypatched entry points."""
    out = Registry(registry.kind, registry.group, registry._check)
    for entry in registry.entries():
        out.add(entry.name, entry.raw, source=entry.source)
    return out


@pytest.mark.parametrize("kind", list(KINDS))
def test_broken_clashing_and_good_entry_points_of_every_kind(kind, monkeypatch):
    registry, builtin, wrong, why = KINDS[kind]
    good_obj = registry.entry(builtin).raw
    module, attr = good_obj.__module__, good_obj.__qualname__
    other = next(e.raw for e in registry.entries() if e.name != builtin)  # a valid object of the kind
    eps = [
        EntryPoint("missing", "no_such_module_xyz:thing", registry.group),
        EntryPoint("exits", "plugin_exits_at_import:thing", registry.group),
        EntryPoint("wrong", wrong, registry.group),
        EntryPoint(builtin, f"{other.__module__}:{other.__qualname__}", registry.group),
        EntryPoint("second-name", f"{module}:{attr}", registry.group),
    ]
    monkeypatch.setattr(core, "entry_points", lambda group: [ep for ep in eps if ep.group == group])
    reg = fresh(registry)
    if kind == "adapter":  # registering a class under a second name renames it; undo after the test
        monkeypatch.setattr(good_obj, "name", good_obj.name)
    with pytest.warns(UserWarning) as caught:
        names = reg.names()
    messages = " | ".join(str(w.message) for w in caught)
    assert "'missing'" in messages and "ModuleNotFoundError" in messages
    assert "'exits'" in messages and "SystemExit" in messages  # sys.exit() at import is reported, not obeyed
    assert "'wrong'" in messages and why in messages
    assert f"{kind} name {builtin!r} is registered twice" in messages  # both sources named
    assert "second-name" in names and reg.get("second-name") is not None
    assert {"missing", "exits", "wrong", builtin} <= set(reg.broken)
    assert reg.entry(builtin).raw is good_obj  # the built-in kept its name
    with pytest.raises(UnknownNameError, match=rf"unknown {kind} 'missng'.*skipped broken plugins: .*missing"):
        reg.get("missng")


@pytest.mark.parametrize("kind", list(KINDS))
def test_clash_in_code_is_an_error_naming_both(kind):
    registry, builtin, _, _ = KINDS[kind]
    reg = fresh(registry)
    other = next(e.raw for e in registry.entries() if e.name != builtin)
    with pytest.raises(NameClashError) as err:
        reg.add(builtin, other)
    msg = str(err.value)
    assert f"{kind} name {builtin!r} is registered twice" in msg
    assert registry.entry(builtin).source in msg and core.source_of(other) in msg
    reg.add(builtin, registry.entry(builtin).raw)  # the same object again is no clash


@pytest.mark.parametrize("kind", list(KINDS))
def test_unknown_name_gets_did_you_mean(kind):
    registry, builtin, _, _ = KINDS[kind]
    typo = builtin + "x"
    with pytest.raises(UnknownNameError) as err:
        registry.get(typo)
    assert f"did you mean {builtin!r}?" in str(err.value) and f"known: " in str(err.value)


def test_contract_breaks_are_refused_when_registering():
    with pytest.raises(PluginError, match="does not implement fit_seeds"):
        from compbench.adapters import Adapter

        ADAPTERS.add("no-fit", type("NoFit", (Adapter,), {}))
    with pytest.raises(PluginError, match="produces must be one of"):
        ENCODINGS.add("bad-enc", type("E", (), {"__call__": lambda self, task: None, "produces": "audio"})())
    with pytest.raises(PluginError, match="does not implement write"):
        from compbench.report import Reporter

        REPORTERS.add("no-write", type("NoWrite", (Reporter,), {}))
    assert "no-fit" not in ADAPTERS and "bad-enc" not in ENCODINGS and "no-write" not in REPORTERS


def test_timm_prefix_is_a_resolver_and_there_is_no_import_cycle():
    assert ADAPTERS.prefixes == ["timm:"]
    # The old cycle: registry.py imported timm_models, which imported registry.py. Now only the
    # timm module knows its prefix, and registers it as a resolver.
    import inspect

    import compbench.adapters.registry as adapter_registry
    import compbench.cli
    import compbench.suite.load

    for module in (adapter_registry, compbench.cli, compbench.suite.load):
        assert "timm" not in inspect.getsource(module), module.__name__
    with pytest.raises(UnknownNameError, match="unknown timm model 'no_such_net_xyz'"):
        ADAPTERS.get("timm:no_such_net_xyz")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cls = ADAPTERS.get("timm:test_resnet")
    assert cls.name == "timm:test_resnet" and "networks" in cls.tags and cls.inputs == ("image",)


def test_a_refused_or_second_registration_never_renames_what_is_registered():
    """A clash is refused before the kind's check runs, and a claim's name lives on its instance: registering
    the class of `above` under a taken name, or under a second name, leaves `above` named `above` (a verdict
    of `above` was once labelled `at_chance` after a clashing plugin's check renamed the shared class)."""
    from compbench.claims import CLAIMS
    from compbench.claims.builtin import Above
    from compbench.registry import NameClashError

    with pytest.raises(NameClashError):
        CLAIMS.add("at_chance", Above)
    assert CLAIMS.get("above").name == "above" and CLAIMS.get("at_chance").name == "at_chance"
    try:
        alias = CLAIMS.add("above-alias-for-test", Above)
        assert alias.name == "above-alias-for-test" and CLAIMS.get("above").name == "above"
    finally:
        CLAIMS._entries.pop("above-alias-for-test", None)
