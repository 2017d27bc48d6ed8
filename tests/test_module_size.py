"""No compbench module grows past ~600 lines (issue 36): a module that long does more than one job.

The numerical kernels are exempt: their length is one computation written out for speed.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "compbench"
MOST_LINES = 600
KERNELS = {"theory/ntk.py", "training/stacked_convnet.py"}
# Split on the branch that owns report/ (issue 36 item 2); remove from here when it lands.


def test_no_module_is_over_600_lines_outside_the_numerical_kernels() -> None:
    sizes = {str(p.relative_to(PACKAGE)): len(p.read_text(encoding="utf-8").splitlines()) for p in PACKAGE.rglob("*.py")}
    assert len(sizes) > 100  # the walk saw the package, not an empty folder
    over = {name: n for name, n in sizes.items() if n > MOST_LINES and name not in KERNELS}
    assert over == {}, f"split these into modules with one job each: {over}"


def test_the_cli_and_the_suite_loader_are_split_by_job() -> None:
    """`compbench.cli` is a package of command families and suite/load.py only loads (edits live in suite/edit.py)."""
    import compbench.cli
    from compbench.suite import add_adapter_models, load_suite, seeds_override

    assert Path(compbench.cli.__file__).name == "__init__.py"
    assert {p.stem for p in Path(compbench.cli.__file__).parent.glob("*.py")} >= {"run", "check", "results", "catalog"}
    assert add_adapter_models.__module__ == seeds_override.__module__ == "compbench.suite.edit"
    assert load_suite.__module__ == "compbench.suite.load"
