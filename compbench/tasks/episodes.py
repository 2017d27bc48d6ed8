"""Episode tasks on the modular teacher: composition in context (Kobayashi, Schug et al. 2024, LITERATURE.md §5).

A sample is an *episode*: k context pairs (x, y) drawn from one cell's function (one module
combination of the modular teacher, `compbench.tasks.modular_teacher`) plus a query x; the target
is y(query). Cells, splits and everything the latent-given models see are the modular teacher's:
the family returns the same `TaskData` (cells, split, `samples` with fixed training inputs per
training cell and one shared set of evaluation inputs), so `khot` models (kernels at the
module-additive ceiling, the hypernetwork, the MLP) run on it unchanged, and adds an
`EpisodeSpec` that the `episodes` encoding turns into sequences:

- training is **streamed**: `EpisodeSpec.batch(rng, n)` draws fresh episodes (a training cell
  uniformly, then k + 1 fresh inputs x ~ U[−1, 1]^I) from a generator the adapter seeds per seed,
  so a sequence model cannot memorise a fixed sample set;
- evaluation is a **fixed** seeded set: every cell at the modular teacher's shared evaluation
  inputs (the queries, `samples.x_eval`), each query with its own context of k pairs drawn once
  from the cell's function (`eval_context_x`), so the scores are the modular teacher's per-task R²
  on the same queries.

The context must underdetermine the function (k ≲ inputs × hidden), otherwise in-context
regression solves held-out cells without composing and nothing is measured (issue 27's design
rule). `bias: centered` draws the teacher's biases from U[−0.25, 0.25) instead of the authors'
U[0, 0.5) (issue 27's throwaway run used zero-mean biases).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np
from pydantic import Field

from compbench.tasks.base import CellSamples, TaskData
from compbench.tasks.modular_teacher import (
    _BIAS_MAX,
    ModularTeacherParams,
    Teacher,
    _streams,
    make_teacher,
)
from compbench.tasks.registry import register_family

__all__ = ["EpisodeSpec", "ModularEpisodesParams", "build_modular_episodes", "episode_teacher"]

_EPISODE_STREAMS = 27  # a tag in the episode streams' seed sequences, apart from the modular teacher's four


class ModularEpisodesParams(ModularTeacherParams):
    """The modular teacher's params plus the episode's context size."""

    context: int = Field(default=16, ge=1, description="k: context pairs (x, y) per episode, before the query")
    bias: Literal["positive", "centered"] = Field(
        default="positive", description="teacher biases: the authors' U[0, 0.5) (positive) or U[−0.25, 0.25) (centered)"
    )


def _episode_seeds(seed: int, stream: int, *more: int) -> np.random.SeedSequence:
    """Episode streams: 0 evaluation contexts, 1 the fixed training episodes, 2 + … each training seed's stream."""
    return np.random.SeedSequence([int(seed), _EPISODE_STREAMS, int(stream), *map(int, more)])


@dataclass(frozen=True)
class EpisodeSpec:
    """What episodes of a task are drawn from: its teacher, cells, training cells and context size.

    Plain arrays only (it travels to process-pool and Ray workers with the task).
    """

    teacher: Teacher
    cells: np.ndarray  # (n_cells, M) module masks
    train_ids: np.ndarray  # the training cells, which streamed episodes draw from
    context: int  # k
    inputs: int  # I
    seed: int  # the task's seed
    eval_context_x: np.ndarray  # (n_cells, m, k, I): each evaluation query's own fixed context inputs

    @property
    def outputs(self) -> int:
        """Teacher outputs O (the width of y in a token)."""
        return int(self.teacher.readout.shape[1])

    def targets(self, x: np.ndarray, cell_ids: np.ndarray) -> np.ndarray:
        """Teacher outputs (…, O) at inputs x (n, …, I), sample i from cell `cell_ids[i]`'s function."""
        t = self.teacher
        s = self.cells[np.asarray(cell_ids)].astype(np.float64) / np.sqrt(t.max_active)  # (n, M)
        w = np.einsum("mih,nm->nih", t.theta, s)
        b = s @ t.bias  # (n, H)
        x = np.asarray(x, dtype=np.float64)
        lead = x.shape[1:-1]
        xf = x.reshape(len(x), -1, x.shape[-1])
        h = np.maximum(np.einsum("nki,nih->nkh", xf, w) + b[:, None, :], 0.0)
        return (h @ t.readout).reshape(len(x), *lead, -1)

    def rng(self, seed: int) -> np.random.Generator:
        """The generator of a training seed's stream of fresh episodes."""
        return np.random.default_rng(_episode_seeds(self.seed, 2, seed))

    def draw(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """n fresh training episodes: (cell ids (n,), context x (n, k, I), context y (n, k, O), query x (n, I), query y (n, O))."""
        ids = self.train_ids[rng.integers(0, len(self.train_ids), size=n)]
        x = rng.uniform(-1.0, 1.0, size=(n, self.context + 1, self.inputs))
        y = self.targets(x, ids)
        return ids, x[:, 1:], y[:, 1:], x[:, 0], y[:, 0]


def episode_teacher(p: ModularEpisodesParams) -> Teacher:
    """The teacher of an episode task: the modular teacher's draw, biases centred with `bias: centered`."""
    t = make_teacher(p, np.random.default_rng(_streams(p.seed)[0]))
    if p.bias == "centered":
        t = Teacher(t.theta, t.bias - _BIAS_MAX / 2, t.readout, t.max_active)
    return t


@register_family("modular_episodes", ModularEpisodesParams)
def build_modular_episodes(p: ModularEpisodesParams) -> TaskData:
    """The modular teacher's cells and split, with episodes (k context pairs + a query) for sequence models."""
    from compbench.limits import TooLargeError, limits
    from compbench.tasks.modular_teacher import build_modular_teacher

    base = build_modular_teacher(ModularTeacherParams(**p.model_dump(exclude={"context", "bias"})))
    n_cells = len(base.cells)
    tokens = n_cells * p.eval_samples * (p.context + 1)
    if tokens > limits().samples_per_task * 32:
        raise TooLargeError("the evaluation episodes' tokens (cells × eval_samples × (context + 1))", tokens,
                            limits().samples_per_task * 32, "--max-cells")
    teacher = episode_teacher(p)
    ctx = np.random.default_rng(_episode_seeds(p.seed, 0)).uniform(-1.0, 1.0, size=(n_cells, p.eval_samples, p.context, p.inputs))
    spec = EpisodeSpec(teacher, base.cells, np.flatnonzero(base.train_mask), p.context, p.inputs, p.seed, ctx)
    s = base.samples
    assert s is not None
    if p.bias == "centered":  # the modular teacher's inputs, the centred teacher's targets
        y_train = spec.targets(s.x_train[:, None, :], s.train_cells)[:, 0]
        y_eval = np.stack([teacher(s.x_eval, z) for z in base.cells])
        if p.outputs == 1:
            y_train, y_eval = y_train[:, 0], y_eval[:, :, 0]
        s = CellSamples(s.x_train, s.train_cells, y_train, s.x_eval, y_eval)
    return TaskData(
        "modular_episodes", base.cells, s.y_eval.mean(axis=1), base.train_mask, base.n_values, base.kind, p.model_dump(),
        base.component_names, allow_unseen_values=base.allow_unseen_values, value_labels=base.value_labels,
        relevant=base.relevant, samples=s, heldout=base.heldout, episodes=spec,
    )

