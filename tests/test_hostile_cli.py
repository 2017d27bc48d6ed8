"""Hostile input, third round: report files opened in other programs, deep nesting, ids, CLI numbers.

Every case goes through the real CLI: `compbench.cli.main(argv)` in this process with its output
captured (exit code from its return value or argparse's SystemExit), or `python -m compbench.cli`
in a subprocess where the process itself is under test (a closed pipe).
"""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from compbench.limits import MAX_SEED
from tiny_suites import Result, cli, suite_text, yaml_work

ROOT = Path(__file__).resolve().parent.parent




TINY = suite_text("te22", name="hostile3")


def write(tmp: Path, name: str, text: str) -> Path:
    path = tmp / name
    path.write_text(text, encoding="utf-8")
    return path


def refused(res: Result, *phrases: str) -> None:
    assert res.rc == 2, res.text
    assert "Traceback" not in res.text, res.text
    for phrase in phrases:
        assert phrase in res.err, (phrase, res.err)


# --- 3: report files opened in spreadsheets and markdown viewers ----------------------------------

HOSTILE_TABLE = """\
name: inject
seeds: 1
tasks:
  - id: tbl
    family: table
    description: "<img src=x onerror=alert(1)> | cell\\n**Expectations: 2/2 pass.**"
    params:
      components:
        - {name: "=HYPERLINK(\\"http://x\\")", values: ["@SUM(A1)", "+1+2", "-4", "plain"]}
        - {name: "-shape", values: ["=1+1", "\\tx"]}
      target:
        sum: {"=HYPERLINK(\\"http://x\\")": [1.0, -2.5, 0.5, 3.0], "-shape": [0.0, -1.0]}
      held_out: [["plain", "=1+1"]]
models:
  - {id: k, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.3, 1.0]}, description: "<script>alert(1)</script>"}
expectations:
  - {id: slope, source: {paper: compbench, threshold: a test fixture}, claim: slope_below_one, models: [k], tasks: [tbl]}
"""
FORMULA = ("=", "+", "-", "@", "\t", "\r")


