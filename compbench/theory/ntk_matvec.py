"""Matrix-free empirical NTK products and conjugate-gradient kernel regression for large N.

The empirical NTK is K = J Jᵀ with J the (N × P) Jacobian of the scalar outputs f(x_i) w.r.t. the
trainable parameters (module in eval mode, as in `compbench.theory.empirical_ntk`). A product
K_ab v = J_a (J_bᵀ v) needs neither J nor K:

* u = J_bᵀ v is one vector-Jacobian product: the parameter gradient of Σ_i v_i f(x_i), one
  forward + backward pass per chunk of samples, accumulated over chunks in float64;
* J_a u is one Jacobian-vector product: the directional derivative of f(x_i) along u,
  `torch.func.jvp` over `functional_call` (forward mode, one dual forward pass per chunk), or, with
  ``jvp="reverse"``, the double-backward trick ∂/∂w ⟨Jᵀ w, u⟩ for modules that have an op without
  a forward-mode formula.

Memory is O(P + chunk · activations), time per product ≈ 2–3 forward passes + 1 backward pass
over the samples; nothing is N × N or N × P.

Precision. Products are summed in float64 across chunks, but every forward/backward pass runs in
the computing dtype: the module's own (``dtype=None``, the default) or e.g. ``dtype=torch.float64``,
a float64 evaluation of the same parameters (cast copies through `functional_call`; the module is
not touched). With a float64 module the products equal `empirical_ntk(...) @ v` to ~1e-15 relative.
With a float32 module they agree with the (float32-computed) dense `empirical_ntk` to ~5e-7
relative for a random v, but the error is absolute, ~ε₃₂·λ_max·‖v‖ (sums over a chunk cancel in
float32): CG's late search directions lie in small-eigenvalue directions, where that is large
relative to K v, so the true relative residual stalls near ε₃₂·cond-ish — measured: 3–5e-6 for a
convnet NTK at N = 512 (cond 3e3); at N = 4096 above 1e-4 (a tol = 1e-4 solve was flagged: the
recursive residual reached it, the true one did not; predictions within 1.2e-4 of the dense solve).
Hence the float32 default tolerance 1e-3 (`default_tol`). The float32 network's
NTK is not defined much more finely anyway: ``dtype=torch.float64`` on a float32 module (a float64
evaluation of the same parameters) differs from it by 5e-4 relative on the convnet adapter's
network, because the gradients of a ReLU / max-pool network jump at kinks and ties and the float64
activations move some across; it is also ~3–10× slower on CPUs. `ntk_cg_regression` always
recomputes the *true* residual at the end and reports it.

Solver. `scipy.sparse.linalg.cg` on a `LinearOperator` wrapping the torch product: the cost is all
in the products (each a pass over the data), so the N-vector arithmetic on the host and one
N-vector transfer per iteration are negligible, and a well-kept solver beats a hand-written one.
Several target columns are solved one after the other (independent Krylov spaces).

Singular K and min-norm. For the *predictions* the choice among solutions of a consistent system
does not matter: K n = 0 ⇒ ‖Jᵀ n‖² = nᵀ K n = 0 ⇒ K_eval,train n = J_eval Jᵀ n = 0, so every α
solving K α = y − f0 gives the same f_eval, equal to the min-norm (pinv) one. Unpreconditioned CG
started from 0 stays in range(K) and returns the min-norm α itself (in exact arithmetic); with the
Jacobi preconditioner or a non-zero `x0` it may return another solution (same predictions). An
*inconsistent* system (y − f0 with a component in null(K), e.g. one input repeated with different
targets, or N > P) has no solution: the residual cannot fall below that component, CG reports
non-convergence, and `lstsq`/pinv (which drops it) is the right tool. `kernel_regression`'s
`rcond` (DEFAULT_RCOND = 1e-12) truncates eigen-directions below 1e-12 · λ_max; CG has no such
cut, but stopping at a relative residual `tol` leaves the smallest-eigenvalue directions (which CG
resolves last) partly unfit: at the default tolerances that is the coarser regulariser, and the
difference from the dense solve follows the reported residual (measured: about equal to it), not rcond.
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from compbench.theory.ntk import eval_mode, trainable_parameters
from compbench.thread_scope import one_thread

if TYPE_CHECKING:  # torch is imported lazily so that `import compbench.theory` stays light
    import torch

__all__ = ["CGInfo", "DEFAULT_CHUNK", "NTKOperator", "default_tol", "ntk_cg_regression", "ntk_diagonal", "ntk_matvec"]

DEFAULT_CHUNK = 256  # samples per forward/backward pass


def default_tol(dtype: torch.dtype) -> float:
    """CG's default relative-residual tolerance for products computed in `dtype`.

    Above where the true residual stalls with the products' round-off (float32: ~ε₃₂·cond, past
    1e-4 at N = 4096 on a convnet), so that a default solve converges; predictions then agree with
    the dense solve to about `tol` or better.
    """
    import torch

    if dtype == torch.float64:
        return 1e-8
    if dtype == torch.float32:
        return 1e-3
    return 1e-2


class NTKOperator:
    """J (JVP) and Jᵀ (VJP) of a module's scalar outputs w.r.t. its trainable parameters, chunked."""

    def __init__(
        self,
        module: torch.nn.Module,
        *,
        chunk: int = DEFAULT_CHUNK,
        dtype: torch.dtype | None = None,
        jvp: Literal["forward", "reverse"] = "forward",
    ) -> None:
        import torch

        if chunk < 1:
            raise ValueError(f"chunk must be ≥ 1, got {chunk}")
        if jvp not in ("forward", "reverse"):
            raise ValueError(f"jvp must be 'forward' or 'reverse', got {jvp!r}")
        trainable, ref = trainable_parameters(module)
        self.module, self.chunk, self.jvp_mode = module, int(chunk), jvp
        self.dtype = ref.dtype if dtype is None else dtype
        self.device = ref.device
        if not self.dtype.is_floating_point:
            raise ValueError(f"dtype must be a floating dtype, got {self.dtype}")

        def cast(t: torch.Tensor) -> torch.Tensor:
            return t.detach().to(self.dtype) if t.is_floating_point() else t.detach()

        # Snapshot at construction: the operator is the NTK at *these* parameters, even if the
        # module is trained afterwards (detach() shares storage when no cast is needed, so in-place
        # updates would leak in; clone to keep the snapshot honest).
        self.names = list(trainable)
        self.theta = {k: cast(p).clone() for k, p in trainable.items()}
        self.rest = {k: cast(p).clone() for k, p in module.named_parameters() if not p.requires_grad}
        self.rest.update({k: cast(b).clone() for k, b in module.named_buffers()})
        self.n_params = sum(p.numel() for p in self.theta.values())

    def inputs(self, x: Any) -> torch.Tensor:
        """x on the operator's device; floating inputs in its dtype (integer ids pass through)."""
        import torch

        t = torch.as_tensor(x, device=self.device)
        return t.to(self.dtype) if t.is_floating_point() else t

    def _slices(self, n: int) -> list[slice]:
        return [slice(i, min(i + self.chunk, n)) for i in range(0, n, self.chunk)]

    def _call(self, theta: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        from torch.func import functional_call

        out = functional_call(self.module, (theta, self.rest), (x,))
        if out.numel() != x.shape[0]:
            raise ValueError(
                f"the NTK needs one scalar output per sample, got output shape {tuple(out.shape)} for {x.shape[0]} samples"
            )
        return out.reshape(x.shape[0])

    def outputs(self, x: torch.Tensor) -> torch.Tensor:
        """f(x) at the snapshot parameters, float64, eval mode."""
        import torch

        with eval_mode(self.module), torch.no_grad():
            return torch.cat([self._call(self.theta, x[s]).to(torch.float64) for s in self._slices(x.shape[0])])

    def vjp(self, x: torch.Tensor, v: torch.Tensor) -> list[torch.Tensor]:
        """Jᵀ v: per trainable parameter, Σ_i v_i ∂f(x_i)/∂θ in float64 (v: (n,) or (n, k) → extra leading k)."""
        import torch

        v = torch.as_tensor(v, device=self.device)
        cols = v.reshape(v.shape[0], -1)
        k = cols.shape[1]
        u = [torch.zeros((k,) + p.shape, dtype=torch.float64, device=self.device) for p in self.theta.values()]
        with eval_mode(self.module), torch.enable_grad():
            for s in self._slices(x.shape[0]):
                theta = {name: p.detach().requires_grad_(True) for name, p in self.theta.items()}
                out = self._call(theta, x[s])
                vc = cols[s].to(out.dtype)
                leaves = list(theta.values())
                for j in range(k):
                    grads = torch.autograd.grad(out @ vc[:, j], leaves, retain_graph=j < k - 1, allow_unused=True)
                    for acc, g in zip(u, grads):
                        if g is not None:
                            acc[j] += g.to(torch.float64)
        return u if v.dim() > 1 else [t[0] for t in u]

    def jvp(self, x: torch.Tensor, u: list[torch.Tensor]) -> torch.Tensor:
        """J u in float64: (n,) for per-parameter tangents u, (n, k) when they carry a leading k."""
        import torch

        batched = u[0].dim() == next(iter(self.theta.values())).dim() + 1
        cols = u if batched else [t.unsqueeze(0) for t in u]
        k = cols[0].shape[0]
        out = torch.empty(x.shape[0], k, dtype=torch.float64, device=self.device)
        with eval_mode(self.module):
            for j in range(k):
                tangent = [t[j].to(self.dtype) for t in cols]
                for s in self._slices(x.shape[0]):
                    out[s, j] = self._jvp_chunk(x[s], tangent).to(torch.float64)
        return out if batched else out[:, 0]

    def _jvp_chunk(self, x: torch.Tensor, tangent: list[torch.Tensor]) -> torch.Tensor:
        import torch

        if self.jvp_mode == "forward":
            from torch.func import jvp

            # no_grad: forward mode needs no autograd graph, and building one would cost memory.
            try:
                # torch's first forward-AD call loads its JVP decompositions through the deprecated
                # torch.jit.script (torch-internal, once per process): not the caller's concern.
                with torch.no_grad(), warnings.catch_warnings():
                    warnings.filterwarnings("ignore", message=r".*torch\.jit\.script.*deprecated", category=FutureWarning)
                    _, jv = jvp(lambda theta: self._call(theta, x), (self.theta,), (dict(zip(self.names, tangent)),))
            except (NotImplementedError, RuntimeError) as exc:
                if "forward AD" not in str(exc) and "forward-mode" not in str(exc):
                    raise
                raise NotImplementedError(
                    f"{exc}\nAn op of this module has no forward-mode derivative: pass jvp='reverse' (double "
                    "backward), or use its unfused variant (timm attention: fused_attn=False; see "
                    "compbench.adapters.deep._ntk_friendly)."
                ) from exc
            return jv
        # Double backward: g(w) = Jᵀ w is linear in w, so ∂⟨g(w), u⟩/∂w = J u (at any w; w = 0).
        with torch.enable_grad():
            theta = {name: p.detach().requires_grad_(True) for name, p in self.theta.items()}
            out = self._call(theta, x)
            w = torch.zeros_like(out, requires_grad=True)
            grads = torch.autograd.grad(out @ w, list(theta.values()), create_graph=True, allow_unused=True)
            inner = sum((g * t).sum() for g, t in zip(grads, tangent) if g is not None)
            if not torch.is_tensor(inner) or not inner.requires_grad:
                return torch.zeros(x.shape[0], dtype=self.dtype, device=self.device)
            (jv,) = torch.autograd.grad(inner, w, allow_unused=True)
        return torch.zeros_like(out) if jv is None else jv.detach()


def ntk_matvec(
    module: torch.nn.Module,
    x: Any,
    x_b: Any | None = None,
    *,
    chunk: int = DEFAULT_CHUNK,
    dtype: torch.dtype | None = None,
    jvp: Literal["forward", "reverse"] = "forward",
) -> Callable[[torch.Tensor], torch.Tensor]:
    """v ↦ K v (K = J Jᵀ on `x`), or v ↦ K_ab v = J_x J_{x_b}ᵀ v with `x_b`; float64, without forming J or K.

    v is (N_b,) or (N_b, k); the result is float64 (N_a,) or (N_a, k) on the module's device. The
    parameters are snapshotted now; each call runs in eval mode and restores the modes.
    """
    op = NTKOperator(module, chunk=chunk, dtype=dtype, jvp=jvp)
    xa = op.inputs(x)
    xb = xa if x_b is None else op.inputs(x_b)

    @one_thread  # the products run when the closure is called, after ntk_matvec returned
    def matvec(v: torch.Tensor) -> torch.Tensor:
        import torch

        v = torch.as_tensor(v, device=op.device)
        if v.dim() not in (1, 2) or v.shape[0] != xb.shape[0]:
            raise ValueError(f"v must have shape ({xb.shape[0]},) or ({xb.shape[0]}, k), got {tuple(v.shape)}")
        return op.jvp(xa, op.vjp(xb, v))

    return matvec


def ntk_diagonal(module: torch.nn.Module, x: Any, *, chunk: int = 64, dtype: torch.dtype | None = None) -> np.ndarray:
    """diag K = ‖∂f(x_i)/∂θ‖², float64, from `empirical_ntk` on chunks (cost N·chunk pairs, not N²)."""
    import torch

    from compbench.theory.ntk import empirical_ntk

    if chunk < 1:
        raise ValueError(f"chunk must be ≥ 1, got {chunk}")
    xt = torch.as_tensor(x)
    target = module
    if dtype is not None and next(p for p in module.parameters() if p.requires_grad).dtype != dtype:
        import copy

        target = copy.deepcopy(module).to(dtype)
    parts = [torch.diagonal(empirical_ntk(target, xt[i : i + chunk])).cpu() for i in range(0, xt.shape[0], chunk)]
    return torch.cat(parts).numpy()


@dataclass
class CGInfo:
    """How the conjugate-gradient solve went (per target column where there are several)."""

    iterations: list[int]
    relative_residual: list[float]  # true ‖b − (K + ridge·I) α‖ / ‖b‖, recomputed after the solve
    converged: bool  # every column reached `tol` (true residual) with finite values
    tol: float
    preconditioner: str
    alpha: np.ndarray  # dual coefficients, (N_train,) or (N_train, k)
    seconds: float
    message: str = ""

    def summary(self) -> dict[str, Any]:
        """The scalar fields, for a record (no α)."""
        return {
            "cg_iterations": max(self.iterations) if self.iterations else 0,
            "cg_relative_residual": max(self.relative_residual) if self.relative_residual else 0.0,
            "cg_converged": self.converged,
            "cg_tol": self.tol,
            "cg_preconditioner": self.preconditioner,
            "cg_seconds": round(self.seconds, 3),
        }


def _as_targets(y: Any, n: int, name: str) -> np.ndarray:
    arr = np.asarray(y.detach().cpu() if hasattr(y, "detach") else y, dtype=np.float64)
    if arr.ndim not in (1, 2) or arr.shape[0] != n:
        raise ValueError(f"{name} must have shape ({n},) or ({n}, k), got {arr.shape}")
    return arr


@one_thread
def ntk_cg_regression(
    module: torch.nn.Module,
    x_train: Any,
    y_train: Any,
    x_eval: Any,
    *,
    f0_train: Any | None = None,
    f0_eval: Any | None = None,
    ridge: float = 0.0,
    tol: float | None = None,
    max_iter: int = 1000,
    x0: Any | None = None,
    preconditioner: Literal["jacobi", "none"] = "jacobi",
    chunk: int = DEFAULT_CHUNK,
    dtype: torch.dtype | None = None,
    jvp: Literal["forward", "reverse"] = "forward",
) -> tuple[np.ndarray, CGInfo]:
    """f_eval = f0_eval + K_eval,train α with (K + ridge·I) α = y − f0_train solved by CG on the matrix-free NTK.

    The same prediction as `kernel_regression(empirical_ntk(m, x_train), empirical_ntk(m, x_eval,
    x_train), y_train, ridge, f0_train, f0_eval)` up to the solver tolerance `tol` on the relative
    residual (default by computing dtype: 1e-8 float64, 1e-3 float32, 1e-2 half; the true residual
    is recomputed at the end). Not reaching it within `max_iter` iterations is reported in the info
    (`converged=False`, `message`) and warned about.
    """
    import torch
    from scipy.sparse.linalg import LinearOperator, cg

    if not ridge >= 0:
        raise ValueError(f"ridge must be ≥ 0, got {ridge}")
    if tol is not None and not tol > 0:
        raise ValueError(f"tol must be > 0, got {tol}")
    if max_iter < 1:
        raise ValueError(f"max_iter must be ≥ 1, got {max_iter}")
    if preconditioner not in ("jacobi", "none"):
        raise ValueError(f"preconditioner must be 'jacobi' or 'none', got {preconditioner!r}")
    start = time.perf_counter()
    op = NTKOperator(module, chunk=chunk, dtype=dtype, jvp=jvp)
    if tol is None:
        tol = default_tol(op.dtype)
    xt, xe = op.inputs(x_train), op.inputs(x_eval)
    n = xt.shape[0]
    b = _as_targets(y_train, n, "y_train")
    if f0_train is not None:
        b = b - _as_targets(f0_train, n, "f0_train")
    cols = b.reshape(n, -1)
    k = cols.shape[1]
    guess = None if x0 is None else _as_targets(x0, n, "x0").reshape(n, -1)
    if guess is not None and guess.shape[1] != k:
        raise ValueError(f"x0 has {guess.shape[1]} columns, y_train {k}")

    def apply(v: np.ndarray) -> np.ndarray:
        vt = torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64).reshape(n)).to(op.device)
        return op.jvp(xt, op.vjp(xt, vt)).cpu().numpy() + ridge * v.reshape(n)

    A = LinearOperator((n, n), matvec=apply, dtype=np.float64)
    M = None
    if preconditioner == "jacobi":
        d = ntk_diagonal(module, xt, dtype=dtype) + ridge
        # A zero diagonal means a zero row of the PSD K (a sample with zero gradient); any positive
        # scale keeps M positive definite, the median keeps it in proportion with the others.
        positive = d[d > 0]
        d = np.where(d > 0, d, np.median(positive) if positive.size else 1.0)
        M = LinearOperator((n, n), matvec=lambda r: r.reshape(n) / d, dtype=np.float64)

    alpha = np.zeros((n, k))
    iterations: list[int] = []
    for j in range(k):
        count = [0]

        def step(_: np.ndarray, count: list[int] = count) -> None:
            count[0] += 1

        # atol 0: the stopping rule is purely relative to ‖b‖ (scale-free in the targets).
        start_j = None if guess is None else guess[:, j].copy()
        sol, _ = cg(A, cols[:, j], x0=start_j, rtol=tol, atol=0.0, maxiter=max_iter, M=M, callback=step)
        alpha[:, j] = sol
        iterations.append(count[0])

    # One VJP serves both the true residual (J_train u) and the predictions (J_eval u).
    finite = bool(np.all(np.isfinite(alpha)))
    u = op.vjp(xt, torch.from_numpy(alpha).to(op.device)) if finite else None
    if u is not None:
        K_alpha = op.jvp(xt, u).cpu().numpy()
        residual = cols - K_alpha - ridge * alpha
        norms = np.linalg.norm(cols, axis=0)
        rel = [float(np.linalg.norm(residual[:, j]) / norms[j]) if norms[j] > 0 else 0.0 for j in range(k)]
        pred = op.jvp(xe, u).cpu().numpy()
    else:
        rel = [float("nan")] * k
        pred = np.full((xe.shape[0], k), np.nan)
    pred = pred.reshape((xe.shape[0],) + b.shape[1:])
    if f0_eval is not None:
        pred = pred + _as_targets(f0_eval, xe.shape[0], "f0_eval")

    converged = finite and all(r <= tol for r in rel)
    message = ""
    if not converged:
        if not finite:
            message = "CG produced non-finite coefficients (breakdown: is K + ridge·I singular with an inconsistent right-hand side?)"
        elif any(it >= max_iter for it, r in zip(iterations, rel) if r > tol):
            message = f"CG did not converge in max_iter={max_iter} iterations: relative residual {max(rel):.3g} > tol {tol:.3g}"
        else:
            message = (
                f"CG's recursive residual reached tol {tol:.3g} but the true relative residual is {max(rel):.3g}: "
                "the products' round-off limits the attainable accuracy (use dtype=torch.float64 or a larger tol)"
            )
        warnings.warn(message, RuntimeWarning, stacklevel=2)
    info = CGInfo(
        iterations=iterations,
        relative_residual=rel,
        converged=converged,
        tol=float(tol),
        preconditioner=preconditioner,
        alpha=alpha.reshape(b.shape),
        seconds=time.perf_counter() - start,
        message=message,
    )
    return pred, info
