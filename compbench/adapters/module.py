"""Any `torch.nn.Module`, trained and theory-scored: the adapter behind `--model file.py:Name`.

An architecture author writes a factory `build(in_shape, n_out) -> nn.Module` (an `nn.Module`
class whose `__init__` takes those two arguments is one) and nothing else. `in_shape` is the
shape of one sample as the task's encoding gives it: `(d,)` for one-hot, k-hot and continuous
vectors, `(channels, H, W)` for images; `n_out` is the number of outputs the task needs (1 for a
scalar or ±1 task, K for K outputs or K classes). The module maps a batch `(n, *in_shape)` to
`(n, n_out)` (or `(n,)` when `n_out` is 1).

Training and theory are the deep-network base's (`compbench.adapters.deep.NetworkAdapter`):
minibatch Adam or SGD with the adapter's parameters (`--model-args lr=1e-2,epochs=200`), and per
seed the outputs f₀ and the empirical NTK at initialisation, from which the runner computes the
lazy-limit prediction for the same split. Each seed has its own seeded initialisation and data
order; the seeds of a cell train at once where the module allows it (`stack_seeds: auto`,
`compbench.training.stacked_functional`), else one after another, and either way a seed's result
is the one it gets alone, up to float rounding (`info.seeds_stacked` says which ran).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from pydantic import Field

from compbench.adapters.base import Batch, Fitted
from compbench.adapters.deep import NetworkAdapter, NetworkParams, seeded_rng

if TYPE_CHECKING:
    import torch


class ModuleParams(NetworkParams):
    """Training and theory settings of a user's module: the deep-network defaults (Adam, lr 1e-3,
    100 epochs, batch 128, MSE, empirical-NTK theory)."""

    stack_seeds: Literal["auto", "never"] = Field(
        default="auto",
        description="auto: train a cell's seeds at once (torch.func.functional_call over stacked parameters) when the "
        "module allows it (no buffers, no random ops; not with lr_ntk, which gives each seed its own rate), one by one "
        "otherwise; never: one by one",
    )


def check_factory(factory: Callable[..., Any], what: str) -> None:
    """Raise TypeError unless `factory` can be called as factory(in_shape, n_out)."""
    try:
        sig = inspect.signature(factory)
    except (TypeError, ValueError):  # a builtin or C callable: trust it, the first call will tell
        return
    try:
        sig.bind(("d",), 1)
    except TypeError as exc:
        raise TypeError(
            f"{what} must take (in_shape, n_out) — the shape of one sample, e.g. (d,) or (channels, H, W), "
            f"and the number of outputs — but its signature is {sig}: {exc}"
        ) from None


class ModuleAdapter(NetworkAdapter):
    """Base of adapters made from a module factory: `factory(in_shape, n_out)` builds each seed's network."""

    Params = ModuleParams
    params: ModuleParams
    inputs = ("vector", "image")
    tags = ("networks",)
    factory: ClassVar[Callable[..., Any] | None] = None

    def build(self, in_shape: tuple[int, ...], n_out: int = 1) -> torch.nn.Module:
        """The factory's network for samples of shape `in_shape` with `n_out` outputs."""
        import torch

        factory = type(self).factory
        if factory is None:
            raise TypeError(f"adapter {self.name!r} has no module factory (make one with compbench.adapters.user.adapter_for)")
        net = factory(tuple(in_shape), int(n_out))
        if not isinstance(net, torch.nn.Module):
            raise TypeError(f"{_label(factory)}(in_shape={tuple(in_shape)}, n_out={n_out}) returned "
                            f"{type(net).__name__}, not a torch.nn.Module")
        if not any(p.requires_grad for p in net.parameters()):
            raise TypeError(f"{_label(factory)}(in_shape={tuple(in_shape)}, n_out={n_out}) has no trainable parameters")
        return net

    def fit_seeds(self, train: Batch, evaluate: Batch, seeds: list[int]) -> list[Fitted]:
        """One network per seed; the seeds trained at once when the module allows it (`stack_seeds`)."""
        from compbench.training.minibatch import train_minibatch
        from compbench.training.stacked_functional import CannotStack, train_stacked

        p = self.params
        if p.stack_seeds == "never" or len(seeds) < 2 or p.lr_ntk is not None:
            fitted = super().fit_seeds(train, evaluate, seeds)
            why = "stack_seeds: never" if p.stack_seeds == "never" else "one seed" if len(seeds) < 2 else "lr_ntk: a rate per seed"
            for f in fitted:
                f.info.update(seeds_stacked=False, seeds_stacked_why=why)
            return fitted
        x_tr, x_ev, y_tr, in_shape = self._tensors(train, evaluate)
        outputs = self._outputs(train)
        nets = [self._init(seed, in_shape, outputs) for seed in seeds]
        at_init = [self._at_init(net, x_tr, x_ev, y_tr, outputs) for net in nets]
        options = self._train_options(at_init[0])
        why = ""
        try:
            results = train_stacked(nets, x_tr, y_tr, list(seeds), options)
        except CannotStack as exc:
            why = str(exc)
            nets = [self._init(seed, in_shape, outputs) for seed in seeds]  # untouched copies: a failed try may have run
            results = []
            for seed, net in zip(seeds, nets):
                with seeded_rng(seed, self.device):
                    results.append(train_minibatch(net, x_tr, y_tr, options, seed=seed))
        fitted = [self._fitted(net, r, x_ev, a, options.lr, x_tr) for net, r, a in zip(nets, results, at_init)]
        for f in fitted:
            f.info.update(seeds_stacked=not why, **({"seeds_stacked_why": why} if why else {}))
        return fitted

    def _check_inputs(self, train: Batch, evaluate: Batch) -> None:
        """Inputs of any sample shape, the same in training and evaluation."""
        if train.x.ndim < 2:
            raise ValueError(f"inputs must have a sample axis and features, got shape {train.x.shape}")
        if evaluate.x.shape[1:] != train.x.shape[1:]:
            raise ValueError(f"evaluation inputs {evaluate.x.shape[1:]} differ from training inputs {train.x.shape[1:]}")


def _label(factory: Callable[..., Any]) -> str:
    return getattr(factory, "__qualname__", None) or getattr(factory, "__name__", None) or repr(factory)


__all__ = ["ModuleAdapter", "ModuleParams", "check_factory"]