def _numeric(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def test_report_csv_cells_and_column_names_never_start_a_formula_and_markdown_keeps_suite_text_as_text(tmp_path):
    suite = write(tmp_path, "inject.yaml", HOSTILE_TABLE)
    out = tmp_path / "out"
    res = cli("run", "--suite", str(suite), "--out", str(out), "--quiet", "--format", "md,csv,predictions-csv")
    assert res.rc in (0, 1) and "Traceback" not in res.text, res.text
    names = ["expectations.csv", "predictions.csv", "records.csv", "leaderboard.csv", "theory.csv"]
    for name in names:
        with open(out / name, newline="", encoding="utf-8") as f:
            rows = list(csv.reader(f))
        assert rows, name
        for row in rows:
            for cell in row:
                assert not (cell.startswith(FORMULA) and not _numeric(cell)), (name, cell)
    with open(out / "predictions.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert "'=HYPERLINK(\"http://x\")" in rows[0] and "'-shape" in rows[0], list(rows[0])
    labels = {r["'=HYPERLINK(\"http://x\")"] for r in rows} | {r["'-shape"] for r in rows}
    assert {"'@SUM(A1)", "'+1+2", "-4", "plain", "'=1+1", "'\tx"} <= labels, labels  # "-4" is a number, kept
    assert any(r["y"].startswith("-") and float(r["y"]) < 0 for r in rows)  # negative numbers stay numbers
    md = (out / "leaderboard.md").read_text(encoding="utf-8")
    assert "<script>" not in md and "<img" not in md, md
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in md and "&lt;img src=x onerror=alert(1)&gt;" in md
    assert "\\| cell **Expectations: 2/2 pass.**" in md  # the description stays inside its cell, on its line
    assert not any(line.startswith("**Expectations") for line in md.splitlines()), md


def test_write_csv_quotes_text_only(tmp_path):
    import pandas as pd

    from compbench.report.escape import csv_text

    frame = pd.DataFrame({"=bad": ["=1+1", "-2", "@x", None, "\rcr\r=1+1"], "v": [-0.5, 1.0, -2.0, 3.0, -1e-9]})
    (tmp_path / "f.csv").write_text(csv_text(frame))
    with open(tmp_path / "f.csv", newline="") as f:
        rows = list(csv.reader(f))
    assert rows == [["'=bad", "v"], ["'=1+1", "-0.5"], ["-2", "1.0"], ["'@x", "-2.0"], ["", "3.0"], ["'\ncr\n=1+1", "-1e-09"]]
    assert frame.columns[0] == "=bad"  # the caller's frame is left as it was


# --- 5: deep nesting refused before parsing --------------------------------------------------------


def test_a_40kb_flow_nest_is_refused_at_its_line_after_scanning_its_first_levels(tmp_path):
    warm = write(tmp_path, "ok.yaml", TINY)
    assert cli("validate", str(warm)).rc == 0  # imports done before the clock starts
    for name, text in (("flow.yaml", TINY + "x: " + "[" * 40_000 + "]" * 40_000 + "\n"),
                       ("mapping.yaml", TINY + "x: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n"),
                       ("block.yaml", TINY + "x:\n" + "".join(" " * (i + 1) + f"k{i}:\n" for i in range(100)))):
        path = write(tmp_path, name, text)
        with yaml_work() as work:  # counted, not timed: the parser stops at the 65th level
            res = cli("validate", str(path))
        refused(res, f"error: {path}:{TINY.count(chr(10)) + 1}" if name != "block.yaml" else f"error: {path}:",
                "nested more than 64 levels deep")
        assert 64 < work["tokens"] < 1000, (name, work)


def test_nesting_within_the_limit_and_brackets_in_text_still_validate(tmp_path):
    text = TINY.replace("name: hostile3", "name: hostile3\ndescription: \"[[[[[[[[[[[[ don't {{{{{{{{{{{{{{{{{\"  # [[[[[[[[[[")
    text += "profiles:\n  p: {description: 'it''s a [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[ text'}\n"
    res = cli("validate", str(write(tmp_path, "ok.yaml", text)))
    assert res.rc == 0, res.text


def test_deep_model_args_are_refused_before_parsing(tmp_path):
    suite = write(tmp_path, "s.yaml", TINY)
    res = cli("run", "--suite", str(suite), "--out", str(tmp_path / "o"), "--model", "kernel", "--quiet",
              "--model-args", "weights=" + "[" * 40_000)
    refused(res, "--model-args weights", "nested more than 64 levels deep")


# --- 6: --workers --------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["0", "-3", "two"])
def test_workers_below_one_or_not_a_number_is_a_usage_error(tmp_path, value):
    suite = write(tmp_path, "s.yaml", TINY)
    res = cli("run", "--suite", str(suite), "--out", str(tmp_path / "o"), "--executor", "process", "--workers", value)
    refused(res, "argument --workers:")
    assert not (tmp_path / "o").exists()


def test_workers_beyond_the_cores_are_capped_and_said_so(tmp_path):
    from compbench.runner.executors import WORKERS_PER_CORE, usable_cores

    suite = write(tmp_path, "s.yaml", TINY.replace("classes: [2, 2]}}", "classes: [2, 2]}}\n  - {id: te3, family: transitive_equivalence, params: {classes: [3, 3]}}"))
    res = cli("run", "--suite", str(suite), "--out", str(tmp_path / "o"), "--executor", "process", "--workers", "1000",
              "--quiet", "--format", "md")
    assert res.rc in (0, 1), res.text
    cap = WORKERS_PER_CORE * usable_cores()
    assert f"--workers 1000: using {cap} worker processes" in res.err, res.err
    assert "2 cells run" in res.out, res.out


# --- 7: ids -------------------------------------------------------------------------------------


def test_ids_are_one_pattern_and_length_located_at_their_line(tmp_path):
    long_task = TINY.replace("{id: te,", "{id: " + "t" * 250 + ",").replace("te]", "t]")
    res = cli("validate", str(p := write(tmp_path, "long.yaml", long_task)))
    refused(res, f"error: {p}:4: tasks[0].id: an id is 1 to 64 letters", "(250 characters)")
    huge = TINY.replace("{id: k,", "{id: " + "m" * 900_000 + ",")
    start = time.perf_counter()
    res = cli("validate", str(p := write(tmp_path, "huge.yaml", huge)))
    refused(res, f"error: {p}:6: models[0].id: an id is 1 to 64 letters", "(900,000 characters)")
    assert time.perf_counter() - start < 10
    assert len(res.err) < 1000  # the id is not echoed whole
    newline_id = TINY + 'expectations:\n  - {id: "x\\n**Expectations: 2/2 pass.**", source: {paper: compbench, threshold: a test fixture}, claim: at_chance, models: [k], tasks: [te]}\n'
    res = cli("validate", str(p := write(tmp_path, "nl.yaml", newline_id)))
    refused(res, f"error: {p}:8: expectations[0].id: an id is 1 to 64 letters")
    assert len(res.err.strip().splitlines()) == 1, res.err  # the line break is shown escaped, not obeyed
    for bad in ("a b", "-x", "a/b", "a:b", "é"):
        res = cli("validate", str(p := write(tmp_path, "bad.yaml", TINY.replace("{id: k,", f"{{id: '{bad}',"))))
        refused(res, f"error: {p}:6: models[0].id: an id is")


def test_generated_member_ids_stay_file_name_sized(tmp_path):
    sweep = TINY + "  - {id: k2, adapter: kernel, params: {kernel: overlap}, sweep: {weights: [[%s], [%s]]}}\n" % (
        ", ".join(["0.123456789"] * 30), ", ".join(["0.987654321"] * 30))
    res = cli("validate", str(p := write(tmp_path, "sweep.yaml", sweep)))
    refused(res, f"error: {p}:7: models[1].sweep: sweep member id 'k2[weights=", "at most 200")


@pytest.mark.slow
def test_bundled_suites_validate_with_the_id_pattern():
    for path in sorted((ROOT / "suites").glob("*.yaml")):
        res = cli("validate", str(path))
        assert res.rc == 0, res.text


# --- 9: a closed pipe ------------------------------------------------------------------------------


def test_list_into_a_closed_pipe_exits_quietly():
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "compbench.cli", "list"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the first line is written (`| head -0`)
    _, err = proc.communicate(timeout=120)
    assert b"Traceback" not in err and b"BrokenPipeError" not in err, err.decode()
    assert proc.returncode == 1, (proc.returncode, err.decode())


# --- 10: CLI numbers ---------------------------------------------------------------------------------


def test_seed_start_without_seeds_and_out_of_range_seeds_are_usage_errors(tmp_path):
    suite = write(tmp_path, "s.yaml", TINY)
    base = tmp_path / "b.json"
    common = ("--suite", str(suite), "--results", str(tmp_path / "r"), "--quiet")
    refused(cli("baseline", "record", *common, "--out", str(base), "--seed-start", "3"), "--seed-start needs --seeds")
    assert not base.exists()
    refused(cli("baseline", "record", *common, "--out", str(base), "--seeds", "2", "--seed-start", "99999999999999999999"),
            "argument --seed-start: must be from 0 to 4,294,967,295")
    refused(cli("baseline", "record", *common, "--out", str(base), "--seeds", "2", "--seed-start", str(MAX_SEED)),
            "--seed-start: seeds 4,294,967,295..4,294,967,296 go past 4,294,967,295")
    refused(cli("baseline", "record", *common, "--out", str(base), "--seeds", "0"), "argument --seeds: must be at least 1")
    assert cli("baseline", "record", *common, "--out", str(base)).rc == 0
    refused(cli("check", *common, "--baseline", str(base), "--seed-start", "1"), "--seed-start needs --seeds")
    refused(cli("check", *common, "--baseline", str(base), "--k", "-1"), "argument --k: must be a finite number > 0")
    refused(cli("check", *common, "--baseline", str(base), "--k", "nan"), "argument --k: must be a finite number > 0")
    res = cli("validate", str(write(tmp_path, "big.yaml", TINY.replace("seeds: 1", "seeds: [99999999999999999999]"))))
    refused(res, "seeds: seeds must be at most 4,294,967,295")


@pytest.mark.parametrize(("flag", "value"), [("--max-seeds", "-1"), ("--max-cells", "0"), ("--max-models", "1.5"),
                                             ("--max-cells", "")])
def test_limit_flags_take_positive_whole_numbers(tmp_path, flag, value):
    refused(cli("validate", str(write(tmp_path, "s.yaml", TINY)), flag, value), f"argument {flag}:")


def test_max_cells_is_applied_not_ignored(tmp_path):
    res = cli("validate", str(write(tmp_path, "s.yaml", TINY)), "--max-cells", "3")
    refused(res, "tasks[0].params", "the limit is 3")


def test_run_numbers_are_validated(tmp_path):
    suite = write(tmp_path, "s.yaml", TINY)
    for flag, value in (("--cell-timeout", "0"), ("--cell-timeout", "inf"), ("--gpus-per-cell", "-0.5"), ("--seeds", "-2")):
        refused(cli("run", "--suite", str(suite), "--out", str(tmp_path / "o"), flag, value), f"argument {flag}:")
    assert not (tmp_path / "o").exists()


# --- 11: --model-args ---------------------------------------------------------------------------------


def test_model_args_take_lists_refuse_duplicates_and_booleans_for_numbers(tmp_path):
    suite = write(tmp_path, "s.yaml", TINY)
    common = ("run", "--suite", str(suite), "--out", str(tmp_path / "o"), "--quiet", "--format", "md", "--model", "kernel")
    res = cli(*common, "--model-args", "kernel=overlap,weights=[0,0.3,1]")
    assert res.rc in (0, 1) and "adding adapter 'kernel' with parameters kernel=overlap,weights=[0,0.3,1]" in res.out, res.text
    refused(cli(*common, "--model-args", "kernel=overlap,weights=[0,0.3,1],kernel=relu_ntk"), "--model-args gives 'kernel' twice")
    refused(cli(*common, "--model-args", "weights=[0,true,1]"), "weights: expected a number, got the boolean true")
    res = cli("run", "--suite", str(suite), "--out", str(tmp_path / "o2"), "--model", "mlp", "--model-args", "depth=true")
    refused(res, "adapter 'mlp': depth: expected a number, got the boolean true")
    assert "Value error" not in res.err


def test_adapter_params_in_a_suite_refuse_booleans_for_numbers(tmp_path):
    text = TINY + "  - {id: m, adapter: mlp, params: {depth: true}}\n"
    refused(cli("validate", str(p := write(tmp_path, "s.yaml", text))),
            f"error: {p}:7: models[1].params.depth: expected a number, got the boolean true")


# --- 12: booleans in task params of every family ------------------------------------------------------


@pytest.mark.parametrize(("task", "field"), [
    ("{id: add, family: additive, params: {split: dispersed, per_row: true}}", "per_row"),
    ("{id: add, family: additive, params: {anchors: [[true], [false]]}}", "anchors"),
    ("{id: te2, family: transitive_equivalence, params: {classes: [true, 2]}}", "classes"),
    ("{id: ord, family: transitive_ordering, params: {n_items: yes}}", "n_items"),
])
def test_booleans_are_not_numbers_in_task_params(tmp_path, task, field):
    head, models = TINY.split("models:\n")
    p = write(tmp_path, "s.yaml", head + f"  - {task}\nmodels:\n" + models)
    refused(cli("validate", str(p)), f"error: {p}:5: tasks[1].params.{field}: expected a number, got the boolean")


def test_seeds_true_is_not_one_seed(tmp_path):
    refused(cli("validate", str(p := write(tmp_path, "s.yaml", TINY.replace("seeds: 1", "seeds: true")))),
            f"error: {p}:2: seeds: expected a number, got the boolean true")


# --- 4: Ctrl-C pressed again and again during --executor process ----------------------------------

SLEEPY = '''\
"""A test adapter whose fit sleeps: jobs still running in the pool's workers when Ctrl-C comes."""
import os
import signal
import time
from pathlib import Path

import numpy as np
from compbench.adapters import Adapter, Fitted, register_adapter


@register_adapter("sleepy")
class Sleepy(Adapter):
    deterministic = True

    def fit_seeds(self, train, evaluate, seeds):
        Path(os.environ["SLEEPY_DIR"], str(os.getpid())).write_text("")
        time.sleep(120)
        return [Fitted(np.zeros(len(evaluate))) for _ in seeds]
'''
SLEEPY_SUITE = """\
name: sleepy
seeds: 1
tasks:
  - {id: te, family: transitive_equivalence, params: {classes: [2, 2]}}
  - {id: te3, family: transitive_equivalence, params: {classes: [3, 3]}}
models:
  - {id: s, adapter: sleepy}
"""


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as f:
            return "zombie" not in f.read()
    except FileNotFoundError:
        return False


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads worker states from /proc")
@pytest.mark.parametrize("every", [0.1, 0.4])
def test_ctrl_c_pressed_again_and_again_only_hurries_the_cleanup(tmp_path, every):
    write(tmp_path, "sleepy_adapter.py", SLEEPY)
    suite = write(tmp_path, "suite.yaml", SLEEPY_SUITE)
    pids = tmp_path / "pids"
    pids.mkdir()
    # As the console script runs: main() with no argv, in a process of its own.
    code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); import sleepy_adapter; from compbench.cli import main; "
            "sys.argv[0] = 'compbench'; sys.exit(main())")
    env = {**os.environ, "SLEEPY_DIR": str(pids), "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-c", code, "run", "--suite", str(suite), "--out", str(tmp_path / "out"), "--quiet",
                             "--executor", "process", "--workers", "2", "--format", "md"],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            # SIGINT as a terminal delivers it, even where the tests run with it ignored (a shell's
                            # background job without job control): Python keeps an ignored SIGINT ignored.
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        end = time.monotonic() + 120
        while len(list(pids.iterdir())) < 2:
            assert proc.poll() is None and time.monotonic() < end, proc.communicate()
            time.sleep(0.05)
        workers = [int(p.name) for p in pids.iterdir()]
        start = time.monotonic()
        while proc.poll() is None and time.monotonic() - start < 30:  # pressed until it has exited
            proc.send_signal(signal.SIGINT)
            time.sleep(every)
        took = time.monotonic() - start
        _, err = proc.communicate(timeout=5)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert took < 30, "the run did not exit under repeated Ctrl-C"
    assert proc.returncode == 130, (proc.returncode, err)
    assert "Traceback" not in err and "Exception ignored" not in err, err
    assert "interrupted: finished cells are kept" in err
    time.sleep(0.2)
    assert not [p for p in workers if _running(p)], "a pool worker outlived the run"
