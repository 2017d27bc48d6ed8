"""Scenario suites more than one test file runs (a module beside the tests, imported by name: tests are not a package)."""

TINY = """\
name: tiny
seeds: 2
tasks:
  - {id: add, family: additive, params: {anchors: [[4], [4]]}}
  - {id: te, family: transitive_equivalence}
models:
  - id: overlap
    adapter: kernel
    params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}
  - id: lazy
    adapter: mlp
    params: {width: 256, init_scale: 1.0, lr: 0.02, max_steps: 3000, loss_tol: 1.0e-3}
expectations:
  - {id: exact, source: {paper: compbench, threshold: a test fixture}, claim: matches_kernel, models: [overlap], tasks: ["*"], tolerance: 1.0e-6, max_abs_diff: 1.0e-6}
  - {id: leak, source: {paper: compbench, threshold: a test fixture}, claim: slope_below_one, models: [overlap], tasks: [add]}
  - {id: chance, source: {paper: compbench, threshold: a test fixture}, claim: at_chance, models: [overlap], tasks: [te], tolerance: 0.01}
"""

# Expectations the kernel scenarios below pick from by id (a test fixture's source, as every claim needs one).
_CLAIMS = {
    "leak": "{id: leak, source: {paper: compbench, threshold: a test fixture}, claim: slope_below_one, models: [overlap], tasks: [add]}",
    "chance": "{id: chance, source: {paper: compbench, threshold: a test fixture}, claim: at_chance, models: [overlap], tasks: [te], "
              "tolerance: 0.01}",
    "impossible": "{id: impossible, source: {paper: compbench, threshold: a test fixture}, claim: beats_kernel, models: [overlap], "
                  "tasks: [te]}",
}


def kernel_suite(name: str, *claims: str, seeds: int = 1, relu: bool = True) -> str:
    """A seconds-long suite of deterministic kernels on symbolic addition and transitive equivalence.

    `claims`: ids of `_CLAIMS` (leak: the overlap kernel's slope is below one; chance: it is at chance on te;
    impossible: it beats its own theory, which a kernel never does); `relu`: a ReLU-NTK kernel beside the overlap one.
    """
    models = ["  - {id: overlap, adapter: kernel, params: {kernel: overlap, weights: [0.0, 0.4, 1.0]}}"]
    if relu:
        models.append("  - {id: relu, adapter: kernel, params: {kernel: relu_ntk}}")
    return "\n".join([f"name: {name}", f"seeds: {seeds}", "tasks:",
                      "  - {id: add, family: additive, params: {anchors: [[4], [4]]}}",
                      "  - {id: te, family: transitive_equivalence}", "models:", *models, "expectations:",
                      *(f"  - {_CLAIMS[c]}" for c in claims)]) + "\n"
