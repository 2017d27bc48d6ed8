"""Sequence adapters for episode tasks: a pre-LN transformer that reads the query token, and the bottleneck model.

Both take the `episodes` encoding's input kind "sequence" (`compbench.encodings.sequences`: the
query token first, then k context pairs (x, y), then masked padding) and train on the training
batch's stream of fresh episodes (`Batch.stream`), one Adam step per batch of `batch_size` new
episodes, for `steps` steps; each seed has its own seeded initialisation and its own seeded
episode stream. Without a stream (a fixed sequence batch) they train on its samples in shuffled
minibatches instead. Real targets train with MSE; class targets (the `sraven` task's
`raven_panels`) with `loss: cross_entropy` or MSE on one-hot rows (the transformer only).

- `transformer` (Kobayashi, Schug et al. 2024's vanilla model): tokens → linear embedding →
  `torch.nn.TransformerEncoder` (pre-LN, `norm_first`, no dropout; key-padding mask from
  `Batch.mask`) → final LayerNorm → a linear readout of the query token (position 0).
- `bottleneck` (the paper's contrast): the same encoder over the context tokens only (the query
  masked out), a masked mean over them, a linear map to a latent z of `latent` units, and a
  linear hypernetwork that builds the network applied to the query's x:
  relu(W(z) x + b(z)) with W(z) = Θ_0 + Σ_m z_m Θ_m (the `hypernet` adapter's form), then a
  readout shared by every episode.

No positional encoding: the context is a set of pairs, and the query is told apart by its flag
feature, so `max_context` is the longest context accepted, not a learned table's size.

Theory: `theory: none` by default, and the record says why (`info.theory_none_why`): training is
streamed, so there is no fixed training set whose kernel regression the lazy limit would be; the
empirical NTK on the fixed sample of `train_episodes` (`theory: empirical`) is offered as an
approximation, at sizes where the (n × n) Grams of a transformer's Jacobians are affordable.

Seeds train one after another (`info.seeds_stacked` False, with the reason): the encoder's
attention kernels are not stacked over members here.
"""

from __future__ import annotations

import functools
import time
from typing import TYPE_CHECKING, Any, Literal

import numpy as np
from pydantic import Field

from compbench.adapters.base import Batch, Fitted
from compbench.adapters.deep import NetworkAdapter, NetworkParams
from compbench.adapters.registry import register_adapter

if TYPE_CHECKING:
    import torch

    from compbench.training.minibatch import MinibatchResult, TrainOptions

__all__ = ["BottleneckAdapter", "BottleneckParams", "SequenceParams", "TransformerAdapter", "pack"]

STREAMED_THEORY_WHY = (
    "training is streamed (fresh episodes every step): no fixed training set whose kernel regression the lazy "
    "limit would be; theory: empirical gives the empirical NTK on the fixed sample of train_episodes as an approximation"
)
NOT_STACKED_WHY = "sequence models train their seeds one after another (attention is not stacked over members)"


class SequenceParams(NetworkParams):
    """A small pre-LN transformer encoder and its streamed training (Adam, MSE)."""

    d: int = Field(default=64, ge=1, description="model width")
    layers: int = Field(default=2, ge=1, description="encoder layers")
    heads: int = Field(default=4, ge=1, description="attention heads (d must be a multiple)")
    ff: int | None = Field(default=None, ge=1, description="feed-forward width (None: 4·d)")
    max_context: int = Field(default=256, ge=1, description="the longest sequence (tokens, padding included) accepted")
    steps: int | None = Field(default=2000, ge=1, description="optimizer steps (one fresh batch of episodes each)")
    pool: int | None = Field(default=None, ge=1, description="streamed training: draw this many episodes once per seed and "
                             "train every step on a minibatch of that fixed pool (None: fresh episodes every step), so "
                             "the data a model sees can vary at a fixed number of steps")
    theory: Literal["empirical", "none"] = Field(
        default="none", description="none (streamed training has no fixed training set), or the empirical NTK on the fixed sample"
    )
    amp: bool = Field(default=False, description="mixed precision on CUDA (ignored on the CPU)")


