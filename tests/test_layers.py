"""compbench's layers, read from the import statements (the AST): every arrow between its parts points down, and no
module imports itself back through others.

`python tests/test_layers.py` prints each layer with what it imports, and every arrow that points up.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "compbench"

# Bottom first: a part may import its own layer's parts and those below, never one above. The data flows from the
# suite to the report (docs/explanation/architecture.md); the imports mostly follow it backwards (the report imports
# the outcome, which imports the store, ...), but the suite sits above the tasks, adapters and claims because loading
# a suite validates its tasks', models' and claims' parameters with them.
LAYERS: list[tuple[str, frozenset[str]]] = [
    ("base", frozenset({"errors", "params", "registry", "limits", "files", "controls", "codehash", "losses",
                        "stage_progress", "thread_scope"})),
    ("records", frozenset({"records"})),  # the typed record and the metric facts
    ("theory", frozenset({"theory"})),
    ("tasks", frozenset({"tasks"})),
    ("encodings", frozenset({"encodings"})),
    ("training", frozenset({"training"})),
    ("adapters", frozenset({"adapters", "provenance"})),
    ("scoring", frozenset({"scoring"})),  # the numbers of one cell
    ("claims", frozenset({"claims"})),
    ("suite", frozenset({"suite"})),
    ("store", frozenset({"store"})),
    ("runner", frozenset({"runner"})),
    ("outcome", frozenset({"outcome"})),  # cells' states and the expectations' verdicts
    ("report", frozenset({"report"})),
    ("check", frozenset({"check", "bundle", "bundle_pack"})),
    ("views", frozenset({"compare", "history", "site"})),
    ("session", frozenset({"session"})),
    ("faces", frozenset({"api", "cli", "pytest_plugin", "testing", "__main__", "__init__"})),
]
# Arrows up that are known, each with why it is still there.
KNOWN_UP = {
    # Moving check_id down means editing adapters/user.py, which is result code (runner/cells.py hashes it into every
    # cell's key): that edit retrains every stored cell, so it waits for a change that retrains anyway.
    ("adapters", "suite"): "adapters/user.py reads suite.schema.check_id (an id's rule) for a file model's `=ID`",
}


def modules() -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its own name)."""
    out = {}
    for f in PACKAGE.rglob("*.py"):
        parts = f.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = f
    return out


def _typing_only(tree: ast.AST) -> set[int]:
    """ids of the import nodes under `if TYPE_CHECKING:` (read by a type checker, never run)."""
    return {id(n) for node in ast.walk(tree) if isinstance(node, ast.If) and getattr(node.test, "id", None) == "TYPE_CHECKING"
            for stmt in node.body for n in ast.walk(stmt)}


def module_imports(runtime: bool = False) -> dict[str, dict[str, set[str]]]:
    """module → {compbench module it imports → the lines}: every import statement, in a function or under
    TYPE_CHECKING too (a lazy import is still an arrow); with `runtime`, only the imports that run (not those under
    TYPE_CHECKING, which make no import loop: the standard way two modules name each other's types)."""
    mods = modules()
    out: dict[str, dict[str, set[str]]] = {name: defaultdict(set) for name in mods}
    for name, f in mods.items():
        package = name if f.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(f.read_text(encoding="utf-8"))
        skip = _typing_only(tree) if runtime else set()
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")
                    base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in mods:
                    target = target.rpartition(".")[0]
                # `from compbench import __version__` is no arrow: the package itself is imported before any of its
                # modules, and its lazy names (compbench.evaluate, ...) are the faces' layer
                if target and target not in (name, "compbench"):
                    out[name][target].add(f"{f.relative_to(ROOT)}:{node.lineno}")
    return out


def part(module: str) -> str:
    """The part of the package a module belongs to: its subpackage, or its own name for a top-level module."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def part_imports() -> dict[str, dict[str, set[str]]]:
    """part → {part it imports → where}."""
    out: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for module, targets in module_imports().items():
        for target, where in targets.items():
            if part(target) != part(module):
                out[part(module)][part(target)] |= where
    return out


def layer_of(name: str) -> int:
    """The index of the layer holding a part (ValueError: no layer holds it)."""
    for i, (_, members) in enumerate(LAYERS):
        if name in members:
            return i
    raise ValueError(name)


def up_arrows() -> list[tuple[str, str, list[str]]]:
    """Every import of a part from a layer above its own, but the known ones."""
    return [(a, b, sorted(where)) for a, targets in sorted(part_imports().items()) for b, where in sorted(targets.items())
            if layer_of(b) > layer_of(a) and (a, b) not in KNOWN_UP]


def loops(graph: dict[str, set[str]] | dict[str, dict[str, set[str]]]) -> list[list[str]]:
    """The graph's strongly connected components of more than one node: its import loops."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for v in list(graph):
        if v not in index:
            visit(v)
    return found


def test_every_part_of_the_package_has_a_layer():
    unplaced = sorted({part(m) for m in modules()} - {p for _, members in LAYERS for p in members})
    assert unplaced == [], f"add {unplaced} to LAYERS in tests/test_layers.py"


