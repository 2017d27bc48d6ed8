"""Task families: cell counts, targets and splits of the reference defaults; split validation."""

from __future__ import annotations

import numpy as np
import pytest
from pydantic import ValidationError

from compbench.tasks import FAMILIES, SplitError, UnknownFamilyError, make_task


def cell_y(task, cell) -> float:
    idx = np.flatnonzero((task.cells == np.asarray(cell)).all(axis=1))
    assert len(idx) == 1, cell
    return float(task.y[idx[0]])


def held_out(task) -> set[tuple[int, ...]]:
    return {tuple(int(v) for v in c) for c in task.cells[~task.train_mask]}


def test_all_six_families_registered():
    assert set(FAMILIES) == {
        "additive", "context_dependence", "transitive_equivalence", "associative_inference", "symmetry", "transitive_ordering",
    }


@pytest.mark.parametrize(
    ("anchors", "n_train", "n_test"),
    [([[4], [4]], 17, 64), ([[0], [0]], 17, 64), ([[0, 8], [0, 8]], 32, 49), ([[2, 6], [2, 6]], 32, 49)],
)
def test_additive_comps_splits(anchors, n_train, n_test):
    t = make_task("additive", anchors=anchors)
    assert t.cells.shape == (81, 2) and t.n_values == (9, 9) and t.kind == "regression"
    assert (t.n_train, t.n_test) == (n_train, n_test)
    assert cell_y(t, (0, 8)) == 0.0 and cell_y(t, (8, 8)) == 8.0 and cell_y(t, (1, 2)) == -5.0
    for a in anchors[0]:
        assert t.train_mask[(t.cells[:, 0] == a)].all()


def test_additive_dispersed_split_is_two_per_row_and_column_and_seeded():
    t = make_task("additive", split="dispersed", split_seed=3)
    assert (t.n_train, t.n_test) == (18, 63)
    m = np.zeros((9, 9), dtype=int)
    m[t.cells[t.train_mask, 0], t.cells[t.train_mask, 1]] = 1
    assert (m.sum(axis=0) == 2).all() and (m.sum(axis=1) == 2).all()
    again = make_task("additive", split="dispersed", split_seed=3)
    other = make_task("additive", split="dispersed", split_seed=4)
    assert (again.train_mask == t.train_mask).all() and (other.train_mask != t.train_mask).any()


@pytest.mark.parametrize(("preset", "n_test"), [("CD-1", 2), ("CD-2", 8), ("CD-3", 18)])
def test_context_dependence_presets(preset, n_test):
    t = make_task("context_dependence", preset=preset)
    assert t.cells.shape == (72, 3) and t.kind == "classification"
    assert (t.n_train, t.n_test) == (72 - n_test, n_test)
    test = t.cells[~t.train_mask]
    # In every held-out cell the features disagree: the answer is -1 in context 0, +1 in context 1.
    np.testing.assert_array_equal(t.y[~t.train_mask], np.where(test[:, 0] == 0, -1.0, 1.0))
    assert cell_y(t, (0, 4, 0)) == 1.0 and cell_y(t, (1, 4, 0)) == -1.0


def test_transitive_equivalence_reference_default():
    t = make_task("transitive_equivalence")
    assert (len(t.cells), t.n_train, t.n_test) == (16, 12, 4)
    assert held_out(t) == {(1, 1), (1, 3), (3, 1), (3, 3)}
    assert [cell_y(t, c) for c in [(1, 1), (1, 3), (3, 1), (3, 3)]] == [1.0, -1.0, -1.0, 1.0]
    assert (make_task("transitive_equivalence", classes=[5, 5], train_items=[1, 1]).n_train) == 36
    big = make_task("transitive_equivalence", classes=[5, 5], train_items=[4, 4])
    assert (len(big.cells), big.n_train, big.n_test) == (100, 96, 4)


def test_associative_inference_holds_out_a_c_pairs_with_both_labels():
    t = make_task("associative_inference", chains=2)
    assert (len(t.cells), t.n_train, t.n_test) == (36, 28, 8)
    assert held_out(t) == {(0, 2), (2, 0), (3, 5), (5, 3), (0, 5), (5, 0), (3, 2), (2, 3)}
    assert cell_y(t, (0, 2)) == 1.0 and cell_y(t, (0, 5)) == -1.0
    assert cell_y(t, (0, 1)) == 1.0 and t.train_mask[(t.cells == [0, 1]).all(1)].all()  # A–B link trained
    assert (t.y[~t.train_mask] == 1).sum() == 4


def test_symmetry_variants():
    inv = make_task("symmetry", variant="invariance")
    assert held_out(inv) == {(0, 1), (1, 1)} and cell_y(inv, (1, 1)) == 1.0 and cell_y(inv, (0, 1)) == -1.0
    part = make_task("symmetry", variant="partial_exposure")
    assert held_out(part) == {(1, 1)}
    swap = make_task("symmetry", variant="swap", n_items=5)
    assert (len(swap.cells), swap.n_train, swap.n_test) == (25, 15, 10)
    for a, b in held_out(swap):
        assert a > b and cell_y(swap, (a, b)) == cell_y(swap, (b, a))
    assert set(swap.y[~swap.train_mask]) == {-1.0, 1.0}


def test_transitive_ordering():
    t = make_task("transitive_ordering", n_items=7)
    assert (len(t.cells), t.n_train, t.n_test) == (42, 12, 30)
    assert cell_y(t, (2, 5)) == 1.0 and cell_y(t, (5, 2)) == -1.0
    assert not (t.cells[:, 0] == t.cells[:, 1]).any()


def test_unknown_family_suggests_closest():
    with pytest.raises(UnknownFamilyError, match="unknown task family 'additve'; did you mean 'additive'"):
        make_task("additve")


def test_unknown_param_is_named():
    with pytest.raises(ValidationError, match="anchor"):
        make_task("additive", anchor=[[4], [4]])


def test_unseen_value_is_an_error_naming_it():
    with pytest.raises(SplitError, match=r"component 'value 2' \(index 1\) value 0 occurs in held-out cell \(0, 0\)"):
        make_task("additive", anchors=[[], [4]])


def test_empty_test_set_and_out_of_range_anchor():
    with pytest.raises(SplitError, match="no held-out cells"):
        make_task("context_dependence", preset=None, held_out=[{1: [9]}])
    with pytest.raises(ValidationError, match="anchor index 9 of component 0 is out of range"):
        make_task("additive", anchors=[[9], [4]])
