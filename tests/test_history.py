"""`compbench history` over a suite's recorded runs, `check --baseline history:N`, and `--fdr` (Benjamini–Hochberg),
through the real CLI in a temporary git repository whose commits label the runs."""

import json
import math
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from tiny_suites import cli, kernel_suite

from compbench.store import ResultStore

SUITE = kernel_suite("hist", "leak")
WORSE = SUITE.replace("{kernel: relu_ntk}", "{kernel: relu_ntk, objective: ridge, ridge: 10.0}")  # relu/add: R² 0.83 → 0.03
DOCS = Path(__file__).resolve().parent.parent / "docs" / "how-to" / "compare-runs.md"
GIT_ID = ["-c", "user.name=t", "-c", "user.email=t@example.org"]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *GIT_ID, *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """A repository with the suite, run at its first commit and again at a second (the results live outside it, so
    the tree is clean); each test works on a copy."""
    base = tmp_path_factory.mktemp("history")
    repo = base / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / "s.yaml").write_text(SUITE)
    git(repo, "add", "s.yaml")
    git(repo, "commit", "-qm", "the suite")
    assert cli("run", "--suite", str(repo / "s.yaml"), "--results", str(base / "res"), "-q", "--format", "md").rc == 0
    (repo / "README").write_text("an unrelated change\n")
    git(repo, "add", "README")
    git(repo, "commit", "-qm", "readme")
    assert cli("run", "--suite", str(repo / "s.yaml"), "--results", str(base / "res"), "-q", "--format", "md").rc == 0
    return base


@pytest.fixture
def work(two_runs, tmp_path):
    shutil.copytree(two_runs / "repo", tmp_path / "repo")
    shutil.copytree(two_runs / "res", tmp_path / "res")
    return tmp_path


def check(work: Path, *extra: str):
    return cli("check", "--suite", str(work / "repo" / "s.yaml"), "--results", str(work / "res"), "--baseline", "history:2",
               "-q", *extra)


def stored_means(results: Path) -> list[dict[tuple[str, str], float]]:
    """Per run, oldest first: the score of each (model, task) as its stored records say (one seed: kernels are exact)."""
    store = ResultStore(results / "store")
    try:
        out = []
        for run in store.runs():
            recs = store.run_records(run)
            out.append({(r.model, r.task): r.metrics["heldout_r2" if r.kind == "regression" else "heldout_acc"] for r in recs})
        return out
    finally:
        store.close()


@pytest.mark.slow
def test_history_over_three_runs_shows_each_commit_and_the_regression_a_history_check_fails_on(work):
    repo, res = work / "repo", work / "res"
    shas = [git(repo, "rev-parse", "HEAD~1")[:7], git(repo, "rev-parse", "HEAD")[:7]]
    (repo / "s.yaml").write_text(WORSE)
    git(repo, "commit", "-qam", "relu: a ridge of 10")
    shas.append(git(repo, "rev-parse", "HEAD")[:7])
    # The third run is the check itself: its reference is the two runs before it.
    got = check(work, "--fdr", "0.05")
    assert got.rc == 1, got.text
    failing = [line.strip() for line in got.out.splitlines() if line.startswith("  ")]
    assert len(failing) == 1 and failing[0].startswith("REGRESSED: relu/add heldout_r2: baseline 0.8319"), got.out
    assert "gate: Benjamini–Hochberg at q = 0.05" in got.out and re.search(r"\| relu/add +\| heldout_r2 +\|", got.out)
    assert "over 2 run(s)" in got.err and f"({shas[0]})" in got.err and f"({shas[1]})" in got.err

    got = cli("history", "--suite", str(repo / "s.yaml"), "--results", str(res), "--format", "json")
    assert got.rc == 0, got.text
    rows = json.loads(got.out)["rows"]
    means = stored_means(res)
    assert len(means) == 3 and means[2][("relu", "add")] < 0.1 < 0.8 < means[1][("relu", "add")] == means[0][("relu", "add")]
    assert [r["commit"] for r in rows if r["model"] == "relu" and r["task"] == "add"] == shas
    for row in rows:
        i = shas.index(row["commit"])
        assert row["mean"] == pytest.approx(means[i][(row["model"], row["task"])], abs=1e-6) and row["n"] == 1
    assert {r["metric"] for r in rows if r["task"] == "add"} == {"heldout_r2"} and len(rows) == 3 * 4

    # A model family (a glob), as a table with the runs' ids and commits, and as a plot.
    got = cli("history", "--suite", "hist", "--results", str(res), "--model", "re*", "--plot", str(work / "h.png"))
    assert got.rc == 0, got.text
    table = [line for line in got.out.splitlines() if line.startswith("| 2")]
    assert [line.split(" | ")[2] for line in table] == shas
    assert [line.split(" | ")[4] for line in table] == [f"{means[i][('relu', 'add')]:.4f} (n=1)" for i in range(3)]
    assert "overlap" not in got.out and "relu/te heldout_acc" in got.out
    png = (work / "h.png").read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    import matplotlib.image

    assert matplotlib.image.imread(str(work / "h.png")).ndim == 3
    # --last and csv: the last two runs only.
    got = cli("history", "--suite", "hist", "--results", str(res), "--last", "2", "--format", "csv", "--task", "add")
    assert [line.split(",")[2] for line in got.out.splitlines()[1:]] == [shas[1], shas[1], shas[2], shas[2]]