class BottleneckParams(SequenceParams):
    """The transformer over the context, pooled to a latent, and a linear hypernetwork on the query."""

    latent: int = Field(default=16, ge=1, description="units of the pooled latent z")
    width: int = Field(default=32, ge=1, description="hidden units of the network the hypernetwork builds")


def pack(x: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """Tokens (n, L, F) and mask (n, L) as one float32 array (n, L, F + 1): the mask is the last feature."""
    x = np.asarray(x, dtype=np.float32)
    m = np.ones(x.shape[:2], dtype=np.float32) if mask is None else np.asarray(mask, dtype=np.float32)
    return np.concatenate([x, m[..., None]], axis=-1)


def _encoder(d: int, layers: int, heads: int, ff: int) -> Any:
    from torch import nn

    layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True, norm_first=True)
    return nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)


@functools.cache
def _modules() -> tuple[type, type]:
    import torch
    from torch import nn

    class QueryTransformer(nn.Module):
        """Packed tokens (n, L, F + 1) → encoder → LayerNorm → readout of position 0."""

        def __init__(self, features: int, d: int, layers: int, heads: int, ff: int, n_out: int) -> None:
            super().__init__()
            self.embed = nn.Linear(features, d)
            self.encoder = _encoder(d, layers, heads, ff)
            self.norm = nn.LayerNorm(d)
            self.readout = nn.Linear(d, n_out)

        def forward(self, inp: torch.Tensor) -> torch.Tensor:
            tokens, real = inp[..., :-1], inp[..., -1] > 0.5
            h = self.encoder(self.embed(tokens), src_key_padding_mask=~real)
            return self.readout(self.norm(h[:, 0]))

    class Bottleneck(nn.Module):
        """Context tokens → encoder → masked mean → latent z → W(z), b(z) → relu(W(z) x_q + b(z)) → readout."""

        def __init__(self, features: int, x_dim: int, d: int, layers: int, heads: int, ff: int, latent: int,
                     width: int, n_out: int) -> None:
            super().__init__()
            self.x_dim, self.latent, self.width = x_dim, latent, width
            self.embed = nn.Linear(features, d)
            self.encoder = _encoder(d, layers, heads, ff)
            self.norm = nn.LayerNorm(d)
            self.to_latent = nn.Linear(d, latent)
            self.generated = nn.Linear((latent + 1) * (x_dim + 1), width, bias=False)
            self.readout = nn.Linear(width, n_out)

        def forward(self, inp: torch.Tensor) -> torch.Tensor:
            tokens, real = inp[:, 1:, :-1], inp[:, 1:, -1] > 0.5
            h = self.norm(self.encoder(self.embed(tokens), src_key_padding_mask=~real))
            w = real.to(h.dtype).unsqueeze(-1)
            pooled = (h * w).sum(1) / w.sum(1).clamp_min(1.0)
            z = self.to_latent(pooled)
            zt = torch.cat([z.new_ones(len(z), 1), z], dim=-1)
            xq = inp[:, 0, : self.x_dim]
            xt = torch.cat([xq, xq.new_ones(len(xq), 1)], dim=-1)
            hidden = torch.relu(self.generated((zt.unsqueeze(-1) * xt.unsqueeze(-2)).flatten(-2)))
            return self.readout(hidden)

    return QueryTransformer, Bottleneck


