"""docs/how-to/ci-model-family.yml, the GitHub Actions recipe, run as far as it can be without GitHub: each job's `run:`
scripts run in bash as Actions runs them (`bash -eo pipefail`), with `compbench` this checkout's; what needs the CI
service is emulated: checkout copies the repository, upload/download-artifact copy a folder, `pip` and `gh` (the
pull-request comment) are recorded, not called. Main's job runs, then a pull request's gate: unchanged it passes;
with a model made worse (the overlap kernel's weights, as in docs/how-to/compare-runs.md) the comparison fails and
still posts its markdown."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from tiny_suites import kernel_suite

RECIPE = Path(__file__).resolve().parents[1] / "docs" / "how-to" / "ci-model-family.yml"
SUITE = kernel_suite("my-family", "leak")
WORSE = SUITE.replace("weights: [0.0, 0.4, 1.0]", "weights: [0.0, 0.0, 1.0]")
EXPRESSION = re.compile(r"\$\{\{\s*([^}]*?)\s*\}\}")
# Stand-ins for the commands that need the network or GitHub: they log their arguments (and `gh run list` prints an id).
SHIMS = f"""
compbench() {{ {shlex.quote(sys.executable)} -m compbench "$@"; }}
pip() {{ echo "pip $*" >> "$CALLS"; }}
gh() {{ echo "gh $*" >> "$CALLS"; if [ "$1 $2" = "run list" ]; then echo 4242; fi; }}
"""


def _expression(text: str, context: dict[str, str]) -> str:
    return EXPRESSION.sub(lambda m: context[m.group(1)], text)


def _run_job(job: dict, workspace: Path, repo: Path, artifacts: Path, tmp: Path, context: dict[str, str]) -> list[tuple[str, int]]:
    """Run a job's steps in `workspace`; (step name, exit code) for each step that ran."""
    ran: list[tuple[str, int]] = []
    failed = False
    for i, step in enumerate(job["steps"]):
        cond = step.get("if", "success()")
        if failed and "always()" not in cond:
            continue
        name = step.get("name") or step.get("uses") or f"step {i}"
        uses = step.get("uses", "")
        args = {k: _expression(str(v), context) for k, v in (step.get("with") or {}).items()}
        if uses.startswith("actions/checkout@"):
            shutil.copytree(repo, workspace, dirs_exist_ok=True)
            rc = 0
        elif uses.startswith("actions/setup-python@"):
            rc = 0
        elif uses.startswith("actions/upload-artifact@"):
            assert args.get("include-hidden-files") == "True", "upload-artifact@v4 leaves out .compbench without it"
            shutil.copytree(workspace / args["path"], artifacts / args["name"])
            rc = 0
        elif uses.startswith("actions/download-artifact@"):
            assert args["run-id"] == "4242"  # the id the previous step found
            shutil.copytree(artifacts / args["name"], workspace / args["path"])
            rc = 0
        else:
            assert "run" in step and not uses, f"a step this test cannot emulate: {step}"
            assert "${{" not in step["run"], "scripts take expressions through env:, as GitHub advises"
            env = {**os.environ, "CALLS": str(tmp / "calls.log"), "GITHUB_OUTPUT": str(tmp / "output"),
                   "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"),
                   **{k: _expression(str(v), context) for k, v in (step.get("env") or {}).items()}}
            rc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", SHIMS + step["run"]],
                                cwd=workspace, env=env, timeout=600).returncode
            if step.get("id"):
                outputs = dict(line.split("=", 1) for line in (tmp / "output").read_text().splitlines() if "=" in line)
                context.update({f"steps.{step['id']}.outputs.{k}": v for k, v in outputs.items()})
        ran.append((name, rc))
        failed = failed or rc != 0
    return ran


@pytest.fixture(scope="module")
def main_artifact(tmp_path_factory) -> Path:
    """The artifacts folder after main's job ran (push event)."""
    tmp = tmp_path_factory.mktemp("ci-main")
    repo = tmp / "repo"
    (repo / "suites").mkdir(parents=True)
    (repo / "suites" / "my-family.yaml").write_text(SUITE)
    recipe = yaml.safe_load(RECIPE.read_text())
    job = recipe["jobs"]["main-results"]
    assert job["if"] == "github.event_name == 'push'"
    ran = _run_job(job, tmp / "ws", repo, tmp / "artifacts", tmp, {"github.token": "t"})
    assert all(rc == 0 for _, rc in ran), ran
    assert (tmp / "artifacts" / "compbench-main" / "store" / "records.sqlite").is_file()
    return tmp / "artifacts"


@pytest.mark.slow
@pytest.mark.parametrize("suite, gate", [(SUITE, 0), (WORSE, 1)], ids=["unchanged", "worsened"])
def test_the_recipe_gates_a_pull_request_on_a_regression(main_artifact, tmp_path, suite, gate):
    repo = tmp_path / "repo"
    (repo / "suites").mkdir(parents=True)
    (repo / "suites" / "my-family.yaml").write_text(suite)
    recipe = yaml.safe_load(RECIPE.read_text())
    job = recipe["jobs"]["gate"]
    assert job["if"] == "github.event_name == 'pull_request'"
    ws = tmp_path / "ws"
    ran = dict(_run_job(job, ws, repo, main_artifact, tmp_path,
                        {"github.token": "t", "github.event.pull_request.number": "17"}))
    assert ran["Compare with main"] == gate, ran
    assert ran["Post the comparison on the pull request"] == 0  # posted whatever the gate says
    assert all(rc == 0 for name, rc in ran.items() if name != "Compare with main"), ran
    calls = (tmp_path / "calls.log").read_text()
    assert "gh pr comment 17 --body-file compare/compare.md" in calls
    assert "gh run list --workflow compbench.yml --branch main" in calls
    markdown = (ws / "compare" / "compare.md").read_text()
    assert (tmp_path / "summary.md").read_text().strip() == markdown.strip()  # --format github: the step summary
    if gate:
        # overlap's held-out R² on main and in the pull request, as docs/how-to/compare-runs.md states them
        assert "| overlap on add | regressed | heldout_r2 | 0.8889 | 0.0000 |" in markdown, markdown
        assert "| leak | overlap | add | PASS | FAIL |" in markdown
    else:
        assert "**4 cells**: 0 regressed, 0 fixed, 0 new, 0 gone, 4 unchanged." in markdown, markdown
