"""The README's commands, as written, in a fresh virtual environment (issue #38: the README's test command failed).

`.ci/run` runs the README's test command by reading it out of the README, so the two cannot drift apart;
this test runs the README's install and run commands literally in a new environment over a copy of the
checkout, and the test command's install with the collection of every test under plain `pytest` (the
way `python -m pytest` once hid `No module named 'tests'`). The full test run is CI's.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def section(title: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


def tier(pytest_step: str) -> str:
    """The marker expression of one pytest command of the README's test command (`-m EXPR`)."""
    (expr,) = re.findall(r'-m ("[^"]*"|\S+)', pytest_step)
    return expr.strip('"')


def bash_lines(block_text: str) -> list[str]:
    """The command lines of the first ```bash block, comments dropped."""
    (block,) = re.findall(r"```bash\n(.*?)```", block_text, flags=re.S)[:1]
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_ci_runs_the_readme_test_command_read_out_of_the_readme():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    (command,) = bash_lines(section("Test"))
    assert command == ("pip install -e '.[test]' && pytest -n auto -m \"not slow\" "
                       "&& pytest -n auto --dist worksteal -m slow")
    # The fast tier first, then the slow one: the two marker expressions are each other's complement, so every
    # test runs once and none falls between them.
    assert [tier(step) for step in command.split(" && ")[1:]] == ["not slow", "slow"]
    # .ci/run takes the command from the README's Test section and runs it; it names no other pytest run of tests/.
    assert "awk '/^## Test/" in ci and 'bash -c "$README_TEST"' in ci
    assert not re.search(r"^\s*python -m pytest\s*$", ci, flags=re.M)


@pytest.mark.slow
def test_the_readme_commands_work_as_written_in_a_fresh_environment(tmp_path):
    src = tmp_path / "compbench"
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    for name in files:
        if name.startswith("results/"):  # the published results are data, not needed to install or run
            continue
        (src / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, src / name)
    # The environment reuses this interpreter's packages (torch is not installed twice; nothing is downloaded).
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"

    def sh(command: str, timeout: int = 900) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(["bash", "-c", command], cwd=src, env=env, capture_output=True, text=True, timeout=timeout)
        assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done

    for line in bash_lines(section("Install and run")):
        done = sh(line)
        if line.startswith("compbench run"):
            assert "kernel-limits:" in done.stdout and (src / "results" / "kernel-limits" / "leaderboard.md").is_file()
        if line == "compbench list":
            assert "kernel-limits" in done.stdout
    installed = sh("python -c 'import compbench, pathlib; print(pathlib.Path(compbench.__file__).resolve())'").stdout.strip()
    assert Path(installed).is_relative_to(src.resolve()), installed  # the editable install of the copy, not of the checkout
    (test_command,) = bash_lines(section("Test"))
    install, *tiers = test_command.split(" && ")
    sh(install)
    counts = []
    for step in tiers:  # each tier's collection: "N/M tests collected (K deselected) in S s", no ", E errors"
        # collected in one process: xdist's workers would each collect every test again (CI runs the tiers as written)
        one = re.sub(r" -n \S+| --dist \S+", "", step)
        done = sh(f"{one} --collect-only -p no:cacheprovider")
        found = re.search(r"^(\d+)(?:/(\d+))? tests? collected(?: \(\d+ deselected\))? in [^,]*$", done.stdout, flags=re.M)
        assert found, done.stdout[-2000:]
        counts.append((int(found.group(1)), int(found.group(2) or found.group(1))))
    # The two tiers split the tests between them: together they are all of them, each once.
    (fast, total), (slow, total_again) = counts
    assert total == total_again and fast + slow == total and fast and slow, counts


def test_no_test_imports_another_as_a_package():
    """`tests` is not a package: `from tests.x import …` works under `python -m pytest` only (the checkout on sys.path)."""
    offenders = [f"{p.name}:{i}" for p in sorted((ROOT / "tests").rglob("*.py"))
                 for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
                 if re.match(r"\s*(from tests[. ]|import tests\b)", line) or re.search(r"[\"']tests\.\w+:", line)]
    assert not offenders, offenders