class _SequenceAdapter(NetworkAdapter):
    """Base: sequence inputs (packed with their mask), streamed Adam training, f₀ and optional eNTK per seed."""

    Params = SequenceParams
    params: SequenceParams
    inputs = ("sequence",)
    tags = ("networks", "sequence")

    def _check(self, train: Batch, evaluate: Batch) -> None:
        p = self.params
        if train.x.ndim != 3 or evaluate.x.ndim != 3:
            raise ValueError(f"adapter {self.name!r} needs sequence inputs (samples, length, features), got shape "
                             f"{train.x.shape}; use `encoding: episodes` on an episode task")
        if max(train.x.shape[1], evaluate.x.shape[1]) > p.max_context:
            raise ValueError(f"sequences of {max(train.x.shape[1], evaluate.x.shape[1])} tokens exceed max_context {p.max_context}")
        if p.d % p.heads:
            raise ValueError(f"d = {p.d} is not a multiple of heads = {p.heads}")
        if train.n_classes:
            if p.loss not in ("mse", "cross_entropy"):
                raise ValueError(f"adapter {self.name!r} trains class targets with loss: mse (one-hot) or cross_entropy")
        elif p.loss != "mse":
            raise ValueError(f"adapter {self.name!r} trains real targets with loss: mse")

    def _tensors(self, train: Batch, evaluate: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[int, ...]]:
        """Packed training and evaluation sequences (mask as the last feature), the fixed targets, one sample's shape."""
        import torch

        self._check(train, evaluate)
        x_tr = torch.as_tensor(pack(train.x, train.mask), device=self.device)
        x_ev = torch.as_tensor(pack(evaluate.x, evaluate.mask), device=self.device)
        y_tr = torch.as_tensor(train.regression_targets(), dtype=torch.float32, device=self.device)
        return x_tr, x_ev, y_tr, tuple(int(s) for s in x_tr.shape[1:])

    def _ff(self) -> int:
        return self.params.ff or 4 * self.params.d

    def _stream_train(self, net: torch.nn.Module, train: Batch, x_tr: torch.Tensor, y_tr: torch.Tensor, seed: int, lr: float) -> MinibatchResult:
        """Adam on fresh episodes from the stream (each seed its own), or shuffled minibatches of a fixed batch."""
        import torch

        from compbench.training.minibatch import MinibatchResult, make_optimizer

        p = self.params
        steps = p.steps if p.steps is not None else p.epochs * max(1, -(-len(x_tr) // p.batch_size))
        opt = make_optimizer([q for q in net.parameters() if q.requires_grad], p.optimizer, lr, p.momentum, p.weight_decay)
        stream = train.stream
        rng = stream.rng(seed) if stream is not None else np.random.default_rng(np.random.SeedSequence([int(seed), 27]))
        classes = bool(train.n_classes)
        pool = None
        if stream is not None and p.pool is not None:
            # The fixed pool is drawn from the seed's own stream, as its fresh batches would be.
            px, pm, py, _ = stream.batch(rng, p.pool)
            pool = (torch.as_tensor(pack(px, pm), device=self.device),
                    torch.as_tensor(np.asarray(py, dtype=np.int64 if classes else np.float32), device=self.device))
        history: list[float] = []
        t0 = time.perf_counter()
        net.train()
        diverged = False
        done = 0
        for step in range(steps):
            if pool is not None:
                idx = torch.as_tensor(rng.integers(0, p.pool, size=min(p.batch_size, p.pool)), device=self.device)
                inp, target = pool[0][idx], pool[1][idx]
            elif stream is not None:
                xb, mb, yb, _ = stream.batch(rng, p.batch_size)
                inp = torch.as_tensor(pack(xb, mb), device=self.device)
                if classes:  # integer classes from the stream
                    target = torch.as_tensor(np.asarray(yb, dtype=np.int64), device=self.device)
                else:
                    target = torch.as_tensor(np.asarray(yb, dtype=np.float32), device=self.device)
            else:
                idx = torch.as_tensor(rng.integers(0, len(x_tr), size=min(p.batch_size, len(x_tr))), device=self.device)
                inp, target = x_tr[idx], y_tr[idx]
                if classes:  # the fixed batch's targets are one-hot rows
                    target = target.argmax(dim=1)
            out = net(inp)
            if not classes:
                loss = torch.mean((out - target) ** 2)
            elif p.loss == "cross_entropy":
                loss = torch.nn.functional.cross_entropy(out, target)
            else:  # mse on one-hot rows, summed over classes as the other adapters' mse on one-hot targets
                loss = torch.mean(torch.sum((out - torch.nn.functional.one_hot(target, out.shape[1]).to(out.dtype)) ** 2, dim=1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            done = step + 1
            value = float(loss.detach())
            if step % 50 == 0 or step == steps - 1:
                history.append(value)
            if not np.isfinite(value):
                diverged = True
                break
        net.eval()
        final = history[-1] if history else float("nan")
        return MinibatchResult(epochs=0, steps=done, final_loss=final, converged=False, diverged=diverged,
                               seconds=time.perf_counter() - t0, loss_history=history)

    _classes = False

    def fit_seeds(self, train: Batch, evaluate: Batch, seeds: list[int]) -> list[Fitted]:
        """One network per seed, trained on its own stream of fresh episodes; f₀ (and the eNTK if asked) at init."""
        self._classes = bool(train.n_classes)
        return super().fit_seeds(train, evaluate, seeds)

    def _train_one(self, net: torch.nn.Module, train: Batch, x_tr: torch.Tensor, y_tr: torch.Tensor, seed: int,
                   options: TrainOptions) -> MinibatchResult:
        """Train on the stream of fresh episodes when the task has one, else on the fixed split."""
        return self._stream_train(net, train, x_tr, y_tr, seed, options.lr)

    def _seed_fitted(self, net: torch.nn.Module, train: Batch, result: Any, x_ev: torch.Tensor, at_init: Any, lr: float,
                     x_tr: torch.Tensor) -> Fitted:
        """The seed's Fitted with what streaming recorded (episodes seen, the loss curve, why no theory)."""
        f = self._fitted(net, result, x_ev, at_init, lr)
        f.info.update(seeds_stacked=False, seeds_stacked_why=NOT_STACKED_WHY, streamed=train.stream is not None,
                      episodes_seen=result.steps * self.params.batch_size if train.stream is not None else None,
                      distinct_episodes=(self.params.pool if self.params.pool is not None
                                         else result.steps * self.params.batch_size) if train.stream is not None else None,
                      loss_history=[round(v, 6) for v in result.loss_history])
        if self.params.theory == "none":
            f.info["theory_none_why"] = STREAMED_THEORY_WHY if train.stream is not None else "theory: none was asked for"
        return f


@register_adapter("transformer")
class TransformerAdapter(_SequenceAdapter):
    """A small pre-LN transformer encoder on the episode's tokens, reading the query token."""

    def build(self, in_shape: tuple[int, ...], n_out: int = 1) -> torch.nn.Module:
        """The transformer for packed tokens of shape (length, features + 1)."""
        p = self.params
        query_transformer, _ = _modules()
        return query_transformer(in_shape[-1] - 1, p.d, p.layers, p.heads, self._ff(), n_out)


@register_adapter("bottleneck")
class BottleneckAdapter(_SequenceAdapter):
    """The transformer over the context, pooled to a latent z; a linear hypernetwork of z applied to the query."""

    Params = BottleneckParams
    params: BottleneckParams

    def build(self, in_shape: tuple[int, ...], n_out: int = 1) -> torch.nn.Module:
        """The bottleneck model; the query's x is the token's first features − outputs − flag."""
        p = self.params
        features = in_shape[-1] - 1
        if n_out > 1 and self._classes:
            raise ValueError("the bottleneck applies its generated network to the query's x (episode tasks with real "
                             "targets); a class task such as sraven has none: use the transformer")
        x_dim = features - n_out - 1
        if x_dim < 1:
            raise ValueError(f"tokens of {features} features leave no query input beside {n_out} output(s) and the flag")
        _, bottleneck = _modules()
        return bottleneck(features, x_dim, p.d, p.layers, p.heads, self._ff(), p.latent, p.width, n_out)
