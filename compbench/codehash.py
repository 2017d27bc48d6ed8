"""Which compbench source a result depends on, found by reading import statements, and its hash.

A leaf module: the runner hashes the code that produces a cell's predictions, scoring the code
that scores them, and neither list is kept by hand.
"""

from __future__ import annotations

import functools
import hashlib
import re
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
_IMPORT = re.compile(r"^[ \t]*(?:from[ \t]+(compbench[\w.]*)[ \t]+import[ \t]+(\([^)]*\)|[^\n#]+)|import[ \t]+(compbench[\w.]*))",
                     re.MULTILINE)


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
            source = re.sub(r"#[^\n]*", "", f.read_text(encoding="utf-8"))  # a comment may hold "(" or ")"
            for m in _IMPORT.finditer(source):
                if m.group(3):
                    todo.append(m.group(3))
                    continue
                todo.append(m.group(1))
                for alias in re.split(r"[\s,()]+", m.group(2)):
                    if alias and alias != "as" and alias.isidentifier():
                        todo.append(f"{m.group(1)}.{alias}")  # `from compbench.theory import ntk`: a module
    return tuple(sorted(seen))


@functools.lru_cache(maxsize=None)
def _source_hash(paths: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        p = Path(path)
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
            digest.update(f.name.encode())
            digest.update(f.read_bytes())
    return digest.hexdigest()[:12]


