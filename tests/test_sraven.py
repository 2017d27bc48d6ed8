"""sRAVEN's rules by hand (a stub generator fixes the draws), latents, the held-out share and rule coverage."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest

from compbench.tasks.sraven import RULES, instances, latents, rule_grid, split_latents


class Draws:
    """A stand-in generator that returns the given draws in order (integers / choice / permutation)."""

    def __init__(self, *draws):
        self.draws = [np.asarray(d) for d in draws]

    def _next(self):
        return self.draws.pop(0)

    def integers(self, low, high, size):
        d = self._next()
        assert d.shape == tuple(size) and d.min() >= low and d.max() < high
        return d

    def choice(self, n, size, replace):
        d = self._next()
        assert not replace and len(set(d.tolist())) == size
        return d

    def permutation(self, n):
        return self._next()


def test_the_eight_rules_by_hand_on_a_grid_of_five_values():
    V = 5
    assert len(RULES) == 8
    assert rule_grid(0, V, Draws([[3], [0], [4]])).tolist() == [[3, 3, 3], [0, 0, 0], [4, 4, 4]]
    starts = [[3], [0], [4]]
    assert rule_grid(1, V, Draws(starts)).tolist() == [[3, 4, 0], [0, 1, 2], [4, 0, 1]]  # +1 mod 5
    assert rule_grid(2, V, Draws(starts)).tolist() == [[3, 0, 2], [0, 2, 4], [4, 1, 3]]  # +2
    assert rule_grid(3, V, Draws(starts)).tolist() == [[3, 2, 1], [0, 4, 3], [4, 3, 2]]  # −1
    assert rule_grid(4, V, Draws(starts)).tolist() == [[3, 1, 4], [0, 3, 1], [4, 2, 0]]  # −2
    pairs = [[3, 4], [1, 1], [0, 2]]
    assert rule_grid(5, V, Draws(pairs)).tolist() == [[3, 4, 2], [1, 1, 2], [0, 2, 2]]  # a + b mod 5
    assert rule_grid(6, V, Draws(pairs)).tolist() == [[3, 4, 4], [1, 1, 0], [0, 2, 3]]  # a − b mod 5
    g = rule_grid(7, V, Draws([1, 4, 2], [0, 1, 2], [2, 0, 1], [1, 2, 0]))
    assert g.tolist() == [[1, 4, 2], [2, 1, 4], [4, 2, 1]]  # each row a permutation of the same three symbols
    with pytest.raises(ValueError, match="rule must be"):
        rule_grid(8, V, Draws())


def test_rules_hold_on_random_draws():
    rng = np.random.default_rng(0)
    V = 7
    for _ in range(20):
        c = rule_grid(0, V, rng)
        assert np.all(c == c[:, :1])
        for rule, step in ((1, 1), (2, 2), (3, -1), (4, -2)):
            p = rule_grid(rule, V, rng)
            assert np.all(np.diff(p, axis=1) % V == step % V)
        a = rule_grid(5, V, rng)
        assert np.all(a[:, 2] == (a[:, 0] + a[:, 1]) % V)
        s = rule_grid(6, V, rng)
        assert np.all(s[:, 2] == (s[:, 0] - s[:, 1]) % V)
        d = rule_grid(7, V, rng)
        assert len(set(d[0].tolist())) == 3 and all(sorted(r) == sorted(d[0]) for r in d.tolist())


def test_latents_are_multisets_of_rules_in_the_authors_order():
    for f in (2, 3, 4):
        lat = latents(f)
        assert len(lat) == comb(8 + f - 1, f) and np.all(np.diff(lat, axis=1) >= 0)
    assert len(latents(4)) == 330 and latents(2)[:3].tolist() == [[0, 0], [0, 1], [0, 2]]


@pytest.mark.parametrize("features", [2, 3, 4])
def test_a_quarter_of_latents_held_out_and_every_rule_among_them(features):
    n = len(latents(features))
    for seed in range(5):
        train, held = split_latents(features, 0.25, seed)
        assert held.sum() == int(n * 0.25) and np.all(train == ~held)
        assert set(np.unique(latents(features)[held]).tolist()) == set(range(8))
    a, b = split_latents(features, 0.25, 0), split_latents(features, 0.25, 0)
    assert np.array_equal(a[1], b[1]) and not np.array_equal(a[1], split_latents(features, 0.25, 1)[1])


def test_instances_follow_the_latent_per_feature_and_permutation_keeps_columns_consistent():
    rng = np.random.default_rng(1)
    inst = instances(np.array([0, 5]), 4, 5, rng)
    assert inst.shape == (4, 9, 2)
    grid = inst.reshape(4, 3, 3, 2)
    assert np.all(grid[..., 0] == grid[..., :1, 0])  # feature 0: constant rows
    assert np.all(grid[:, :, 2, 1] == (grid[:, :, 0, 1] + grid[:, :, 1, 1]) % 5)  # feature 1: add
    from itertools import product

    perm = instances(np.array([0, 5]), 30, 5, np.random.default_rng(2), permute_features=True).reshape(30, 3, 3, 2)
    moved = 0
    for g in perm:
        # one permutation per column position, the same in every row: some choice of swaps per column restores
        # a constant feature 0 and an add feature 1 in every row
        fits = []
        for swaps in product((False, True), repeat=3):
            u = np.stack([g[:, j, ::-1] if sw else g[:, j] for j, sw in enumerate(swaps)], axis=1)
            fits.append(np.all(u[..., 0] == u[:, :1, 0]) and np.all(u[:, 2, 1] == (u[:, 0, 1] + u[:, 1, 1]) % 5))
        assert any(fits)
        moved += not fits[0]
    assert moved > 0  # the features were permuted in some instances


# --- the task family and its encodings ------------------------------------------------------------

from compbench.encodings import encode, get_encoding  # noqa: E402
from compbench.tasks import make_task  # noqa: E402
from compbench.tasks.sraven import instance_of  # noqa: E402

TINY = {"samples_per_cell": 3, "eval_samples": 4}


def test_the_family_holds_out_a_quarter_of_latents_with_every_rule_and_scores_the_last_panel_as_a_class():
    t = make_task("sraven", **TINY)
    assert t.kind == "multiclass" and t.n_classes == 25 and t.cells.shape == (36, 2) and t.n_test == 9
    assert set(np.unique(t.cells[t.test_mask]).tolist()) == set(range(8)) and t.label(0, 7) == "distribute_three"
    s, spec = t.samples, t.episodes
    assert s.x_train.shape == (27 * 3, 3) and s.y_eval.shape == (36, 4)
    for c in (0, 17, 35):  # every latent at the shared inputs u: the class is the last panel's base-5 digits
        for j in range(4):
            panel = instance_of(t.cells[c], s.x_eval[j], 5)
            assert s.y_eval[c, j] == panel[-1, 0] + 5 * panel[-1, 1]
    for i in range(0, len(s.x_train), 7):
        panel = instance_of(t.cells[s.train_cells[i]], s.x_train[i], 5)
        assert s.y_train[i] == panel[-1, 0] + 5 * panel[-1, 1]
    assert np.all(t.train_mask[s.train_cells])
    u = np.array([0.25, 0.5, 0.75])
    np.testing.assert_array_equal(instance_of(np.array([1, 5]), u, 5), instance_of(np.array([1, 5]), u, 5))  # a function of u
    g = instance_of(np.array([1, 5]), u, 5).reshape(3, 3, 2)
    assert np.all(np.diff(g[..., 0], axis=1) % 5 == 1) and np.all(g[:, 2, 1] == (g[:, 0, 1] + g[:, 1, 1]) % 5)


def test_raven_onehot_is_the_given_panels_flattened():
    t = make_task("sraven", **TINY)
    enc = encode("raven_onehot", t)
    s, spec = t.samples, t.episodes
    assert enc.train.x.shape == (81, 8 * 2 * 5) and enc.evaluate.x.shape == (36 * 4, 80)
    panels = instance_of(t.cells[s.train_cells[5]], s.x_train[5], 5)
    want = np.zeros((8, 2, 5))
    for i in range(8):
        for k in range(2):
            want[i, k, panels[i, k]] = 1
    np.testing.assert_array_equal(enc.train.x[5], want.reshape(-1))
    assert enc.evaluate.cell_ids.tolist() == np.repeat(np.arange(36), 4).tolist()
    np.testing.assert_array_equal(enc.evaluate.y, s.y_eval.reshape(-1))


def test_raven_panels_puts_the_query_first_and_streams_training_instances():
    t = make_task("sraven", **TINY)
    enc = encode("raven_panels", t)
    assert get_encoding("raven_panels").produces == "sequence"
    x = enc.train.x
    assert x.shape == (81, 9, 10 + 9 + 1) and enc.train.mask.all()
    assert x[0, 0, :10].sum() == 0 and x[0, 0, 10 + 8] == 1 and x[0, 0, -1] == 1  # the query: no values, position 8
    assert [int(np.argmax(x[0, i, 10:19])) for i in range(1, 9)] == list(range(8)) and not x[0, 1:, -1].any()
    stream = enc.train.stream
    a, b = stream.batch(stream.rng(0), 6), stream.batch(stream.rng(0), 6)
    np.testing.assert_array_equal(a[0], b[0])
    assert np.all(t.train_mask[a[3]]) and a[2].dtype.kind == "i" and a[2].max() < 25
    with pytest.raises(ValueError, match="needs the sraven task"):
        encode("raven_panels", make_task("modular_episodes", modules=6, samples_per_cell=2, eval_samples=2))


def test_the_transformer_trains_on_streamed_instances_with_either_loss_and_the_bottleneck_refuses():
    import torch

    from compbench.adapters import get_adapter

    torch.set_num_threads(1)
    t = make_task("sraven", **TINY)
    enc = encode("raven_panels", t)
    cls = get_adapter("transformer")
    for loss in ("cross_entropy", "mse"):
        f = cls(cls.Params(d=8, heads=2, layers=1, steps=3, batch_size=4, loss=loss), "cpu").fit_seeds(enc.train, enc.evaluate, [0])[0]
        assert f.error is None and f.predictions.shape == (len(enc.evaluate), 25) and f.info["episodes_seen"] == 12
    b = get_adapter("bottleneck")
    with pytest.raises(ValueError, match="use the transformer"):
        b(b.Params(d=8, heads=2, layers=1, steps=1), "cpu").fit_seeds(enc.train, enc.evaluate, [0])


def test_a_pool_fixes_the_data_at_a_given_number_of_steps():
    """`pool`: the seed's stream is drawn once (pool instances), and every step's minibatch comes from that pool."""
    import torch

    from compbench.adapters import get_adapter

    torch.set_num_threads(1)
    t = make_task("sraven", **TINY)
    enc = encode("raven_panels", t)
    stream = enc.train.stream
    drawn: list[int] = []
    real = type(stream).batch

    def counting(self, rng, n):
        drawn.append(n)
        return real(self, rng, n)

    cls = get_adapter("transformer")
    params = dict(d=8, heads=2, layers=1, steps=5, batch_size=4, loss="cross_entropy")
    type(stream).batch = counting
    try:
        fresh = cls(cls.Params(**params), "cpu").fit_seeds(enc.train, enc.evaluate, [0])[0]
        assert drawn == [4] * 5 and fresh.info["distinct_episodes"] == 20  # a fresh batch every step
        drawn.clear()
        pooled = cls(cls.Params(**params, pool=6), "cpu").fit_seeds(enc.train, enc.evaluate, [0])[0]
        assert drawn == [6] and pooled.info["distinct_episodes"] == 6 and pooled.info["episodes_seen"] == 20
    finally:
        type(stream).batch = real
    assert pooled.error is None and pooled.predictions.shape == (len(enc.evaluate), 25)
