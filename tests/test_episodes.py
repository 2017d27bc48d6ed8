"""Episode tasks (`modular_episodes`, the `episodes` encoding) and the sequence adapters (`transformer`, `bottleneck`)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from compbench.adapters import get_adapter
from compbench.encodings import encode, get_encoding
from compbench.encodings.sequences import EpisodeStream, episode_tokens
from compbench.tasks import make_task
from compbench.tasks.episodes import EpisodeSpec
from compbench.tasks.modular_teacher import Teacher, teacher_of, ModularTeacherParams
from compbench.testing import check_task_family

SMALL = {"modules": 6, "heldout_fraction": 0.2, "samples_per_cell": 8, "eval_samples": 6, "context": 4}


def hand_spec() -> EpisodeSpec:
    """Two modules, one active at a time, I = H = O = 1: cell 0 is 2·relu(x + 0.5), cell 1 is 2·relu(−2x)."""
    teacher = Teacher(np.array([[[1.0]], [[-2.0]]]), np.array([[0.5], [0.0]]), np.array([[2.0]]), max_active=1)
    return EpisodeSpec(teacher, np.array([[1, 0], [0, 1]]), np.array([0]), context=2, inputs=1, seed=0,
                       eval_context_x=np.zeros((2, 1, 2, 1)))


def test_targets_by_hand():
    spec = hand_spec()
    x = np.array([[[0.25], [-1.0]], [[-0.5], [0.5]]])  # episode 0 from cell 0, episode 1 from cell 1
    y = spec.targets(x, np.array([0, 1]))
    assert y.shape == (2, 2, 1)
    assert y[:, :, 0].tolist() == [[1.5, 0.0], [2.0, 0.0]]  # 2·relu(0.75), 2·relu(−0.5); 2·relu(1), 2·relu(−1)


def test_streamed_episodes_come_from_training_cells_and_their_functions():
    spec = hand_spec()  # only cell 0 trains
    ids, cx, cy, qx, qy = spec.draw(np.random.default_rng(0), 5)
    assert ids.tolist() == [0] * 5 and cx.shape == (5, 2, 1) and cy.shape == (5, 2, 1) and qx.shape == (5, 1)
    np.testing.assert_allclose(cy[..., 0], 2 * np.maximum(cx[..., 0] + 0.5, 0))
    np.testing.assert_allclose(qy[:, 0], 2 * np.maximum(qx[:, 0] + 0.5, 0))


def test_token_layout_query_first_then_context_then_padding():
    x, mask = episode_tokens(np.array([[0.3]]), np.array([[[0.1], [0.2]]]), np.array([[[1.0], [2.0]]]), pad=2)
    assert x.shape == (1, 5, 3) and mask.tolist() == [[True, True, True, False, False]]
    np.testing.assert_allclose(x[0], [[0.3, 0, 1], [0.1, 1.0, 0], [0.2, 2.0, 0], [0, 0, 0], [0, 0, 0]], rtol=1e-6)


def test_family_is_the_modular_teacher_with_episodes():
    t = make_task("modular_episodes", **SMALL)
    base = make_task("modular_teacher", **{k: v for k, v in SMALL.items() if k != "context"})
    assert np.array_equal(t.cells, base.cells) and np.array_equal(t.train_mask, base.train_mask)
    np.testing.assert_array_equal(t.samples.y_eval, base.samples.y_eval)  # bias: positive is the authors' teacher
    assert t.family == "modular_episodes" and t.episodes.context == 4 and t.n_test == 4
    assert not check_task_family("modular_episodes", SMALL).breaks
    # the khot models see exactly the modular teacher's inputs
    a, b = encode("khot", t), encode("khot", base)
    np.testing.assert_array_equal(a.train.x, b.train.x) and np.testing.assert_array_equal(a.evaluate.y, b.evaluate.y)


def test_centered_biases_shift_the_teacher_and_its_targets():
    t = make_task("modular_episodes", bias="centered", **SMALL)
    p = ModularTeacherParams(**{k: v for k, v in SMALL.items() if k != "context"})
    base = teacher_of(p)
    np.testing.assert_allclose(t.episodes.teacher.bias, base.bias - 0.25)
    assert t.episodes.teacher.bias.min() < 0
    s = t.samples
    for c in np.unique(s.train_cells)[:3]:
        rows = s.train_cells == c
        np.testing.assert_allclose(s.y_train[rows], t.episodes.teacher(s.x_train[rows], t.cells[c])[:, 0])
    np.testing.assert_allclose(s.y_eval[5], t.episodes.teacher(s.x_eval, t.cells[5])[:, 0])


def test_evaluation_episodes_are_each_cell_at_the_shared_queries_with_fixed_contexts():
    t = make_task("modular_episodes", **SMALL)
    enc = encode("episodes", t)
    ev, s, spec = enc.evaluate, t.samples, t.episodes
    n, m = len(t.cells), s.n_eval
    assert get_encoding("episodes").produces == "sequence"
    assert ev.x.shape == (n * m, 1 + 4, 8 + 1 + 1) and ev.mask.all() and ev.stream is None
    assert ev.cell_ids.tolist() == np.repeat(np.arange(n), m).tolist()  # what function-valued scoring reads
    for r in (0, 7, n * m - 1):
        c, j = divmod(r, m)
        np.testing.assert_allclose(ev.x[r, 0, :8], s.x_eval[j], rtol=1e-6)  # the query is the shared input
        assert ev.y[r] == pytest.approx(spec.teacher(s.x_eval[j:j + 1], t.cells[c])[0, 0])  # target: the cell's function
        ctx_x = ev.x[r, 1:, :8].astype(np.float64)
        np.testing.assert_allclose(ctx_x, spec.eval_context_x[c, j], rtol=1e-6)
        np.testing.assert_allclose(ev.x[r, 1:, 8], spec.teacher(spec.eval_context_x[c, j], t.cells[c])[:, 0], rtol=1e-5)
    # fixed: the same task seed gives the same evaluation set; another seed another
    again = encode("episodes", make_task("modular_episodes", **SMALL))
    np.testing.assert_array_equal(again.evaluate.x, ev.x)
    other = encode("episodes", make_task("modular_episodes", seed=1, **SMALL))
    assert not np.array_equal(other.evaluate.x, ev.x)


def test_training_stream_is_fresh_seeded_per_seed_and_apart_from_evaluation():
    t = make_task("modular_episodes", **SMALL)
    enc = encode("episodes", t, train_episodes=32)
    stream = enc.train.stream
    assert isinstance(stream, EpisodeStream) and enc.train.x.shape == (32, 5, 10) and enc.train.y.shape == (32,)
    assert np.all(t.train_mask[enc.train.cell_ids])
    r1, r2 = stream.rng(0), stream.rng(0)
    a, b = stream.batch(r1, 16), stream.batch(r2, 16)
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)  # deterministic per seed
    nxt = stream.batch(r1, 16)
    assert not np.array_equal(nxt[0], a[0])  # fresh episodes every step
    assert not np.array_equal(stream.batch(stream.rng(1), 16)[0], a[0])  # each seed its own stream
    assert np.all(t.train_mask[a[3]]) and np.all(t.train_mask[nxt[3]])  # only training cells are streamed
    # each streamed episode's targets are its cell's function (checked against the teacher)
    x, _, y, ids = a
    for i in range(3):
        z = t.cells[ids[i]]
        assert y[i] == pytest.approx(t.episodes.teacher(x[i, :1, :8].astype(np.float64), z)[0, 0], rel=1e-5)
        np.testing.assert_allclose(x[i, 1:, 8], t.episodes.teacher(x[i, 1:, :8].astype(np.float64), z)[:, 0], rtol=1e-4, atol=1e-6)
    # training and evaluation inputs apart: no streamed input equals an evaluation query or context input
    ev_inputs = {tuple(r) for r in enc.evaluate.x[:, :, :8].reshape(-1, 8).tolist()}
    assert not ev_inputs & {tuple(r) for r in np.concatenate([a[0], nxt[0]])[:, :, :8].reshape(-1, 8).tolist()}
    # the fixed training sample is the evaluation-independent stream 1, the same every encoding
    np.testing.assert_array_equal(encode("episodes", t, train_episodes=32).train.x, enc.train.x)


def test_episodes_encoding_needs_an_episode_task():
    with pytest.raises(ValueError, match="needs an episode task"):
        encode("episodes", make_task("modular_teacher", samples_per_cell=4, eval_samples=4))


def test_sequence_is_an_input_kind_only_the_sequence_adapters_take():
    assert get_adapter("transformer").inputs == ("sequence",) and get_adapter("bottleneck").inputs == ("sequence",)
    assert "sequence" not in get_adapter("mlp").inputs and "sequence" not in get_adapter("hypernet").inputs


def _nets(name: str, **params):
    import torch

    torch.set_num_threads(1)
    cls = get_adapter(name)
    adapter = cls(cls.Params(d=16, heads=2, layers=1, **params), "cpu")
    return adapter


@pytest.mark.parametrize("name", ["transformer", "bottleneck"])
def test_padding_changes_nothing(name):
    import torch

    from compbench.adapters.sequence import pack

    t = make_task("modular_episodes", **SMALL)
    plain, padded = encode("episodes", t).evaluate, encode("episodes", t, pad=3).evaluate
    assert padded.x.shape[1] == plain.x.shape[1] + 3 and not padded.mask[:, -3:].any()
    junk = padded.x.copy()
    junk[:, -3:, :] = np.random.default_rng(0).normal(size=junk[:, -3:, :].shape)  # padding tokens full of noise
    adapter = _nets(name)
    net = adapter._init(0, (plain.x.shape[1], plain.x.shape[2] + 1), 0)
    net.eval()
    with torch.no_grad():
        a = net(torch.as_tensor(pack(plain.x, plain.mask)))
        b = net(torch.as_tensor(pack(junk, padded.mask)))
        unmasked = junk.copy()
        c = net(torch.as_tensor(pack(unmasked, np.ones_like(padded.mask))))
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)
    assert not np.allclose(a.numpy(), c.numpy(), atol=1e-3)  # the mask is what hides them


def test_bottleneck_ignores_the_query_token_beyond_its_x():
    import torch

    from compbench.adapters.sequence import pack

    t = make_task("modular_episodes", **SMALL)
    ev = encode("episodes", t).evaluate
    net = _nets("bottleneck")._init(0, (ev.x.shape[1], ev.x.shape[2] + 1), 0)
    net.eval()
    x2 = ev.x.copy()
    x2[:, 1:] = ev.x[::-1, 1:]  # other contexts, same queries: the latent changes
    with torch.no_grad():
        a = net(torch.as_tensor(pack(ev.x, ev.mask)))
        b = net(torch.as_tensor(pack(x2, ev.mask)))
        shuffled = ev.x.copy()
        shuffled[:, 1:] = ev.x[:, 1:][:, ::-1]  # the same context in another order: a set, no positions
        c = net(torch.as_tensor(pack(shuffled, ev.mask)))
    assert not np.allclose(a.numpy(), b.numpy())
    np.testing.assert_allclose(a.numpy(), c.numpy(), atol=1e-5)


@pytest.mark.parametrize("name", ["transformer", "bottleneck"])
def test_fit_seeds_streams_each_seed_as_it_would_alone(name):
    t = make_task("modular_episodes", **SMALL)
    enc = encode("episodes", t, train_episodes=16)
    adapter = _nets(name, steps=4, batch_size=8)
    both = adapter.fit_seeds(enc.train, enc.evaluate, [0, 1])
    alone = adapter.fit_seeds(enc.train, enc.evaluate, [1])
    assert len(both) == 2 and both[0].predictions.shape == (len(enc.evaluate),)
    np.testing.assert_array_equal(both[1].predictions, alone[0].predictions)  # seed 1 is the same with or without seed 0
    assert not np.allclose(both[0].predictions, both[1].predictions)
    f = both[0]
    assert f.error is None and f.initial_train.shape == (16,) and f.initial_eval.shape == (len(enc.evaluate),)
    assert f.kernels is None and f.info["streamed"] and f.info["episodes_seen"] == 32 and f.info["steps"] == 4
    assert "streamed" in f.info["theory_none_why"] and f.info["seeds_stacked"] is False and f.info["seeds_stacked_why"]


def test_function_valued_scores_carry_the_in_distribution_r2_and_the_gap():
    from compbench.scoring.metrics import shaped_metrics

    rng = np.random.default_rng(0)
    target = rng.normal(size=(12, 1))
    preds = target.copy()
    preds[6:] = 0.0  # cells 2 and 3 predicted as a constant
    cells = np.repeat(np.arange(4), 3)
    m, _ = shaped_metrics("regression", np.array([2, 3]), np.array([0, 1]), target, preds, None, cells, per_task_r2=True)
    assert m["train_r2"] == 1.0 and m["heldout_r2"] == pytest.approx(np.mean([1 - np.sum(target[r] ** 2) / np.sum((target[r] - target[r].mean()) ** 2) for r in (slice(6, 9), slice(9, 12))]))
    assert m["r2_gap"] == pytest.approx(m["train_r2"] - m["heldout_r2"]) and math.isfinite(m["r2_gap"])


SUITE = """\
name: s
seeds: 1
tasks:
  - {id: ep, family: modular_episodes, params: {modules: 6, split: connected, samples_per_cell: 4, eval_samples: 4, context: 2}, encoding: episodes}
  - {id: kh, family: modular_episodes, params: {modules: 6, split: connected, samples_per_cell: 4, eval_samples: 4, context: 2}, encoding: khot}
