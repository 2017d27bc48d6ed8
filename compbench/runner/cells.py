"""Cell expansion: every (task, model) job of a suite with the seeds it still needs."""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import sys
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from compbench.codehash import NOT_RESULT_CODE, _source_hash, code_closure
from compbench.encodings import Encoded, encode, encode_for_seed, follows_model_seed
from compbench.suite import LoadedSuite, ModelSpec, TaskEntry
from compbench.store import KEY_SCHEMA, cell_key
from compbench.tasks import TaskData, make_task


@dataclass
class PreparedTask:
    """A task built once per suite: data, encoded inputs and its additivity fit."""

    entry: TaskEntry
    data: TaskData
    # A `seed: model` encoding's latest draw, (seed, Encoded): only one is kept, a paper-size draw being hundreds of
    # MB, and a task's seeds of one model run one after another.
    _seed_encoded: tuple[int, Encoded] | None = field(default=None, repr=False, compare=False)

    @cached_property
    def encoded(self) -> Encoded:
        """The task rendered by its encoding: training and evaluation batches (one draw for every seed)."""
        return encode(self.entry.encoding_name, self.data, **self.entry.encoding_params)

    @property
    def per_seed(self) -> bool:
        """Whether its encoding draws with each model seed (`seed: model`), so each seed is a job of its own."""
        return follows_model_seed(self.entry.encoding_params)

    def encoded_for(self, seed: int) -> Encoded:
        """The task rendered for one model seed: `encoded` unless the encoding draws per seed."""
        if not self.per_seed:
            return self.encoded
        if self._seed_encoded is None or self._seed_encoded[0] != seed:
            self._seed_encoded = (seed, encode_for_seed(self.entry.encoding_name, self.data, seed, self.entry.encoding_params))
        return self._seed_encoded[1]

    @cached_property
    def additivity(self):  # -> theory.AdditivityFit
        """The conjunction-wise additivity fit for this task's cells and split."""
        from compbench.theory import AdditivityFit

        if self.data.train_mask.all():  # an iid control trains every cell: nothing is held out to decompose
            return None
        if not self.data.additivity:  # the family declares the fit off (many components: costly)
            return None
        return AdditivityFit(self.data.cells, self.data.train_mask)


@dataclass(frozen=True)
class Job:
    """One model on one task, for a set of seeds."""

    task: PreparedTask
    model: ModelSpec
    seeds: tuple[int, ...]
    keys: tuple[str, ...]
    code: str = ""  # hash of the code that produces its predictions (code_version); stored in its records

    @property
    def encoded(self) -> Encoded:
        """Its task's inputs for its seeds (a per-seed encoding's job has one seed: see expand_jobs)."""
        return self.task.encoded_for(self.seeds[0])


def prepare_tasks(loaded: LoadedSuite) -> dict[str, PreparedTask]:
    """Build every task of the suite once."""
    return {t.id: PreparedTask(t, make_task(t.family, **t.params)) for t in loaded.suite.tasks}


# A cell's predictions are produced by runner/execute.py and every compbench module it imports,
# directly or through others (found by reading their import statements, so a new module, or an
# existing one such as losses.py that an adapter imports, is covered without being listed). The
# packages below describe, store, judge or show results and never change a cell's numbers, so the
# walk does not enter them: editing a claim, a report or the suite loader retrains nothing.
RESULT_ENTRY = "compbench.runner.execute"


@functools.lru_cache(maxsize=None)
def result_code_files() -> tuple[Path, ...]:
    """The compbench source files that produce a cell's predictions: runner/execute.py's import closure.

    Scoring (compbench.scoring) is outside it: its own hash (scoring.score.scoring_version) says
    when a stored record is rescored, which needs no training.
    """
    return code_closure(RESULT_ENTRY, NOT_RESULT_CODE + ("compbench.scoring",))


def package_files(obj: object) -> tuple[str, ...]:
    """The source files of the whole package `obj` comes from ('' when it has none, e.g. defined by exec).

    A plugin's adapter usually imports helpers from its own package: editing any of them must
    invalidate its cells, so the whole top-level package is hashed, not only the class's module.
    compbench's own objects are covered by result_code_files().
    """
    module = sys.modules.get(getattr(obj, "__module__", "") or "")
    top = (module.__name__.split(".")[0] if module else "")
    if top == "compbench":
        return ()
    package = sys.modules.get(top)
    paths = list(getattr(package, "__path__", []) or [])
    if paths:
        return tuple(str(Path(p).resolve()) for p in paths)
    try:
        return (inspect.getsourcefile(obj) or "",)  # type: ignore[arg-type]
    except (TypeError, OSError):  # defined in a notebook, by exec, ...: no file to hash
        return ("",)


def code_version(adapter: str, family: str | None = None, encoding: str | None = None) -> str:
    """Hash of compbench's result-producing code plus the packages the adapter, family and encoding come from."""
    from compbench.adapters import get_adapter

    return _code_version(get_adapter(adapter), family, encoding)


