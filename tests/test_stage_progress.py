"""Progress from inside a long theory stage (#38 item 7): the eNTK reports its blocks, the run shows them."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from compbench.runner.progress import Progress
from compbench.stage_progress import listening, report
from tiny_suites import suite_text

torch = pytest.importorskip("torch")


def _mlp(d: int = 3, width: int = 8) -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(d, width), torch.nn.Tanh(), torch.nn.Linear(width, 1))


@pytest.mark.slow
@pytest.mark.parametrize("structured", [False, True])
def test_the_entk_reports_every_block_it_computes(structured):
    from compbench.theory.ntk import empirical_ntk

    x, y = torch.randn(10, 3), torch.randn(6, 3)
    heard: list[tuple[str, int, int]] = []
    with listening(lambda *a: heard.append(a), interval=0):
        # 10 samples in chunks of 3 (generic path) / of max_memory's size (structured path, forced small below)
        K = empirical_ntk(_mlp(), x, chunk_size=3, structured=structured, max_memory=1 << 20)
        K_xy = empirical_ntk(_mlp(), x, y, chunk_size=3, structured=structured, max_memory=1 << 20)
    sym = [h for h in heard if h[0] == "eNTK 10×10"]
    cross = [h for h in heard if h[0] == "eNTK 10×6"]
    assert sym and cross and len(sym) + len(cross) == len(heard)
    for seen in (sym, cross):
        total = seen[0][2]
        assert [h[1] for h in seen] == list(range(1, total + 1))  # each block once, in order, up to the total
    if not structured:  # 4 chunks of 10: 4·5/2 blocks on one side of the diagonal; 4 × 2 across
        assert (sym[0][2], cross[0][2]) == (10, 8)
    assert K.shape == (10, 10) and K_xy.shape == (10, 6)


def test_without_a_listener_a_report_does_nothing_and_a_listener_is_throttled():
    report("eNTK 5×5", 1, 3)  # no listener: nothing to call, nothing raised
    heard: list[tuple] = []
    with listening(lambda *a: heard.append(a), interval=3600):
        for done in range(1, 101):
            report("eNTK 5×5", done, 100)
    assert heard == [("eNTK 5×5", 1, 100)]  # the first gets through; the next is an hour away
    with listening(lambda *a: 1 / 0, interval=0):
        report("eNTK 5×5", 1, 1)  # a failing display does not fail the computation


def test_the_progress_line_names_the_stage_beside_the_running_job(capsys):
    class Job:
        class model:
            id = "mine"

        class task:
            class entry:
                id = "add"

    bar = Progress([], "s", enabled=True)
    bar._live = False
    bar.start(Job)
    bar.stage(Job, "eNTK 81×17", 12, 33)
    assert bar.status().endswith("running mine on add (eNTK 81×17: block 12/33)")
    assert "running mine on add (eNTK 81×17: block 12/33)" in capsys.readouterr().err  # a CI log line, not silence
    bar.advance(Job, ["ok"], cached=False)
    assert "block" not in bar.status()


WIDE = textwrap.dedent('''
    from torch import nn


    def wide(in_shape, n_out):
        return nn.Sequential(nn.Linear(in_shape[0], 2048), nn.ReLU(), nn.Linear(2048, n_out))
''')
SUITE = suite_text("add", name="stages", models=["{id: wide, adapter: wide.py:wide, params: {steps: 2, ntk_max_memory: 1048576}}"])


@pytest.mark.parametrize("executor", ["local", "process"])
def test_a_run_shows_the_entk_blocks_of_its_running_job(tmp_path, monkeypatch, executor):
    """A network whose eNTK (1 MiB allowed) comes in several blocks: its stage reports reach the display,
    from this process and from a pool worker."""
    from compbench.runner.run import run_suite
    from compbench.suite import load_suite

    (tmp_path / "wide.py").write_text(WIDE, encoding="utf-8")
    (tmp_path / "s.yaml").write_text(SUITE, encoding="utf-8")
    shown: list[tuple[str, str, int, int]] = []
    original = Progress.stage

    def stage(self, job, name, done, total):
        shown.append((f"{job.model.id} on {job.task.entry.id}", name, done, total))
        original(self, job, name, done, total)

    monkeypatch.setattr(Progress, "stage", stage)
    summary = run_suite(load_suite(tmp_path / "s.yaml"), tmp_path / "res", device="cpu", executor=executor, workers=1)
    assert summary.n_run == 1 and summary.n_failed == 0
    assert shown, "no stage report reached the display"
    assert {s[0] for s in shown} == {"wide on add"}
    # the 17 training cells with themselves, the 81 evaluated against them, and the evaluated cells' diagonal
    # in blocks of DIAGONAL_BLOCK (32, 32, then 17): which of these a throttled display shows depends on timing
    from compbench.theory.similarity import DIAGONAL_BLOCK

    assert DIAGONAL_BLOCK == 32
    assert {s[1] for s in shown} <= {"eNTK 17×17", "eNTK 81×17", "eNTK 32×32"}
    assert all(1 <= done <= total for _, _, done, total in shown) and max(t for *_, t in shown) > 1