def test_every_arrow_points_down_the_layers():
    assert up_arrows() == []


def test_the_known_arrows_up_are_still_there():
    # one that went away leaves its entry stale: remove it
    graph = part_imports()
    assert [k for k in KNOWN_UP if k[1] not in graph.get(k[0], {})] == []


def test_no_import_loop_between_parts_or_modules():
    down = {a: {b for b in targets if (a, b) not in KNOWN_UP} for a, targets in part_imports().items()}
    assert loops(down) == []
    # report/legend.py and report/tables.py imported each other (the legend's tables, the leaderboard's cells)
    assert loops(module_imports(runtime=True)) == []


def test_records_and_the_metric_facts_import_only_the_base():
    graph = part_imports()
    assert set(graph["records"]) <= LAYERS[0][1]
    assert not module_imports()["compbench.records.metric_facts"]  # facts import nothing at all
    assert not (PACKAGE / "scoring" / "metric_facts.py").exists()


def test_scoring_is_the_numbers_of_one_cell():
    # expectation judging (which reads the suite and the claims) sits beside the outcome
    assert set(part_imports()["scoring"]) <= LAYERS[0][1] | {"records", "theory"}
    assert "compbench.outcome.expectations" in modules()


def test_the_report_shows_the_verdicts_it_is_given_and_judges_none():
    # publish() judged the expectations itself when not handed the outcome's verdicts: a second judging path
    judging = {"evaluate_expectations", "judge", "stored_outcome", "whole_outcome"}
    found = {(f.name, node.lineno) for f in (PACKAGE / "report").glob("*.py") if f.name != "publish.py"
             for node in ast.walk(ast.parse(f.read_text(encoding="utf-8")))
             if isinstance(node, ast.Name) and node.id in judging}
    assert found == set()
    publish = (PACKAGE / "report" / "publish.py").read_text(encoding="utf-8")
    # publish_run and rebuild take the verdicts of the outcome they are handed or read (stored_outcome, whole_outcome)
    assert "evaluate_expectations" not in publish


def test_an_edit_of_a_metric_fact_rescores():
    # the facts' n/a rules decide what a stored cell's score says: they are part of the scoring code's hash
    from compbench.scoring.score import scoring_code_files

    assert PACKAGE / "records" / "metric_facts.py" in scoring_code_files()
    assert PACKAGE / "scoring" / "metrics.py" in scoring_code_files()


@pytest.fixture
def kernels(tmp_path):
    from tiny_suites import kernel_suite

    suite = tmp_path / "layers.yaml"
    suite.write_text(kernel_suite("layers", "leak", "chance"), encoding="utf-8")
    return suite, tmp_path / "out"


def test_a_report_computes_its_leaderboard_cells_once(kernels, monkeypatch):
    from tiny_suites import cli

    from compbench.report.tables import CellStats  # the class the statistics build, as the tables see it

    made: list[tuple[str, str]] = []
    init = CellStats.__init__

    def counting(self, model, task, *args, **kwargs):  # type: ignore[no-untyped-def]
        made.append((model, task))
        init(self, model, task, *args, **kwargs)

    monkeypatch.setattr(CellStats, "__init__", counting)
    suite, out = kernels
    done = cli("run", "--suite", str(suite), "--results", str(out), "--format", "md,csv,html", "-q")
    assert done.rc == 0, done.text
    # 2 models × 2 tasks, once: the markdown and HTML leaderboards, their headlines, leaderboard.csv and the cell
    # details each computed them again (5 times)
    assert sorted(made) == sorted((m, t) for m in ("overlap", "relu") for t in ("add", "te"))
    assert "| overlap " in (out / "leaderboard.md").read_text(encoding="utf-8")
    assert len((out / "leaderboard.csv").read_text(encoding="utf-8").splitlines()) == 5


def test_a_run_records_its_verdicts_in_its_runs_row(kernels):
    from tiny_suites import cli

    from compbench.store import ResultStore

    suite, out = kernels
    assert cli("run", "--suite", str(suite), "--results", str(out), "--format", "csv", "-q").rc == 0
    store = ResultStore(out / "store")
    try:
        (run,) = store.runs()
    finally:
        store.close()
    assert [(v["expectation"], v["task"], v["status"]) for v in run.info["verdicts"]] == [
        ("leak", "add", "PASS"), ("chance", "te", "PASS")]


if __name__ == "__main__":
    graph = part_imports()
    for i, (name, members) in enumerate(LAYERS):
        below = sorted({t for m in members for t in graph.get(m, {}) if t not in members})
        print(f"{i:2d} {name:9s} {' '.join(sorted(members)):40s} → {' '.join(below) or '-'}")
    for a, b, where in up_arrows():
        print(f"UP: {a} → {b} ({where[0]}{' …' if len(where) > 1 else ''})")
    for (a, b), why in KNOWN_UP.items():
        print(f"known up: {a} → {b}: {why}")
    for comp in loops(graph) + loops(module_imports()):
        print("LOOP:", " ↔ ".join(comp))
