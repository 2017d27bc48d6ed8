"""The `modular_teacher` family: the four splits on hand-listed module sets, the teacher by hand, samples, seeding."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest

from compbench.encodings.registry import encode
from compbench.suite import parse_suite
from compbench.tasks import TaskData, TaskParamError, make_task
from compbench.tasks.modular_teacher import ModularTeacherParams, teacher_of
from compbench.testing import check_task_family

SMALL = {"samples_per_cell": 8, "eval_samples": 16}


def sets(task: TaskData, mask: np.ndarray) -> set[frozenset[int]]:
    return {frozenset(np.flatnonzero(c).tolist()) for c in task.cells[mask]}


def S(*items: str) -> set[frozenset[int]]:
    """S("0", "02") -> {{0}, {0, 2}}."""
    return {frozenset(int(ch) for ch in s) for s in items}


def test_cells_are_every_set_of_one_or_two_modules_in_the_authors_order():
    t = make_task("modular_teacher", **SMALL)
    assert t.cells.shape == (36, 8) and t.n_values == (2,) * 8 and t.component_names == tuple(f"m{i}" for i in range(8))
    assert t.kind == "regression" and t.relevant is None and t.label(3, 1) == "on"
    assert t.cells[:8].tolist() == np.eye(8, dtype=int).tolist()
    assert t.cells[8].tolist() == [1, 1, 0, 0, 0, 0, 0, 0] and t.cells[-1].tolist() == [0, 0, 0, 0, 0, 0, 1, 1]
    three = make_task("modular_teacher", modules=4, max_active=3, **SMALL)
    assert len(three.cells) == 4 + 6 + 4 and three.cells.sum(axis=1).tolist() == [1] * 4 + [2] * 6 + [3] * 4


def test_random_split_for_four_modules():
    t = make_task("modular_teacher", modules=4, **SMALL)
    # int(10 · 0.25) = 2 held out; seed 0 draws these (numpy's PCG64 permutation).
    assert sets(t, t.test_mask) == S("1", "02")
    assert sets(t, t.train_mask) == S("0", "2", "3", "01", "03", "12", "13", "23")
    assert t.heldout is None and not t.allow_unseen_values
    for seed in range(20):  # every draw trains every module and keeps the modules connected
        s = make_task("modular_teacher", modules=4, seed=seed, **SMALL)
        assert s.n_test == 2 and s.cells[s.train_mask].sum(axis=0).min() > 0
    seed1 = make_task("modular_teacher", modules=4, seed=1, **SMALL)
    assert sets(seed1, seed1.test_mask) == S("12", "13")
    half = make_task("modular_teacher", modules=4, heldout_fraction=0.5, **SMALL)
    assert half.n_test == 5


def test_non_compositional_split_for_four_modules_holds_out_the_last_module():
    t = make_task("modular_teacher", modules=4, split="non_compositional", **SMALL)
    assert sets(t, t.train_mask) == S("0", "1", "2", "01", "02", "12")
    assert sets(t, t.test_mask) == S("3", "03", "13", "23")
    assert t.allow_unseen_values and t.cells[t.train_mask, 3].max() == 0


def test_connected_and_disconnected_need_six_modules_or_more():
    for split in ("connected", "disconnected"):
        with pytest.raises(TaskParamError, match=r"even number of modules ≥ 6.*modules = 4") as err:
            make_task("modular_teacher", modules=4, split=split, **SMALL)
        assert err.value.loc == ("split",)
        with pytest.raises(TaskParamError, match="max_active = 3"):
            make_task("modular_teacher", modules=6, max_active=3, split=split, **SMALL)


def test_connected_and_disconnected_for_six_modules():
    one = {str(i) for i in range(6)}
    con = make_task("modular_teacher", modules=6, split="connected", **SMALL)
    assert sets(con, con.train_mask) == S(*one, "01", "12", "23", "34", "45", "05", "02", "13", "24", "35", "04", "15")
    assert sets(con, con.test_mask) == S("03", "14", "25")
    dis = make_task("modular_teacher", modules=6, split="disconnected", **SMALL)
    assert sets(dis, dis.train_mask) == S(*one, "01", "02", "12", "34", "35", "45")
    # The authors score both supports on the pairs neither trains.
    assert sets(dis, dis.test_mask) == S("03", "14", "25")
    untrained = make_task("modular_teacher", modules=6, split="disconnected", heldout="untrained", **SMALL)
    assert sets(untrained, untrained.test_mask) == S("03", "04", "05", "13", "14", "15", "23", "24", "25")
    assert untrained.heldout is None and dis.heldout is not None


def test_connected_and_disconnected_for_eight_modules():
    con = make_task("modular_teacher", split="connected", **SMALL)
    dis = make_task("modular_teacher", split="disconnected", **SMALL)
    assert (con.n_train, dis.n_train) == (24, 20)
    across = {frozenset((a, b)) for a in range(4) for b in range(4, 8)}
    assert sets(dis, dis.train_mask) == S(*map(str, range(8))) | {frozenset((a, b)) for h in (0, 4) for a in range(h, h + 4) for b in range(a + 1, h + 4)}
    shared = across - S("34", "07", "24", "35", "06", "17")
    assert sets(con, con.test_mask) == sets(dis, dis.test_mask) == shared and len(shared) == 10
    # Neither trained nor scored: (0,3) and (4,7) for connected, the connected support's 6 cross pairs for disconnected.
    assert sets(con, ~con.train_mask & ~con.test_mask) == S("03", "47")
    assert sets(dis, ~dis.train_mask & ~dis.test_mask) == S("34", "07", "24", "35", "06", "17")
    untrained = make_task("modular_teacher", split="connected", heldout="untrained", **SMALL)
    assert sets(untrained, untrained.test_mask) == shared | S("03", "47")


def test_teacher_output_by_hand():
    t = make_task("modular_teacher", modules=4, inputs=3, hidden=5, **SMALL)
    w = teacher_of(ModularTeacherParams(modules=4, inputs=3, hidden=5, **SMALL))
    assert w.theta.shape == (4, 3, 5) and w.bias.shape == (4, 5) and w.readout.shape == (5, 1)
    cell = [i for i, c in enumerate(t.cells.tolist()) if c == [1, 0, 1, 0]][0]
    x = t.samples.x_eval[5]
    y = 0.0
    for j in range(5):
        pre = sum(x[i] * (w.theta[0, i, j] + w.theta[2, i, j]) / math.sqrt(2) for i in range(3))
        pre += (w.bias[0, j] + w.bias[2, j]) / math.sqrt(2)
        y += w.readout[j, 0] * max(pre, 0.0)
    assert t.samples.y_eval[cell, 5] == pytest.approx(y, rel=1e-12)
    one = [i for i, c in enumerate(t.cells.tolist()) if c == [0, 0, 0, 1]][0]
    h = np.maximum(x @ w.theta[3] / math.sqrt(2) + w.bias[3] / math.sqrt(2), 0)
    assert t.samples.y_eval[one, 5] == pytest.approx(float(h @ w.readout[:, 0]), rel=1e-12)
    # Training targets are the same function at the training inputs of their own cell.
    s = t.samples
    k = 3 * 8 + 2  # the third sample of the fourth training cell
    z = t.cells[s.train_cells[k]]
    assert s.y_train[k] == pytest.approx(float(w(s.x_train[k:k + 1], z)[0, 0]), rel=1e-12)
    np.testing.assert_allclose(t.y, s.y_eval.mean(axis=1))


def test_teacher_weights_follow_the_authors_distributions():
    w = teacher_of(ModularTeacherParams())
    std = math.sqrt(math.sqrt(3.0) / 8) / 0.87962566103423978
    assert np.abs(w.theta).max() <= 2 * std and w.theta.std() == pytest.approx(math.sqrt(math.sqrt(3.0) / 8), rel=0.1)
    assert w.bias.min() >= 0 and w.bias.max() < 0.5 and w.bias.mean() == pytest.approx(0.25, abs=0.03)
    assert np.abs(w.readout).max() <= 2 * math.sqrt(math.sqrt(3.0) / 16) / 0.87962566103423978


def test_samples_train_and_eval_inputs_are_disjoint_and_shaped():
    t = make_task("modular_teacher", modules=4, **SMALL)
    s = t.samples
    assert s.x_train.shape == (8 * 8, 8) and s.x_eval.shape == (16, 8) and s.y_eval.shape == (10, 16) and s.y_train.shape == (64,)
    assert s.train_cells.tolist() == np.repeat(np.flatnonzero(t.train_mask), 8).tolist()
    assert s.x_train.min() >= -1 and s.x_train.max() < 1 and s.x_eval.min() >= -1 and s.x_eval.max() < 1
    assert not {r.tobytes() for r in s.x_train} & {r.tobytes() for r in s.x_eval}
    # The shared evaluation inputs do not depend on the split or on the number of training samples.
    other = make_task("modular_teacher", modules=4, split="non_compositional", samples_per_cell=3, eval_samples=16)
    np.testing.assert_array_equal(other.samples.x_eval, s.x_eval)
    np.testing.assert_array_equal(other.samples.y_eval, s.y_eval)


def test_seeding():
    a = make_task("modular_teacher", **SMALL)
    b = make_task("modular_teacher", **SMALL)
    for f in ("x_train", "y_train", "x_eval", "y_eval", "train_cells"):
        np.testing.assert_array_equal(getattr(a.samples, f), getattr(b.samples, f))
    np.testing.assert_array_equal(a.train_mask, b.train_mask)
    c = make_task("modular_teacher", seed=1, **SMALL)
    assert not np.allclose(c.samples.x_eval, a.samples.x_eval)
    assert not np.allclose(teacher_of(ModularTeacherParams(seed=1)).theta, teacher_of(ModularTeacherParams()).theta)
    assert not np.array_equal(c.train_mask, a.train_mask)


def test_several_outputs_and_relevant_modules():
    t = make_task("modular_teacher", modules=4, outputs=3, **SMALL)
    assert t.y.shape == (10, 3) and t.samples.y_eval.shape == (10, 16, 3) and t.samples.y_train.shape == (64, 3)
    assert t.n_outputs == 3 and t.vector_output
    scalar = make_task("modular_teacher", modules=4, **SMALL)
    assert not scalar.vector_output
    r = make_task("modular_teacher", modules=4, relevant=[0, 1, 2], **SMALL)
    assert r.relevant == (0, 1, 2) and r.irrelevant == (3,)
    # Module 3 draws zero weights: its solo cell is 0 and it adds nothing to a pair; the rest is unchanged.
    rows = {tuple(c): i for i, c in enumerate(r.cells.tolist())}
    assert np.all(r.samples.y_eval[rows[(0, 0, 0, 1)]] == 0)
    all_rel = make_task("modular_teacher", modules=4, relevant=[0, 1, 2, 3], **SMALL)
    np.testing.assert_array_equal(all_rel.samples.y_eval, scalar.samples.y_eval)
    np.testing.assert_array_equal(r.samples.y_eval[rows[(1, 1, 0, 0)]], scalar.samples.y_eval[rows[(1, 1, 0, 0)]])
    w = teacher_of(ModularTeacherParams(modules=4, **SMALL))
    x = r.samples.x_eval
    expect = np.maximum(x @ w.theta[1] / math.sqrt(2) + w.bias[1] / math.sqrt(2), 0) @ w.readout[:, 0]
    np.testing.assert_allclose(r.samples.y_eval[rows[(0, 1, 0, 1)]], expect, rtol=1e-12)
    with pytest.raises(TaskParamError, match=r"distinct module indices 0..3"):
        make_task("modular_teacher", modules=4, relevant=[4], **SMALL)


def test_bad_parameters():
    with pytest.raises(TaskParamError, match="more than the 3 modules"):
        make_task("modular_teacher", modules=3, max_active=4)
    with pytest.raises(TaskParamError, match="holds out none of the 4 combinations") as err:
        make_task("modular_teacher", modules=4, max_active=1, heldout_fraction=0.2)
    assert err.value.loc == ("heldout_fraction",)
    # One active module at a time cannot connect modules: no random split qualifies.
    with pytest.raises(TaskParamError, match="no random split"):
        make_task("modular_teacher", modules=4, max_active=1, heldout_fraction=0.5, **SMALL)


@pytest.mark.parametrize("split", ["random", "connected", "disconnected", "non_compositional"])
def test_conformance_and_validation(split):
    assert check_task_family("modular_teacher", {"split": split, **SMALL}).ok
    make_task("modular_teacher", split=split)  # defaults: make_task validates the split and samples


def test_khot_encoding():
    t = make_task("modular_teacher", modules=4, **SMALL)
    enc = encode("khot", t)
    assert enc.train.x.shape == (64, 4 + 8) and enc.evaluate.x.shape == (10 * 16, 4 + 8)
    np.testing.assert_array_equal(enc.train.x[:, :4], t.cells[t.samples.train_cells])
    np.testing.assert_array_equal(enc.train.x[:, 4:], t.samples.x_train)
    np.testing.assert_array_equal(enc.evaluate.x[16:32, :4], np.repeat(t.cells[1:2], 16, axis=0))
    np.testing.assert_array_equal(enc.evaluate.x[16:32, 4:], t.samples.x_eval)
    np.testing.assert_array_equal(enc.evaluate.y, t.samples.y_eval.reshape(-1))
    assert enc.train.y.shape == (64,)


def test_docs_example_loads_and_builds():
    docs = (Path(__file__).resolve().parent.parent / "docs" / "how-to" / "tasks.md").read_text(encoding="utf-8")
    section = docs.split("## The modular_teacher family\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", section, re.S)
    text = "name: docs\nseeds: 1\ntasks:\n" + "".join("  " + line + "\n" for line in block.splitlines()) + (
        "models:\n  - {id: k, adapter: kernel, params: {kernel: relu_ntk}}\n"
    )
    loaded = parse_suite(text, "docs.yaml")
    rnd, con = (make_task(e.family, **e.params) for e in loaded.suite.tasks)
    assert (rnd.n_train, rnd.n_test, con.n_train, con.n_test) == (27, 9, 24, 10)
    assert [e.encoding_name for e in loaded.suite.tasks] == ["khot", "khot"]