@functools.lru_cache(maxsize=None)
def _code_version(cls: type, family: str | None, encoding: str | None) -> str:
    # Keyed by the class, not its name: a user's model given again under the same name (redefined
    # in a notebook, its file edited) is a new class with its own identity.
    own = getattr(cls, "__compbench_code__", None)  # a user's model (compbench.adapters.user): its source's digest
    extra = () if own else package_files(cls)
    if "" in extra:
        _warn_no_source(cls.name, f"{cls.__module__}.{cls.__qualname__}")
    if family is not None:
        from compbench.tasks import FAMILIES

        extra += package_files(FAMILIES.get(family).build)
    if encoding is not None:
        from compbench.encodings import get_encoding

        extra += package_files(get_encoding(encoding).encode)
    files = tuple(dict.fromkeys(p for p in extra if p))
    digest = _source_hash(tuple(str(p) for p in result_code_files()) + files)
    return hashlib.sha256(f"{digest}:{own}".encode()).hexdigest()[:12] if own else digest


@functools.lru_cache(maxsize=None)
def _warn_no_source(adapter: str, where: str) -> None:
    warnings.warn(
        f"adapter {adapter!r} ({where}) has no source file, so editing it does not invalidate its cached "
        "cells: run with --force after changing it",
        stacklevel=3,
    )


def _definition(task: TaskEntry, model: ModelSpec, seed: int, device: str, params: dict | None = None) -> dict:
    """What a cell is (hashed into its key): task, encoding, model, seed, device.

    The code that computes it is not part of its identity: a record stores the hash of that code
    (`code`), so a result computed by another version of compbench is still found, shown as stale
    by `report`, and recomputed by `run`.
    """
    return {
        "task": {"family": task.family, "params": task.params, "encoding": task.encoding},
        "adapter": adapter_identity(model.adapter),
        "params": model.params.model_dump(mode="json") if params is None else params,
        "seed": seed,
        "device": device,
    }


def adapter_identity(adapter: str) -> str:
    """The adapter as a cell's key names it: a file model by its resolved path (compbench.adapters.user), so
    `../net.py:Net` from a subfolder is the model `net.py:Net` is from its parent; any other by its name."""
    from compbench.adapters import get_adapter

    return getattr(get_adapter(adapter), "__compbench_key__", adapter)


def key_for(task: TaskEntry, model: ModelSpec, seed: int, device: str) -> str:
    """The cache key of one cell: everything that determines its result."""
    return cell_key(_definition(task, model, seed, device))


class _KeyMaker:
    """The keys of many cells at once, equal to key_for's, with each part's JSON built once.

    cell_key hashes `json.dumps({"schema": …, **definition}, sort_keys=True, default=str)`: a JSON
    object's text is its sorted members' `"name": value` texts joined by ", ", so a cell's text is
    assembled from the texts of its model's params and of its task, made once each (a 50 × 50
    sweep has thousands of cells sharing them) instead of dumping every cell's whole definition.
    """

    MEMBERS = ("adapter", "device", "params", "schema", "seed", "task")

    def __init__(self, device: str) -> None:
        self.device = json.dumps(device)
        self.models: dict[int, tuple[str, str]] = {}
        self.tasks: dict[tuple[str, str], tuple[str, str]] = {}
        self.adapters: dict[str, str] = {}  # adapter → its name in a key (a registry look-up per model otherwise)
        self.seeds: dict[tuple[type, int], str] = {}  # a seed's JSON, by type too: True == 1, but dumps to "true"

    def keys(self, task: TaskEntry, model: ModelSpec, seeds: tuple[int, ...]) -> tuple[str, ...]:
        """The cache keys of `model` on `task` for each seed."""
        dump = functools.partial(json.dumps, sort_keys=True, default=str)
        if id(model) not in self.models:
            if model.adapter not in self.adapters:
                self.adapters[model.adapter] = dump(adapter_identity(model.adapter))
            self.models[id(model)] = (self.adapters[model.adapter], dump(model.params.model_dump(mode="json")))
        adapter, params = self.models[id(model)]
        if (model.adapter, task.id) not in self.tasks:
            definition = _definition(task, model, 0, "", params={})
            assert sorted({"schema", *definition}) == list(self.MEMBERS), "a key field was added: update _KeyMaker"
            self.tasks[(model.adapter, task.id)] = dump(definition["task"])
        task_text = self.tasks[(model.adapter, task.id)]
        head = (f'{{"adapter": {adapter}, "device": {self.device}, "params": {params}, '
                f'"schema": {KEY_SCHEMA}, "seed": ')
        tail = f', "task": {task_text}}}'
        texts = self.seeds
        for seed in seeds:
            if (type(seed), seed) not in texts:
                texts[(type(seed), seed)] = json.dumps(seed)
        return tuple(hashlib.sha256(f"{head}{texts[(type(seed), seed)]}{tail}".encode()).hexdigest()[:20] for seed in seeds)


def expand_jobs(loaded: LoadedSuite, tasks: dict[str, PreparedTask], device: str) -> list[Job]:
    """All (task, model) jobs of the suite, in suite order."""
    jobs = []
    maker = _KeyMaker(device)
    codes: dict[tuple[str, str, str], str] = {}  # a few (adapter, family, encoding) for thousands of jobs
    for model in loaded.models:
        for entry in loaded.tasks_for(model):
            what = (model.adapter, entry.family, entry.encoding_name)
            code = codes[what] if what in codes else codes.setdefault(what, code_version(*what))
            task = tasks[entry.id]
            keys = maker.keys(entry, model, model.seeds)
            if task.per_seed:  # each seed trains on its own draw: a job per seed (no seeds stacked on one input)
                jobs.extend(Job(task, model, (s,), (k,), code) for s, k in zip(model.seeds, keys))
            else:
                jobs.append(Job(task, model, model.seeds, keys, code))
    return jobs
