"""The `gln` adapter: a gated linear network whose gates are set by one component of the task.

Every unit has one linear pathway per value of the gate component (`gate_component`, e.g. 0: the
context of the context-dependence tasks); a sample uses the pathway of its own value. Depth 1 is
f(x) = w_g · x; depth 2 adds a hidden layer of `width` gated units and a linear readout,
f(x) = Σ_h a_h w_{h,g} · x. Inputs are the task's encoding (e.g. the one-hot of every component,
the gate's own included). Full-batch gradient descent on the mean squared error from a small
initialisation (`init_scale`), all seeds trained together as one stacked tensor.

Theory (`compbench.theory.gln`): the convex program of Lippl, Abbott & Chung (2022) for the
infinite-time limit from a vanishing initialisation. With one gate driving every unit it is
min-norm least squares per gate value, so both depths share it; the theory column of every record
is that program's prediction (objective `gln_program`).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field

from compbench.adapters.base import Adapter, AdapterParams, Batch, Fitted
from compbench.adapters.registry import register_adapter
from compbench.theory.options import TheoryOptions


class GLNParams(AdapterParams):
    """Hyperparameters of the gated linear network."""

    gate_component: int = Field(default=0, ge=0, description="the component whose value picks every unit's pathway")
    depth: Literal[1, 2] = Field(default=2, description="1: one gated linear layer; 2: gated hidden layer + linear readout")
    width: int = Field(default=32, ge=1, description="hidden units (depth 2)")
    init_scale: float = Field(default=1.0e-3, gt=0, description="std of every initial weight (small: the program's limit)")
    lr: float = Field(default=0.2, gt=0)
    max_steps: int = Field(default=100_000, ge=1)
    loss_tol: float = Field(default=1.0e-7, gt=0, description="a seed stops when its mean squared error is below")
    grad_tol: float = Field(
        default=1.0e-9, gt=0,
        description="or when its gradient norm is below (a stationary point: gates that cannot fit the training set)",
    )


def gate_problem(gate_component: int, batch: Batch) -> str | None:
    """Why this batch cannot be gated by `gate_component` (or trained by a GLN), or None."""
    n = len(batch.n_values)
    if gate_component >= n:
        return (f"gate_component {gate_component} does not exist: this task has {n} components (0..{n - 1}); "
                f"set the gln model's gate_component to one of them")
    if batch.vector_output:
        return "the gln adapter regresses one scalar target per sample; this task has several outputs or classes"
    if batch.x.ndim != 2:
        return f"the gln adapter takes flat vector inputs, got inputs of shape {batch.x.shape[1:]}"
    return None


@register_adapter("gln")
class GLNAdapter(Adapter):
    """Gated linear network trained by full-batch GD; its theory is the GLN convex program."""

    Params = GLNParams
    params: GLNParams
    inputs = ("vector",)
    tags = ("networks",)

    def fit_seeds(self, train: Batch, evaluate: Batch, seeds: list[int]) -> list[Fitted]:
        """Train one GLN per seed, stacked; every seed's theory is the (seed-free) program's prediction."""
        import torch

        p = self.params
        problem = gate_problem(p.gate_component, train)
        if problem:
            raise ValueError(problem)
        n_gates = int(train.n_values[p.gate_component])
        x_tr = torch.as_tensor(train.x, dtype=torch.float64, device=self.device)
        x_ev = torch.as_tensor(evaluate.x, dtype=torch.float64, device=self.device)
        g_tr = torch.as_tensor(train.cells[:, p.gate_component], dtype=torch.int64, device=self.device)
        g_ev = torch.as_tensor(evaluate.cells[:, p.gate_component], dtype=torch.int64, device=self.device)
        y = torch.as_tensor(np.asarray(train.y, dtype=np.float64), device=self.device)
        params = _init(seeds, p, n_gates, x_tr.shape[1], self.device)
        steps, losses, diverged, stationary = _train(params, x_tr, g_tr, y, p)
        with torch.no_grad():
            preds = _forward(params, x_ev, g_ev).cpu().numpy()
        from compbench.theory.gln import gated_min_norm

        theory = gated_min_norm(train.x, train.cells[:, p.gate_component], train.y, evaluate.x,
                                evaluate.cells[:, p.gate_component])
        fitted = []
        for i in range(len(seeds)):
            info = {"steps": int(steps[i]), "train_loss": float(losses[i]),
                    "converged": bool(losses[i] < p.loss_tol or stationary[i]), "stationary": bool(stationary[i])}
            error = None
            if diverged[i] or not np.all(np.isfinite(preds[i])):
                error = f"training diverged (non-finite loss) at step {int(steps[i])}; lower lr"
            fitted.append(Fitted(preds[i], info=info, error=error, theory_predictions=theory))
        return fitted

    def theory_options(self) -> TheoryOptions:
        """The GLN program's prediction comes with each seed (Fitted.theory_predictions)."""
        return TheoryOptions("gln_program")

    def theory_kernel_name(self) -> str:
        """The penalty the theory minimises."""
        return "gln_group_norm" if self.params.depth == 2 else "gln_sum_of_squares"


