"""Files compbench writes in a results directory and baselines: never outside it, never through a
link, atomically (a full disk is one line and the previous files survive), verified by digest, and
one suite's report per directory."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

import compbench.files
from compbench.cli import main
from compbench.files import OutputError, remove_contained, write_atomic
from tiny_suites import cli_process, suite_text

ROOT = Path(__file__).resolve().parents[1]

TINY = suite_text("add", name="tiny")
OTHER = TINY.replace("name: tiny", "name: other").replace("weights: [0.0, 0.4, 1.0]", "weights: [0.0, 0.3, 1.0]")


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The `compbench` command in its own process, importing this checkout's code."""
    return cli_process(*args, cwd=cwd)


def one_error_line(stderr: str) -> str:
    """The single `compbench: ...` line of a refused command (and nothing like a traceback)."""
    assert "Traceback" not in stderr, stderr
    # Every command first says which suite file it loaded; the error is the one line after it.
    lines = [line for line in stderr.splitlines() if line.strip() and not line.startswith("suite '")]
    assert len(lines) == 1 and lines[0].startswith("compbench: "), stderr
    return lines[0]


def report_bytes(out: Path) -> dict[str, bytes]:
    """Every report file (not the store, nor this copy's file statuses, recorded once a file is 2 s old) by path
    relative to out."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*"))
            if p.is_file() and "store" not in p.relative_to(out).parts and p.name != "status.json"}


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> tuple[Path, Path]:
    """A suite file and a results directory its run published into (copied by each test that changes it)."""
    base = tmp_path_factory.mktemp("published")
    suite = base / "tiny.yaml"
    suite.write_text(TINY)
    done = cli("run", "--suite", str(suite), "--out", str(base / "out"), "--quiet")
    assert done.returncode == 0, done.stderr
    return suite, base / "out"


@pytest.fixture
def out(published, tmp_path) -> Path:
    """A copy of the published results directory, in this test's own folder."""
    copy = tmp_path / "work" / "out"
    shutil.copytree(published[1], copy, symlinks=True)
    return copy


@pytest.fixture
def suite(published, tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY)
    return path


# -- A: manifests from a pull request cannot delete outside the results directory -----------------


