"""Scenario suites and helpers more than one test file uses (a module beside the tests, imported by name: tests are not
a package): the suites (files under tests/suites/, `suite_text` and `write_suite` to vary them), a file model's source,
and the CLI run in this process (`cli`) or in its own (`cli_process`, `cli_popen`). tests/conftest.py hands these to
tests as the fixtures `suite_file`, `run_cli` and `run_cli_process`."""

import contextlib
import dataclasses
import io
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import yaml

SUITES = Path(__file__).parent / "suites"
ROOT = Path(__file__).parent.parent  # the checkout whose code the subprocesses import


def scenario(name: str) -> str:
    """tests/suites/NAME.yaml as written, less its leading comment lines (so a test's line numbers are the suite's)."""
    lines = (SUITES / f"{name}.yaml").read_text(encoding="utf-8").splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "".join(lines)


def suite_text(base: str = "te", **overrides: Any) -> str:
    """The scenario tests/suites/BASE.yaml with top-level keys replaced (None removes a key), as YAML text; without
    overrides, the file's text itself.

    A list's string items are YAML flow mappings, so a test writes a model as the suite file would:
    `models=["{id: k, adapter: kernel, params: {kernel: relu_ntk}}"]`.
    """
    if not overrides:
        return scenario(base)
    doc = yaml.safe_load(scenario(base))
    for key, value in overrides.items():
        if value is None:
            doc.pop(key, None)
        else:
            doc[key] = [yaml.safe_load(v) if isinstance(v, str) else v for v in value] if isinstance(value, list) else value
    return "".join(_dump_key(key, value) for key, value in doc.items())


def _dump_key(key: str, value: Any) -> str:
    # A list's items one a line in flow style, as the suite files are written by hand: tests edit them by line.
    if isinstance(value, list) and value:
        return f"{key}:\n" + "".join(f"  - {_flow(item)}\n" for item in value)
    if not isinstance(value, (dict, list)):
        return f"{key}: {_flow(value)}\n"
    return yaml.safe_dump({key: value}, sort_keys=False, default_flow_style=None, width=1000)


def _flow(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True, sort_keys=False, width=float("inf")).removesuffix("\n...\n").strip()


def write_suite(directory: Path, base: str = "te", *, file: str = "suite.yaml", **overrides: Any) -> Path:
    """`suite_text(base, **overrides)` written to DIRECTORY/FILE (folders made); the file's path."""
    path = Path(directory) / file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(suite_text(base, **overrides), encoding="utf-8")
    return path

TINY = scenario("tiny")
SHAPES = scenario("shapes")  # scalar, class and vector outputs: what a per-cell writer must handle

# Expectations the kernel scenarios below pick from by id (a test fixture's source, as every claim needs one).
_CLAIMS = {
    "leak": "{id: leak, source: {paper: compbench, threshold: a test fixture}, claim: slope_below_one, models: [overlap], tasks: [add]}",
    "chance": "{id: chance, source: {paper: compbench, threshold: a test fixture}, claim: at_chance, models: [overlap], tasks: [te], "
              "tolerance: 0.01}",
    "impossible": "{id: impossible, source: {paper: compbench, threshold: a test fixture}, claim: beats_kernel, models: [overlap], "
                  "tasks: [te]}",
}


def kernel_suite(name: str, *claims: str, seeds: int = 1, relu: bool = True, sweep: int = 0) -> str:
    """A seconds-long suite of deterministic kernels on symbolic addition and transitive equivalence.

    `claims`: ids of `_CLAIMS` (leak: the overlap kernel's slope is below one; chance: it is at chance on te;
    impossible: it beats its own theory, which a kernel never does); `relu`: a ReLU-NTK kernel beside the overlap one;
    `sweep`: that many overlap kernels (its middle weight swept over [0, 0.45]) instead of one, as kernel-limits sweeps
    its kernels (millisecond jobs, many of them).
    """
    swept = f", sweep: {{weights.1: {{linspace: [0.0, 0.45, {sweep}]}}}}" if sweep else ""
    models = [f"  - {{id: overlap, adapter: kernel, params: {{kernel: overlap, weights: [0.0, 0.4, 1.0]}}{swept}}}"]
    if relu:
        models.append("  - {id: relu, adapter: kernel, params: {kernel: relu_ntk}}")
    return "\n".join([f"name: {name}", f"seeds: {seeds}", "tasks:",
                      "  - {id: add, family: additive, params: {anchors: [[4], [4]]}}",
                      "  - {id: te, family: transitive_equivalence}", "models:", *models,
                      "expectations:" if claims else "expectations: []", *(f"  - {_CLAIMS[c]}" for c in claims)]) + "\n"