def _init(seeds: list[int], p: GLNParams, n_gates: int, d: int, device: str) -> list[Any]:
    """Per-seed weights (seed i drawn from its own generator, as if trained alone), stacked on dim 0."""
    import torch

    gens = [torch.Generator().manual_seed(int(s)) for s in seeds]
    hidden = p.width if p.depth == 2 else 1
    w = torch.stack([torch.randn(n_gates, hidden, d, generator=g, dtype=torch.float64) for g in gens]) * p.init_scale
    params = [w.to(device).requires_grad_()]
    if p.depth == 2:
        a = torch.stack([torch.randn(hidden, generator=g, dtype=torch.float64) for g in gens]) * p.init_scale
        params.append(a.to(device).requires_grad_())
    return params


def _forward(params: list[Any], x: Any, gates: Any) -> Any:
    """(seeds, n) outputs: each sample through its gate's pathway (depth 1: the single unit, readout 1)."""
    import torch

    hidden = torch.einsum("sihd,id->sih", params[0][:, gates], x)
    return hidden[..., 0] if len(params) == 1 else torch.einsum("sih,sh->si", hidden, params[1])


def _train(params: list[Any], x: Any, gates: Any, y: Any, p: GLNParams) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Full-batch GD on each seed's mean squared error; a seed stops (its slice frozen) below loss_tol, at a
    stationary point (gradient norm below grad_tol) or on divergence."""
    import torch

    k = params[0].shape[0]
    active = torch.ones(k, dtype=torch.bool, device=x.device)
    steps = np.zeros(k, dtype=np.int64)
    diverged = np.zeros(k, dtype=bool)
    loss = torch.full((k,), float("inf"), dtype=torch.float64)
    stationary = np.zeros(k, dtype=bool)
    for step in range(p.max_steps + 1):
        loss_s = 0.5 * ((_forward(params, x, gates) - y) ** 2).mean(dim=1)
        loss = (2 * loss_s).detach().cpu()
        grads = torch.autograd.grad(loss_s.sum(), params)
        # the small init starts near the saddle at 0, but its gradient (~init_scale) is far above grad_tol
        grad_norm = torch.sqrt(sum((g.reshape(k, -1) ** 2).sum(dim=1) for g in grads)).detach().cpu()
        bad = ~torch.isfinite(loss)
        diverged |= bad.numpy()
        stationary |= (grad_norm < p.grad_tol).numpy() & active.cpu().numpy()
        done = (loss < p.loss_tol) | (grad_norm < p.grad_tol) | bad
        active &= ~done.to(active.device)
        if not bool(active.any()) or step == p.max_steps:
            break
        with torch.no_grad():
            for param, grad in zip(params, grads):
                mask = active.reshape(-1, *([1] * (grad.ndim - 1)))
                param -= p.lr * torch.where(mask, grad, torch.zeros_like(grad))
        steps[active.cpu().numpy()] = step + 1
    return steps, loss.numpy(), diverged, stationary
