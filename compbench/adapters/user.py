"""A user's model given as `file.py:Name`, `package.module:Name` or a Python object, made an adapter.

`Name` is either a compbench `Adapter` subclass, used as it is, or a factory of a
`torch.nn.Module` (`build(in_shape, n_out)`, e.g. the module's class), wrapped by
`compbench.adapters.module.ModuleAdapter` so it trains and gets its empirical-NTK theory for free.
Either way it is registered under a name of its own for this process (within a
`compbench.evaluate` call, for that call only: `Registry.scope`), no package or entry point
needed. The same reference is taken wherever a model is named: `--model` of run, check and
baseline record, the pytest plugin's `--compbench-model`, `compbench.evaluate`, and a suite
model's `adapter:` (a relative path there is taken from the suite's folder).

Cache identity. A record stores the hash of the code that produced it; for a user's model that
hash covers its source: the whole file (`file.py:Name`), the whole package (`package.module:Name`),
or, for an object defined where there is no file (a notebook cell, `exec`), the text
`inspect.getsource` finds for it. An object with no source at all gets a fresh random identity in
every process: its cells are recomputed each session (never served stale from a store), and
`UserModel.note` says so.
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compbench.adapters.base import Adapter
from compbench.adapters.module import ModuleAdapter, check_factory
from compbench.adapters.registry import ADAPTERS

# `path/to/file.py:Name` or `package.module:Name` (Name a Python identifier, possibly dotted: Outer.Inner).
_REFERENCE = re.compile(r"^(?P<target>.+?):(?P<attr>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)$")
_MODULE = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


class ModelReferenceError(ValueError):
    """A model reference or object that cannot be made an adapter: what is wrong, and where."""


@dataclass(frozen=True)
class UserModel:
    """A user's model registered as an adapter for this process."""

    model_id: str  # the id it has in the suite and the results (the object's name unless given)
    adapter: str  # the adapter name it is registered under (stored in its records)
    cls: type[Adapter]
    source: str | None  # the file or package hashed into its cells' code identity; None: no file
    cached: bool  # False: no source to identify it by, so its cells are recomputed in every process

    @property
    def note(self) -> str | None:
        """What a user should know about its caching, or None."""
        if self.cached:
            return None
        return (f"model {self.model_id!r} has no source compbench can read (defined interactively?): "
                "its cells are recomputed in every session, not reused from the store")


def is_reference(text: str) -> bool:
    """Whether `text` names a model by file or module (`x.py:Name`, `pkg.mod:Name`), not a registered adapter."""
    if any(text.startswith(p) for p in ADAPTERS.prefixes):
        return False
    # A name registered by an earlier load of the same reference (a suite's model, an earlier --model in
    # this process) is still a reference: it is loaded again, so an edited file is read again.
    if text in ADAPTERS.names() and not getattr(ADAPTERS.get(text), "__compbench_reference__", False):
        return False
    m = _REFERENCE.fullmatch(text)
    if m is None:
        return False
    target = m.group("target")
    return target.endswith(".py") or "/" in target or "\\" in target or bool(_MODULE.fullmatch(target))


def _module_name(path: Path) -> str:
    stem = re.sub(r"\W", "_", path.stem)
    return f"_compbench_model_{stem}_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"


