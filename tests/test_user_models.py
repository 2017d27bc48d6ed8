"""A model from a file, a module or a Python object: `--model file.py:Name`, `compbench.evaluate`."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import compbench
from compbench.adapters.user import ModelReferenceError, adapter_for, is_reference, load_reference
from compbench.store import ResultStore
from tiny_suites import cli_env, cli_process

ROOT = Path(__file__).resolve().parent.parent

GATED = textwrap.dedent('''
    import torch
    from torch import nn


    class GatedMLP(nn.Module):
        def __init__(self, in_shape, n_out, width=64):
            super().__init__()
            d = in_shape[0]
            self.value = nn.Linear(d, width)
            self.gate = nn.Linear(d, width)
            self.out = nn.Linear(width, n_out)

        def forward(self, x):
            return self.out(torch.relu(self.value(x)) * torch.sigmoid(self.gate(x)))
''')
# add-extrap: 9 + 9 one-hot inputs; value and gate 18 → 64, readout 64 → 1
N_PARAMS = 2 * (18 * 64 + 64) + 64 + 1
QUICK = ["--task", "add-extrap", "--seeds", "2", "--model-args", "steps=150"]

PLUGIN_TOML = textwrap.dedent('''
    [build-system]
    requires = ["setuptools"]
    build-backend = "setuptools.build_meta"

    [project]
    name = "gated-plugin"
    version = "0.1"

    [project.entry-points."compbench.adapters"]
    gated-mlp = "gated_plugin:GatedMLPAdapter"
''')
PLUGIN_INIT = GATED + textwrap.dedent('''

    from compbench.adapters.module import ModuleAdapter


    class GatedMLPAdapter(ModuleAdapter):
        def build(self, in_shape, n_out=1):
            return GatedMLP(in_shape, n_out)
''')


def _env(*paths: Path) -> dict[str, str]:
    return cli_env(*paths)


def cli(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return cli_process(*args, cwd=cwd, env=env)


def stored(out: Path) -> dict[tuple[str, int], object]:
    return {(r.model, r.seed): r for r in ResultStore(out / "store")}


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("user-models")
    (d / "gated_mlp.py").write_text(GATED, encoding="utf-8")
    return d


@pytest.fixture(scope="module")
def from_file(work) -> Path:
    """The gated MLP run from its file through the CLI."""
    done = cli("run", "--suite", "kernel-limits", "--model", "gated_mlp.py:GatedMLP", *QUICK, "--results", str(work / "file"), cwd=work)
    assert done.returncode == 0, done.stderr
    assert ("adding model 'GatedMLP' from gated_mlp.py:GatedMLP with parameters steps=150 and the suite's added_networks "
            "optimizer=adam,lr=0.01,batch_size=128,loss_tol=0.0001 on every task of kernel-limits whose inputs it takes") in done.stdout
    return work / "file"


@pytest.mark.slow
def test_a_file_model_trains_and_gets_its_empirical_ntk_theory(from_file):
    recs = stored(from_file)
    assert sorted(recs) == [("GatedMLP", 0), ("GatedMLP", 1)]
    for r in recs.values():
        assert r.status.value == "ok" and r.adapter == "gated_mlp.py:GatedMLP"
        assert r.theory_kernel == "empirical_ntk_at_init" and r.theory_objective == "min_norm"
        assert r.info["n_params"] == N_PARAMS
        assert r.info["steps"] == 150 or (r.info["steps"] < 150 and r.info["converged"])  # loss_tol 1e-4 from the suite
        assert r.params["steps"] == 150 and r.params["lr"] == 0.01  # kernel-limits' added_networks, then --model-args
        assert np.isfinite(r.metrics["theory_r2"]) and np.isfinite(r.metrics["heldout_r2"])
    assert not np.array_equal(recs[("GatedMLP", 0)].predictions, recs[("GatedMLP", 1)].predictions)


@pytest.mark.slow
def test_the_file_model_equals_the_same_model_from_an_installed_plugin(work, from_file, tmp_path):
    src = tmp_path / "src"
    (src / "gated_plugin").mkdir(parents=True)
    (src / "pyproject.toml").write_text(PLUGIN_TOML, encoding="utf-8")
    (src / "gated_plugin" / "__init__.py").write_text(PLUGIN_INIT, encoding="utf-8")
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "--no-index",
                           "--disable-pip-version-check", "--quiet", "--target", str(site), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "plugin"
    done = cli("run", "--suite", "kernel-limits", "--model", "gated-mlp", *QUICK, "--results", str(out), cwd=tmp_path, env=_env(site))
    assert done.returncode == 0, done.stderr
    plugin, file = stored(out), stored(from_file)
    assert sorted(plugin) == [("gated-mlp", 0), ("gated-mlp", 1)]
    for seed in (0, 1):
        a, b = plugin[("gated-mlp", seed)], file[("GatedMLP", seed)]
        assert a.adapter == "gated-mlp" and a.key != b.key
        np.testing.assert_array_equal(a.predictions, b.predictions)
        np.testing.assert_array_equal(a.theory_predictions, b.theory_predictions)
        assert a.metrics == b.metrics


@pytest.mark.slow
def test_evaluate_returns_the_cli_numbers_in_memory(work, from_file, monkeypatch):
    monkeypatch.chdir(work)
    sys.path.insert(0, str(work))
    try:
        from gated_mlp import GatedMLP  # noqa: PLC0415
    finally:
        sys.path.remove(str(work))
    res = compbench.evaluate("kernel-limits", models=[GatedMLP], tasks=["add-extrap"], seeds=2, model_args={"steps": 150})
    assert res.out is None and res.n_run == 2 and res.passed and res.errors == []
    file = stored(from_file)
    for r in res.records:
        np.testing.assert_array_equal(r.predictions, file[("GatedMLP", r.seed)].predictions)
    frame = res.to_pandas()
    assert list(frame.model) == ["GatedMLP", "GatedMLP"] and list(frame.seed) == [0, 1]
    assert frame.heldout_r2.tolist() == [file[("GatedMLP", s)].metrics["heldout_r2"] for s in (0, 1)]
    board = res.leaderboard()
    assert board.loc["GatedMLP", "add-extrap"] == pytest.approx(np.mean(frame.heldout_r2))
    # the same through a reference and under a name of the caller's choosing
    named = compbench.evaluate("kernel-limits", models={"gated": GatedMLP}, tasks=["add-extrap"], seeds=2, model_args={"steps": 150})
    assert [r.model for r in named.records] == ["gated", "gated"]
    np.testing.assert_array_equal(named.records[1].predictions, res.records[1].predictions)


@pytest.mark.slow
def test_the_store_reuses_a_file_model_until_the_file_changes(work, tmp_path):
    (tmp_path / "gated_mlp.py").write_text(GATED, encoding="utf-8")
    args = ["run", "--suite", "kernel-limits", "--model", "gated_mlp.py:GatedMLP", *QUICK, "--results", str(tmp_path / "r"), "-q"]
    assert "2 cells run, 0 reused" in cli(*args, cwd=tmp_path).stdout
    assert "0 cells run, 2 reused" in cli(*args, cwd=tmp_path).stdout
    (tmp_path / "gated_mlp.py").write_text(GATED + "\n# an edit\n", encoding="utf-8")
    assert "2 cells run, 0 reused" in cli(*args, cwd=tmp_path).stdout


@pytest.mark.slow
def test_an_object_without_source_is_recomputed_and_says_so(tmp_path):
    def define():  # a class compbench cannot read the source of, as a fresh session would define it
        scope: dict = {}
        exec(compile(GATED, "<cell>", "exec"), scope)
        return scope["GatedMLP"]

    user = adapter_for(define())
    assert not user.cached and "recomputed in every session" in user.note
    kw = dict(tasks=["add-extrap"], seeds=1, model_args={"steps": 20}, out=tmp_path / "r")
    first = compbench.evaluate("kernel-limits", models=[define()], **kw)
    assert first.n_run == 1 and any("recomputed in every session" in n for n in first.notes)
    again = compbench.evaluate("kernel-limits", models=[define()], **kw)  # a new session's object: not served from the store
    assert again.n_run == 1 and again.n_cached == 0


@pytest.mark.slow
def test_an_image_network_gets_image_shapes(tmp_path):
    shapes = []

    def tiny_cnn(in_shape, n_out):
        import torch.nn as nn

        shapes.append((in_shape, n_out))
        return nn.Sequential(nn.Conv2d(in_shape[0], 2, 3, padding=1), nn.ReLU(), nn.Flatten(),
                             nn.Linear(2 * in_shape[1] * in_shape[2], n_out))

    res = compbench.evaluate("kernel-limits-images", models=[tiny_cnn], tasks=["te"], seeds=1, model_args={"epochs": 1})
    assert shapes == [((1, 8, 16), 1)]  # two 8×8 digits side by side, one ±1 output
    (rec,) = res.records
    assert rec.status.value == "ok" and rec.info["n_params"] == 1 * 2 * 9 + 2 + 2 * 8 * 16 + 1
    assert rec.theory_kernel == "empirical_ntk_at_init"


@pytest.mark.slow
def test_a_vector_network_on_images_fails_visibly(work, monkeypatch):
    monkeypatch.chdir(work)
    res = compbench.evaluate("kernel-limits-images", models=["gated_mlp.py:GatedMLP"], tasks=["te"], seeds=1,
                             model_args={"epochs": 1})
    assert not res.passed and res.exit_code == 1
    (err,) = res.errors
    assert err.model == "GatedMLP" and "mat1 and mat2 shapes cannot be multiplied" in err.message


@pytest.mark.parametrize("ref, message", [
    ("missing.py:Net", "no such file"),
    ("gated_mlp.py:GatedMPL", "defines no 'GatedMPL'; did you mean 'GatedMLP'?"),
    ("broken.py:Net", "broken.py:3: syntax error"),
    ("raises.py:Net", "raises.py:2: importing it failed: RuntimeError: no GPU here"),
    ("values.py:NUMBER", "neither a compbench Adapter subclass nor a factory"),
    ("values.py:INSTANCE", "is an nn.Module instance"),
    ("values.py:one_arg", "must take (in_shape, n_out)"),
    ("no_such_package.models:Net", "no module named 'no_such_package'"),
])
@pytest.mark.slow
def test_a_bad_reference_is_one_clear_line(work, ref, message):
    (work / "broken.py").write_text("import torch\n\ndef f(:\n", encoding="utf-8")
    (work / "raises.py").write_text("x = 1\nraise RuntimeError('no GPU here')\n", encoding="utf-8")
    (work / "values.py").write_text("import torch\nNUMBER = 3\nINSTANCE = torch.nn.Linear(2, 1)\n\ndef one_arg(shape):\n    return None\n",
                                    encoding="utf-8")
    done = cli("run", "--suite", "kernel-limits", "--model", ref, "--results", str(work / "bad"), cwd=work)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


def test_a_model_id_that_clashes_with_the_suite_is_refused(work, tmp_path):
    (tmp_path / "clash.py").write_text(GATED.replace("class GatedMLP", "class mlp_rich_alias") + "\nglobals()['mlp-rich'] = 1\n",
                                       encoding="utf-8")
    with pytest.raises(Exception, match="has the id of a model of suite 'kernel-limits'"):
        compbench.evaluate("kernel-limits", models={"mlp-rich": load_reference(str(tmp_path / "clash.py") + ":mlp_rich_alias").cls})


def test_references_are_told_from_adapter_names():
    assert is_reference("nets/gated.py:GatedMLP") and is_reference("mypkg.models:Net")
    assert not is_reference("timm:resnet18") and not is_reference("mlp") and not is_reference("mlp-rich")
    with pytest.raises(ModelReferenceError, match="expected path/to/file.py:Name"):
        load_reference("gated.py")


def _gated():
    scope: dict = {}
    exec(compile(GATED, "<test>", "exec"), scope)
    return scope["GatedMLP"]


@pytest.mark.slow
def test_seeds_train_stacked_as_each_would_alone():
    kw = dict(tasks=["add-extrap"], seeds=3)
    alone = compbench.evaluate("kernel-limits", models={"g": _gated()}, model_args={"steps": 300, "stack_seeds": "never"}, **kw)
    stacked = compbench.evaluate("kernel-limits", models={"g": _gated()}, model_args={"steps": 300}, **kw)
    for a, b in zip(alone.records, stacked.records):
        assert a.info["seeds_stacked"] is False and b.info["seeds_stacked"] is True
        assert a.info["steps"] == b.info["steps"] and a.info["epochs"] == b.info["epochs"]  # the same stop by loss_tol
        np.testing.assert_allclose(b.predictions, a.predictions, rtol=0, atol=1e-4)  # float32 rounding of batched kernels
        np.testing.assert_array_equal(b.theory_predictions, a.theory_predictions)  # f₀ and eNTK per seed, untouched


@pytest.mark.slow
@pytest.mark.parametrize("layer, why", [("torch.nn.BatchNorm1d(8)", "buffers"), ("torch.nn.Dropout(0.5)", "torch.vmap cannot run")])
def test_a_module_that_cannot_stack_trains_seed_by_seed_and_says_why(layer, why):
    import torch

    def net(in_shape, n_out):
        return torch.nn.Sequential(torch.nn.Linear(in_shape[0], 8), eval(layer), torch.nn.ReLU(), torch.nn.Linear(8, n_out))

    res = compbench.evaluate("kernel-limits", models=[net], tasks=["add-extrap"], seeds=2, model_args={"steps": 20})
    assert res.passed
    for r in res.records:
        assert r.info["seeds_stacked"] is False and why in r.info["seeds_stacked_why"]
    never = compbench.evaluate("kernel-limits", models=[net], tasks=["add-extrap"], seeds=2,
                               model_args={"steps": 20, "stack_seeds": "never"})
    for a, b in zip(res.records, never.records):
        np.testing.assert_array_equal(a.predictions, b.predictions)  # the fallback is exactly the one-by-one path


def test_list_tells_how_to_give_a_model_from_a_file(tmp_path):
    out = cli("list", cwd=tmp_path).stdout
    assert "FILE.py:Name" in out and "nn.Module factory build(in_shape, n_out)" in out
