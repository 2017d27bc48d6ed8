"""Encodings of the `sraven` task (compbench.tasks.sraven): the panels as one flat one-hot vector, or as tokens.

- `raven_onehot` (input kind "vector"): the first grid² − 1 panels' features, each one-hot over its
  V values, concatenated panel by panel ((grid² − 1) · F · V inputs). For kernels and MLPs. No
  latent code: a model must read the rule off the panels.
- `raven_panels` (input kind "sequence"): one token per panel, the query (the missing last panel)
  first, as the `episodes` encoding places its query: features = F · V one-hot values, a one-hot of
  the panel's position (grid²), and the query flag; the query token has no values. The training
  batch carries a stream of fresh instances of the training latents (`Batch.stream`, each seed its
  own generator), its `x`, `y` being the task's fixed training instances.

Both evaluate every latent at the task's shared inputs u (cell by cell), as function-valued scoring
reads them; the target is the last panel as one class of V^F.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from compbench.encodings.batch import Batch
from compbench.encodings.registry import Encoded, register_encoding
from compbench.tasks import TaskData

__all__ = ["RavenStream", "onehot_panels", "panel_tokens"]


def onehot_panels(panels: np.ndarray, values: int) -> np.ndarray:
    """(n, P, F) values → (n, P · F · V) one-hot, panel by panel, feature by feature."""
    n, p, f = panels.shape
    return np.eye(values, dtype=np.float32)[panels].reshape(n, p * f * values)


def panel_tokens(panels: np.ndarray, values: int) -> tuple[np.ndarray, np.ndarray]:
    """(n, grid², F) panels → tokens (n, grid², F·V + grid² + 1) with the query (the last panel, values hidden)
    first, then the grid² − 1 given panels; and the mask (all True)."""
    n, p, f = panels.shape
    width = f * values
    tokens = np.zeros((n, p, width + p + 1), dtype=np.float32)
    tokens[:, 0, width + p - 1] = 1.0  # the query sits at the last position of the grid
    tokens[:, 0, -1] = 1.0
    tokens[:, 1:, :width] = np.eye(values, dtype=np.float32)[panels[:, :-1]].reshape(n, p - 1, width)
    tokens[:, 1:, width : width + p - 1] = np.eye(p - 1, dtype=np.float32)[None]
    return tokens, np.ones((n, p), dtype=bool)


def _spec(task: TaskData, name: str) -> Any:
    from compbench.tasks.sraven import RavenSpec

    if not isinstance(task.episodes, RavenSpec) or task.samples is None:
        raise ValueError(f"encoding {name!r} needs the sraven task; {task.family!r} is not it")
    return task.episodes


def _eval_ids_and_panels(task: TaskData, spec: Any) -> tuple[np.ndarray, np.ndarray]:
    s = task.samples
    n, m = len(task.cells), s.n_eval
    ids = np.repeat(np.arange(n), m)
    return ids, spec.panels(ids, np.tile(s.x_eval, (n, 1)))


@register_encoding("raven_onehot")
def encode_raven_onehot(task: TaskData) -> Encoded:
    """sRAVEN: the given panels' one-hot features, flattened (for kernels and MLPs)."""
    spec = _spec(task, "raven_onehot")
    s = task.samples
    tr = spec.panels(s.train_cells, s.x_train)
    ev_ids, ev = _eval_ids_and_panels(task, spec)
    train = Batch(onehot_panels(tr[:, :-1], spec.values).astype(np.float64), task.cells[s.train_cells], np.asarray(s.train_cells),
                  task.n_values, np.asarray(s.y_train), task.n_classes)
    evaluate = Batch(onehot_panels(ev[:, :-1], spec.values).astype(np.float64), task.cells[ev_ids], ev_ids, task.n_values,
                     np.asarray(s.y_eval).reshape(-1), task.n_classes)
    return Encoded("raven_onehot", train, evaluate)


@dataclass(frozen=True)
class RavenStream:
    """Fresh training instances of the sraven task as panel tokens: `batch(rng, n)` → (x, mask, classes, latent ids)."""

    spec: Any  # compbench.tasks.sraven.RavenSpec

    def rng(self, seed: int) -> np.random.Generator:
        """A training seed's generator of instances."""
        return self.spec.rng(seed)

    def batch(self, rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """n fresh instances: tokens, mask, the last panel's class, the latent ids."""
        ids, panels = self.spec.draw(rng, n)
        x, mask = panel_tokens(panels, self.spec.values)
        return x, mask, self.spec.classes(panels), ids


@register_encoding("raven_panels", produces="sequence")
def encode_raven_panels(task: TaskData) -> Encoded:
    """sRAVEN: one token per panel (the query first), with a mask; training instances streamed."""
    spec = _spec(task, "raven_panels")
    s = task.samples
    tr = spec.panels(s.train_cells, s.x_train)
    ev_ids, ev = _eval_ids_and_panels(task, spec)
    x_tr, m_tr = panel_tokens(tr, spec.values)
    x_ev, m_ev = panel_tokens(ev, spec.values)
    train = Batch(x_tr, task.cells[s.train_cells], np.asarray(s.train_cells), task.n_values, np.asarray(s.y_train),
                  task.n_classes, m_tr, RavenStream(spec))
    evaluate = Batch(x_ev, task.cells[ev_ids], ev_ids, task.n_values, np.asarray(s.y_eval).reshape(-1), task.n_classes, m_ev)
    return Encoded("raven_panels", train, evaluate)
