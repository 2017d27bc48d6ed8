"""Editing a loaded suite for a command: the models `--model` adds, the seeds `--seeds` sets, and the checks of
`--task`/`--model` patterns; each returns a new LoadedSuite and leaves the one given as it was."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from compbench.limits import MAX_SEED, TooLargeError, limits
from compbench.suite.expand import ModelSpec, matches, model_seeds, seed_list
from compbench.suite.schema import TaskEntry
from compbench.suite.source import SuiteError, SuiteIssue, format_loc, load_value

if TYPE_CHECKING:
    from compbench.suite.load import LoadedSuite


def unmatched_tasks(loaded: LoadedSuite, patterns: list[str]) -> str | None:
    """'P Q matches no task of suite S (tasks: ...)' for the task globs that select no task, else None:
    the one check of `run --task` and `evaluate(tasks=)`, so that a typo is refused, not run as nothing."""
    unmatched = [p for p in patterns if not any(matches(t.id, [p]) for t in loaded.suite.tasks)]
    if not unmatched:
        return None
    return (f"{' '.join(unmatched)} matches no task of suite {loaded.name} "
            f"(tasks: {', '.join(t.id for t in loaded.suite.tasks)})")


def no_model_message(loaded: LoadedSuite, patterns: list[str]) -> str:
    """'P Q matches no model of suite S and no adapter (models: ...)': what `run --model`, `check --model` and
    `evaluate(models=)` say of model patterns that select nothing."""
    return (f"{' '.join(patterns)} matches no model of suite {loaded.name} and no adapter "
            f"(models: {', '.join(m.id for m in loaded.suite.models)}; adapters: see `compbench list`)")


def seeds_override(loaded: LoadedSuite, n: int, start: int = 0) -> LoadedSuite:
    """The suite with every non-deterministic model's seeds start..start+n-1 (CLI --seeds); `loaded` is left as it was."""
    from compbench.adapters import get_adapter

    if n < 1 or start < 0:
        raise SuiteError([SuiteIssue(str(loaded.path or loaded.name), None, "--seeds", f"needs a count ≥ 1 and a start ≥ 0, got {n} from {start}")])
    if n > limits().seeds:
        raise SuiteError([SuiteIssue(str(loaded.path or loaded.name), None, "--seeds", str(TooLargeError("seeds", n, limits().seeds, "--max-seeds")))])
    if start + n - 1 > MAX_SEED:
        raise SuiteError([SuiteIssue(str(loaded.path or loaded.name), None, "--seed-start", f"seeds {start:,}..{start + n - 1:,} "
                                     f"go past {MAX_SEED:,} (2**32 - 1), the largest seed every backend takes, as in a suite's seeds")])
    return loaded.copy(models=[
        replace(m, seeds=model_seeds(get_adapter(m.adapter), range(start, start + n)))
        for m in loaded.models
    ])


def _top_level_parts(text: str) -> list[str]:
    """`text` split at commas outside brackets and quotes: 'a=[0,1],b=x' → ['a=[0,1]', 'b=x']."""
    parts, depth, quote, start = [], 0, None, 0
    for i, c in enumerate(text):
        if quote is not None:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth = max(0, depth - 1)
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def parse_model_args(text: str) -> dict[str, Any]:
    """'width=64,weights=[0,0.3,1],theory=none' → {'width': 64, 'weights': [0, 0.3, 1], 'theory': 'none'}.

    Values are read as YAML (flow lists and mappings included, nested as deep as a suite may); commas
    split pairs only outside brackets and quotes; a key given twice is an error, as in a suite file.
    """
    import yaml

    out: dict[str, Any] = {}
    for part in _top_level_parts(text):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or not key:
            raise ValueError(f"--model-args takes key=value pairs separated by commas, got {part!r}")
        if key in out:
            raise ValueError(f"--model-args gives {key!r} twice; give each key once")
        try:
            out[key] = load_value(value, f"--model-args {key}") if value else ""
        except yaml.YAMLError as exc:
            if value[:1] in "[{'\"":
                raise ValueError(f"--model-args {key}: cannot read {value!r} as a YAML value "
                                 f"({getattr(exc, 'problem', None) or exc})") from None
            out[key] = value  # plain text YAML would not take (e.g. starting with '@')
    return out


