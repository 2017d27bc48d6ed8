"""A model from a file wherever an adapter's name goes (#38 item 6): a suite's `adapter: file.py:Name`,
`check` and `baseline record --model file.py:Name`, and the pytest plugin's --compbench-model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compbench.cli import main
from compbench.store import ResultStore
from tiny_suites import NET, suite_text

pytest.importorskip("torch")
pytest_plugins = ["pytester"]

SUITE = suite_text("add", name="filemodels", seeds=2)
FILE_MODEL = "  - {id: mine, adapter: models/net.py:Net, params: {lr: 0.01, steps: 30}}\n"


@pytest.fixture
def suite_dir(tmp_path: Path) -> Path:
    """suites/s.yaml naming suites/models/net.py; the tests run from tmp_path, not the suite's folder."""
    d = tmp_path / "suites"
    (d / "models").mkdir(parents=True)
    (d / "models" / "net.py").write_text(NET, encoding="utf-8")
    (d / "s.yaml").write_text(SUITE + FILE_MODEL, encoding="utf-8")
    return d


def _stored(out: Path) -> list:
    return sorted(ResultStore(out / "store"), key=lambda r: (r.model, r.seed))


def test_a_suite_names_a_model_by_its_file_from_the_suites_folder(suite_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["validate", "suites/s.yaml", "-v"]) == 0
    assert "model mine: suites/models/net.py:Net, 2 seed(s), on add" in capsys.readouterr().out
    args = ["run", "--suite", "suites/s.yaml", "--results", "res", "-q", "--device", "cpu"]
    assert main(args) == 0
    assert "3 cells run, 0 reused" in capsys.readouterr().out
    mine = [r for r in _stored(tmp_path / "res") if r.model == "mine"]
    assert [(r.seed, r.status.value, r.adapter) for r in mine] == [(0, "ok", "suites/models/net.py:Net"), (1, "ok", "suites/models/net.py:Net")]
    assert all(r.theory_kernel == "empirical_ntk_at_init" and r.info["n_params"] == 18 * 8 + 8 + 8 + 1 for r in mine)
    assert main(args) == 0
    assert "0 cells run, 3 reused" in capsys.readouterr().out
    # Editing the file changes its cells' code identity: they are recomputed, the kernel's are not.
    (suite_dir / "models" / "net.py").write_text(NET + "\n# an edit\n", encoding="utf-8")
    assert main(args) == 0
    assert "2 cells run, 1 reused" in capsys.readouterr().out


@pytest.mark.parametrize("adapter, message", [
    ("models/nope.py:Net", "s.yaml:7: models[1].adapter: adapter models/nope.py:Net: no such file"),
    ("models/net.py:Nett", "s.yaml:7: models[1].adapter: adapter models/net.py:Nett: {dir}/models/net.py defines no 'Nett'; "
                           "did you mean 'Net'?"),
    ("models/broken.py:Net", "s.yaml:7: models[1].adapter: {dir}/models/broken.py:2: syntax error"),
    ("no_such_package.nets:Net", "s.yaml:7: models[1].adapter: adapter no_such_package.nets:Net: no module named 'no_such_package'"),
])
def test_a_missing_file_or_name_is_a_validation_error_at_the_models_line(suite_dir, adapter, message, capsys):
    (suite_dir / "models" / "broken.py").write_text("import torch\ndef f(:\n", encoding="utf-8")
    (suite_dir / "s.yaml").write_text(SUITE + FILE_MODEL.replace("models/net.py:Net", adapter), encoding="utf-8")
    assert main(["validate", str(suite_dir / "s.yaml")]) == 2
    err = capsys.readouterr().err
    assert message.format(dir=suite_dir) in err and "Traceback" not in err


