"""A user's model given as `file.py:Name`, `package.module:Name` or a Python object, made an adapter.

`Name` is either a compbench `Adapter` subclass, used as it is, or a factory of a
`torch.nn.Module` (`build(in_shape, n_out)`, e.g. the module's class), wrapped by
`compbench.adapters.module.ModuleAdapter` so it trains and gets its empirical-NTK theory for free.
Either way it is registered under a name of its own for this process (within a
`compbench.evaluate` call, for that call only: `Registry.scope`), no package or entry point
needed. The same reference is taken wherever a model is named: `--model` of run, check and
baseline record, the pytest plugin's `--compbench-model`, `compbench.evaluate`, and a suite
model's `adapter:` (a relative path there is taken from the suite's folder).

A reference may end in `=ID` (`--model a/net.py:Net=net-a`) to give the model an id of its own
instead of Name's (two files may define one class name).

Cache identity. A record stores the hash of the code that produced it; for a user's model that
hash covers its source: the whole file (`file.py:Name`) with the modules beside it that it
imports (codehash.local_modules), the whole package (`package.module:Name`), or, for an object
defined where there is no file (a notebook cell, `exec`), the text `inspect.getsource` finds for
it and the plain values of the globals it reads. A factory's closure, a class's methods' closures
and a `functools.partial`'s arguments are part of it too. An object with no source at all, or
carrying a value compbench cannot identify, gets a fresh random identity in every process: its
cells are recomputed each session (never served stale from a store), and `UserModel.note` says so.
A cell's key names a file model by its resolved path, so the current directory does not matter.
"""

from __future__ import annotations

import difflib
import dis
import functools
import hashlib
import importlib
import importlib.machinery
import importlib.util
import inspect
import re
import sys
import sysconfig
import types
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from compbench.adapters.base import Adapter
from compbench.adapters.module import ModuleAdapter, check_factory
from compbench.adapters.registry import ADAPTERS
from compbench.codehash import local_modules
from compbench.errors import CompbenchError

# `path/to/file.py:Name` or `package.module:Name` (Name a Python identifier, possibly dotted: Outer.Inner),
# optionally `=ID`: the model's id (checked by the suite's id rules in load_reference).
_REFERENCE = re.compile(r"^(?P<target>.+?):(?P<attr>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)(?:=(?P<id>[^=:/\\]*))?$")
_MODULE = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


class ModelReferenceError(CompbenchError, ValueError):
    """A model reference or object that cannot be made an adapter: what is wrong, and where."""


