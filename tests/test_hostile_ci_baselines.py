"""Every bundled suite is checked in CI against its own baseline (issue #33: kernel-limits-images-paper had none), and
`check` / `baseline record` take run's `--task`, so a suite too slow for CI is checked on a few tasks of a small profile."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

from tiny_suites import cli, kernel_suite

from compbench.check import Baseline
from compbench.suite import load_suite

ROOT = Path(__file__).resolve().parent.parent


def _ci_checks() -> dict[str, dict[str, list[str]]]:
    """`compbench check` commands of .ci/run by suite: their options (each a list of its values)."""
    out: dict[str, dict[str, list[str]]] = {}
    for line in (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not re.match(r"(venv/bin/)?compbench check ", line) or "$baselines" in line:
            continue
        words = shlex.split(line)
        options: dict[str, list[str]] = {}
        for flag, value in zip(words, words[1:]):
            if flag.startswith("--") and not value.startswith("--"):
                options.setdefault(flag, []).append(value)
        out.setdefault(options["--suite"][0], options)
    return out


def test_every_bundled_suite_is_checked_in_ci_against_its_baseline_under_its_profile():
    """Each suites/*.yaml has a `compbench check` in .ci/run whose baseline is in baselines/, is of that suite, was
    recorded under the profile the check runs, and whose --task globs each name a task of the suite."""
    checks = _ci_checks()
    suites = sorted(p.stem for p in (ROOT / "suites").glob("*.yaml"))
    assert sorted(checks) == suites, f"suites without a CI check: {sorted(set(suites) - set(checks))}"
    for name, options in checks.items():
        path = ROOT / options["--baseline"][0]
        assert path.is_file() and path.parent == ROOT / "baselines", (name, path)
        base = Baseline.read(path)
        profile = options.get("--profile", [None])[0]
        assert base.suite == name and base.profile == profile, (name, base.suite, base.profile, profile)
        tasks = {t.id for t in load_suite(name, profile=profile).suite.tasks}
        assert all(t in tasks for t in options.get("--task", [])), (name, options.get("--task"))
        assert {c["task"] for c in base.cells.values()} <= tasks


def test_the_images_paper_ci_profile_says_it_checks_the_code_path_not_the_claims():
    loaded = load_suite("kernel-limits-images-paper", profile="ci")
    said = " ".join(loaded.suite.profiles["ci"].description.split())
    assert "code path in CI, not the paper's claims" in said and "default profile" in said


def test_check_and_baseline_record_take_task(tmp_path):
    """A baseline recorded with --task te has te's cells only: the check with the same --task passes; without it the
    add cells are new (exit 1), and a check of a task the baseline lacks says so."""
    suite = tmp_path / "k.yaml"
    suite.write_text(kernel_suite("tasks-only", "chance"), encoding="utf-8")
    base, results = tmp_path / "base.json", tmp_path / "results"
    rec = cli("baseline", "record", "--suite", str(suite), "--task", "te", "--results", str(results), "--out", str(base))
    assert rec.rc == 0, rec.text
    assert sorted(json.loads(base.read_text(encoding="utf-8"))["cells"]) == ["overlap/te", "relu/te"]

    same = cli("check", "--suite", str(suite), "--task", "te", "--results", str(results), "--baseline", str(base))
    assert same.rc == 0, same.text
    assert "2 cells, " in same.out and "0 new" in same.out

    whole = cli("check", "--suite", str(suite), "--results", str(results), "--baseline", str(base))
    assert whole.rc == 1, whole.text
    assert "2 new" in whole.out