def sweep_suite(n: int) -> str:
    """kernel-limits in small: an n × n sweep of SVM overlap kernels (skip_invalid) and a ReLU-NTK kernel on two CD tasks,
    with a cross-cell claim on the sweep, a per-cell claim by tag and a known failure (#34's warm-run tests)."""
    return f"""\
name: sweep
seeds: 1
tasks:
  - {{id: cd-1, family: context_dependence, params: {{preset: CD-1}}}}
  - {{id: cd-2, family: context_dependence, params: {{preset: CD-2}}}}
models:
  - id: sw
    adapter: kernel
    params: {{kernel: overlap, weights: [0.0, 0.0, 0.0, 1.0], relative: {{1: 0.0}}, objective: svm}}
    sweep: {{weights.2: {{linspace: [0.0, 0.6, {n}]}}, relative.1: {{linspace: [0.0, 0.5, {n}]}}}}
    skip_invalid: true
  - {{id: k, adapter: kernel, params: {{kernel: relu_ntk}}}}
expectations:
  - {{id: order, source: {{paper: compbench, threshold: a test fixture}}, claim: ordered, models: [sw], tasks: [cd-1, cd-2],
     metric: heldout_acc, statistic: count_perfect, tolerance: -1.0}}
  - {{id: exact, source: {{paper: compbench, threshold: a test fixture}}, claim: matches_kernel, models: ["@kernels"],
     tasks: ["*"], tolerance: 1.0e-6}}
  - {{id: impossible, source: {{paper: compbench, threshold: a test fixture}}, claim: beats_kernel, models: [k],
     tasks: [cd-1, cd-2], known_failure: [{{profiles: [default], models: [k], tasks: ["cd-*"],
     reason: a kernel is its own theory, measured: [-0.1, 0.1]}}]}}
"""


# Seed spread against the NTK-GP (seed_var_ratio): symbolic addition on values in [−1, 1] (small targets keep the
# finite-width NTK part of the spread, ∝ y²/H, small at H = 512), 40 seeds; an uncentred lazy MLP (its theory
# predicts the spread), a centred one (its theory predicts none), a rich one (it leaves its theory), and an uncentred
# one whose theory is each seed's empirical NTK from its own f₀ (the spread of those theories is the prediction).
# Tolerance 0.45 = 2 relative standard errors of a variance from 40 seeds, 2·√(2/39).
SEED_SPREAD = """\
name: seed-spread
seeds: 40
tasks:
  - {id: add, family: additive, params: {values: [[-1, -0.5, 0, 0.5, 1], [-1, -0.5, 0, 0.5, 1]], anchors: [[2], [2]]}}
models:
  - {id: lazy, adapter: mlp, params: {width: 512, init_scale: 1.0, lr: 0.02, max_steps: 5000, loss_tol: 1.0e-5}}
  - {id: lazy-centred, adapter: mlp, params: {width: 512, init_scale: 1.0, lr: 0.02, max_steps: 5000, loss_tol: 1.0e-5, center: true}}
  - {id: rich, adapter: mlp, params: {width: 512, init_scale: 1.0e-3, lr: 0.1, max_steps: 5000, loss_tol: 1.0e-4}}
  - {id: lazy-empirical, adapter: mlp, params: {width: 512, init_scale: 1.0, lr: 0.02, max_steps: 5000, loss_tol: 1.0e-5,
     theory: empirical}}
expectations:
  - {id: spread, source: {paper: compbench, threshold: a test fixture}, claim: near, metric: seed_var_ratio, target: 1.0,
     tolerance: 0.45, models: ["*"], tasks: [add]}
"""


# A file model: a one-hidden-layer ReLU network of width 8, as a user writes one (`net.py:Net`).
NET = textwrap.dedent('''
    import torch
    from torch import nn


    class Net(nn.Module):
        def __init__(self, in_shape, n_out):
            super().__init__()
            self.hidden = nn.Linear(in_shape[0], 8)
            self.out = nn.Linear(8, n_out)

        def forward(self, x):
            return self.out(torch.relu(self.hidden(x)))
''')


