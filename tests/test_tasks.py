"""Task families: cell counts, targets and splits of the reference defaults; split validation."""

from __future__ import annotations

import json

import numpy as np
import pytest
from pydantic import ValidationError

from compbench.tasks import FAMILIES, SplitError, TaskData, UnknownFamilyError, family_params_model, make_task
from compbench.tasks.base import validate_split


def cell_y(task, cell) -> float:
    idx = np.flatnonzero((task.cells == np.asarray(cell)).all(axis=1))
    assert len(idx) == 1, cell
    return float(task.y[idx[0]])


def held_out(task) -> set[tuple[int, ...]]:
    return {tuple(int(v) for v in c) for c in task.cells[~task.train_mask]}


def test_all_builtin_families_registered():
    assert set(FAMILIES) == {
        "additive", "context_dependence", "transitive_equivalence", "associative_inference", "symmetry", "transitive_ordering",
        "table", "redundant_input", "modular_teacher", "modular_episodes", "slot_render", "sprites", "sraven",
        "quadrants",
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


# `table` has no defaults (a table is the user's own task): tests/test_table.py covers it.
DEFAULTABLE = [f for f in FAMILIES if f != "table"]


def test_contract_dtypes_shapes_and_json_params():
    for family in DEFAULTABLE:
        t = make_task(family)
        n = len(t.cells)
        assert t.family == family and t.cells.dtype == np.int64 and t.cells.ndim == 2
        if t.kind == "multiclass":  # sraven: one integer class per cell
            assert t.y.dtype == np.int64 and t.y.shape == (n,) and 0 <= t.y.min() and t.y.max() < t.n_classes
        else:
            assert t.y.dtype == np.float64 and t.y.shape in ((n,), (n, t.n_outputs))
        assert t.train_mask.dtype == bool and t.train_mask.shape == (n,)
        assert (t.test_mask == ~t.train_mask).all() and t.n_train + t.n_test == n
        assert t.n_components == t.cells.shape[1] == len(t.n_values) == len(t.component_names)
        assert (t.cells.max(axis=0) < np.asarray(t.n_values)).all() and (t.cells >= 0).all()
        assert t.kind in ("classification", "regression") or (family, t.kind) == ("sraven", "multiclass")
        # params are validated incl. defaults and survive a JSON round trip back into make_task
        again = make_task(family, **json.loads(json.dumps(t.params)))
        assert (again.cells == t.cells).all() and (again.y == t.y).all() and (again.train_mask == t.train_mask).all()
        assert family_params_model(family).model_config["extra"] == "forbid"


def test_cells_are_in_product_order():
    t = make_task("context_dependence")
    assert t.cells[:3].tolist() == [[0, 0, 0], [0, 0, 1], [0, 0, 2]] and t.cells[-1].tolist() == [1, 5, 5]
    assert [tuple(c) for c in t.cells] == sorted(tuple(c) for c in t.cells)


def test_additive_dispersed_default_and_targets():
    t = make_task("additive", split="dispersed")
    assert t.params["split_seed"] == 1 and (t.n_train, t.n_test) == (18, 63)
    np.testing.assert_array_equal(t.y, (t.cells[:, 0] - 4) + (t.cells[:, 1] - 4))
    three = make_task("additive", split="dispersed", per_row=3)
    assert (three.n_train, three.n_test) == (27, 54)


def test_additive_custom_values():
    t = make_task("additive", values=[[0.5, 1.5], [10.0, 20.0, 30.0]], anchors=[[0], [0]])
    assert t.n_values == (2, 3) and (t.n_train, t.n_test) == (4, 2)
    assert cell_y(t, (1, 2)) == 31.5 and held_out(t) == {(1, 1), (1, 2)}


def test_context_dependence_targets_and_custom_blocks():
    t = make_task("context_dependence")
    assert held_out(t) == {(0, 0, 3), (1, 0, 3)}
    assert cell_y(t, (0, 0, 3)) == -1.0 and cell_y(t, (1, 0, 3)) == 1.0
    assert cell_y(t, (0, 5, 0)) == 1.0 and cell_y(t, (1, 5, 0)) == -1.0
    ctx0_only = make_task("context_dependence", held_out=[{0: [0], 1: [0], 2: [3]}])
    assert held_out(ctx0_only) == {(0, 0, 3)}
    two_blocks = make_task("context_dependence", held_out=[{1: [0], 2: [3]}, {1: [5], 2: [2]}])
    assert held_out(two_blocks) == {(0, 0, 3), (1, 0, 3), (0, 5, 2), (1, 5, 2)}
    graded = make_task("context_dependence", responses=[[0, 1, 2, 3, 4, 5], [0, 1, 2, 3, 4, 5]])
    assert graded.kind == "regression" and cell_y(graded, (1, 2, 4)) == 4.0


def test_context_dependence_unseen_feature_value_is_named():
    msg = r"component 'feature 1' \(index 1\) value 0 occurs in held-out cell \(0, 0, 0\) but in no training cell"
    with pytest.raises(SplitError, match=msg):
        make_task("context_dependence", held_out=[{1: [0]}])


def test_transitive_equivalence_five_and_five():
    t = make_task("transitive_equivalence", classes=[5, 5], train_items=[1, 1])
    assert (len(t.cells), t.n_train, t.n_test) == (100, 36, 64)
    assert cell_y(t, (1, 4)) == 1.0 and cell_y(t, (1, 6)) == -1.0 and not t.train_mask[(t.cells == [1, 6]).all(1)].any()
    assert held_out(make_task("transitive_equivalence", classes=[5, 5], train_items=[4, 4])) == {
        (4, 4), (4, 9), (9, 4), (9, 9),
    }
    with pytest.raises(ValidationError, match="train_items"):
        make_task("transitive_equivalence", classes=[2, 2], train_items=[1])


def test_associative_inference_three_chains():
    t = make_task("associative_inference", chains=3)
    assert (len(t.cells), t.n_train, t.n_test) == (81, 63, 18)
    test = t.cells[~t.train_mask]
    assert set((test % 3).flatten().tolist()) == {0, 2}  # only A (pos 0) and C (pos 2) items
    assert ((test[:, 0] % 3) != (test[:, 1] % 3)).all()
    assert (t.y[~t.train_mask] == 1).sum() == 6
    for trained in [(0, 1), (1, 2), (2, 1), (4, 4), (0, 3), (1, 4)]:
        assert t.train_mask[(t.cells == trained).all(1)].all()


def test_symmetry_invariance_allows_the_unseen_nuisance_value_partial_exposure_counts():
    inv = make_task("symmetry")
    assert inv.params["variant"] == "invariance" and (inv.n_train, inv.n_test) == (2, 2)
    assert 1 not in inv.cells[inv.train_mask, 1]  # the held-out nuisance value is never trained
    part = make_task("symmetry", variant="partial_exposure")
    assert (part.n_train, part.n_test) == (3, 1) and cell_y(part, (1, 1)) == 1.0 and cell_y(part, (0, 0)) == -1.0


def test_symmetry_swap_relation_is_symmetric_seeded_and_holds_out_reverses():
    t = make_task("symmetry", variant="swap")
    n = 6
    assert (len(t.cells), t.n_train, t.n_test) == (n * n, n * (n + 1) // 2, n * (n - 1) // 2)
    rel = t.y.reshape(n, n)
    assert (rel == rel.T).all()
    assert (t.train_mask == (t.cells[:, 0] <= t.cells[:, 1])).all()
    assert set(t.y[~t.train_mask]) == {-1.0, 1.0}
    assert (make_task("symmetry", variant="swap").y == t.y).all()
    assert any((make_task("symmetry", variant="swap", relation_seed=s).y != t.y).any() for s in (1, 2, 3))
    with pytest.raises(ValidationError, match="n_items"):
        make_task("symmetry", variant="swap", n_items=2)


def test_transitive_ordering_distances():
    t = make_task("transitive_ordering", train_distances=[1, 2])
    assert (t.n_train, t.n_test) == (22, 20)
    assert (t.y == np.where(t.cells[:, 0] < t.cells[:, 1], 1.0, -1.0)).all()
    with pytest.raises(ValidationError, match="train_distances"):
        make_task("transitive_ordering", train_distances=[7])


def test_unknown_family_lists_known_names():
    with pytest.raises(UnknownFamilyError) as err:
        make_task("context_dependance")
    msg = str(err.value)
    assert "did you mean 'context_dependence'?" in msg
    assert "known: additive, associative_inference, context_dependence, modular_episodes, modular_teacher, quadrants, redundant_input, slot_render, sprites, sraven, symmetry, table, transitive_equivalence" in msg
    assert isinstance(err.value, ValueError)
    with pytest.raises(UnknownFamilyError, match=r"unknown task family 'zzz'; known: additive"):
        family_params_model("zzz")


def test_unknown_param_is_named_for_every_family():
    for family in FAMILIES:
        with pytest.raises(ValidationError, match="bogus_param"):
            make_task(family, bogus_param=1)


def test_additive_anchor_leaving_a_component_unseen():
    msg = r"component 'value 1' \(index 0\) value 0 occurs in held-out cell \(0, 0\) but in no training cell"
    with pytest.raises(SplitError, match=msg):
        make_task("additive", anchors=[[4], []])
    with pytest.raises(ValidationError, match="anchor index -1 of component 1 is out of range"):
        make_task("additive", anchors=[[4], [-1]])
    with pytest.raises(ValidationError, match="one list per component"):
        make_task("additive", anchors=[[4]])


def test_validate_split_rejects_bad_targets_and_empty_train():
    cells = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=np.int64)
    mask = np.array([True, True, True, False])

    def task(y, train=mask, kind="classification", allow=False):
        return TaskData("t", cells, np.asarray(y, float), train, (2, 2), kind, {}, ("a", "b"), allow_unseen_values=allow)

    validate_split(task([1, -1, 1, -1]))
    with pytest.raises(SplitError, match="±1"):
        validate_split(task([1, -1, 0.5, -1]))
    with pytest.raises(SplitError, match="finite"):
        validate_split(task([1, np.nan, 1, 1], kind="regression"))
    with pytest.raises(SplitError, match="no training cells"):
        validate_split(task([1, -1, 1, -1], train=np.zeros(4, bool)))
    unseen = np.array([True, True, False, False])
    with pytest.raises(SplitError, match=r"component 'a' \(index 0\) value 1 occurs in held-out cell \(1, 0\)"):
        validate_split(task([1, -1, 1, -1], train=unseen))
    validate_split(task([1, -1, 1, -1], train=unseen, allow=True))
