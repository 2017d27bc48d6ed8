"""The wheel: it carries every bundled suite and baseline, and an installed wheel (no repository) lists and
validates them. `.ci/run` also runs kernel-limits from an installed wheel; here only the fast commands run.

One wheel is built per module from a copy of the files the build reads (so no build/ or egg-info lands
in the checkout), with the installed setuptools (no download), and installed into a virtual environment
that shares this interpreter's dependencies (`--system-site-packages`: torch is not reinstalled).
"""

from __future__ import annotations

import os
import shutil
import site
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BUNDLED = {"suites": "*.yaml", "baselines": "*.json"}  # = setup.py's BUNDLED


def _env() -> dict[str, str]:
    """The environment of a command in the virtual environment: no PYTHONPATH, which would import the checkout."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("src")
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(ROOT / name, src / name)
    for name in ("compbench", *BUNDLED):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet",
                    "--disable-pip-version-check", "-w", str(out), str(src)], check=True, env=_env(), timeout=300)
    (whl,) = out.glob("compbench-*.whl")
    return whl


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory) -> Path:
    """A virtual environment with the wheel installed; its `bin` (or `Scripts`) folder."""
    env_dir = tmp_path_factory.mktemp("venv")
    # No pip of its own: the shared site-packages' pip installs into the environment that runs it.
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(env_dir)],
                   check=True, timeout=120)
    bin_dir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    if sys.prefix != sys.base_prefix:
        # This interpreter is itself a virtual environment, so --system-site-packages shares the base
        # interpreter's packages, not the ones installed here: a .pth file adds these after the new
        # environment's own (plain paths: their editable-install hooks are not run).
        purelib = subprocess.run([str(bin_dir / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 check=True, capture_output=True, text=True, env=_env(), timeout=60).stdout.strip()
        Path(purelib, "compbench-test-shared.pth").write_text("\n".join(site.getsitepackages()) + "\n", encoding="utf-8")
    # --force-reinstall: the shared site-packages may hold compbench already (an editable install of a
    # checkout); the wheel's copy goes into the environment, which comes first on its sys.path.
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "--no-deps", "--force-reinstall", "--no-index",
                    "--quiet", "--disable-pip-version-check", str(wheel)], check=True, env=_env(), timeout=300)
    return bin_dir


@pytest.mark.slow
def test_the_wheel_carries_every_bundled_suite_and_baseline_and_every_module(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for kind, pattern in BUNDLED.items():
        files = sorted((ROOT / kind).glob(pattern))
        assert files, f"no {pattern} in {ROOT / kind}"
        missing = [p.name for p in files if f"compbench/_bundled/{kind}/{p.name}" not in names]
        assert not missing, f"the wheel lacks {kind}: {missing}"
    modules = {p.relative_to(ROOT).as_posix() for p in (ROOT / "compbench").rglob("*.py")}
    assert not modules - names, f"the wheel lacks modules: {sorted(modules - names)}"


@pytest.mark.slow
def test_the_installed_wheel_lists_and_validates_its_bundled_suites_and_says_where_it_looked_without_them(venv, tmp_path):
    # Outside the repository, so neither ./suites nor the checkout can answer.
    run = dict(cwd=tmp_path, env=_env(), capture_output=True, text=True, timeout=300)
    where = subprocess.run([str(venv / "python"), "-c", "import compbench.suite as s; print(s.bundled_dir('suites')); "
                            "print(s.bundled_dir('baselines'))"], **run)
    assert where.returncode == 0, where.stderr
    suites, baselines = (Path(line) for line in where.stdout.split())
    env_dir = venv.parent.resolve()
    assert suites.is_relative_to(env_dir) and baselines.is_relative_to(env_dir), where.stdout
    assert sorted(p.name for p in baselines.glob("*.json")) == sorted(p.name for p in (ROOT / "baselines").glob("*.json"))

    listed = subprocess.run([str(venv / "compbench"), "list"], **run)
    assert listed.returncode == 0, listed.stderr
    lines = listed.stdout.split("suites:\n", 1)[1].splitlines()
    shown = [line.strip() for line in lines[: next(i for i, line in enumerate(lines) if not line.startswith("  "))]]
    assert shown == sorted(p.stem for p in (ROOT / "suites").glob("*.yaml")), listed.stdout[:500]

    checked = subprocess.run([str(venv / "compbench"), "validate", "kernel-limits"], **run)
    assert checked.returncode == 0 and "OK: suite 'kernel-limits'" in checked.stdout, checked.stderr

    # Without its suites the install says where it looked (the wheel's folder and the would-be checkout).
    suites.rename(suites.with_name("suites-gone"))
    try:
        listed = subprocess.run([str(venv / "compbench"), "list"], **run)
        checked = subprocess.run([str(venv / "compbench"), "validate", "kernel-limits"], **run)
    finally:
        suites.with_name("suites-gone").rename(suites)
    assert listed.returncode == 0 and f"none: no bundled suites: neither {suites} (an installed wheel)" in listed.stdout
    assert checked.returncode == 2 and f"no bundled suites: neither {suites}" in checked.stderr, checked.stderr
