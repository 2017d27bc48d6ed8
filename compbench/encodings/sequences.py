"""The `episodes` encoding: an episode task's samples as token sequences with a mask (input kind "sequence").

Token layout, for inputs x ∈ R^I and outputs y ∈ R^O (features F = I + O + 1):

    position 0          the query:         (x_query, 0…0, 1)
    positions 1..k      the context pairs: (x_j, y_j, 0)
    positions k+1..     padding (`pad`):   zeros, mask False

The query comes first so that it sits at the same position whatever the context's length and
padding; the last feature flags it. `Batch.mask` (n, length) is True on real tokens.

The training batch carries an `EpisodeStream` (`Batch.stream`): sequence adapters draw fresh
episodes from it every step, each training seed from its own seeded generator
(`stream.rng(seed)`); its `x`, `y` are a fixed sample of `train_episodes` streamed episodes (its
own seed stream), on which f₀ (and any theory) is computed. The evaluation batch is the task's
fixed evaluation set: every cell at the shared evaluation queries, each query with the context
drawn for it once (`EpisodeSpec.eval_context_x`), in the order the function-valued scoring reads
(cell by cell, queries in order), so the scores are those of the modular teacher on the same
queries.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from pydantic import Field

from compbench.encodings.batch import Batch
from compbench.encodings.registry import Encoded, register_encoding
from compbench.params import StrictParams
from compbench.tasks import TaskData

__all__ = ["EpisodeStream", "EpisodesParams", "encode_episodes", "episode_tokens"]


def episode_tokens(query_x: np.ndarray, ctx_x: np.ndarray, ctx_y: np.ndarray, pad: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Tokens (n, 1 + k + pad, I + O + 1) float32 and mask (n, 1 + k + pad) bool of n episodes."""
    n, k, i = ctx_x.shape
    o = ctx_y.shape[-1]
    tokens = np.zeros((n, 1 + k + pad, i + o + 1), dtype=np.float32)
    tokens[:, 0, :i] = query_x
    tokens[:, 0, -1] = 1.0
    tokens[:, 1 : k + 1, :i] = ctx_x
    tokens[:, 1 : k + 1, i : i + o] = ctx_y
    mask = np.zeros((n, 1 + k + pad), dtype=bool)
    mask[:, : k + 1] = True
    return tokens, mask


@dataclass(frozen=True)
class EpisodeStream:
    """Fresh training episodes of a task, as tokens: `batch(rng, n)` → (x, mask, y, cell ids)."""

    spec: Any  # compbench.tasks.episodes.EpisodeSpec
    pad: int = 0
    scalar: bool = True  # targets (n,) for a one-output task, else (n, O)

    def rng(self, seed: int) -> np.random.Generator:
        """A training seed's generator of episodes (the same episodes for the same task and seed)."""
        return self.spec.rng(seed)

    def batch(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """n fresh episodes: tokens (n, L, F) float32, mask (n, L) bool, targets (n,) or (n, O), cell ids (n,)."""
        ids, cx, cy, qx, qy = self.spec.draw(rng, n)
        x, mask = episode_tokens(qx, cx, cy, self.pad)
        return x, mask, (qy[:, 0] if self.scalar else qy), ids


class EpisodesParams(StrictParams):
    """Parameters of the `episodes` encoding."""

    train_episodes: int = Field(default=256, ge=1, description="the fixed sample of streamed training episodes (f₀, theory)")
    pad: int = Field(default=0, ge=0, description="masked padding tokens after the context (the model must ignore them)")


@register_encoding("episodes", EpisodesParams, produces="sequence")
def encode_episodes(task: TaskData, **params: Any) -> Encoded:
    """Episodes as token sequences (query first, then the context pairs) with a mask; training streamed."""
    from compbench.tasks.episodes import _episode_seeds

    p = EpisodesParams.model_validate(params)
    spec = task.episodes
    if spec is None or task.samples is None:
        raise ValueError(f"encoding 'episodes' needs an episode task (family modular_episodes); {task.family!r} is not one")
    if task.n_classes:
        raise ValueError("encoding 'episodes' puts real targets in the context tokens; a multi-class task has none")
    s = task.samples
    scalar = np.ndim(s.y_eval) == 2
    stream = EpisodeStream(spec, p.pad, scalar)
    x_tr, m_tr, y_tr, ids_tr = stream.batch(np.random.default_rng(_episode_seeds(spec.seed, 1)), p.train_episodes)
    n, m = len(task.cells), s.n_eval
    ev_ids = np.repeat(np.arange(n), m)
    ctx_x = spec.eval_context_x.reshape(n * m, spec.context, spec.inputs)
    ctx_y = spec.targets(ctx_x, ev_ids)
    x_ev, m_ev = episode_tokens(np.tile(s.x_eval, (n, 1)), ctx_x, ctx_y, p.pad)
    y_ev = np.asarray(s.y_eval).reshape(n * m, *np.shape(s.y_eval)[2:])
    train = Batch(x_tr, task.cells[ids_tr], ids_tr, task.n_values, y_tr, 0, m_tr, stream)
    evaluate = Batch(x_ev, task.cells[ev_ids], ev_ids, task.n_values, y_ev, 0, m_ev)
    return Encoded("episodes", train, evaluate)