def add_adapter_models(loaded: LoadedSuite, patterns: list[Any], model_args: dict[str, Any] | None = None,
                       tags: list[str] | tuple[str, ...] = ()) -> tuple[LoadedSuite, dict[str, str]]:
    """Add a model, on every task whose inputs it takes, for each pattern that is not a model of the suite
    but an adapter's name (`--model my-arch`), a reference (`--model file.py:Name`, `pkg.mod:Name`) or,
    from Python, an object (an Adapter subclass or an nn.Module factory; a dict names them). Returns the
    suite with them (`loaded` is left as it was) and {pattern as given (str) or object's name: the id of
    the model added}; `model_args` set their parameters, `tags` are added to the adapter's (e.g. `lazy`,
    so the suite's `@lazy` claims judge the model).

    Raises SuiteError when a reference cannot be loaded or an adapter cannot be built from its
    defaults and the given args.
    """
    from compbench.adapters import ADAPTERS, UnknownAdapterError, get_adapter
    from compbench.adapters.user import ModelReferenceError, adapter_for, is_reference, load_reference

    added: dict[str, str] = {}
    loaded = loaded.copy()
    where = str(loaded.path or loaded.name)
    from compbench.suite.schema import is_tag

    bad = [t for t in tags if not is_tag(t)]
    if bad:
        raise SuiteError([SuiteIssue(where, None, "--model-tags", f"tags are names of letters, digits, '_', '.', '-': got {bad}")])
    items: list[tuple[str | None, Any]] = []
    for pattern in patterns:
        if isinstance(pattern, dict):
            items.extend(pattern.items())
        else:
            items.append((None, pattern))
    given_by: dict[str, str] = {}  # model id: the reference or object (as shown) that added it in this call
    for given_id, pattern in items:
        if isinstance(pattern, str) and pattern in added:
            continue  # the same reference twice: one model
        user = None
        try:
            if not isinstance(pattern, str):
                user = adapter_for(pattern, given_id)
            elif is_reference(pattern):
                user = load_reference(pattern, given_id)
        except ModelReferenceError as exc:
            raise SuiteError([SuiteIssue(where, None, "--model", str(exc))]) from None
        if user is not None:
            name, model_id, adapter = str(pattern if isinstance(pattern, str) else user.model_id), user.model_id, user.cls
            problem = _id_problem(model_id, name if isinstance(pattern, str) else None)
            if problem:
                raise SuiteError([SuiteIssue(where, None, "--model", f"model {model_id!r} from {name}: {problem}")])
            if model_id in given_by:
                raise SuiteError([SuiteIssue(where, None, "--model", _clash(given_by[model_id], name, model_id))])
            if any(m.id == model_id for m in loaded.models):
                raise SuiteError([SuiteIssue(where, None, "--model", (
                    f"model {model_id!r} from {name} has the id of a model of suite {loaded.name!r}; rename it "
                    + (f"({_with_id(name, 'new-id')})" if isinstance(pattern, str) else "(Python: models={'new-id': obj})")))])
            given_by[model_id] = name
        else:
            name = model_id = str(pattern)
            if any(matches(m.id, [name], m.group) for m in loaded.models):
                continue
            if name not in ADAPTERS.names() and not any(name.startswith(p) for p in ADAPTERS.prefixes):
                continue
            try:
                adapter = get_adapter(name)
            except UnknownAdapterError as exc:
                raise SuiteError([SuiteIssue(where, None, "--model", str(exc))]) from None
        args = dict(model_args or {})
        if "networks" in adapter.tags:  # the suite's training settings for added networks, where this adapter has them
            fields = getattr(adapter.Params, "model_fields", {})
            args = {**{k: v for k, v in loaded.suite.added_networks.items() if k in fields}, **args}
        try:
            params = adapter.Params.model_validate(args)
        except ValidationError as exc:
            msgs = "; ".join(f"{format_loc(e['loc'])}: {_message(e)}" if e["loc"] else _message(e) for e in exc.errors())
            raise SuiteError([SuiteIssue(
                where, None, "--model-args" if model_args else "--model",
                f"adapter {name!r}: {msgs}" if model_args else
                f"adapter {name!r} has no usable defaults ({msgs}); give its parameters with --model-args k=v,k=v",
            )]) from None
        seeds = seed_list(loaded.suite.seeds)
        tasks = tuple(t.id for t in loaded.suite.tasks if _produces(t) in adapter.inputs)
        if not tasks:
            raise SuiteError([SuiteIssue(where, None, "--model", f"model {name!r} takes {' or '.join(adapter.inputs)} "
                                         f"inputs; no task of suite {loaded.name!r} has them")])
        loaded.models.append(ModelSpec(model_id, model_id, adapter.name, params, args, {}, tasks,
                                       model_seeds(adapter, seeds), False, tuple(sorted({*adapter.tags, *tags}))))
        added[name] = model_id
    return loaded, added


def _id_problem(model_id: str, reference: str | None = None) -> str | None:
    from compbench.suite.schema import check_id

    try:
        check_id(model_id)
    except ValueError as exc:
        how = _with_id(reference, "my-model") if reference else "Python: models={'my-model': obj}"
        return f"its name is not a usable model id ({exc}); give it one ({how})"
    return None


def _with_id(reference: str, model_id: str) -> str:
    """`reference` naming its model `model_id`: `a/net.py:Net=net-a` (the one syntax, compbench.adapters.user)."""
    return f"{reference.rsplit('=', 1)[0] if '=' in reference.rpartition(':')[2] else reference}={model_id}"


def _clash(first: str, second: str, model_id: str) -> str:
    """Two models added at once that would both be `model_id`: say so, and how to name each."""
    named = [x for x in (first, second) if ":" in x]  # references; an object is named by a dict's key
    how = (" and ".join(_with_id(x, f"{model_id.lower()}-{'ab'[i]}") for i, x in enumerate(named)) if len(named) == 2
           else "Python: models={'" + model_id.lower() + "-a': obj_a, '" + model_id.lower() + "-b': obj_b}")
    return f"{first} and {second} clash on the model id {model_id!r}: give each its own id ({how})"


def _message(err: Any) -> str:
    return err["msg"].removeprefix("Value error, ") if err["type"] == "value_error" else err["msg"]


def _produces(task: TaskEntry) -> str | None:
    from compbench.encodings import get_encoding

    try:
        return get_encoding(task.encoding_name).produces
    except ValueError:
        return None


__all__ = ["add_adapter_models", "no_model_message", "parse_model_args", "seeds_override", "unmatched_tasks"]
