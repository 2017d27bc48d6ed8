"""One registry mechanism for every extension kind: adapters, task families, encodings, claims, reporters.

Each kind is a `Registry`: built-ins register with a decorator in code, third parties through
their package's entry-point group (`compbench.<kind>s`), loaded lazily on the first lookup. A name
registered twice by different objects is an error naming both sources; an unknown name gets a
"did you mean"; a broken entry point is reported by name (a warning) and skipped, never taking
the others down; a name prefix (`timm:<model>`) is a registered resolver.
"""

from __future__ import annotations

import contextlib
import difflib
import inspect
import warnings
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Generic, TypeVar

from compbench.errors import CompbenchError

T = TypeVar("T")


class UnknownNameError(CompbenchError, ValueError):
    """A name that no extension of this kind is registered under."""


class NameClashError(CompbenchError, ValueError):
    """Two different objects registered under one name."""


class PluginError(CompbenchError, ValueError):
    """An object offered to a registry breaks the kind's contract."""


def require_subclass(kind: str, name: str, obj: object, base: type[T], public: str) -> type[T]:
    """`obj` itself if it is a subclass of `base` (named `public` in the message), else PluginError."""
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise PluginError(f"{kind} {name!r} is {obj!r}, not a subclass of {public}")
    return obj


def named_instance(cls: Callable[[], T], name: str) -> T:
    """The one instance of a kind whose entries are instances (claims, report writers), named as registered."""
    instance = cls()
    instance.name = name  # type: ignore[attr-defined]  # the instance's, not the class's: a class registered twice keeps each name
    return instance


