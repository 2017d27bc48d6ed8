"""What a run asked for (its profile, added models, seeds), recorded in summary.json for `report`.

`report` rebuilds the suite from its file; without this record it rebuilt the suite's defaults, not
what the last run asked for: after a failing `run --profile alt` it judged the default profile's
cells (green), after `run --model net.py:Net` it dropped the added model. `run` and
`evaluate(report=True)` write the record (`RunConfig.facts`); `report` reads it back
(`recorded_config`) and rebuilds the same configuration (`RunConfig.apply`), or says in one line
why it cannot (`RecordedConfigError`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from compbench.errors import CompbenchError
from compbench.files import read_contained
from compbench.outcome import SUMMARY_FILE
from compbench.suite import LoadedSuite

# The keys of summary.json this module owns (publish keeps them when it rewrites the summary).
CONFIG_KEYS = ("profile", "added_models", "seeds")


class RecordedConfigError(CompbenchError, ValueError):
    """The configuration a results directory records cannot be rebuilt (a model's file is gone, a profile left the suite)."""


@dataclass(frozen=True)
class AddedModel:
    """A model a run added (`--model`, `evaluate(models=)`), as `report` rebuilds it."""

    id: str
    given: str  # as the user gave it: an adapter's name, file.py:Name, package.module:Name, a Python object's name
    reference: str | None  # what rebuilds it (a file's path made absolute); None: a Python object, which cannot be
    args: dict[str, Any] = field(default_factory=dict)  # --model-args / evaluate(model_args=)
    tags: tuple[str, ...] = ()  # --model-tags / evaluate(tags=)

    def shown(self) -> str:
        """'mlp', or 'Net (from /abs/net.py:Net)'."""
        return self.id if self.given == self.id else f"{self.id} (from {self.reference or self.given})"


@dataclass(frozen=True)
class RunConfig:
    """The configuration a run asked for beyond the suite file: profile (None: none), added models, a seeds override."""

    profile: str | None = None
    added: tuple[AddedModel, ...] = ()
    seeds: int | None = None

    def facts(self) -> dict[str, Any]:
        """The summary.json entries that record it."""
        return {"profile": self.profile, "seeds": self.seeds,
                "added_models": [{"id": m.id, "given": m.given, "reference": m.reference, "args": _as_json(m.args),
                                  "tags": list(m.tags)} for m in self.added]}

    @property
    def profile_shown(self) -> str:
        """"profile 'alt'", or "no profile"."""
        return f"profile {self.profile!r}" if self.profile else "no profile"

    def describe(self) -> str:
        """One phrase: "profile 'alt', added model mlp, --seeds 3" ("no profile" when none)."""
        parts = [self.profile_shown]
        if self.added:
            parts.append(f"added model{'s' if len(self.added) > 1 else ''} {', '.join(m.shown() for m in self.added)}")
        if self.seeds is not None:
            parts.append(f"--seeds {self.seeds}")
        return ", ".join(parts)

    def apply(self, loaded: LoadedSuite, where: Path) -> LoadedSuite:
        """`loaded` with the recorded models added and its seeds overridden, as the run did (`where`: the summary file, for messages)."""
        from compbench.adapters.user import is_reference
        from compbench.suite import SuiteError, add_adapter_models, seeds_override

        rerun = (f"or run the suite again without it (`compbench run --suite {loaded.name} --results {where.parent}`) "
                 "to report without it")
        for m in self.added:
            if m.reference is None:
                raise RecordedConfigError(
                    f"{where}: the last run (compbench.evaluate) added model {m.id!r} as a Python object, which "
                    f"`compbench report` cannot import; report it with evaluate(..., out=..., report=True), {rerun}")
            pattern: Any = {m.id: m.reference} if is_reference(m.reference) else m.reference
            try:
                loaded, got = add_adapter_models(loaded, [pattern], dict(m.args), m.tags)
            except SuiteError as exc:
                why = "; ".join(i.message for i in exc.issues)
                raise RecordedConfigError(f"{where}: the last run added model {m.shown()}, which cannot be rebuilt "
                                          f"({why}); restore it, {rerun}") from None
            if m.id not in got.values():  # an adapter no longer registered, or now a model of the suite
                raise RecordedConfigError(f"{where}: the last run added model {m.shown()}, which cannot be rebuilt "
                                          f"(no adapter {m.reference!r} is registered, or the suite now has a model "
                                          f"{m.id!r}); install it, {rerun}")
        if self.seeds is not None:
            try:
                loaded = seeds_override(loaded, self.seeds)
            except SuiteError as exc:
                raise RecordedConfigError(f"{where}: the last run's --seeds {self.seeds} cannot be applied "
                                          f"({'; '.join(i.message for i in exc.issues)})") from None
        return loaded


def _as_json(value: dict[str, Any]) -> dict[str, Any]:
    """`value` as JSON holds it (evaluate's model_args may hold any object: its text, whose cells a report then misses)."""
    return json.loads(json.dumps(value, default=str))


def config_of(loaded: LoadedSuite, added: dict[str, str], *, profile: str | None, model_args: dict[str, Any] | None = None,
              tags: list[str] | tuple[str, ...] = (), seeds: int | None = None) -> RunConfig:
    """What a run asked for: its profile, the models `add_adapter_models` added ({as given: id}), its seeds override."""
    from compbench.adapters import get_adapter
    from compbench.adapters.user import is_reference

    models = []
    for given, model_id in added.items():
        spec = next(s for s in loaded.models if s.id == model_id)
        reference: str | None = spec.adapter
        if is_reference(given):
            reference = _absolute(given)
        elif hasattr(get_adapter(spec.adapter), "__compbench_code__"):  # an object given in Python: nothing to import
            reference = None
        models.append(AddedModel(model_id, given, reference, dict(model_args or {}), tuple(tags)))
    return RunConfig(profile, tuple(models), seeds)


def _absolute(reference: str) -> str:
    """`file.py:Name` with the file's absolute path (a report may run from another folder); a module's unchanged."""
    target, _, attr = reference.rpartition(":")
    if target.endswith(".py") or "/" in target or "\\" in target:
        return f"{Path(target).expanduser().resolve()}:{attr}"
    return reference


def recorded_config(out_dir: Path, suite: str) -> RunConfig | None:
    """The configuration summary.json records for `suite`; None when it records none (no summary, one written before
    it did, or another suite's: publish.check_owner refuses that directory)."""
    try:
        doc = json.loads(read_contained(out_dir, SUMMARY_FILE) or b"{}")
    except ValueError:  # damaged: as though there were none
        return None
    if not isinstance(doc, dict) or doc.get("suite") != suite:
        return None
    return config_from_summary(doc, out_dir / SUMMARY_FILE)


def config_from_summary(doc: dict[str, Any], where: Path | str = SUMMARY_FILE) -> RunConfig | None:
    """The configuration a summary (summary.json's object) records; None when it records none."""
    if "profile" not in doc:
        return None
    profile, seeds, added = doc.get("profile"), doc.get("seeds"), doc.get("added_models") or []
    if not (profile is None or isinstance(profile, str) and profile) or \
            not (seeds is None or isinstance(seeds, int) and not isinstance(seeds, bool)) or not isinstance(added, list):
        raise RecordedConfigError(f"{where}: its profile, seeds or added_models is not what compbench writes "
                                  "(edited by hand?); run the suite again to rewrite it")
    models = []
    for entry in added:
        ok = isinstance(entry, dict) and isinstance(entry.get("id"), str) and isinstance(entry.get("given"), str) \
            and (entry.get("reference") is None or isinstance(entry.get("reference"), str)) \
            and isinstance(entry.get("args", {}), dict) and isinstance(entry.get("tags", []), list)
        if not ok:
            raise RecordedConfigError(f"{where}: added_models holds {str(entry)[:60]!r}, not what compbench writes; "
                                      "run the suite again to rewrite it")
        models.append(AddedModel(entry["id"], entry["given"], entry.get("reference"), entry.get("args", {}),
                                 tuple(str(t) for t in entry.get("tags", []))))
    return RunConfig(profile, tuple(models), seeds)


def with_profile(config: RunConfig | None, profile: str | None) -> RunConfig:
    """The configuration a report states: the recorded one (or none) under the profile it reports."""
    return replace(config or RunConfig(), profile=profile)


__all__ = ["AddedModel", "CONFIG_KEYS", "RecordedConfigError", "RunConfig", "config_from_summary", "config_of", "recorded_config", "with_profile"]