def test_a_history_check_passes_an_unchanged_rerun(work):
    got = check(work, "-v")
    assert got.rc == 0, got.text
    assert "0 regressed" in got.out and "passed" in got.out and "gate: k·SE" in got.out
    assert re.search(r"\| relu/add +\| heldout_r2 +\| 0\.8319 ± 0\.0000 \(n=1\) \| 0\.8319", got.out), got.out


def test_benjamini_hochberg_against_a_hand_computation():
    from compbench.check import benjamini_hochberg

    # m = 4, q = 0.05: sorted 0.01 ≤ 1·0.0125; 0.03 > 2·0.0125, 0.04 > 3·0.0125, 0.5 > 0.05: only the first.
    assert benjamini_hochberg([0.01, 0.04, 0.03, 0.5], 0.05) == [True, False, False, False]
    # step-up: sorted 0.011 ≤ 0.0125, 0.03 > 0.025, 0.036 ≤ 0.0375, 0.6 > 0.05: the largest rank within its bound is 3,
    # so 0.03 is rejected too, though it misses its own bound
    assert benjamini_hochberg([0.036, 0.03, 0.011, 0.6], 0.05) == [True, True, True, False]
    assert benjamini_hochberg([0.04, 0.2, 0.9], 0.05) == [False, False, False]
    from scipy.stats import false_discovery_control

    p = [0.001, 0.008, 0.039, 0.041, 0.042, 0.06, 0.074, 0.205]
    assert benjamini_hochberg(p, 0.05) == [bool(a <= 0.05) for a in false_discovery_control(p)] == [True, True] + [False] * 6


def test_welch_p_is_scipys_one_sided_welch_test():
    from scipy.stats import ttest_ind

    from compbench.check import welch_p

    base, now = [0.80, 0.84, 0.83, 0.86], [0.70, 0.78, 0.74]
    sd = lambda v: math.sqrt(sum((x - sum(v) / len(v)) ** 2 for x in v) / (len(v) - 1))  # noqa: E731
    worse = sum(base) / 4 - sum(now) / 3  # a higher-is-better metric fell
    expected = ttest_ind(now, base, equal_var=False, alternative="less").pvalue
    assert welch_p(worse, sd(base), 4, sd(now), 3) == pytest.approx(expected, rel=1e-9)
    assert welch_p(0.1, 0.0, 1, 0.0, 1) == 0.0 and welch_p(-0.1, 0.0, 1, 0.0, 1) == 1.0


def _cell(mean: float, sd: float = 0.1, n: int = 10) -> dict:
    return {"task": "add", "group": "m", "errors": 0, "model": "m", "metrics": {"heldout_r2": {"mean": mean, "std": sd, "n": n}}}