def source_of(obj: object) -> str:
    """Where an object comes from, for messages: 'module.qualname (file)' or 'entry point ...'."""
    origin = getattr(obj, "__compbench_origin__", None)
    if origin:
        return str(origin)
    module = getattr(obj, "__module__", "?")
    name = getattr(obj, "__qualname__", type(obj).__qualname__)
    try:
        path = inspect.getsourcefile(obj)  # type: ignore[arg-type]
    except (TypeError, OSError):
        path = None
    return f"{module}.{name}" + (f" ({path})" if path else "")


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One registered extension: its name, the object, where it came from, and its distribution."""

    name: str
    obj: T
    source: str
    distribution: str | None = None  # the installed package that provided it (entry points only)
    raw: object = None  # what was offered, before the kind's check converted it


class Registry(Generic[T]):
    """Named extensions of one kind, from decorators and from the `group` entry points."""

    def __init__(
        self, kind: str, group: str, check: Callable[[str, object], T] | None = None,
        unknown: type[UnknownNameError] = UnknownNameError,
    ) -> None:
        self.kind = kind
        self._unknown = unknown  # the kind's own UnknownNameError subclass, raised for an unknown name
        self.group = group
        self._check = check
        self._entries: dict[str, Entry[T]] = {}
        self._resolvers: dict[str, Callable[[str], T]] = {}
        self._loaded = False
        self._loading = False
        self.broken: dict[str, str] = {}  # entry-point name -> why it was skipped
        # Names added with `scoped=True` inside `scope()`: seen by lookups in that context only (a thread, a
        # task), so two `compbench.evaluate` calls at once, each with its own class named `Net`, never see
        # each other's; outside any scope such names go to the process-wide table as before.
        self._scoped: ContextVar[dict[str, Entry[T]] | None] = ContextVar(f"compbench-{kind}-scope", default=None)

    # -- registration -----------------------------------------------------------------------

    def add(self, name: str, obj: object, *, source: str | None = None, distribution: str | None = None,
            replace: bool = False, scoped: bool = False) -> T:
        """Register `obj` under `name` (checked by the kind's contract); a clash is an error unless `replace`
        (a user's model given again, e.g. redefined in a notebook, replaces its earlier definition);
        `scoped`: inside `scope()`, for that scope only."""
        if not isinstance(name, str) or not name.strip():
            raise PluginError(f"a {self.kind} needs a non-empty name, got {name!r}")
        where = source or source_of(obj)
        local = self._scoped.get() if scoped else None
        table = local if local is not None else self._entries
        old = table.get(name)
        if old is not None and old.raw is obj:
            return old.obj
        if old is not None and not replace:  # refused before the kind's check runs: a check may name what it accepts
            raise NameClashError(
                f"{self.kind} name {name!r} is registered twice: by {old.source} and by {where}; rename one of them"
            )
        checked = self._check(name, obj) if self._check is not None else obj  # type: ignore[assignment]
        table[name] = Entry(name, checked, where, distribution, obj)  # type: ignore[arg-type]
        return checked  # type: ignore[return-value]

    def register(self, name: str) -> Callable[[T], T]:
        """Decorator: register the decorated object under `name` and return it."""

        def decorate(obj: T) -> T:
            self.add(name, obj)
            return obj

        return decorate

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """Within it, names added with `scoped=True` are this context's own (see `_scoped`); they end with it."""
        token = self._scoped.set({})  # a new table, never one shared with a context this one was copied from
        try:
            yield
        finally:
            self._scoped.reset(token)

    def _visible(self) -> dict[str, Entry[T]]:
        """The process-wide names with this context's scoped ones over them."""
        local = self._scoped.get()
        return {**self._entries, **local} if local else self._entries

    def add_resolver(self, prefix: str, resolve: Callable[[str], T]) -> None:
        """Names starting with `prefix` (e.g. 'timm:') are created on demand by `resolve(name)`."""
        self._resolvers[prefix] = resolve

    @property
    def prefixes(self) -> list[str]:
        """The registered name prefixes (e.g. ['timm:'])."""
        return sorted(self._resolvers)

    # -- entry points -----------------------------------------------------------------------

    def load_entry_points(self) -> None:
        """Load the kind's entry points once; a broken one is reported by name and skipped."""
        if self._loaded or self._loading:
            return
        self._loading = True
        try:
            for ep in entry_points(group=self.group):
                self._load_one(ep)
        finally:
            self._loading = False
            self._loaded = True

    def _load_one(self, ep: EntryPoint) -> None:
        dist = getattr(ep.dist, "name", None) if getattr(ep, "dist", None) is not None else None
        where = f"entry point {ep.name!r} = {ep.value!r} of group {self.group!r}" + (f" (package {dist})" if dist else "")
        try:
            obj = ep.load()
        except BaseException as exc:  # noqa: BLE001 — third-party import code may raise anything, even SystemExit
            if isinstance(exc, KeyboardInterrupt):
                raise
            self._skip(ep.name, f"cannot load {self.kind} plugin, {where}: {type(exc).__name__}: {exc}")
            return
        try:
            self.add(ep.name, obj, source=where, distribution=dist)
        except (PluginError, NameClashError) as exc:
            self._skip(ep.name, f"ignoring {where}: {exc}")

    def _skip(self, name: str, message: str) -> None:
        self.broken[name] = message
        warnings.warn(f"compbench: {message}", stacklevel=4)

    # -- lookup -----------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Every registered name (built-in and plugins), sorted."""
        self.load_entry_points()
        return sorted(self._visible())

    def entries(self) -> Iterator[Entry[T]]:
        """Every registered entry, sorted by name."""
        self.load_entry_points()
        visible = self._visible()
        for name in sorted(visible):
            yield visible[name]

    def entry(self, name: str) -> Entry[T]:
        """The entry registered as `name` (resolving prefixes); unknown names get a 'did you mean'."""
        self.load_entry_points()
        if name not in self._visible():
            for prefix, resolve in self._resolvers.items():
                if name.startswith(prefix):
                    self.add(name, resolve(name))
                    break
        found = self._visible().get(name)
        if found is None:
            raise self._unknown(self.unknown_message(name))
        return found

    def get(self, name: str) -> T:
        """The object registered as `name`."""
        return self.entry(name).obj

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self.entry(name)
        except (UnknownNameError, PluginError):
            return False
        return True

    def unknown_message(self, name: str) -> str:
        """'unknown <kind> 'x'; did you mean 'y'? known: ...'."""
        known = sorted(self._visible())
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ";"
        prefixes = "".join(f", {p}<name>" for p in sorted(self._resolvers))
        broken = f" (skipped broken plugins: {', '.join(sorted(self.broken))})" if self.broken else ""
        return f"unknown {self.kind} {name!r}{hint} known: {', '.join(known)}{prefixes}{broken}"