@dataclass(frozen=True)
class UserModel:
    """A user's model registered as an adapter for this process."""

    model_id: str  # the id it has in the suite and the results (the object's name unless given)
    adapter: str  # the adapter name it is registered under (stored in its records)
    cls: type[Adapter]
    source: str | None  # the file or package hashed into its cells' code identity; None: no file
    cached: bool  # False: no source to identify it by, so its cells are recomputed in every process
    why: str | None = None  # why it is not cached, where that is not a missing source

    @property
    def note(self) -> str | None:
        """What a user should know about its caching, or None."""
        if self.cached:
            return None
        return (f"model {self.model_id!r} {self.why or 'has no source compbench can read (defined interactively?)'}: "
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


class _SourceOnlyLoader(importlib.machinery.SourceFileLoader):
    """Compiles the file's text as it is now, never a cached .pyc: an edit within one second that keeps the
    file's size (WIDTH = 4 → 5) leaves the .pyc's timestamp check satisfied, and the old code would run
    under the new code's hash."""

    def get_code(self, fullname: str) -> Any:
        """The module's code compiled from its source."""
        return compile(self.get_data(self.path), self.path, "exec", dont_inherit=True)


class _HelperFinder:
    """While a file model executes, its local helpers are found here and loaded from their source."""

    def __init__(self, helpers: dict[str, Path]) -> None:
        self.helpers = helpers

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        """The spec of a helper module of the file, or None for any other module."""
        file = self.helpers.get(name)
        if file is None:
            return None
        package = [str(file.parent)] if file.name == "__init__.py" else None
        return importlib.util.spec_from_file_location(name, file, loader=_SourceOnlyLoader(name, str(file)),
                                                      submodule_search_locations=package)


def _load_file(path: Path, shown: str, helpers: dict[str, Path]) -> Any:
    """Execute the file as a fresh module (registered in sys.modules, so pool workers can unpickle its classes)."""
    name = _module_name(path)
    spec = importlib.util.spec_from_file_location(name, path, loader=_SourceOnlyLoader(name, str(path)))
    if spec is None or spec.loader is None:
        raise ModelReferenceError(f"{shown}: {str(path)!r} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.append(folder)  # the file may import helpers that sit beside it
    # Every helper is imported again, from its file beside this one: the code that runs is the code hashed,
    # even where a module of the same name from elsewhere (another model's helper.py) is already imported;
    # that one is put back afterwards for whoever holds it.
    others = {}
    for helper, file in helpers.items():
        mod = sys.modules.pop(helper, None)
        loaded = getattr(mod, "__file__", None)
        if mod is not None and not (loaded and Path(loaded).resolve() == file.resolve()):
            others[helper] = mod
    old = sys.modules.get(name)
    sys.modules[name] = module
    finder = _HelperFinder(helpers)
    sys.meta_path.insert(0, finder)
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
    finally:
        sys.meta_path.remove(finder)
        sys.modules.update(others)
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
    """Import `file.py:Name[=ID]` or `package.module:Name[=ID]` and register Name as an adapter (see module doc).

    A relative file path is taken from `base` (a suite's folder) or else the working directory;
    `option` names where the reference was given, in error messages (`--model`, a suite's `adapter`).
    """
    m = _REFERENCE.fullmatch(text)
    shown_ref = f"{option} {text}"
    if m is None:
        raise ModelReferenceError(f"{shown_ref}: expected path/to/file.py:Name or package.module:Name"
                                  + (", then =ID to name the model" if option != "adapter" else ""))
    target, attr, given = m.group("target"), m.group("attr"), m.group("id")
    if given is not None:
        model_id = _given_id(given, model_id, shown_ref, option)
    key = None
    if target.endswith(".py") or "/" in target or "\\" in target:
        path = ((base or Path.cwd()) / Path(target).expanduser()).resolve()
        if not path.is_file():
            raise ModelReferenceError(f"{shown_ref}: no such file {str(path)!r}")
        helpers = local_modules(path)
        module = _load_file(path, shown_ref, helpers)
        where, shown, source = str(path), f"{_shown_path(path)}:{attr}", [path, *helpers.values()]
        key = f"{path}:{attr}"  # a cell's key: the resolved file, whichever directory it was named from
    else:
        try:
            module = importlib.import_module(target)
        except ModuleNotFoundError as exc:
            raise ModelReferenceError(f"{shown_ref}: no module named {exc.name!r} (a file needs its .py suffix)") from None
        except Exception as exc:  # noqa: BLE001 — the user's module failed to import: say how
            raise ModelReferenceError(f"{shown_ref}: importing {target} failed: {type(exc).__name__}: {exc}") from None
        where, shown = target, f"{target}:{attr}"  # without =ID: one module's Name is one adapter, whatever it is called
        top = sys.modules.get(target.split(".")[0])
        paths = [Path(p) for p in getattr(top, "__path__", [])]
        if not paths and getattr(module, "__file__", None):  # a lone module: it and the modules beside it it imports
            paths = [Path(module.__file__), *local_modules(Path(module.__file__)).values()]
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
    if key:
        user.cls.__compbench_key__ = key  # type: ignore[attr-defined]  # read by runner.cells.adapter_identity
    return user


def _given_id(given: str, model_id: str | None, shown_ref: str, option: str) -> str:
    """The id `=ID` gives, checked by the suite's id rules."""
    from compbench.suite.schema import check_id

    if option == "adapter":
        raise ModelReferenceError(f"{shown_ref}: a suite's model is named by its id:, not by =ID in its adapter")
    try:
        check_id(given)
    except ValueError as exc:
        raise ModelReferenceError(f"{shown_ref}: {given!r} after '=' is no usable model id ({exc})") from None
    if model_id is not None and model_id != given:
        raise ModelReferenceError(f"{shown_ref}: named {model_id!r} and, by =, {given!r}; give one name")
    return given


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
    cached, why = True, None
    if code is None:
        code, source, cached, why = _object_identity(obj)
    adapter = adapter_name or f"{getattr(obj, '__module__', '?')}:{getattr(obj, '__qualname__', name)}"
    cls.__compbench_code__ = code  # type: ignore[attr-defined]  # read by runner.cells.code_version
    cls.__compbench_origin__ = source or f"{adapter} (no source file)"  # type: ignore[attr-defined]
    cls.__compbench_cached__ = cached  # type: ignore[attr-defined]  # False: recomputed in every process
    cls.__compbench_why__ = why  # type: ignore[attr-defined]  # read by caching_note
    try:
        registered = ADAPTERS.add(adapter, cls, replace=True, scoped=True)
    except ValueError as exc:
        raise ModelReferenceError(str(exc)) from None
    return UserModel(str(name), adapter, registered, source, cached, why)


def caching_note(cls: type, model_id: str) -> str | None:
    """The note (UserModel.note) of the model `model_id` whose adapter is `cls`, or None."""
    if getattr(cls, "__compbench_cached__", True):
        return None
    return UserModel(model_id, "", cls, None, False, getattr(cls, "__compbench_why__", None)).note


def _object_identity(obj: Any) -> tuple[str, str | None, bool, str | None]:
    """(code digest, source description, cached, why not cached) of an object given in Python."""
    code = obj
    while isinstance(code, functools.partial):  # its function's source, then its arguments (in _bound)
        code = code.func
    digest, source = _source_identity(code)
    if digest is None:
        return uuid.uuid4().hex[:16], None, False, None
    bound = _bound(obj, getattr(code, "__module__", None), source == _NO_FILE, set())
    if bound is None:
        return (uuid.uuid4().hex[:16], source, False,
                "carries a value compbench cannot identify (in its closure, its arguments or the globals it reads)")
    return hashlib.sha256(f"{digest}\0{bound}".encode()).hexdigest()[:16], source, True, None


_NO_FILE = "source text (no file)"


def _source_identity(obj: Any) -> tuple[str | None, str | None]:
    """(digest, description) of the source `obj` is defined in: its package, or its file and the modules beside it
    that it imports, or its own text where it has no file; (None, None) where it has no source at all."""
    try:
        path = inspect.getsourcefile(obj)
    except (TypeError, OSError):
        path = None
    if path and Path(path).is_file() and not path.startswith("<"):
        p = Path(path).resolve()
        module = sys.modules.get(getattr(obj, "__module__", "") or "")
        top = sys.modules.get((getattr(module, "__name__", "") or "").split(".")[0])
        dirs = [Path(d) for d in getattr(top, "__path__", [])]
        return _source_digest(dirs or [p, *local_modules(p).values()]), str(dirs[0] if dirs else p)
    try:
        text = inspect.getsource(obj)
    except (TypeError, OSError):
        return None, None
    return hashlib.sha256(text.encode()).hexdigest()[:16], _NO_FILE


_PLAIN = (type(None), bool, int, float, complex, str, bytes, range, slice)


def _bound(obj: Any, module: str | None, read_globals: bool, seen: set[int]) -> str | None:
    """What `obj` computes with beyond its source text, as text (None where a part cannot be identified).

    A closure's values and a partial's arguments are set when the program runs, whatever the file
    says; so are the globals an object without a file reads (`width = 64` in another notebook cell).
    """
    if id(obj) in seen:
        return ""
    seen.add(id(obj))
    parts: list[str | None] = []
    if isinstance(obj, functools.partial):
        parts += [_bound(obj.func, module, read_globals, seen), _value(obj.args, module, read_globals, seen),
                  _value(obj.keywords, module, read_globals, seen)]
    functions = [obj] if inspect.isfunction(obj) else []
    if inspect.isclass(obj):
        for v in vars(obj).values():
            f = v.__func__ if isinstance(v, (staticmethod, classmethod)) else v.fget if isinstance(v, property) else v
            if inspect.isfunction(f):
                functions.append(f)
    for f in functions:
        cells = zip(f.__code__.co_freevars, f.__closure__ or ())
        parts += [f"{n}={_value(_contents(c), module, read_globals, seen)}" for n, c in cells if _contents(c) is not _EMPTY]
        if read_globals:
            parts += [_value(f.__defaults__, module, read_globals, seen), _value(f.__kwdefaults__, module, read_globals, seen)]
            parts += [f"{n}={_value(f.__globals__[n], module, read_globals, seen)}"
                      for n in sorted(_global_names(f.__code__)) if n in f.__globals__]
    return None if any(p is None or "\0unknown" in p for p in parts) else "|".join(parts)


_EMPTY = object()


def _contents(cell: Any) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # a variable not assigned yet
        return _EMPTY


def _global_names(code: types.CodeType) -> set[str]:
    """The global names a code object and the functions nested in it read (not attribute names: `self.out` is no global)."""
    names = {i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")}
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _value(value: Any, module: str | None, read_globals: bool, seen: set[int]) -> str:
    """A value's identity as text; '\0unknown' marks one that cannot be known (an arbitrary object, a tensor)."""
    if isinstance(value, _PLAIN):
        return repr(value)
    if isinstance(value, (tuple, list, set, frozenset)):
        items = [_value(v, module, read_globals, seen) for v in value]
        return f"{type(value).__name__}({','.join(sorted(items) if isinstance(value, (set, frozenset)) else items)})"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_value(k, module, read_globals, seen)}:{_value(v, module, read_globals, seen)}"
                              for k, v in value.items()) + "}"
    if isinstance(value, types.ModuleType):
        return f"module {value.__name__}"
    array = _array(value)
    if array is not None:  # a mask or table a factory closes over: its contents, not its address
        return f"array {array.dtype} {array.shape} {hashlib.sha256(array.tobytes()).hexdigest()[:16]}"
    if isinstance(value, functools.partial) or inspect.isfunction(value) or inspect.isclass(value):
        code = value
        while isinstance(code, functools.partial):
            code = code.func
        where = getattr(code, "__module__", None)
        name = f"{where}:{getattr(code, '__qualname__', '?')}"
        if where != module and _is_library(code):
            return name  # an installed library's (or compbench's) object: its version is not the user's model
        if where != module or id(value) in seen:  # another user module's object: its own source identity
            digest, _ = _source_identity(code)
            return f"{name}@{digest}" if digest else "\0unknown"
        inner = _bound(value, module, read_globals, seen)  # one of the module's own: its closure, and globals if read
        return f"{name}({inner})" if inner is not None else "\0unknown"
    if inspect.isbuiltin(value) or isinstance(value, (types.MethodWrapperType, types.BuiltinMethodType)):
        return f"builtin {getattr(value, '__qualname__', repr(value))}"
    return "\0unknown"


def _array(value: Any) -> Any:
    """`value` as a numpy array where it is one (or a numpy scalar, or a torch tensor), else None."""
    import numpy as np

    if isinstance(value, (np.ndarray, np.generic)):
        return np.ascontiguousarray(value)
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        return np.ascontiguousarray(value.detach().cpu().numpy())
    return None


def _is_library(obj: Any) -> bool:
    """Whether `obj` comes from compbench, an installed package or the standard library (not the user's code)."""
    module = getattr(obj, "__module__", "") or ""
    if module == "compbench" or module.startswith("compbench.") or module in sys.builtin_module_names:
        return True
    try:
        path = inspect.getsourcefile(obj)
    except (TypeError, OSError):
        return False
    if not path:
        return False
    roots = {sysconfig.get_paths().get(k) for k in ("purelib", "platlib", "stdlib", "platstdlib")} - {None}
    return any(Path(path).resolve().is_relative_to(Path(r).resolve()) for r in roots)


__all__ = ["ModelReferenceError", "UserModel", "adapter_for", "caching_note", "is_reference", "load_reference"]