def _load_file(path: Path, shown: str) -> Any:
    """Execute the file as a fresh module (registered in sys.modules, so pool workers can unpickle its classes)."""
    if not path.is_file():
        raise ModelReferenceError(f"{shown}: no such file {str(path)!r}")
    name = _module_name(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ModelReferenceError(f"{shown}: {str(path)!r} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.append(folder)  # the file may import helpers that sit beside it
    old = sys.modules.get(name)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except SyntaxError as exc:
        _restore(name, old)
        raise ModelReferenceError(f"{path}:{exc.lineno}: syntax error: {exc.msg}") from None
    except BaseException as exc:
        _restore(name, old)
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise ModelReferenceError(f"{path}{_line_in(exc, path)}: importing it failed: {type(exc).__name__}: {exc}") from None
    return module


def _restore(name: str, old: Any) -> None:
    if old is None:
        sys.modules.pop(name, None)
    else:
        sys.modules[name] = old


def _line_in(exc: BaseException, path: Path) -> str:
    """':LINE' of the deepest traceback frame in `path`, or ''."""
    line = ""
    tb = exc.__traceback__
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename).resolve() == path:
            line = f":{tb.tb_lineno}"
        tb = tb.tb_next
    return line


def _shown_path(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _source_digest(paths: list[Path]) -> str:
    """A digest of the files' bytes now: codehash's hash, uncached (a file edited in the same process gives a new digest)."""
    from compbench.codehash import _source_hash

    return _source_hash.__wrapped__(tuple(str(p) for p in paths))


def load_reference(text: str, model_id: str | None = None, *, base: Path | None = None, option: str = "--model") -> UserModel:
    """Import `file.py:Name` or `package.module:Name` and register Name as an adapter (see module doc).

    A relative file path is taken from `base` (a suite's folder) or else the working directory;
    `option` names where the reference was given, in error messages (`--model`, a suite's `adapter`).
    """
    m = _REFERENCE.fullmatch(text)
    shown_ref = f"{option} {text}"
    if m is None:
        raise ModelReferenceError(f"{shown_ref}: expected path/to/file.py:Name or package.module:Name")
    target, attr = m.group("target"), m.group("attr")
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = ((base or Path.cwd()) / Path(target).expanduser()).resolve()
        module = _load_file(path, shown_ref)
        where, shown, source = str(path), f"{_shown_path(path)}:{attr}", [path]
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            raise ModelReferenceError(f"{shown_ref}: no module named {exc.name!r} (a file needs its .py suffix)") from None
        except Exception as exc:  # noqa: BLE001 — the user's module failed to import: say how
            raise ModelReferenceError(f"{shown_ref}: importing {target} failed: {type(exc).__name__}: {exc}") from None
        where, shown = target, text
        top = sys.modules.get(target.split(".")[0])
        paths = [Path(p) for p in getattr(top, "__path__", [])] or ([Path(module.__file__)] if getattr(module, "__file__", None) else [])
        source = paths
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            names = [n for n in vars(obj) if not n.startswith("_")]
            close = difflib.get_close_matches(part, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ModelReferenceError(f"{shown_ref}: {where} defines no {part!r}{hint}")
        obj = getattr(obj, part)
    user = adapter_for(obj, model_id or attr.split(".")[-1], adapter_name=shown,
                       code=_source_digest(source) if source else None, source=where if source else None)
    user.cls.__compbench_reference__ = True  # type: ignore[attr-defined]  # read by is_reference
    return user


def adapter_for(obj: Any, model_id: str | None = None, *, adapter_name: str | None = None,
                code: str | None = None, source: str | None = None) -> UserModel:
    """Register `obj` (an Adapter subclass or a factory of an nn.Module) as an adapter and describe it.

    Without `code`, its identity is the digest of its source file or, lacking one, of the text
    `inspect.getsource` finds; with neither it is recomputed in every process (`cached` False).
    """
    import torch

    name = model_id or getattr(obj, "__name__", None)
    if isinstance(obj, torch.nn.Module):  # before the name: an instance has none, and a name would not help
        raise ModelReferenceError(
            f"model {name or type(obj).__name__!r} is an nn.Module instance ({type(obj).__name__}(...)); pass its class "
            f"({type(obj).__name__}) or a factory build(in_shape, n_out), so that every seed gets its own initialisation")
    if not name:
        raise ModelReferenceError(f"{obj!r} has no __name__: give the model a name (models={{'name': obj}})")
    if isinstance(obj, type) and issubclass(obj, Adapter):
        cls: type[Adapter] = obj
    elif (isinstance(obj, type) and issubclass(obj, torch.nn.Module)) or (callable(obj) and not isinstance(obj, type)):
        try:
            check_factory(obj, f"model {name!r}")
        except TypeError as exc:
            raise ModelReferenceError(str(exc)) from None
        cls = type(str(name), (ModuleAdapter,), {
            "factory": staticmethod(obj), "__module__": getattr(obj, "__module__", __name__),
            "__qualname__": getattr(obj, "__qualname__", str(name)), "__doc__": inspect.getdoc(obj) or ModuleAdapter.__doc__,
        })
    else:
        raise ModelReferenceError(
            f"model {name!r} is {type(obj).__name__}, neither a compbench Adapter subclass nor a factory of a "
            "torch.nn.Module (a class or function called as build(in_shape, n_out))")
    cached = True
    if code is None:
        code, source, cached = _object_identity(obj)
    adapter = adapter_name or f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', name)}"
    cls.__compbench_code__ = code  # type: ignore[attr-defined]  # read by runner.cells.code_version
    cls.__compbench_origin__ = source or f"{adapter} (no source file)"  # type: ignore[attr-defined]
    cls.__compbench_cached__ = cached  # type: ignore[attr-defined]  # False: recomputed in every process
    try:
        registered = ADAPTERS.add(adapter, cls, replace=True, scoped=True)
    except ValueError as exc:
        raise ModelReferenceError(str(exc)) from None
    return UserModel(str(name), adapter, registered, source, cached)


def _object_identity(obj: Any) -> tuple[str, str | None, bool]:
    """(code digest, source description, cached) of an object given in Python."""
    try:
        path = inspect.getsourcefile(obj)
    except (TypeError, OSError):
        path = None
    if path and Path(path).is_file() and not path.startswith("<"):
        p = Path(path).resolve()
        module = sys.modules.get(getattr(obj, "__module__", "") or "")
        top = sys.modules.get((getattr(module, "__name__", "") or "").split(".")[0])
        dirs = [Path(d) for d in getattr(top, "__path__", [])]
        return _source_digest(dirs or [p]), str(dirs[0] if dirs else p), True
    try:
        text = inspect.getsource(obj)
    except (TypeError, OSError):
        return uuid.uuid4().hex[:16], None, False
    return hashlib.sha256(text.encode()).hexdigest()[:16], "source text (no file)", True


__all__ = ["ModelReferenceError", "UserModel", "adapter_for", "is_reference", "load_reference"]
