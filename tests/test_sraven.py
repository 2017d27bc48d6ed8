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
