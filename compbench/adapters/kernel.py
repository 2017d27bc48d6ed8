"""The `kernel` adapter: a kernel machine with an overlap, analytic infinite-width or additive kernel.

`kernel: additive` has no conjunction term, so every kernel-regression prediction is additive by
construction: one estimator of the additive class, fit on the training cells (the class's best fit
of the targets, the ceiling, is the `additive_projection` adapter). With a base kernel k_b (`base`:
relu_ntk or relu_nngp with `depth`, `sigma_w2`, `sigma_b2`):

* `additive: modules` (default): inputs are a latent z (the cell's encoding, `latent_dim` or the
  k-hot / one-hot code read off the batch as in the `hypernet` adapter) followed by x, and
      k((z, x), (z', x')) = (w_0 + z·z') · k_b(x, x'),     w_0 = `intercept`,
  with k_b ≡ 1 when nothing follows the latent. Its feature map is (√w_0 ψ(x), z_1 ψ(x), …, z_M ψ(x)),
  so every prediction is f(z, x) = F_0(x) + Σ_m z_m F_m(x): exactly module-additive for k-hot
  latents (z·z' counts the modules two cells share). With the one-hot encoding z·z' counts the
  agreeing components and f = F_0(x) + Σ_c G_c(z_c, x) (for one sample per cell: the purely additive
  overlap kernel κ(A) = w_0 + |A|).
* `additive: slots`: the input's columns split into `slots` equal groups (the `latents` encoding of
  a slot task) and k(a, b) = Σ_s k_b(a_s, b_s), so f(z) = Σ_s g_s(z_s): slot-additive (each slot's
  g_s built from that slot's training values).

Both are sums and products of PSD kernels (w_0 ≥ 0), so no PSD check is run.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from compbench.adapters.base import Adapter, AdapterParams, Batch, Fitted, InvalidModelError
from compbench.adapters.registry import register_adapter
from compbench.theory.options import TheoryOptions


PSD_TOL = 1e-8  # the reference code's tolerance on the smallest eigenvalue
# min-norm/ridge cells whose model prediction takes the independent solver (see _independent_check)
CHECK_ALL_UP_TO = 512
CHECK_EVERY = 8
# Above this many training samples no cell takes the SVD check: gelsd on N = 6912 (the modular teacher's
# paper size) takes minutes on one thread, where the Cholesky solve takes 3 s.
CHECK_LARGEST = 2048


class KernelParams(AdapterParams):
    """Hyperparameters of a kernel machine."""

    kernel: Literal["overlap", "relu_nngp", "relu_ntk", "additive"] = "overlap"
    weights: list[float] | None = Field(
        default=None, description="overlap: kernel value per number of agreeing components 0..C"
    )
    pattern_weights: dict[str, float] | None = Field(
        default=None, description="overlap: value per agreement pattern, e.g. '101' (count fallback)"
    )
    relative: dict[int, float] = Field(
        default_factory=dict, description="overlap: κ(i) = relative[i]·κ(i+1), filled from C down"
    )
    additive: Literal["modules", "slots"] = Field(
        default="modules", description="additive: (w_0 + z·z')·k_base(x, x') over latent z and x, or Σ_slots k_base"
    )
    base: Literal["relu_ntk", "relu_nngp"] = Field(default="relu_ntk", description="additive: the kernel on x or on one slot")
    intercept: float = Field(default=1.0, ge=0, description="additive modules: w_0, the weight of the x-only term F_0")
    latent_dim: int | None = Field(
        default=None, ge=0, description="additive modules: leading input columns that are z (None: the k-hot or one-hot cell code)"
    )
    slots: int = Field(default=2, ge=1, description="additive slots: the input's columns split into this many equal groups")
    depth: int = Field(default=1, ge=1, description="relu_* (and the additive base): number of hidden layers")
    sigma_w2: float = Field(default=2.0, gt=0)
    sigma_b2: float = Field(default=0.0, ge=0)
    objective: Literal["min_norm", "ridge", "svm", "svr"] = "min_norm"
    ridge: float = Field(default=0.0, ge=0)
    C: float = Field(default=1e10, gt=0, description="svm/svr: box constraint")
    epsilon: float = Field(default=0.1, ge=0, description="svr: tube width")
    max_iter: int = Field(default=200_000, description="svm/svr: solver iterations (-1: no limit)")

    @model_validator(mode="after")
    def _overlap_needs_weights(self) -> KernelParams:
        if self.kernel == "overlap" and self.weights is None and self.pattern_weights is None:
            raise ValueError("kernel 'overlap' needs 'weights' (per agreement count) or 'pattern_weights'")
        if self.objective == "ridge" and self.ridge <= 0:
            raise ValueError("objective 'ridge' needs ridge > 0 (use 'min_norm' for ridge 0)")
        return self


def _pattern_key(pattern: str) -> tuple[int, ...]:
    if not pattern or set(pattern) - {"0", "1"}:
        raise InvalidModelError(f"pattern_weights key {pattern!r} is not a string of 0/1 per component")
    return tuple(int(c) for c in pattern)


@register_adapter("kernel")
class KernelAdapter(Adapter):
    """Kernel machine: min-norm/ridge regression, SVM (±1 targets) or SVR on a fixed kernel."""

    Params = KernelParams
    deterministic = True
    tags = ("kernels",)
    params: KernelParams

    def _gram(self, a: Batch, b: Batch) -> np.ndarray:
        from compbench import theory

        p = self.params
        if p.kernel == "overlap":
            n_comp = a.cells.shape[1]
            weights: dict[int | tuple[int, ...], float] = dict(enumerate(p.weights or []))
            if p.weights is not None and len(p.weights) != n_comp + 1:
                raise InvalidModelError(
                    f"overlap 'weights' needs {n_comp + 1} values (0..{n_comp} agreeing components), got {len(p.weights)}"
                )
            weights.update({_pattern_key(k): v for k, v in (p.pattern_weights or {}).items()})
            try:
                return theory.overlap_kernel(a.cells, b.cells, weights, relative=p.relative or None)
            except ValueError as exc:
                raise InvalidModelError(str(exc)) from exc
        if p.kernel == "additive":
            return self._additive_gram(a, b)
        fn = theory.relu_nngp if p.kernel == "relu_nngp" else theory.relu_ntk
        # images are flattened: the infinite-width kernel of a fully connected network on the pixels
        return fn(a.x.reshape(len(a), -1), b.x.reshape(len(b), -1), depth=p.depth, sigma_w2=p.sigma_w2, sigma_b2=p.sigma_b2)

    def _additive_gram(self, a: Batch, b: Batch) -> np.ndarray:
        """(w_0 + z·z')·k_base(x, x') (modules) or Σ_s k_base(a_s, b_s) (slots); see the module docstring."""
        from compbench import theory
        from compbench.adapters.hypernet import latent_width

        p = self.params
        fn = theory.relu_nngp if p.base == "relu_nngp" else theory.relu_ntk
        xa = a.x.reshape(len(a), -1).astype(np.float64)
        xb = xa if b is a else b.x.reshape(len(b), -1).astype(np.float64)  # K(x, x): exactly symmetric products
        if xa.shape[1] != xb.shape[1]:
            raise ValueError(f"the two batches' inputs have {xa.shape[1]} and {xb.shape[1]} columns")

        def base(u: np.ndarray, v: np.ndarray) -> np.ndarray:
            return fn(u, v, depth=p.depth, sigma_w2=p.sigma_w2, sigma_b2=p.sigma_b2)

        if p.additive == "slots":
            if xa.shape[1] % p.slots:
                raise InvalidModelError(f"inputs of {xa.shape[1]} columns do not split into {p.slots} equal slots")
            d = xa.shape[1] // p.slots
            return sum(base(xa[:, s * d : (s + 1) * d], xb[:, s * d : (s + 1) * d]) for s in range(p.slots))
        la, lb = latent_width(a, p.latent_dim), latent_width(b, p.latent_dim)
        if la != lb:
            raise ValueError(f"the two batches' latents have {la} and {lb} columns")
        k = p.intercept + xa[:, :la] @ xb[:, :la].T
        return k if la == xa.shape[1] else k * base(xa[:, la:], xb[:, la:])

    def _check_psd(self, train: Batch, K_tr: np.ndarray, factor: Any = None) -> None:
        """Reject a non-PSD kernel (InvalidModelError), as the reference code drops such sweeps.

        `K_tr` is the training Gram the fit uses and `factor` its eigendecomposition when the
        solve has one: the check reads their spectrum instead of building the kernel again.
        """
        p = self.params
        if p.kernel == "additive":
            return  # sums and products of PSD kernels (intercept ≥ 0): PSD by construction
        if p.kernel == "overlap" and p.pattern_weights is None:
            # PSD on the full grid (the reference's criterion), from its Kronecker spectrum.
            from compbench import theory

            lam, mult = theory.overlap_grid_eigenvalues(train.n_values, p.weights, p.relative or None)
            smallest = float(lam[mult > 0].min())
        elif factor is not None:
            smallest = factor.smallest
        else:
            smallest = float(np.linalg.eigvalsh(K_tr)[0])
        if smallest < -PSD_TOL:
            raise InvalidModelError(
                f"kernel is not positive semi-definite on this task's grid (smallest eigenvalue {smallest:.3g})"
            )

    def kernel(self, a: Batch, b: Batch) -> np.ndarray:
        """The kernel between two batches."""
        return self._gram(a, b)

    def _independent_check(self, train: Batch, y_tr: np.ndarray) -> bool:
        """Whether this cell's model prediction takes the independent solver (a real model = theory check).

        Every cell with at most CHECK_ALL_UP_TO training samples (where the second solve costs
        milliseconds), and above that a deterministic one in CHECK_EVERY, chosen by a hash of the
        model's parameters and the training targets (the same cells in every run and process), up to
        CHECK_LARGEST samples. `COMPBENCH_KERNEL_CHECK=all` checks every cell, whatever its size.
        """
        if os.environ.get("COMPBENCH_KERNEL_CHECK", "").strip().lower() == "all" or len(train) <= CHECK_ALL_UP_TO:
            return True
        if len(train) > CHECK_LARGEST:
            return False
        h = hashlib.sha256(self.params.model_dump_json().encode())
        h.update(repr(y_tr.shape).encode())
        h.update(np.ascontiguousarray(y_tr, dtype=np.float64).tobytes())
        return int.from_bytes(h.digest()[:4], "big") % CHECK_EVERY == 0

    def fit_seeds(self, train: Batch, evaluate: Batch, seeds: list[int]) -> list[Fitted]:
        """Fit the kernel machine once (it does not depend on the seed) and predict `evaluate`."""
        from compbench import theory
        from compbench.theory.regression import factor_of, solves_min_norm

        p = self.params
        K_tr = self._gram(train, train)
        regression = p.objective in ("min_norm", "ridge")
        # One eigendecomposition of the training Gram serves the min-norm solve and the PSD check.
        factor = factor_of(K_tr) if solves_min_norm(p.objective, p.ridge) else None
        self._check_psd(train, K_tr, factor)
        K_ev = self._gram(evaluate, train)
        # K outputs share the kernel: K right-hand sides (one-hot rows for classes, the MSE reading)
        y_tr = train.regression_targets()
        if train.vector_output and p.objective in ("svm", "svr"):
            raise InvalidModelError(f"objective {p.objective!r} fits one target; this task has {train.n_outputs} outputs (use min_norm or ridge)")
        info: dict[str, object] = {"objective": p.objective}
        engine_fit = None
        if regression and self._independent_check(train, y_tr):
            # The model solved in the dual with LAPACK's SVD least squares: an independent path
            # from the theory engine's solver, which the runner then runs as the theory, so
            # "model == theory" is a real check of both on this cell.
            import scipy.linalg  # here, not at the top: 0.2 s of every cached run's imports

            alpha, *_ = scipy.linalg.lstsq(K_tr + p.ridge * np.eye(len(K_tr)), y_tr, lapack_driver="gelsd")
            preds = K_ev @ alpha
            info["independent_check"] = True
        elif regression:
            # The kernel machine's min-norm/ridge fit *is* the theory: one solve, given to the
            # runner as the theory prediction (the sampled cells above keep the check real).
            preds = theory.kernel_regression(K_tr, K_ev, y_tr, ridge=p.ridge, factor=factor)
            engine_fit = preds
            info["independent_check"] = False
            if factor is not None:
                info["solve"] = factor.method  # "cholesky" or "eigh": said, never silent
        elif p.objective == "svm":
            preds, converged = theory.kernel_svm(K_tr, K_ev, y_tr, C=p.C, max_iter=p.max_iter)
            info["converged"] = bool(converged)
        else:
            preds, converged = theory.kernel_svr(K_tr, K_ev, y_tr, C=p.C, epsilon=p.epsilon, max_iter=p.max_iter)
            info["converged"] = bool(converged)
        preds = np.asarray(preds, dtype=np.float64)
        # SVM/SVR call the engine's own solver, so their theory prediction is this very fit.
        if p.objective in ("svm", "svr"):
            engine_fit = preds
        fitted = Fitted(preds, info=info, kernels=(K_tr, K_ev), theory_predictions=engine_fit)
        return [fitted for _ in seeds]

    def theory_options(self) -> TheoryOptions:
        """Same machine as the adapter itself."""
        p = self.params
        return TheoryOptions(p.objective, p.ridge, p.C, p.epsilon, p.max_iter)

    def theory_kernel_name(self) -> str:
        """E.g. 'overlap', 'relu_ntk(depth=2)' or 'additive_modules(relu_ntk, depth=1)'."""
        p = self.params
        if p.kernel == "additive":
            return f"additive_{p.additive}({p.base}, depth={p.depth})"
        return "overlap" if p.kernel == "overlap" else f"{p.kernel}(depth={p.depth})"
