"""Hostile suite files and results directories (issue #35, items 11, 12 and 14): what a suite file (data)
may cost and where it may write, and files put where compbench expects its own.

Every case goes through the real CLI (`compbench.cli.main`), a subprocess where a hang is the defect,
or the public API (`compbench.parse_suite`, `compbench.evaluate`).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from tiny_suites import TINY, Result, cli, yaml_work

import compbench
from compbench.suite import SuiteError




def refused(res: Result, *says: str) -> str:
    """The one error line of a refused command (exit 2, no traceback), checked to say each of `says`."""
    assert res.rc == 2, (res.rc, res.out, res.err)
    assert "Traceback" not in res.err, res.err
    lines = [line for line in res.err.splitlines() if line.strip()]
    error = next(line for line in lines if "error" in line or line.startswith("compbench:"))
    for text in says:
        assert text in error, (text, res.err)
    return error


def counted_validate(path: Path) -> tuple[Result, dict[str, int]]:
    """`compbench validate PATH` and the YAML work it cost (tiny_suites.yaml_work): counted, not timed, so that a
    loaded machine cannot fail it and a slow path cannot pass it."""
    with yaml_work() as work:
        res = cli("validate", str(path))
    return res, work


@pytest.fixture(scope="module")
def warm(tmp_path_factory) -> None:
    """Imports done before any clock starts."""
    path = tmp_path_factory.mktemp("warm") / "ok.yaml"
    path.write_text(TINY)
    assert cli("validate", str(path)).rc == 0


# --- 11: a wide file is bounded before parsing, and the message names the limit hit ----------------


def test_a_wide_suite_over_the_size_limit_is_refused_before_parsing(tmp_path, warm):
    # 1.8 MB of keys, no aliases: parsed whole before (17 s), then blamed on aliases it does not have.
    path = tmp_path / "wide.yaml"
    path.write_text(TINY + "extra:\n" + "".join(f"  k{i}: {i}\n" for i in range(150_000)))
    assert path.stat().st_size > 1_800_000
    res, work = counted_validate(path)
    error = refused(res, f"{path}: the file is {path.stat().st_size:,} bytes", "the limit on a suite file is 1,000,000 bytes",
                    "refused before parsing")
    assert "alias" not in error.split(str(path))[-1]
    assert work["loaders"] == 0  # no parser was made: refused on its size alone


def test_suite_text_given_to_the_api_is_bounded_too():
    text = TINY + "extra:\n" + "".join(f"  k{i}: {i}\n" for i in range(150_000))
    with pytest.raises(SuiteError) as exc:
        compbench.parse_suite(text, "big.yaml")
    assert str(exc.value) == (f"big.yaml: the file is {len(text):,} characters; the limit on a suite file is 1,000,000 bytes "
                              "(a suite is a few kB): refused before parsing")


def test_many_nodes_without_aliases_are_refused_for_their_number_not_for_aliases(tmp_path, warm):
    # 300,000 list items in 600 kB (under the size limit): the old message said "expands ... through its aliases".
    path = tmp_path / "nodes.yaml"
    path.write_text(TINY + "extra: [" + ",".join(["1"] * 300_000) + "]\n")
    res = cli("validate", str(path))  # refused at the 100,001st node: a few seconds of PyYAML, not timed here
    error = refused(res, f"{path}:{TINY.count(chr(10)) + 1}: more than 100,000 YAML nodes", "the limit on a suite file")
    assert "alias" not in error.split(str(path))[-1]


# --- 14: the nesting guard counts the parser's events: an anchor or a tag cannot hide a level -------


@pytest.mark.parametrize("prefix", ["&deep ", "!!seq ", "&deep !!seq ", "!custom "])
def test_an_anchor_or_tag_before_the_brackets_does_not_bypass_the_nesting_limit(tmp_path, warm, prefix):
    path = tmp_path / "deep.yaml"
    path.write_text(TINY + "x: " + prefix + "[" * 20_000 + "]" * 20_000 + "\n")
    res, work = counted_validate(path)
    refused(res, f"{path}:{TINY.count(chr(10)) + 1}: lists and mappings are nested more than 64 levels deep")
    assert 64 < work["tokens"] < 500, work  # refused at the 65th level, not after scanning 40,000 brackets


def test_model_args_with_an_anchor_are_held_to_the_nesting_limit(tmp_path, warm):
    path = tmp_path / "s.yaml"
    path.write_text(TINY)
    start = time.perf_counter()
    res = cli("run", "--suite", str(path), "--results", str(tmp_path / "o"), "--model", "kernel", "--quiet",
              "--model-args", "weights=&w " + "[" * 20_000)
    assert time.perf_counter() - start < 2.0
    refused(res, "--model-args weights", "nested more than 64 levels deep")
    assert not (tmp_path / "o").exists()


# --- 14: a FIFO where the store goes is refused, not waited on for ever ------------------------------


def test_a_fifo_at_the_store_path_is_refused_by_run_and_report(tmp_path):
    import os
    import subprocess
    import sys

    from tiny_suites import kernel_suite

    suite = tmp_path / "k.yaml"
    suite.write_text(kernel_suite("fifo", "leak", relu=False))
    results = tmp_path / "results"
    assert cli("run", "--suite", str(suite), "--results", str(results), "--quiet").rc == 0
    store = results / "store" / "records.sqlite"
    for name in os.listdir(store.parent):
        (store.parent / name).unlink()
    os.mkfifo(store)
    for command in (["run", "--suite", str(suite), "--results", str(results), "--quiet"],
                    ["report", "--suite", str(suite), "--results", str(results)]):
        try:
            proc = subprocess.run([sys.executable, "-m", "compbench.cli", *command], capture_output=True, text=True, timeout=60)
        except subprocess.TimeoutExpired:
            pytest.fail(f"compbench {command[0]} waited on the FIFO at {store}")
        assert proc.returncode == 2, (command[0], proc.returncode, proc.stderr)
        assert "Traceback" not in proc.stderr
        errors = [line for line in proc.stderr.splitlines() if str(store) in line]
        assert len(errors) == 1 and "is a FIFO (named pipe), not a regular file" in errors[0], proc.stderr
    assert store.is_fifo()  # left where it was, for the user to move aside


# --- 12: `download: true` writes only into the data cache ------------------------------------------

_TE = "  - {id: te, family: transitive_equivalence}\n"


def download_suite(root: str) -> str:
    """TINY with an MNIST task that asks torchvision to download into `root` (never reached: refused first)."""
    image = ("  - {id: img, family: additive, params: {anchors: [[4], [4]]}, "
             f"encoding: {{name: images, source: mnist, root: '{root}', download: true}}}}\n")
    assert _TE in TINY
    return TINY.replace(_TE, _TE + image)


@pytest.mark.parametrize("where", ["../escape/mnist", "ABSOLUTE"])
def test_download_outside_the_data_cache_is_refused_at_load_and_makes_no_folder(tmp_path, monkeypatch, where):
    cache = tmp_path / "cache"
    monkeypatch.setenv("COMPBENCH_DATA", str(cache))
    root = str(tmp_path / "elsewhere" / "mnist") if where == "ABSOLUTE" else where
    outside = tmp_path / ("elsewhere" if where == "ABSOLUTE" else "escape")
    suite = tmp_path / "s.yaml"
    suite.write_text(download_suite(root))
    line = TINY.split("\n").index(_TE.rstrip("\n")) + 2
    for command in (["validate", str(suite)], ["run", "--suite", str(suite), "--results", str(tmp_path / "r"), "--quiet"]):
        res = cli(*command)
        refused(res, f"{suite}:{line}: tasks[2].encoding.download: `download: true` writes only into the data cache "
                     f"{str(cache)!r}", f"root {root!r} is {str(outside / 'mnist')!r}, outside it")
    assert not outside.exists() and not cache.exists() and not (tmp_path / "r").exists()


def test_download_inside_the_data_cache_validates(tmp_path, monkeypatch):
    monkeypatch.setenv("COMPBENCH_DATA", str(tmp_path / "cache"))
    for root in ("mnist", str(tmp_path / "cache" / "cifar")):
        suite = tmp_path / "s.yaml"
        suite.write_text(download_suite(root))
        res = cli("validate", str(suite))
        assert res.rc == 0, res.err
    assert not (tmp_path / "cache").exists()  # validating downloads nothing


# --- 14: the bytes an image encoding will render are bounded, not only its cells -------------------


def image_suite(task: str) -> str:
    """TINY with one more task (a flow mapping) after its te task."""
    return TINY.replace(_TE, _TE + f"  - {task}\n")


@pytest.mark.parametrize(("task", "says"), [
    # 480,000 cells (under the cell limit) of 256 × 256 sprites: every cell's image and the training cells' copy.
    ("{id: big, family: sprites, params: {scales: 10, orientations: 40, positions_x: 40, positions_y: 10}, "
     "encoding: {name: sprites, size: 256}}",
     "the sprites encoding's inputs (840,000 float32 images of 1 × 256 × 256, about 205.1 GiB) in bytes: "
     "220,200,960,000 asked for, the limit is 8,589,934,592 (raise it with --max-task-gib if you mean it)"),
    # 81 cells of 8 × 8 digits, but a billion columns between the two components' images.
    ("{id: wide, family: additive, params: {anchors: [[4], [4]]}, encoding: {name: digits, distance: 1000000000}}",
     "the digits encoding's inputs (392 float32 images of 1 × 8 × 1000000008, about 11,682.5 GiB) in bytes: 12,544,000,100,352 asked for"),
])
def test_an_image_encoding_that_would_render_too_many_bytes_is_refused_by_validate(tmp_path, task, says):
    suite = tmp_path / "s.yaml"
    suite.write_text(image_suite(task))
    line = TINY.split("\n").index(_TE.rstrip("\n")) + 2
    refused(cli("validate", str(suite)), f"{suite}:{line}: tasks[2].encoding: {says}")


def test_max_task_gib_lets_a_large_image_task_through(tmp_path):
    suite = tmp_path / "s.yaml"
    suite.write_text(image_suite("{id: big, family: sprites, params: {scales: 6, orientations: 8, positions_x: 8, positions_y: 8}, "
                                 "encoding: {name: sprites, size: 256}}"))  # 16,128 images: 3.9 GiB
    refused(cli("validate", str(suite), "--max-task-gib", "3"), "about 3.9 GiB", "the limit is 3,221,225,472")
    res = cli("validate", str(suite), "--max-task-gib", "4")
    assert res.rc == 0, res.err


def test_a_slot_render_task_of_too_many_target_bytes_is_refused_before_rendering(tmp_path):
    # 1,000,000 cells (the cell limit) of 256 × 256 float64 target images: built by validate itself.
    suite = tmp_path / "s.yaml"
    suite.write_text(image_suite("{id: slots, family: slot_render, params: {grid: 10, size: 256}}"))
    line = TINY.split("\n").index(_TE.rstrip("\n")) + 2
    refused(cli("validate", str(suite)), f"{suite}:{line}: tasks[2].params: the task's target images (1,000,000 float64 images "
            "of 256 × 256, about 488.3 GiB) in bytes: 524,288,000,000 asked for, the limit is 8,589,934,592")
