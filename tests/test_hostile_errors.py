"""One error root: every error compbench raises on purpose is a `CompbenchError`, and the CLI catches that one class.

Before it, `cli._dispatch` listed seven classes by name: an error of any other compbench class reaching
it left the command with a traceback, and a new class had to be added to the list by hand.
"""

from __future__ import annotations

import contextlib
import importlib
import inspect
import os
import io
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import compbench
from compbench import cli
from compbench.errors import CompbenchError

ROOT = Path(__file__).resolve().parent.parent


def _compbench_exceptions() -> dict[str, type]:
    """Every Exception subclass defined in a compbench module, by qualified name."""
    found: dict[str, type] = {}
    for info in pkgutil.walk_packages(compbench.__path__, "compbench."):
        if info.name == "compbench.__main__":  # importing it runs the command line
            continue
        module = importlib.import_module(info.name)
        for name, obj in vars(module).items():
            if inspect.isclass(obj) and issubclass(obj, Exception) and obj.__module__ == module.__name__:
                found[f"{module.__name__}.{name}"] = obj
    return found


def test_every_compbench_exception_derives_from_the_root() -> None:
    found = _compbench_exceptions()
    assert len(found) >= 29, sorted(found)  # the walk reached the whole package, not one corner of it
    outside = sorted(name for name, cls in found.items() if not issubclass(cls, CompbenchError))
    assert outside == [], f"derive these from compbench.errors.CompbenchError: {outside}"


def test_each_error_keeps_its_builtin_base() -> None:
    """`except ValueError` written before the root existed still catches what it caught."""
    found = _compbench_exceptions()
    assert issubclass(found["compbench.suite.source.SuiteError"], ValueError)
    assert issubclass(found["compbench.store.records.StoreError"], RuntimeError)
    assert issubclass(found["compbench.files.OutputError"], RuntimeError)
    assert issubclass(found["compbench.testing.ConformanceError"], AssertionError)
    assert issubclass(found["compbench.adapters.registry.UnknownAdapterError"], ValueError)
    assert found["compbench.pytest_plugin.CompbenchFailure"].exit_code == 1  # a failure, not bad input
    assert found["compbench.suite.source.SuiteError"].exit_code == 2
    assert compbench.CompbenchError is CompbenchError  # catchable from the top-level package


class _Odd(CompbenchError, OSError):
    exit_code = 7
    hint = "remove the odd thing, then run it again"


def test_a_compbench_error_from_a_command_gives_its_exit_code_and_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    def raises(args: object) -> int:
        raise _Odd("something odd in /tmp/x")

    monkeypatch.setattr(cli, "cmd_list", raises)  # build_parser binds the command when main runs
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = cli.main(["list"])
    assert rc == 7
    assert err.getvalue() == "compbench: something odd in /tmp/x; remove the odd thing, then run it again\n"
    assert out.getvalue() == ""


def test_a_compbench_error_leaves_the_process_without_a_traceback(tmp_path: Path) -> None:
    """In a real process: the exit status is the class's, stderr is its one line."""
    script = textwrap.dedent("""
        import sys
        from compbench import cli
        from compbench.errors import CompbenchError

        class Gone(CompbenchError, RuntimeError):
            exit_code = 3

        def raises(args):
            raise Gone("the store in results/x went away while it was read")

        cli.cmd_report = raises
        sys.exit(cli.main(["report", "--suite", "x"]))
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 3, proc.stderr
    assert proc.stderr == "compbench: the store in results/x went away while it was read\n"
