"""Which compbench source a result depends on, found by reading import statements, and its hash.

A leaf module: the runner hashes the code that produces a cell's predictions, scoring the code
that scores them, and neither list is kept by hand.
"""

from __future__ import annotations

import functools
import hashlib
import re
import sysconfig
from pathlib import Path

# A cell's predictions are produced by runner/execute.py and every compbench module it imports,
# directly or through others (found by reading their import statements, so a new module, or an
# existing one such as losses.py that an adapter imports, is covered without being listed). The
# packages below describe, store, judge or show results and never change a cell's numbers, so the
# walk does not enter them: editing a claim, a report or the suite loader retrains nothing.
NOT_RESULT_CODE = ("compbench.suite", "compbench.claims", "compbench.store", "compbench.records", "compbench.report",
                   "compbench.check", "compbench.outcome", "compbench.cli", "compbench.pytest_plugin", "compbench.testing",
                   "compbench.scoring.expectations", "compbench.runner.progress", "compbench.runner.run",
                   "compbench.runner.executors", "compbench.runner.interrupt", "compbench.runner.memory", "compbench.api",
                   "compbench.runner.cells")
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import[ \t]+(\([^)]*\)|[^\n#;]+)|import[ \t]+([^\n#;]+))", re.MULTILINE)


def imported_names(source: str) -> list[str]:
    """The modules a source's import statements name, absolute ones only (`from m import x` names m and m.x: x may be a module)."""
    names: list[str] = []
    source = re.sub(r"#[^\n]*", "", source)  # a comment may hold "(" or ")"
    for m in _IMPORT.finditer(source):
        if m.group(3):
            names.extend(part.split()[0] for part in m.group(3).split(",") if part.split())  # import a.b as c, d
            continue
        if m.group(1).startswith("."):
            continue  # relative: a file model is loaded as a top-level module, where it cannot be used
        names.append(m.group(1))
        for alias in re.split(r"[\s,()]+", m.group(2)):
            if alias and alias != "as" and alias.isidentifier():
                names.append(f"{m.group(1)}.{alias}")  # `from compbench.theory import ntk`: a module
    return names


def _module_file(root: Path, name: str) -> Path | None:
    base = root.joinpath(*name.split("."))
    for f in (base.with_suffix(".py"), base / "__init__.py"):
        if f.is_file():
            return f
    return None


@functools.lru_cache(maxsize=None)
def code_closure(entry: str, outside: tuple[str, ...] = NOT_RESULT_CODE) -> tuple[Path, ...]:
    """`entry`'s source file and every compbench module it imports, directly or through others (not entering `outside`)."""
    root = Path(__file__).resolve().parent.parent
    seen: dict[Path, None] = {}
    todo = [entry]
    while todo:
        name = todo.pop()
        if name != entry and any(name == n or name.startswith(n + ".") for n in outside):
            continue
        parts = name.split(".")
        for i in range(1, len(parts) + 1):  # importing a.b.c runs a/__init__ and a/b/__init__ too
            f = _module_file(root, ".".join(parts[:i]))
            if f is None or f in seen or (".".join(parts[:i]) != entry and ".".join(parts[:i]) in outside):
                continue
            seen[f] = None
            todo.extend(n for n in imported_names(f.read_text(encoding="utf-8")) if n.split(".")[0] == "compbench")
    return tuple(sorted(seen))


def local_modules(path: Path) -> dict[str, Path]:
    """The modules `path` imports, directly or through others, that sit in its folder ({name: file}), read now.

    A user's `file.py:Name` runs with its folder on sys.path, so a helper beside it (or a package
    there) is part of the model: editing it must invalidate the model's cells. Nothing is followed
    from a folder of installed packages or the standard library: those are not the user's model.
    """
    root = path.resolve().parent
    if str(root) in {sysconfig.get_paths().get(k) for k in ("purelib", "platlib", "stdlib", "platstdlib")}:
        return {}
    found: dict[str, Path] = {}
    todo = imported_names(path.read_text(encoding="utf-8", errors="replace"))
    while todo:
        parts = todo.pop().split(".")
        for i in range(1, len(parts) + 1):
            name = ".".join(parts[:i])
            f = _module_file(root, name)
            if f is None or name in found or f.resolve() == path.resolve():
                continue
            found[name] = f
            todo.extend(imported_names(f.read_text(encoding="utf-8", errors="replace")))
    return found


@functools.lru_cache(maxsize=None)
def _source_hash(paths: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        p = Path(path)
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
            digest.update(f.name.encode())
            digest.update(f.read_bytes())
    return digest.hexdigest()[:12]


