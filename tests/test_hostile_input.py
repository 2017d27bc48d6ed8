"""Hostile and careless suite files (issue #13, the suite side), each through the real CLI in a subprocess.

Every bad input must end in exit code 2 with a message naming the file (and its line where there is
one), never a traceback, and, where the input asks for a size, without allocating it.

How memory is measured. Each subprocess runs `DRIVER`, which imports compbench once and calls
`compbench.cli.main` for a batch of argument lists (one import, ~2 s, for many files), each call
with its stdout/stderr captured separately. Before each call the driver resets the kernel's peak
RSS counter (`echo 5 > /proc/self/clear_refs`, Linux ≥ 4.0) and afterwards reads `VmHWM`, so every
call gets its own peak, reported as the growth over the RSS it started from. That measures what
was actually touched, whatever allocator did it (numpy, Python lists, pydantic). Where clear_refs
is unavailable the driver falls back to the process's monotone `ru_maxrss`, an upper bound.
Validate batches also run under `RLIMIT_AS` (set in `preexec_fn`) of the virtual size a plain
`validate` of the bundled suite needs plus 2 GiB, measured once per session: an input that does
try to allocate gigabytes then fails loudly (MemoryError, a traceback the test sees) instead of
swapping the machine. Run batches import torch, whose virtual reservations vary by build (CUDA
builds map many GiB), so they get no address-space cap, only the RSS assertion.

A crash of one call is still visible: an exception escaping `main` is caught by the driver and its
traceback becomes that call's stderr (so "Traceback" fails the test), and a driver that dies
outright prints no result marker, which fails the batch with its stderr shown.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_suites import suite_text

ROOT = Path(__file__).resolve().parent.parent
MARK = "@@compbench-driver-results@@"
# Growth of one call's peak RSS over the RSS it started from. Validating a bundled suite grows it by
# well under 100 MB (asserted below); 1e9 seeds as a tuple would be ~36 GB, a 1e7-member sweep
# ~20 GB of model specs, a 1e5-item ordering grid 160 GB: anything allocated "by mistake" is far
# above this, and the bound stays far from what a legitimate small suite needs.
MAX_GROWTH_MB = 400

DRIVER = textwrap.dedent(
    f"""
    import contextlib, dataclasses, io, json, resource, sys, traceback
    calls = json.loads(sys.argv[1])
    for module in json.loads(sys.argv[2]):
        sys.path.insert(0, module[0]); __import__(module[1])
    import compbench.limits as L
    from compbench.cli import main
    defaults = dataclasses.asdict(L.limits())

    def status(key):
        with open("/proc/self/status") as f:
            return next(int(l.split()[1]) // 1024 for l in f if l.startswith(key))

    def reset_peak():
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            return True
        except OSError:
            return False

    results, last_rc = [], None
    for call in calls:
        if call.get("skip") or (call.get("if_previous_ok") and last_rc != 0):
            results.append(None)
            continue
        L.set_limits(**defaults)  # main() sets limits for the whole process: each call starts from the defaults
        exact = reset_peak()
        start = status("VmRSS")
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = main(call["argv"])
        except SystemExit as exc:  # argparse's own usage errors
            rc = exc.code
        except BaseException:
            rc = None
            err.write(traceback.format_exc())
        peak = status("VmHWM") if exact else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        last_rc = rc
        results.append(dict(rc=rc, out=out.getvalue(), err=err.getvalue(), start_mb=start, peak_mb=peak))
    print({MARK!r} + json.dumps(results))
    """
)


@dataclass
class Result:
    """One CLI call: exit code, its captured output, and its peak RSS (MB) and growth over its start."""

    rc: int | None
    out: str
    err: str
    peak_mb: int
    growth_mb: int

    @property
    def text(self) -> str:
        return self.out + self.err


@lru_cache(maxsize=1)
def _validate_vm_mb() -> int:
    """Virtual size (MB) of a child that validates the bundled suite: the base of the address-space cap."""
    code = (
        "import sys; from compbench.cli import main; rc = main(['validate', 'suites/kernel-limits.yaml']);"
        "print(next(l.split()[1] for l in open('/proc/self/status') if l.startswith('VmPeak'))); sys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1]) // 1024


def batch(calls: list[dict], *, modules: tuple[tuple[str, str], ...] = (), cap_memory: bool = True, timeout: int = 300) -> list[Result | None]:
    """Run `compbench.cli.main` for each call in one subprocess; `modules` are (dir, module) to import first."""
    limit = (_validate_vm_mb() + 2048) << 20 if cap_memory else None

    def cap() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = {**os.environ, "PYTHONHASHSEED": "0"}
    proc = subprocess.Popen(
        [sys.executable, "-c", DRIVER, json.dumps(calls), json.dumps(modules)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=cap, env=env,
    )
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        stdout, stderr = proc.communicate()
        pytest.fail(f"driver ran over {timeout} s:\n{stderr[-3000:]}")
    assert MARK in stdout, f"the driver died (rc {proc.returncode}) before reporting:\n{stdout[-2000:]}\n{stderr[-4000:]}"
    assert "Traceback" not in stderr, stderr[-4000:]
    raw = json.loads(stdout.split(MARK, 1)[1])
    return [None if r is None else Result(r["rc"], r["out"], r["err"], r["peak_mb"], r["peak_mb"] - r["start_mb"]) for r in raw]


def assert_refused(path: Path, res: Result, *, line: int | None = None, says: tuple[str, ...] = (), growth_mb: int = MAX_GROWTH_MB) -> None:
    """Exit 2, an `error:` naming the file (at `line`), every phrase of `says`, no traceback, bounded memory."""
    assert res.rc == 2, res.text
    assert "Traceback" not in res.text, res.text
    where = f"{path}:{line}: " if line else f"{path}"
    assert f"error: {where}" in res.err, res.err
    for phrase in says:
        assert phrase in res.err, (phrase, res.err)
    assert res.growth_mb < growth_mb, f"grew by {res.growth_mb} MB: {res.err}"


TINY = suite_text("te22", name="hostile")
TINY_LINES = TINY.count("\n")  # lines of TINY; text appended starts at TINY_LINES + 1


def write(tmp: Path, name: str, content: str | bytes) -> Path:
    path = tmp / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    return path


def with_models(extra_models: str) -> str:
    """TINY with `extra_models` (YAML list items) appended to its models (at line TINY_LINES + 1)."""
    return TINY + textwrap.indent(textwrap.dedent(extra_models), "  ")


def with_tasks(extra_tasks: str) -> str:
    """TINY with more tasks (from line 5); TINY's kernel model runs on every task, so only the task is at issue."""
    head, models = TINY.split("models:\n")
    return head + textwrap.indent(textwrap.dedent(extra_tasks), "  ") + "models:\n" + models


def with_expectation(expectation: str, extra_tasks: str = "") -> str:
    """TINY with one expectation (at line TINY_LINES + 2, one later per extra task)."""
    head, models = TINY.split("models:\n")
    return head + extra_tasks + "models:\n" + models + "expectations:\n" + expectation


def one_line(obj: dict) -> str:
    return "- " + json.dumps(obj, ensure_ascii=False) + "\n"


# Every validate-only case: name → (file content, extra CLI args). All are validated in one subprocess
# (the `validated` fixture), one `main` call each, so the file is one import, not one per case.
CASES: dict[str, tuple[str | bytes, tuple[str, ...]]] = {}


def case(name: str, content: str | bytes, *args: str) -> str:
    CASES[name] = (content, args)
    return name


MLP = "- {id: m, adapter: mlp, params: {width: 8}, sweep: {init_scale: %s}}\n"


@pytest.fixture(scope="module")
def validated(tmp_path_factory) -> dict[str, tuple[Path, Result]]:
    """name → (path, result of `compbench validate PATH ARGS`) for every case in CASES."""
    tmp = tmp_path_factory.mktemp("cases")
    paths = {name: write(tmp, f"{name}.yaml", content) for name, (content, _) in CASES.items()}
    bundled = [ROOT / "suites" / "kernel-limits.yaml", ROOT / "suites" / "kernel-limits-images.yaml"]
    calls = [{"argv": ["validate", str(p)]} for p in bundled]
    calls += [{"argv": ["validate", str(paths[name]), *args]} for name, (_, args) in CASES.items()]
    results = batch(calls)
    out = {f"bundled-{p.stem}": (p, r) for p, r in zip(bundled, results)}
    out.update({name: (paths[name], r) for name, r in zip(CASES, results[len(bundled):])})
    return out  # type: ignore[return-value]


# --- memory baseline ---------------------------------------------------------------------------


@pytest.mark.slow
def test_bundled_suites_validate_within_the_memory_bound(validated):
    for name in ("bundled-kernel-limits", "bundled-kernel-limits-images"):
        _, r = validated[name]
        assert r.rc == 0 and "OK: suite" in r.out, r.text
        # Far below MAX_GROWTH_MB, so the bound tells "refused early" from "built, then refused".
        assert r.growth_mb < MAX_GROWTH_MB / 2, r.growth_mb


# --- encodings ---------------------------------------------------------------------------------

case("binary", bytes(range(256)) * 4)
case("utf16", TINY.encode("utf-16"))  # Python's utf-16 codec writes a BOM
case("latin1", ("# café\n" + TINY).encode("latin-1"))
case("utf8-bom", b"\xef\xbb\xbf" + TINY.encode())


def test_suite_files_that_are_not_utf8_are_refused_and_utf8_with_bom_loads(validated):
    assert_refused(*validated["binary"], line=2, says=("not UTF-8", "byte 0x80 at offset 128", "binary data"))
    assert_refused(*validated["utf16"], says=("UTF-16", "compbench reads UTF-8", "iconv"))
    assert_refused(*validated["latin1"], line=1, says=("not UTF-8", "byte 0xe9 at offset 5", "Latin-1"))
    _, bom = validated["utf8-bom"]
    assert bom.rc == 0 and "OK: suite 'hostile', 1 tasks, 1 models" in bom.out, bom.text


# --- sizes: refused before anything is allocated ------------------------------------------------

case("seeds-suite", TINY.replace("seeds: 1", "seeds: 1000000000"))
case("seeds-model", with_models("- {id: m, adapter: mlp, seeds: 1000000000}\n"))


def test_a_billion_seeds_at_suite_and_model_level_are_refused_before_allocating(validated):
    assert_refused(*validated["seeds-suite"], line=2, says=("seeds: ", "1,000,000,000 seeds", "the limit is 1,000", "--max-seeds"))
    assert_refused(*validated["seeds-model"], line=TINY_LINES + 1, says=("models[1].seeds", "1,000,000,000 seeds", "the limit is 1,000"))


def test_a_billion_seeds_through_run_is_refused_before_anything_runs(tmp_path):
    suite = write(tmp_path, "suite.yaml", TINY.replace("seeds: 1", "seeds: 1000000000"))
    out = tmp_path / "out"
    (res,) = batch([{"argv": ["run", "--suite", str(suite), "--out", str(out), "--quiet"]}], cap_memory=False)
    assert_refused(suite, res, line=2, says=("1,000,000,000 seeds", "the limit is 1,000"))
    assert not (out / "store").exists()  # refused before the store was opened


GRIDS = {
    "additive-40x9": ("additive", {"values": [list(range(9))] * 40, "anchors": [[4]] * 40},
                      "(40 components of 9 values) in cells: 1.478e+38 asked for"),
    "ordering-1e5": ("transitive_ordering", {"n_items": 100000}, "(100000 × 100000) in cells: 10,000,000,000 asked for"),
    "assoc-1e6": ("associative_inference", {"chains": 1000000}, "(3000000 × 3000000) in cells: 9,000,000,000,000 asked for"),
    "equiv-1e5": ("transitive_equivalence", {"classes": [100000, 100000]}, "(200000 × 200000) in cells: 40,000,000,000 asked for"),
    "equiv-1e9": ("transitive_equivalence", {"classes": [1000000000, 1000000000]},
                  "(2000000000 × 2000000000) in cells: 4.000e+18 asked for"),
}
for _name, (_family, _params, _) in GRIDS.items():
    case(f"grid-{_name}", with_tasks(one_line({"id": "big", "family": _family, "params": _params})))


@pytest.mark.parametrize("name", list(GRIDS))
def test_huge_task_grids_are_refused_before_allocating(validated, name):
    asked = GRIDS[name][2]
    assert_refused(*validated[f"grid-{name}"], line=5, says=("tasks[1].params", asked, "the limit is 1,000,000", "--max-cells"))


_ADD4 = with_tasks(one_line({"id": "add4", "family": "additive", "params": {"values": [list(range(40))] * 4, "anchors": [[0]] * 4}}))
case("add4-default", _ADD4)
case("add4-max-cells", _ADD4, "--max-cells", "3000000")


def test_max_cells_lets_a_moderately_large_task_through(validated):
    assert_refused(*validated["add4-default"], line=5, says=("(40 × 40 × 40 × 40) in cells: 2,560,000 asked for", "the limit is 1,000,000"))
    _, raised = validated["add4-max-cells"]
    assert raised.rc == 0 and "OK: suite 'hostile', 2 tasks, 1 models (after sweeps), 2 cells" in raised.out, raised.text
    # 2.56M cells × 4 components of int64 is 82 MB; building the task takes a few such arrays.
    assert raised.growth_mb < 1024, raised.growth_mb


case("sweep-1e7", with_models("- {id: m, adapter: mlp, sweep: {init_scale: {linspace: [0, 1, 10000000]}}}\n"))
case("sweep-product", with_models("""\
    - id: m
      adapter: mlp
      sweep:
        init_scale: {linspace: [0.1, 1, 1000]}
        lr: {linspace: [0.1, 1, 1000]}
        width: {linspace: [1, 1000, 1000]}
"""))
# Two sweeps each under the limit whose sum is over it: the total is checked too.
case("sweep-total", with_models("""\
    - {id: m1, adapter: mlp, sweep: {init_scale: {linspace: [0.1, 1, 60000]}}}
    - {id: m2, adapter: mlp, sweep: {init_scale: {linspace: [0.1, 1, 60000]}}}
"""))


def test_huge_sweeps_are_refused_before_expanding(validated):
    assert_refused(*validated["sweep-1e7"], line=TINY_LINES + 1,
                   says=("models[1].sweep", "10,000,000 asked for", "the limit is 100,000", "--max-models"))
    assert_refused(*validated["sweep-product"], line=TINY_LINES + 3,
                   says=("1,000 (init_scale) × 1,000 (lr) × 1,000 (width)", "1,000,000,000 asked for", "the limit is 100,000"))
    assert_refused(*validated["sweep-total"], line=TINY_LINES - 1,
                   says=("models after sweep expansion", "120,001 asked for", "the limit is 100,000"))


case("image-samples", with_tasks("- {id: img, family: additive, encoding: {name: digits, samples_per_cell: 100000000}}\n"))


def test_image_samples_per_cell_are_bounded_before_encoding(validated):
    assert_refused(*validated["image-samples"], line=5, says=(
        "tasks[1].encoding", "81 cells × 100000000 samples per cell", "8,100,000,000 asked for", "the limit is 2,000,000"))


# "Billion laughs": 9 levels of 9 aliases each, 9^10 leaves once expanded.
_LEVELS = ["a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
_LEVELS += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
case("alias-bomb", "\n".join(_LEVELS) + "\n" + TINY)
# Many aliases of one small node: few expanded nodes, but more aliases than any suite needs.
case("alias-many", "x: &x 1\ny: [" + ", ".join(["*x"] * 1500) + "]\n" + TINY)


def test_a_yaml_alias_bomb_is_refused_without_expanding_it(validated):
    assert_refused(*validated["alias-bomb"], says=("expands to 4,412,961,549 YAML nodes", "limit 200,000", "alias bomb"))
    assert_refused(*validated["alias-many"], says=("more than 1000 YAML aliases", "alias bomb"))


# --- sweep specs ------------------------------------------------------------------------------

SWEEP_SPECS = [
    ("{geomspace: [0, 1, 5]}", "init_scale.geomspace", "geomspace ends must be non-zero and of one sign, got 0 and 1"),
    ("{geomspace: [-1, 1, 5]}", "init_scale.geomspace", "geomspace ends must be non-zero and of one sign, got -1 and 1"),
    ("{linspace: [0, 1, -3]}", "init_scale.linspace", "linspace needs a count ≥ 1, got -3"),
    ("{linspace: [0, 1, 0]}", "init_scale.linspace", "linspace needs a count ≥ 1, got 0"),
    ("{linspace: [.nan, 1, 3]}", "init_scale.linspace", "linspace start must be a finite number, got nan"),
    ("{linspace: [0, .inf, 3]}", "init_scale.linspace", "linspace stop must be a finite number, got inf"),
    ("{geomspace: [.nan, 1, 3]}", "init_scale.geomspace", "geomspace start must be a finite number, got nan"),
    ("{geomspace: [1, -.inf, 3]}", "init_scale.geomspace", "geomspace stop must be a finite number, got -inf"),
    ("[1.0, .nan]", "init_scale", "sweep values must be finite, got nan"),
    ("[1.0, .inf]", "init_scale", "sweep values must be finite, got inf"),
    ("[1.0, 1.0]", "init_scale", "sweep value 1.0 is listed twice"),
    ("[1, 1.0]", "init_scale", "sweep value 1.0 is listed twice"),
    ("{linspace: [1, 1, 2]}", "init_scale", "sweep value 1.0 is listed twice"),
    ("{logspace: [1, 2, 3]}", "init_scale", "a sweep axis is a list of values, {linspace: [start, stop, num]} or {geomspace"),
    ("0.5", "init_scale", "a sweep axis is a list of values"),
]
for _spec, _, _ in SWEEP_SPECS:
    case(f"spec {_spec}", with_models(MLP % _spec))


@pytest.mark.parametrize(("spec", "field", "says"), SWEEP_SPECS)
def test_bad_sweep_specs_are_one_located_error(validated, spec, field, says):
    path, res = validated[f"spec {spec}"]
    assert_refused(path, res, line=TINY_LINES + 1, says=(f"models[1].sweep.{field}: {says}",))
    assert res.err.count("error:") == 1, res.err  # one mistake, one message (not one per form of a sweep axis)


case("nan-in-list-value",
     with_models("- {id: k2, adapter: kernel, params: {kernel: overlap}, sweep: {weights: [[0.0, 0.3, 1.0], [0.0, .nan, 1.0]]}}\n"))


def test_a_nan_inside_a_swept_list_value_is_refused(validated):
    assert_refused(*validated["nan-in-list-value"], line=TINY_LINES + 1,
                   says=("models[1].sweep.weights: sweep values must be finite, got nan in [0.0, nan, 1.0]",))


SEGMENTS = {"weights.²": "'²'", "weights.-1": "'-1'", "a..b": "''", "weights.1x": "'1x'"}
for _segment in SEGMENTS:
    case(f"segment {_segment}", with_models(one_line(
        {"id": "k2", "adapter": "kernel", "params": {"kernel": "overlap", "weights": [0.0, 0.3, 1.0]}, "sweep": {_segment: [0.1, 0.2]}})))


@pytest.mark.parametrize("segment", list(SEGMENTS))
def test_sweep_paths_whose_segments_are_neither_names_nor_indices_are_refused(validated, segment):
    assert_refused(*validated[f"segment {segment}"], line=TINY_LINES + 1, says=(
        f"models[1].sweep.{segment}: cannot set sweep path: path segment {SEGMENTS[segment]} is neither a name",))


case("close-values", with_models(MLP % "[1.0, 1.00001]"))
case("linspace-1000", with_models(MLP % "{linspace: [1000, 1001, 11]}"))


def test_close_sweep_values_validate_with_distinct_member_ids(validated):
    from compbench.suite import load_suite  # in-process too: the ids themselves, not only their count

    close, r_close = validated["close-values"]
    grid, r_grid = validated["linspace-1000"]
    assert r_close.rc == 0 and "3 models (after sweeps)" in r_close.out, r_close.text
    assert r_grid.rc == 0 and "12 models (after sweeps)" in r_grid.out, r_grid.text
    assert [m.id for m in load_suite(close).models] == ["k", "m[init_scale=1]", "m[init_scale=1.00001]"]
    assert [m.id for m in load_suite(grid).models][1:] == [
        f"m[init_scale={v}]" for v in ("1000", "1000.1", "1000.2", "1000.3", "1000.4", "1000.5",
                                       "1000.6", "1000.7", "1000.8", "1000.9", "1001")]


# --- nonsense that used to be accepted ---------------------------------------------------------

case("seeds-suite-negative", TINY.replace("seeds: 1", "seeds: [-1, 2]"))
case("seeds-model-negative", with_models("- {id: m, adapter: mlp, seeds: [3, -2]}\n"))
case("seeds-model-negative-count", with_models("- {id: m, adapter: mlp, seeds: -3}\n"))
case("seeds-model-zero", with_models("- {id: m, adapter: mlp, seeds: 0}\n"))
case("seeds-model-repeat", with_models("- {id: m, adapter: mlp, seeds: [1, 1]}\n"))


def test_negative_zero_and_repeated_seeds_are_refused(validated):
    at = TINY_LINES + 1
    assert_refused(*validated["seeds-suite-negative"], line=2, says=("seeds: seeds must be non-negative, got [-1]",))
    assert_refused(*validated["seeds-model-negative"], line=at, says=("models[1].seeds: seeds must be non-negative, got [-2]",))
    assert_refused(*validated["seeds-model-negative-count"], line=at,
                   says=("models[1].seeds: seeds must be a count ≥ 1 or a list of seeds, got -3",))
    assert_refused(*validated["seeds-model-zero"], line=at, says=("models[1].seeds: seeds must be a count ≥ 1 or a list of seeds, got 0",))
    assert_refused(*validated["seeds-model-repeat"], line=at, says=("models[1].seeds: seed list has repeats ([1])",))


case("dup-top", TINY.replace("seeds: 1\n", "seeds: 1\nseeds: 2\n"))
case("dup-flow", TINY.replace("params: {classes: [2, 2]}", "params: {classes: [2, 2], classes: [3, 3]}"))
case("dup-block", TINY + "  - id: m\n    adapter: mlp\n    params:\n      width: 8\n      width: 16\n")


def test_duplicate_yaml_keys_are_refused_at_their_line(validated):
    assert_refused(*validated["dup-top"], line=3, says=("seeds: duplicate key 'seeds' (first given at line 2)",))
    assert_refused(*validated["dup-flow"], line=4, says=("tasks[0].params.classes: duplicate key 'classes' (first given at line 4)",))
    assert_refused(*validated["dup-block"], line=TINY_LINES + 5,
                   says=("models[1].params.width: duplicate key 'width' (first given at line 10)",))


# --- expectations ------------------------------------------------------------------------------

case("claim-unknown", with_expectation("  - {source: {paper: compbench, threshold: a test fixture}, claim: matches_kernal, models: [k], tasks: [te]}\n"))
case("claim-param", with_expectation("  - {source: {paper: compbench, threshold: a test fixture}, claim: at_chance, metric: heldout_acc, models: [k], tasks: [te]}\n"))
case("claim-kind", with_expectation("  - {source: {paper: compbench, threshold: a test fixture}, claim: at_chance, models: [k], tasks: [add]}\n", "  - {id: add, family: additive}\n"))
case("claim-ordered-one", with_expectation("  - {source: {paper: compbench, threshold: a test fixture}, claim: ordered, metric: heldout_acc, models: [k], tasks: [te]}\n"))


def test_expectation_mistakes_are_located_errors(validated):
    at = TINY_LINES + 2
    assert_refused(*validated["claim-unknown"], line=at,
                   says=("expectations[0].claim: unknown claim 'matches_kernal'; did you mean 'matches_kernel'?",))
    assert_refused(*validated["claim-param"], line=at,
                   says=("expectations[0].metric: unknown field 'metric': claim 'at_chance' takes tolerance",))
    assert_refused(*validated["claim-kind"], line=at + 1,
                   says=("expectations[0].tasks[0]: claim 'at_chance' applies to classification tasks; task 'add' is regression",))
    assert_refused(*validated["claim-ordered-one"], line=at, says=("expectations[0].tasks: 'ordered' needs at least 2 entries",))


NO_THEORY_ADAPTER = '''\
"""A test adapter without a kernel: it predicts the training mean, so it has no theory prediction."""
import numpy as np
from compbench.adapters import Adapter, Fitted, register_adapter


@register_adapter("no-theory")
class NoTheory(Adapter):
    deterministic = True

    def fit_seeds(self, train, evaluate, seeds):
        return [Fitted(np.full(len(evaluate), float(np.mean(train.y)))) for _ in seeds]
'''


@pytest.mark.slow
def test_theory_claims_on_a_model_without_theory_fail_as_not_applicable_through_run_and_report(tmp_path):
    (tmp_path / "no_theory_adapter.py").write_text(NO_THEORY_ADAPTER)
    suite = write(tmp_path, "no_theory.yaml", textwrap.dedent("""\
        name: no-theory
        seeds: 1
        tasks:
          - {id: te, family: transitive_equivalence, params: {classes: [2, 2]}}
          - {id: add, family: additive}
        models:
          - {id: plain, adapter: no-theory}
        expectations:
          - {id: mk, source: {paper: compbench, threshold: a test fixture}, claim: matches_kernel, models: [plain], tasks: [te]}
          - {id: bk, source: {paper: compbench, threshold: a test fixture}, claim: beats_kernel, models: [plain], tasks: [add]}
          - {id: ab, source: {paper: compbench, threshold: a test fixture}, claim: above, metric: theory_r2, bound: 0.5, models: [plain], tasks: [te]}
          - {id: od, source: {paper: compbench, threshold: a test fixture}, claim: ordered, metric: theory_r2, models: [plain], tasks: [te, add]}
          - {id: ch, source: {paper: compbench, threshold: a test fixture}, claim: at_chance, models: [plain], tasks: [te]}
    """))
    out = tmp_path / "out"
    modules = ((str(tmp_path), "no_theory_adapter"),)
    run, report = batch(
        [{"argv": ["run", "--suite", str(suite), "--out", str(out), "--quiet", "--format", "md,csv"]},
         {"argv": ["report", "--suite", str(suite), "--out", str(out), "--format", "md"]}],
        modules=modules, cap_memory=False,
    )
    for res in (run, report):
        assert "Traceback" not in res.text and "KeyError" not in res.text, res.text
        assert res.rc == 1, res.text  # the theory claims fail; nothing crashes
    assert "2 cells run" in run.out and "0 failed" in run.out and "expectations 1/5 pass" in run.out, run.out
    for name, metric in (("mk", "theory_r2"), ("bk", "theory_heldout_r2"), ("ab", "theory_r2"), ("od", "theory_r2")):
        line = next(l for l in run.out.splitlines() if l.startswith(f"  FAIL {name} "))
        assert f"not applicable: plain does not produce {metric} (the model has no kernel-theory prediction)" in line, line
    assert "expectations 1/5 pass" in report.out, report.out
    report_md = (out / "report.md").read_text() if (out / "report.md").exists() else "".join(p.read_text() for p in out.glob("*.md"))
    assert "not applicable" in report_md


# --- fuzz: random bytes and random structures through the real CLI ----------------------------

FIELDS = ["name", "seeds", "tasks", "models", "expectations", "profiles", "id", "family", "params", "encoding",
          "adapter", "sweep", "tags", "claim", "metric", "bound", "tolerance", "linspace", "geomspace", "classes",
          "values", "anchors", "n_items", "chains", "kernel", "weights", "samples_per_cell", "description"]
WORDS = ["hostile", "additive", "transitive_equivalence", "transitive_ordering", "kernel", "mlp", "overlap", "relu_ntk",
         "digits", "onehot", "at_chance", "matches_kernel", "ordered", "heldout_acc", "te", "k", "*", "@kernels", "CD-1"]
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 12), st.sampled_from([10**9, 10**7, -1, 0]),
    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(WORDS), st.text(max_size=6),
)
structures = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(FIELDS) | st.text(max_size=4), inner, max_size=5),
    max_leaves=25,
)