@dataclasses.dataclass
class Result:
    """A command's exit code and captured output."""

    rc: int | None
    out: str
    err: str

    @property
    def text(self) -> str:
        return self.out + self.err


def cli(*argv: str) -> Result:
    """`compbench ARGV` in this process: exit code and captured output (limits restored afterwards)."""
    from compbench.cli import main
    from compbench.limits import limits, set_limits

    saved = limits()
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                rc = main(list(argv))
            except SystemExit as exc:  # argparse's usage errors
                rc = exc.code
    finally:
        set_limits(**dataclasses.asdict(saved))
    return Result(rc, out.getvalue(), err.getvalue())


def cli_env(*paths: Path | str, env: dict[str, str] | None = None) -> dict[str, str]:
    """ENV (default: this process's) with PATHS, then this checkout, first on PYTHONPATH: a child imports them first."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [*map(str, paths), str(ROOT), env.get("PYTHONPATH")]))
    return env


def cli_popen(*argv: str, path: tuple[Path | str, ...] = (), env: dict[str, str] | None = None,
              **kwargs: Any) -> subprocess.Popen:
    """`python -m compbench.cli ARGV` started in its own process (text pipes; `path` as in `cli_env`)."""
    return subprocess.Popen([sys.executable, "-m", "compbench.cli", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=cli_env(*path, env=env), **kwargs)


def cli_process(*argv: str, cwd: Path | None = None, path: tuple[Path | str, ...] = (), env: dict[str, str] | None = None,
                timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m compbench.cli ARGV` run to its end in its own process, output captured (`path` as in `cli_env`)."""
    return subprocess.run([sys.executable, "-m", "compbench.cli", *argv], capture_output=True, text=True,
                          env=cli_env(*path, env=env), cwd=cwd, timeout=timeout)

# The factor-grid's representation diagnostics in seconds (tests/test_probe.py): 2 shapes × 2 scales × 3 x × 3 y sprites
# at 16×16, the corner (scale 1, x 2) held out; the pixel ReLU NTK (a kernel: no features), the frozen-feature probe
# (its features are its read-out's), a small CNN and an MLP on the pixels (its empirical NTK) trained briefly.
SPRITES = """\
name: tiny-sprites
seeds: 1
tasks:
  - id: composition
    family: sprites
    params: {shapes: [square, ellipse], scales: 2, orientations: 1, positions_x: 3, positions_y: 3, targets: [scale, x, y],
             split: {rule: corner, values: {scale: 1, x: 2}}}
    encoding: {name: sprites, size: 16}
models:
  - {id: relu-ntk, adapter: kernel, params: {kernel: relu_ntk}}
  - {id: probe, adapter: frozen_probe, params: {channels: [4], width: 64}}
  - id: cnn
    adapter: convnet
    params: {channels: [4], kernel_size: 3, padding: valid, pool: [0], hidden: [16], optimizer: adam, lr: 1.0e-2,
             momentum: 0.0, epochs: 20, batch_size: 8}
  - {id: mlp, adapter: mlp, params: {width: 32, lr: 0.05, max_steps: 200}}
"""


@contextlib.contextmanager
def yaml_work() -> Any:
    """Count what the suite reader's YAML parser did inside the block: `work["loaders"]` made, and
    `work["tokens"]`, the tokens scanned before a refusal (the work a hostile file cost, counted, not timed)."""
    from compbench.suite import source

    work = {"loaders": 0, "tokens": 0}
    init, refuse = source._GuardedLoader.__init__, source._GuardedLoader._refuse

    def counted_init(self: Any, *args: Any, **kwargs: Any) -> None:
        work["loaders"] += 1
        init(self, *args, **kwargs)

    def counted_refuse(self: Any, message: str) -> None:
        work["tokens"] = max(work["tokens"], self.tokens_taken)
        refuse(self, message)

    source._GuardedLoader.__init__, source._GuardedLoader._refuse = counted_init, counted_refuse  # type: ignore[method-assign]
    try:
        yield work
    finally:
        source._GuardedLoader.__init__, source._GuardedLoader._refuse = init, refuse  # type: ignore[method-assign]