@pytest.mark.slow
def test_plots_manifest_entries_outside_the_results_directory_are_never_deleted(suite, out, tmp_path):
    victims = [tmp_path / "work" / "victim.png", tmp_path / "work" / "victim.svg", tmp_path / "abs.png", tmp_path / "abs.svg"]
    for v in victims:
        v.write_text("precious")
    manifest = json.loads((out / "plots" / "manifest.json").read_text())
    manifest["digest"] = "0" * 64  # as after a change: the plots are redrawn and stale ones removed
    manifest["plots"] += [["../../victim", "x"], [str(tmp_path / "abs"), "y"]]
    (out / "plots" / "manifest.json").write_text(json.dumps(manifest))
    (out / ".report" / "manifest.json").unlink()  # every writer runs
    done = cli("report", "--suite", str(suite), "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_error_line(done.stderr)
    assert "manifest.json" in line and "nothing was deleted" in line
    assert all(v.read_text() == "precious" for v in victims)


@pytest.mark.slow
def test_report_manifest_file_lists_outside_the_results_directory_are_not_trusted(suite, out, tmp_path):
    victim = tmp_path / "work" / "victim.md"
    victim.write_text("precious")
    manifest = json.loads((out / ".report" / "manifest.json").read_text())
    manifest["md"]["files"] = ["../victim.md"]  # the writer's digest still matches: only the list is hostile
    (out / ".report" / "manifest.json").write_text(json.dumps(manifest))
    (out / "leaderboard.md").unlink()
    done = cli("report", "--suite", str(suite), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert (out / "leaderboard.md").is_file() and "victim" not in done.stdout
    assert victim.read_text() == "precious"


def test_paths_that_leave_the_root_are_refused(tmp_path):
    (tmp_path / "root").mkdir()
    (tmp_path / "outside.txt").write_text("precious")
    for bad in ("../outside.txt", str(tmp_path / "outside.txt"), "plots/../../outside.txt", ""):
        with pytest.raises(OutputError, match="not a path inside the results directory"):
            write_atomic(tmp_path / "root", bad, "x")
        with pytest.raises(OutputError, match="not a path inside the results directory"):
            remove_contained(tmp_path / "root", bad)
    assert (tmp_path / "outside.txt").read_text() == "precious"


# -- B: never through a symbolic link --------------------------------------------------------------


@pytest.mark.slow
def test_a_symlink_where_a_report_file_goes_is_refused_and_its_target_untouched(suite, out, tmp_path):
    victim = tmp_path / "work" / "victim.txt"
    victim.write_text("precious")
    (out / "leaderboard.md").unlink()
    (out / "leaderboard.md").symlink_to("../victim.txt")
    done = cli("report", "--suite", str(suite), "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_error_line(done.stderr)
    assert f"{out / 'leaderboard.md'}: is a symbolic link" in line
    assert victim.read_text() == "precious" and (out / "leaderboard.md").is_symlink()


@pytest.mark.slow
def test_a_symlinked_plots_folder_is_refused_and_nothing_written_or_deleted_there(suite, out, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "theory-add.png").write_text("precious")
    (elsewhere / "manifest.json").write_text(json.dumps({"digest": "x", "plots": [["theory-add", "c"]]}))
    shutil.rmtree(out / "plots")
    (out / "plots").symlink_to(elsewhere)
    done = cli("report", "--suite", str(suite), "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{out / 'plots'}: is a symbolic link" in one_error_line(done.stderr)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["manifest.json", "theory-add.png"]
    assert (elsewhere / "theory-add.png").read_text() == "precious"


# -- C: a full disk is one line, and the previous files survive -------------------------------------


def _fail_writing(monkeypatch, name: str) -> list[str]:
    """Make the atomic writer's low-level write run out of space, half-way, for files called `name`."""
    if not Path("/proc/self/fd").is_dir():
        pytest.skip("needs /proc to see which file a descriptor writes")
    real = compbench.files._write_all
    failed: list[str] = []

    def write_all(fd: int, payload: bytes) -> None:
        target = os.readlink(f"/proc/self/fd/{fd}")
        if f"/.{name}." in target:
            os.write(fd, payload[: len(payload) // 2])
            failed.append(target)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real(fd, payload)

    monkeypatch.setattr(compbench.files, "_write_all", write_all)
    return failed


def test_a_full_disk_while_writing_the_report_is_one_line_and_keeps_the_old_page(suite, out, monkeypatch, capsys):
    before = report_bytes(out)
    suite.write_text(TINY.replace("weights: [0.0, 0.4, 1.0]", "weights: [0.0, 0.2, 1.0]"))  # the page must change
    failed = _fail_writing(monkeypatch, "leaderboard.html")
    capsys.readouterr()
    assert main(["run", "--suite", str(suite), "--out", str(out), "--quiet"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"compbench: {out / 'leaderboard.html'}: cannot write: the disk is full"), line
    assert failed
    assert (out / "leaderboard.html").read_bytes() == before["leaderboard.html"]
    assert not [p for p in out.rglob("*.tmp")]
    # Once there is room again the same command finishes the report.
    monkeypatch.undo()
    assert main(["run", "--suite", str(suite), "--out", str(out), "--quiet"]) == 0
    assert (out / "leaderboard.html").read_bytes() != before["leaderboard.html"]


def test_a_full_disk_while_drawing_plots_in_the_plot_process_is_one_line(suite, out, monkeypatch, capsys):
    suite.write_text(TINY.replace("weights: [0.0, 0.4, 1.0]", "weights: [0.0, 0.2, 1.0]"))
    before = report_bytes(out)
    _fail_writing(monkeypatch, "grid-add.svg")
    capsys.readouterr()
    assert main(["run", "--suite", str(suite), "--out", str(out), "--quiet"]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith(f"compbench: {out / 'plots' / 'grid-add.svg'}: cannot write: the disk is full"), line
    assert (out / "plots" / "grid-add.svg").read_bytes() == before["plots/grid-add.svg"]


@pytest.fixture
def tiny_disk(tmp_path):
    """A 2 MB tmpfs (root only); skipped where it cannot be mounted."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None or os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(disk: Path, leave: int) -> None:
    """Fill the disk until only about `leave` bytes are free."""
    st = os.statvfs(disk)
    free = st.f_bavail * st.f_frsize
    with open(disk / f"filler-{uuid.uuid4().hex}", "wb") as fh:
        fh.write(b"\0" * max(0, free - leave))


@pytest.mark.slow
def test_a_really_full_disk_leaves_every_report_file_whole(suite, tiny_disk):
    out = tiny_disk / "out"
    done = cli("run", "--suite", str(suite), "--out", str(out), "--quiet")
    assert done.returncode == 0, done.stderr
    before = report_bytes(out)
    (out / ".report" / "manifest.json").unlink()  # every writer runs again
    (out / "plots" / "manifest.json").unlink()  # and every plot is redrawn
    before.pop(".report/manifest.json")
    before.pop("plots/manifest.json")
    _fill(tiny_disk, 96 * 1024)  # room for the store's shared-memory file, not for leaderboard.html (120 kB)
    done = cli("report", "--suite", str(suite), "--out", str(out))
    assert done.returncode == 2, done.stdout + done.stderr
    line = one_error_line(done.stderr)
    assert line.startswith(f"compbench: {out}/") and ": cannot write: the disk is full" in line, line
    after = report_bytes(out)
    assert {k: after[k] for k in before} == before  # old or rewritten from the same inputs: never cut short
    assert not [p for p in out.rglob("*.tmp")]


# -- D: baselines are written atomically ------------------------------------------------------------


def test_a_full_disk_never_truncates_a_baseline(suite, tmp_path, monkeypatch, capsys):
    results, baseline = tmp_path / "results", tmp_path / "baselines" / "tiny.json"
    assert main(["baseline", "record", "--suite", str(suite), "--results", str(results), "--out", str(baseline), "--quiet"]) == 0
    old = baseline.read_bytes()
    _fail_writing(monkeypatch, "tiny.json")
    capsys.readouterr()
    assert main(["check", "--suite", str(suite), "--results", str(results), "--baseline", str(baseline), "--update", "--quiet"]) == 2
    assert one_error_line(capsys.readouterr().err).startswith(f"compbench: {baseline}: cannot write: the disk is full")
    assert baseline.read_bytes() == old and json.loads(old)["suite"] == "tiny"
    assert main(["baseline", "record", "--suite", str(suite), "--results", str(results), "--out", str(baseline), "--quiet"]) == 2
    assert one_error_line(capsys.readouterr().err).startswith(f"compbench: {baseline}: cannot write: the disk is full")
    assert baseline.read_bytes() == old
    assert [p.name for p in baseline.parent.iterdir()] == ["tiny.json"]


@pytest.mark.slow
def test_a_baseline_that_is_a_symlink_is_refused(suite, tmp_path):
    victim = tmp_path / "victim.json"
    victim.write_text("precious")
    (tmp_path / "baseline.json").symlink_to(victim)
    done = cli("baseline", "record", "--suite", str(suite), "--results", str(tmp_path / "results"),
               "--out", str(tmp_path / "baseline.json"), "--quiet")
    assert done.returncode == 2
    assert "is a symbolic link" in one_error_line(done.stderr)
    assert victim.read_text() == "precious"


# -- E: the report cache checks the files' digests ---------------------------------------------------


@pytest.mark.slow
def test_emptied_or_edited_report_files_are_rewritten_not_trusted(suite, out):
    before = report_bytes(out)
    (out / "leaderboard.html").write_text("")
    with open(out / "leaderboard.md", "a") as fh:
        fh.write("\nedited by hand\n")
    (out / "plots" / "theory-add.png").write_bytes(b"")
    done = cli("report", "--suite", str(suite), "--out", str(out))  # the same summary: the same bytes
    assert done.returncode == 0, done.stderr
    assert "report unchanged" not in done.stdout
    assert done.stdout.rstrip().splitlines()[-1] == \
        "report partly rewritten: 2 writers skipped (csv, predictions; inputs identical)"
    after = report_bytes(out)
    for name in ("leaderboard.html", "leaderboard.md", "plots/theory-add.png"):
        assert after[name] == before[name], name
    again = cli("report", "--suite", str(suite), "--out", str(out))
    assert again.stdout.rstrip().splitlines()[-1].startswith("report unchanged: 5 writers skipped")


# -- F: one suite's report per results directory -------------------------------------------------------


@pytest.mark.slow
def test_a_second_suite_cannot_publish_into_another_suites_results_directory(suite, out, tmp_path):
    before = report_bytes(out)
    other = tmp_path / "other.yaml"
    other.write_text(OTHER)
    for command in (["run", "--suite", str(other), "--out", str(out), "--quiet"], ["report", "--suite", str(other), "--out", str(out)]):
        done = cli(*command)
        assert done.returncode == 2, done.stdout + done.stderr
        line = one_error_line(done.stderr)
        assert "suite 'tiny'" in line and "suite 'other'" in line and "--results results/other" in line, line
        assert report_bytes(out) == before  # its leaderboard and plots are as they were
    assert cli("report", "--suite", str(suite), "--out", str(out)).returncode == 0  # its own suite still reports


def test_published_results_name_their_suite():
    """results/<suite>/ holds the suite's default profile; results/<suite>/<profile>/ another profile's."""
    summaries = sorted((ROOT / "results").glob("*/summary.json"))
    assert len(summaries) >= 8
    for summary in summaries:
        assert json.loads(summary.read_text())["suite"] == summary.parent.name
    profiled = sorted((ROOT / "results").glob("*/*/summary.json"))
    assert [p.relative_to(ROOT / "results").parent.as_posix() for p in profiled] == ["kernel-limits-images/mnist", "modular-teacher/full"]
    for summary in profiled:
        assert json.loads(summary.read_text())["suite"] == summary.parent.parent.name
