"""A run's provenance reads each git repository once (a warm kernel-limits run spent 7 of its 10 s in git: the
suite's repository and compbench's own, the same checkout, were each read whole, `git diff HEAD` of large edits
included)."""

from __future__ import annotations

from pathlib import Path

import pytest

from compbench import provenance
from compbench.suite import load_suite

ROOT = Path(__file__).resolve().parent.parent


def test_the_suites_repository_and_compbenchs_own_are_read_once_when_they_are_one(monkeypatch):
    calls: list[str] = []
    real = provenance._git

    def counting(directory, *args):
        calls.append(args[0])
        return real(directory, *args)

    monkeypatch.setattr(provenance, "_git", counting)
    prov = provenance.run_provenance(load_suite(ROOT / "suites" / "kernel-limits.yaml"), "compbench run", 1, "cpu")
    if not prov["code"] or prov["code"][0]["repo"] != str(ROOT):
        pytest.skip("compbench is not run from a git checkout holding its suites")
    assert calls.count("status") == 1, calls  # twice before: once for the suite's repository, once for compbench's
    assert calls.count("diff") <= 1, calls
    assert prov["compbench"]["commit"] == prov["code"][0]["sha"]
    assert prov["compbench"]["dirty"] == prov["code"][0]["dirty"]
