"""Children die with their parent (#35 item 9): `kill -9` of `run --executor process` left both pool
workers running for ever, and `kill -9` of `report` while it drew its plots left the drawing process
blocked for ever (it held its own copy of the pipe's read end). Each child now dies with its parent."""

from __future__ import annotations

import importlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tiny_suites import kernel_suite

from compbench.cli import main

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")]

SLEEPER = '''\
import time

from compbench.adapters.base import Adapter


class Sleeper(Adapter):
    def fit_seeds(self, train, evaluate, seeds):
        while True:  # a job that runs until its worker is stopped
            time.sleep(0.05)
'''
# `report`, its plots drawn in a forked process that takes minutes to draw them.
SLOW_PLOTS = '''\
import sys
import time

import compbench.report.plots as plots


def slow(*args, **kwargs):
    time.sleep(300)


plots.write_plots = slow  # the forked drawing process inherits it
from compbench.cli import main

sys.exit(main(sys.argv[1:]))
'''


def _state(pid: int) -> tuple[str, int] | None:
    """(state letter, parent pid) of a live process, or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return fields[0], int(fields[1])


def _children(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (st := _state(int(entry.name))) is not None and st[1] == pid:
            found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    st = _state(pid)
    return st is not None and st[0] not in "ZX"  # a zombie is dead, waiting for init to reap it


def _kill_parent_and_watch_children(command: list[str], n_children: int) -> list[int]:
    """Start `command`, wait for its `n_children` children, SIGKILL it; the children alive 5 s later."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=dict(os.environ))
    children: set[int] = set()
    try:
        deadline = time.monotonic() + 120
        while len(children) < n_children:
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, f"{n_children} children never started: {children}"
            time.sleep(0.2)
            children = _children(proc.pid)
        time.sleep(1.0)  # the children are at work (a job, the plots), not starting
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 5
        while any(_alive(c) for c in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        return [c for c in children if _alive(c)]
    finally:
        proc.kill()
        proc.wait()
        proc.stderr.close()
        for c in children:  # an orphan left by a failing test is not left to run on
            if _alive(c):
                os.kill(c, signal.SIGKILL)


def _suite(tmp_path: Path) -> Path:
    path = tmp_path / "orphans.yaml"
    path.write_text(kernel_suite("orphans", "chance", relu=False), encoding="utf-8")
    return path


def test_kill_9_of_run_takes_its_process_pool_workers_with_it(tmp_path):
    (tmp_path / "sleeper.py").write_text(SLEEPER, encoding="utf-8")
    command = [sys.executable, "-m", "compbench", "run", "--suite", str(_suite(tmp_path)), "--task", "add", "--task", "te",
               "--model", f"{tmp_path / 'sleeper.py'}:Sleeper", "--executor", "process", "--workers", "2",
               "--results", str(tmp_path / "out"), "-q"]
    assert _kill_parent_and_watch_children(command, 2) == []


def test_kill_9_of_report_while_it_draws_takes_the_drawing_process_with_it(tmp_path):
    if not importlib.import_module("compbench.report.publish")._can_fork():
        pytest.skip("the plots are drawn in a second process only where it can fork and has two cores")
    suite, out = _suite(tmp_path), tmp_path / "out"
    assert main(["run", "--suite", str(suite), "--results", str(out), "--format", "csv", "-q"]) == 0
    (tmp_path / "slow_plots.py").write_text(SLOW_PLOTS, encoding="utf-8")
    command = [sys.executable, str(tmp_path / "slow_plots.py"), "report", "--suite", str(suite), "--results", str(out)]
    assert _kill_parent_and_watch_children(command, 1) == []


# Where there is no parent-death signal (macOS), the watch thread alone ends an orphan.
WATCHED_CHILD = '''\
import os
import time

from compbench.runner import orphan

orphan._parent_death_signal = lambda: None  # as on macOS
parent = os.getpid()
child = os.fork()
if child == 0:
    orphan.die_with_parent(parent)
    time.sleep(300)
    os._exit(0)
print(child, flush=True)
time.sleep(300)
'''


def test_without_the_parent_death_signal_the_watch_thread_ends_an_orphan(tmp_path):
    from compbench.runner.orphan import WATCH_SECONDS

    (tmp_path / "watched.py").write_text(WATCHED_CHILD, encoding="utf-8")
    proc = subprocess.Popen([sys.executable, str(tmp_path / "watched.py")], stdout=subprocess.PIPE, env=dict(os.environ))
    child = int(proc.stdout.readline())
    try:
        time.sleep(WATCH_SECONDS + 0.5)
        assert _alive(child)  # a child whose parent lives is left alone
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + WATCH_SECONDS + 4
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(child)
    finally:
        proc.stdout.close()
        if _alive(child):
            os.kill(child, signal.SIGKILL)