models:
  - {id: tf, adapter: transformer, tasks: [ep], params: {d: 8, heads: 2, layers: 1, steps: 2, batch_size: 4}}
  - {id: mlp, adapter: mlp, tasks: [TASKS]}
expectations:
  - {source: {paper: compbench, threshold: a test fixture}, claim: above, models: [tf], tasks: [ep], metric: r2_gap, bound: -10}
"""


def test_suite_pairs_sequence_adapters_with_sequence_tasks_only():
    from compbench.suite import SuiteError, parse_suite

    loaded = parse_suite(SUITE.replace("TASKS", "kh"), "s.yaml")
    assert [m.id for m in loaded.models] == ["tf", "mlp"]
    with pytest.raises(SuiteError, match="adapter 'mlp' takes vector or image inputs, but task.s. 'ep' have other inputs"):
        parse_suite(SUITE.replace("TASKS", "ep"), "s.yaml")


def test_the_bundled_suite_validates_with_its_profiles():
    from pathlib import Path

    from compbench.suite import load_suite

    path = Path(__file__).resolve().parents[1] / "suites" / "in-context-modular.yaml"
    for profile in (None, "full"):
        loaded = load_suite(path, profile)
        assert {t.id: t.encoding_name for t in loaded.suite.tasks} == {"connected": "khot", "connected-episodes": "episodes"}
        assert loaded.suite.tasks[0].params == loaded.suite.tasks[1].params  # one family, one set of params: the same cells and queries


def test_a_tiny_suite_runs_end_to_end_and_records_why_there_is_no_theory(tmp_path):
    from compbench.runner.run import run_suite
    from compbench.suite import parse_suite

    summary = run_suite(parse_suite(SUITE.replace("TASKS", "kh"), "s.yaml"), tmp_path, device="cpu", progress=False)
    assert summary.n_failed == 0
    by = {r.model: r for r in summary.records}
    tf = by["tf"]
    assert tf.ok and tf.task == "ep" and tf.theory_kernel == "none" and "streamed" in tf.info["theory_none_why"]
    assert {"train_r2", "heldout_r2", "r2_gap"} <= set(tf.metrics) and "train_r2" in by["mlp"].metrics
    assert tf.threads == 1  # the thread policy: one torch thread per training process, recorded
    again = run_suite(parse_suite(SUITE.replace("TASKS", "kh"), "s.yaml"), tmp_path, device="cpu", progress=False)
    assert again.n_cached == 2 and again.n_run == 0  # streamed training is a function of the cell's key: cached


@pytest.mark.parametrize("name", ["transformer", "bottleneck"])
def test_empirical_ntk_on_the_fixed_training_episodes_at_a_small_size(name):
    t = make_task("modular_episodes", **SMALL)
    enc = encode("episodes", t, train_episodes=12)
    f = _nets(name, steps=2, batch_size=4, theory="empirical").fit_seeds(enc.train, enc.evaluate, [0])[0]
    k_tt, k_et = f.kernels
    assert k_tt.shape == (12, 12) and k_et.shape == (len(enc.evaluate), 12)
    np.testing.assert_allclose(k_tt, k_tt.T, rtol=1e-6, atol=1e-8)
    assert np.linalg.eigvalsh(k_tt)[0] > -1e-6 * np.linalg.eigvalsh(k_tt)[-1]
    assert "theory_none_why" not in f.info and f.info["ntk_solver"] == "dense"