def test_a_suite_names_a_model_by_its_module(suite_dir, tmp_path, monkeypatch, capsys):
    pkg = tmp_path / "lib" / "tinynets"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "nets.py").write_text(NET, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    (suite_dir / "s.yaml").write_text(SUITE + FILE_MODEL.replace("models/net.py:Net", "tinynets.nets:Net"), encoding="utf-8")
    assert main(["validate", str(suite_dir / "s.yaml"), "-v"]) == 0
    assert "model mine: tinynets.nets:Net, 2 seed(s), on add" in capsys.readouterr().out


def test_ray_is_refused_for_a_suite_model_from_a_file(suite_dir, tmp_path, capsys):
    code = main(["run", "--suite", str(suite_dir / "s.yaml"), "--results", str(tmp_path / "res"), "--executor", "ray"])
    assert code == 2
    assert "model 'mine' comes from a file or module" in capsys.readouterr().err
    assert not (tmp_path / "res").exists()


def test_baseline_record_and_check_take_a_file_model(suite_dir, tmp_path, monkeypatch, capsys):
    """A CI user records a baseline for a model the suite does not name, and checks it."""
    monkeypatch.chdir(tmp_path)
    (suite_dir / "s.yaml").write_text(SUITE, encoding="utf-8")
    common = ["--suite", "suites/s.yaml", "--results", "res", "--model", "suites/models/net.py:Net", "--model-args", "lr=0.01,steps=30",
              "-q", "--device", "cpu"]
    assert main(["baseline", "record", *common, "--out", "base.json"]) == 0
    out = capsys.readouterr().out
    assert "adding model 'Net' from suites/models/net.py:Net with parameters lr=0.01,steps=30" in out
    assert "filemodels: 2 cells run, 0 reused" in out and "wrote baseline base.json: 1 cells" in out
    cells = json.loads((tmp_path / "base.json").read_text())["cells"]
    assert sorted(cells) == ["Net/add"] and cells["Net/add"]["metrics"]["heldout_r2"]["n"] == 2
    assert main(["check", *common, "--baseline", "base.json"]) == 0
    out = capsys.readouterr().out
    assert "filemodels: 0 cells run, 2 reused" in out and "check filemodels against base.json: 1 cells" in out
    # The file edited: check recomputes its cells (and, the same network, still passes).
    (suite_dir / "models" / "net.py").write_text(NET + "\n# an edit\n", encoding="utf-8")
    assert main(["check", *common, "--baseline", "base.json"]) == 0
    assert "filemodels: 2 cells run, 0 reused" in capsys.readouterr().out
    # A bad reference is one line, exit 2, before anything runs.
    assert main(["check", *common[:4], "--model", "suites/models/nope.py:Net", "--baseline", "base.json"]) == 2
    err = capsys.readouterr().err
    assert "--model suites/models/nope.py:Net: no such file" in err and "Traceback" not in err


def test_a_reference_loaded_before_is_loaded_again_not_taken_for_an_adapter_name(tmp_path, monkeypatch):
    """In one process (a notebook, pytest), the name a reference was registered under stays a reference,
    so its file is read again: an edit gives a new code identity."""
    from compbench.adapters.user import is_reference, load_reference

    monkeypatch.chdir(tmp_path)
    (tmp_path / "net.py").write_text(NET, encoding="utf-8")
    first = load_reference("net.py:Net")
    assert first.adapter == "net.py:Net" and is_reference("net.py:Net")
    (tmp_path / "net.py").write_text(NET + "\n# an edit\n", encoding="utf-8")
    again = load_reference("net.py:Net")
    assert again.cls is not first.cls and again.cls.__compbench_code__ != first.cls.__compbench_code__
    assert not is_reference("mlp") and not is_reference("timm:resnet18")


PLUGIN_SUITE = suite_text("add", name="plug", seeds=2)


@pytest.mark.slow
def test_the_pytest_plugin_adds_a_model_from_a_file(pytester):
    pytester.makefile(".yaml", plug=PLUGIN_SUITE)
    (pytester.path / "net.py").write_text(NET, encoding="utf-8")
    opts = ["-p", "no:cacheprovider", "--compbench-results", "res", "--compbench-device", "cpu"]
    result = pytester.runpytest_subprocess("plug.yaml", *opts, "--compbench-model", "net.py:Net", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["plug.yaml::overlap::add", "plug.yaml::Net::add", "plug.yaml::outcome", "3 tests collected*"])
    result = pytester.runpytest_subprocess("plug.yaml", *opts, "--compbench-model", "net.py:Net", "-v")
    result.assert_outcomes(passed=3)

    recs = [r for r in ResultStore(pytester.path / "res" / "store") if r.model == "Net"]
    assert sorted((r.seed, r.status.value, r.adapter) for r in recs) == [(0, "ok", "net.py:Net"), (1, "ok", "net.py:Net")]
    result = pytester.runpytest_subprocess("plug.yaml", *opts, "--compbench-model", "nope.py:Net", "--collect-only")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*--model nope.py:Net: no such file*"])
    result = pytester.runpytest_subprocess("plug.yaml", *opts, "--compbench-model", "not-an-adapter", "--collect-only")
    result.stdout.fnmatch_lines(["*--compbench-model not-an-adapter matches no model of suite plug and no adapter*"])