def test_fdr_gates_where_k_se_would_flag_a_cell_by_chance_and_keeps_a_real_regression():
    from compbench.check import Baseline, compare, gate_by_fdr

    # Twenty cells; "m2/add" fell by 0.3 (p ≈ 1e-6: both rules flag it); "m1/add" by 0.12 (t = 2.68 > 2.5: k·SE flags
    # it; one-sided Welch p ≈ 0.0076 > 2·0.05/20, BH's bound at its rank 2, so BH does not); the others did not move.
    cells = {f"m{i}/add": _cell(0.5) for i in range(20)}
    now = {**{k: _cell(0.5) for k in cells}, "m1/add": _cell(0.38), "m2/add": _cell(0.2)}
    rows = compare(Baseline("s", cells), now)
    assert {r.cell: r.verdict for r in rows if r.verdict != "ok"} == {"m1/add": "REGRESSED", "m2/add": "REGRESSED"}
    gated = {r.cell: r for r in gate_by_fdr(rows, 0.05)}
    assert gated["m1/add"].verdict == "ok" and gated["m1/add"].kse_verdict == "REGRESSED"
    assert 0.005 < gated["m1/add"].p_value < 0.01
    assert gated["m2/add"].verdict == "REGRESSED" and gated["m2/add"].p_value < 1e-5
    # the floor stays: an exact (zero-spread) move below heldout_r2's 0.02 is p = 0 yet not a regression
    tiny = gate_by_fdr(compare(Baseline("s", {"a/add": _cell(0.5, 0.0, 1)}), {"a/add": _cell(0.49, 0.0, 1)}), 0.05)
    assert tiny[0].p_value == 0.0 and tiny[0].verdict == "ok"


def test_refusals_are_one_line_exit_2(work, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    cases = [
        (cli("history", "--suite", "hist", "--results", str(empty)), "no compbench store there"),
        (cli("history", "--suite", "other", "--results", str(work / "res")), "no run of suite 'other' that ended (it records runs of hist)"),
        (cli("history", "--suite", "hist", "--results", str(work / "res"), "--model", "vit*"),
         "--model 'vit*': matches nothing the runs of suite 'hist' recorded (overlap, relu)"),
        (cli("history", "--suite", "hist", "--results", str(work / "res"), "--metric", "factor_r2"), "--metric factor_r2: no record"),
        (cli("history", "--suite", "hist", "--results", str(work / "res"), "--plot", str(tmp_path / "h.jpg")), "a plot is written as .png or .svg"),
        (check(work, "--update"), "--update writes a baseline file"),
        (cli("check", "--suite", str(work / "repo" / "s.yaml"), "--results", str(empty), "--baseline", "history:2"),
         "--baseline history:2: "),
        (cli("check", "--suite", str(work / "repo" / "s.yaml"), "--results", str(work / "res"), "--baseline", "history:1"),
         "give history:N with N ≥ 2"),
    ]
    for got, words in cases:
        assert got.rc == 2 and words in got.err and "Traceback" not in got.err, (words, got.text)
        assert [line for line in got.err.splitlines() if line.startswith("compbench: ")] == [got.err.strip().splitlines()[-1]]
    # one run is not enough for a reference across runs
    one = tmp_path / "one"
    assert cli("run", "--suite", str(work / "repo" / "s.yaml"), "--results", str(one), "-q", "--format", "md").rc == 0
    got = cli("check", "--suite", str(work / "repo" / "s.yaml"), "--results", str(one), "--baseline", "history:5")
    assert got.rc == 2 and "records 1 run(s) of suite 'hist' under the default profile" in got.err and "at least 2" in got.err


@pytest.mark.slow
def test_the_how_to_example_runs_as_written(tmp_path, monkeypatch):
    text = DOCS.read_text(encoding="utf-8")
    before = re.search(r"```yaml\n(.*?)```", text, re.S).group(1)
    section = text[text.index("## A model family across runs"):]
    commands = re.search(r"```bash\n(.*?)```", section, re.S).group(1).strip().splitlines()
    monkeypatch.chdir(tmp_path)
    Path("before.yaml").write_text(before)
    Path("after.yaml").write_text(before.replace("[0.0, 0.4, 1.0]", "[0.0, 0.0, 1.0]"))
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org"}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    codes = []
    for line in commands:
        if line.startswith("compbench "):
            got = cli(*shlex.split(line)[1:])
            codes.append(got.rc)
        else:
            subprocess.run(line, shell=True, check=True, capture_output=True)
    assert codes == [0, 0, 1, 0], got.text  # the check fails on the regression (and the claim it breaks)
    out = got.out
    assert Path("history.png").read_bytes().startswith(b"\x89PNG")
    table = [line.split(" | ") for line in out.splitlines() if line.startswith("| 2")]
    assert [row[4] for row in table] == ["0.8889 (n=1)", "0.8889 (n=1)", "0.0000 (n=1)"]
    assert all(re.fullmatch(r"[0-9a-f]{7}", row[2]) for row in table) and len({row[2] for row in table}) == 3