@st.composite
def suites(draw):
    """Random structures: sometimes from nothing, mostly TINY with random fields replaced or added."""
    if draw(st.booleans()) and draw(st.booleans()):
        return draw(structures)
    doc = yaml.safe_load(TINY)
    targets = [doc, doc["tasks"][0], doc["models"][0], doc["tasks"][0]["params"], doc["models"][0]["params"]]
    for _ in range(draw(st.integers(0, 3))):
        draw(st.sampled_from(targets))[draw(st.sampled_from(FIELDS))] = draw(structures)  # a detached one is harmless
    return doc


def _fuzz(tmp: Path, files: list[bytes], runnable: list[bool]) -> None:
    calls, paths = [], []
    for i, (data, run) in enumerate(zip(files, runnable)):
        path = write(tmp, f"fuzz{i}.yaml", data)
        paths.append(path)
        calls.append({"argv": ["validate", str(path)]})
        # A run only after a clean validate, and only of a tiny budget (see _tiny_budget).
        argv = ["run", "--suite", str(path), "--out", str(tmp / f"out{i}"), "--quiet", "--format", "md"]
        calls.append({"argv": argv, "if_previous_ok": True} if run else {"argv": argv, "if_previous_ok": True, "skip": True})
    results = batch(calls, cap_memory=False, timeout=600)
    for path, data, val, run in zip(paths, files, results[::2], results[1::2]):
        assert val is not None
        assert val.rc in (0, 2), (data[:300], val.text)
        assert "Traceback" not in val.text, val.text
        assert val.growth_mb < MAX_GROWTH_MB, (val.growth_mb, data[:300])
        if val.rc == 2:
            assert all(l.startswith(f"error: {path}") for l in val.err.splitlines() if l.strip()), val.err
        if run is not None:
            assert run.rc in (0, 1), (data[:300], run.text)
            assert "Traceback" not in run.text, run.text


def _tiny_budget(doc) -> bool:
    """Whether every model is a closed-form kernel (so a run of it takes well under a second per cell)."""
    models = doc.get("models") if isinstance(doc, dict) else None
    return isinstance(models, list) and all(isinstance(m, dict) and m.get("adapter") == "kernel" for m in models)


@pytest.mark.slow
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(st.binary(max_size=200) | st.text(max_size=200).map(str.encode), min_size=6, max_size=6))
def test_fuzz_random_bytes_through_the_cli(tmp_path_factory, blobs):
    _fuzz(tmp_path_factory.mktemp("bytes"), blobs, [False] * len(blobs))


@pytest.mark.slow
@settings(max_examples=2, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(st.lists(suites(), min_size=7, max_size=7))
def test_fuzz_random_structures_through_the_cli(tmp_path_factory, docs):
    files = [yaml.safe_dump(doc, allow_unicode=True).encode() for doc in docs]
    _fuzz(tmp_path_factory.mktemp("structures"), files, [_tiny_budget(doc) for doc in docs])
