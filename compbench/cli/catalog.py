"""The commands that describe without running: `list`, `show`, `validate`."""

from __future__ import annotations

import argparse

from compbench.cli.common import EXIT_OK, EXIT_USAGE, _err


def _kinds():  # -> list[(title, Registry)]
    from compbench.adapters import ADAPTERS
    from compbench.claims import CLAIMS
    from compbench.encodings import ENCODINGS
    from compbench.report.writers import REPORTERS
    from compbench.tasks import FAMILIES

    return [("task families", FAMILIES), ("encodings", ENCODINGS), ("adapters", ADAPTERS), ("claims", CLAIMS),
            ("report formats", REPORTERS)]


def _first_line(text: str | None) -> str:
    return (text or "").strip().split("\n")[0].strip()


def _doc_of(obj: object) -> str:
    for attr in ("doc", "__doc__"):
        text = getattr(obj, attr, None)
        if isinstance(text, str) and text.strip():
            return text
    return getattr(type(obj), "__doc__", "") or ""


def _adapter_registry():  # the adapter registry, imported when `list` needs it
    from compbench.adapters import ADAPTERS

    return ADAPTERS



def cmd_list(args: argparse.Namespace) -> int:
    """List bundled suites and every registered extension (built-in and plugins) with one line each."""
    from compbench.suite import bundled_suites

    print("suites:")
    try:
        for name in bundled_suites():
            print(f"  {name}")
    except FileNotFoundError as exc:  # an install without its suites: say where they were looked for
        print(f"  none: {exc}")
    for title, registry in _kinds():
        print(f"{title}:")
        for entry in registry.entries():
            where = f" [{entry.distribution}]" if entry.distribution else ""
            print(f"  {entry.name:<24} {_first_line(_doc_of(entry.obj))}{where}")
        for prefix in registry.prefixes:
            print(f"  {prefix + '<name>':<24} any model of that library, created on demand")
        if registry is _adapter_registry():
            print(f"  {'FILE.py:Name':<24} a model from a file (or package.module:Name): an Adapter subclass, or any "
                  "nn.Module factory build(in_shape, n_out), trained with its eNTK theory (--model FILE.py:Name)")
        for name, why in sorted(registry.broken.items()):
            print(f"  {name:<24} BROKEN, skipped: {why}")
    print("`compbench show NAME` prints one's parameters with defaults and docs.")
    return EXIT_OK


def _params_lines(model: object) -> list[str]:
    from pydantic import BaseModel

    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        return ["  (no parameters)"]
    lines = []
    for name, info in model.model_fields.items():
        default = "required" if info.is_required() else f"default {info.get_default(call_default_factory=True)!r}"
        ann = str(info.annotation).replace("typing.", "")
        ann = ann if "[" in ann or "|" in ann else getattr(info.annotation, "__name__", ann)
        lines.append(f"  {name}: {ann} ({default})" + (f" — {info.description}" if info.description else ""))
    return lines or ["  (no parameters)"]


def cmd_show(args: argparse.Namespace) -> int:
    """Print an extension's parameters with defaults and docs (any kind; ambiguous names show every kind)."""
    shown = 0
    for title, registry in _kinds():
        if args.name not in registry:
            continue
        entry = registry.entry(args.name)
        obj = entry.obj
        kind = {"task families": "task family", "encodings": "encoding", "adapters": "adapter", "claims": "claim"}.get(title, "report format")
        print(f"{args.name} ({kind}; from {entry.source})")
        doc = _doc_of(obj).strip()
        if doc:
            print("  " + doc.replace("\n", "\n  "))
        for attr in ("inputs", "tags", "kinds", "metrics", "produces"):
            value = getattr(obj, attr, None)
            if value and isinstance(value, (tuple, list, str)):
                print(f"  {attr}: {value if isinstance(value, str) else ', '.join(value)}")
        params = getattr(obj, "Params", None) or getattr(obj, "params_model", None)
        print("parameters:")
        print("\n".join(_params_lines(params)))
        shown += 1
    if not shown:
        from compbench.adapters import ADAPTERS

        _err(f"nothing is registered as {args.name!r}; " + ADAPTERS.unknown_message(args.name).split(";", 1)[-1].strip()
             + " — see `compbench list`")
        return EXIT_USAGE
    return EXIT_OK


def cmd_validate(args: argparse.Namespace) -> int:
    """Validate a suite file without running it."""
    from compbench.suite import load_suite

    loaded = load_suite(args.path)
    n_cells = sum(len(loaded.tasks_for(m)) * len(m.seeds) for m in loaded.models)
    if args.quiet:
        return EXIT_OK
    print(
        f"{args.path}: OK: suite {loaded.name!r}, {len(loaded.suite.tasks)} tasks, {len(loaded.models)} models "
        f"(after sweeps), {n_cells} cells, {len(loaded.suite.expectations)} expectations"
    )
    if args.verbose:
        for t in loaded.suite.tasks:
            print(f"  task {t.id}: {t.family}, {loaded.task_kinds[t.id]}")  # every task of a valid suite has its kind
        for m in loaded.models:
            print(f"  model {m.id}: {m.adapter}, {len(m.seeds)} seed(s), on {', '.join(t.id for t in loaded.tasks_for(m))}")
    return EXIT_OK
