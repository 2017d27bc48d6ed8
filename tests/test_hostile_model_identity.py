"""A user's model is identified by everything that decides its outputs (#35 items 2 and 19): the helpers its file
imports, a factory's closure and arguments, its file whatever directory names it; two files' same-named classes
are told apart by `=ID`."""

from __future__ import annotations

import importlib.util
import os
import sys

import functools
import linecache
import textwrap
import types
from pathlib import Path

import pytest

import compbench
from compbench.cli import main
from compbench.store import ResultStore
from compbench.suite import SuiteError
from tiny_suites import TINY

pytest.importorskip("torch")
pytest_plugins = ["pytester"]

NET = textwrap.dedent('''
    import torch
    from torch import nn
    {width}


    class Net(nn.Module):
        def __init__(self, in_shape, n_out):
            super().__init__()
            self.hidden = nn.Linear(in_shape[0], WIDTH)
            self.out = nn.Linear(WIDTH, n_out)

        def forward(self, x):
            return self.out(torch.relu(self.hidden(x)))
''')
QUICK = ["--task", "add", "--seeds", "1", "--model-args", "steps=20"]


@pytest.fixture
def work(tmp_path: Path, monkeypatch) -> Path:
    """net.py importing its width from helper.py beside it, a/net.py and b/net.py (widths 8 and 4), tiny.yaml; cwd there."""
    (tmp_path / "tiny.yaml").write_text(TINY, encoding="utf-8")
    (tmp_path / "helper.py").write_text("WIDTH = 8\n", encoding="utf-8")
    (tmp_path / "net.py").write_text(NET.format(width="from helper import WIDTH"), encoding="utf-8")
    for folder, width in (("a", 8), ("b", 4)):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "net.py").write_text(NET.format(width=f"WIDTH = {width}"), encoding="utf-8")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(work: Path, capsys, *models: str) -> tuple[int, str, str]:
    code = main(["run", "--suite", str(work / "tiny.yaml"), *(a for m in models for a in ("--model", m)), *QUICK,
                 "--results", str(work / "r"), "-q"])
    out, err = capsys.readouterr()
    return code, out, err


def _params(work: Path) -> dict[str, int]:
    """{model id: its network's parameter count} of the stored records."""
    return {r.model: r.info["n_params"] for r in ResultStore(work / "r" / "store")}


def _width(n_params: int, n_in: int) -> int:
    return (n_params - 1) // (n_in + 2)  # n_in → W → 1: W·n_in + W + W + 1


def test_editing_a_helper_beside_a_file_model_recomputes_it(work, capsys):
    assert "1 cells run, 0 reused" in _run(work, capsys, "net.py:Net")[1]
    assert "0 cells run, 1 reused" in _run(work, capsys, "net.py:Net")[1]
    first = _params(work)["Net"]
    before = (work / "helper.py").stat()
    (work / "helper.py").write_text("WIDTH = 5\n", encoding="utf-8")
    # The same size and the same time stamp (an edit within one second): a cached .pyc would pass its check.
    os.utime(work / "helper.py", ns=(before.st_atime_ns, before.st_mtime_ns))
    assert "1 cells run, 0 reused" in _run(work, capsys, "net.py:Net")[1]
    n_in = (first - 1) // 8 - 2
    assert _width(_params(work)["Net"], n_in) == 5  # the edited helper ran, not the one this process imported first


def test_a_helper_of_the_same_name_imported_from_elsewhere_is_not_the_one_that_runs(work, capsys, monkeypatch, tmp_path):
    other = tmp_path / "elsewhere" / "helper.py"
    other.parent.mkdir()
    other.write_text("WIDTH = 9\n", encoding="utf-8")
    spec = importlib.util.spec_from_file_location("helper", other)
    foreign = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(foreign)
    monkeypatch.setitem(sys.modules, "helper", foreign)  # another model's helper.py, imported first
    assert "2 cells run, 0 reused" in _run(work, capsys, "net.py:Net", "a/net.py:Net=width-8")[1]
    params = _params(work)
    assert params["Net"] == params["width-8"]  # net.py's own helper ran (WIDTH = 8), as its hash says, not 9
    assert sys.modules["helper"] is foreign  # and the other one is left where it was


def test_a_file_model_named_from_a_subfolder_is_the_same_model(work, capsys, monkeypatch):
    assert "1 cells run, 0 reused" in _run(work, capsys, "net.py:Net")[1]
    monkeypatch.chdir(work / "sub")
    code, out, _ = _run(work, capsys, "../net.py:Net")
    assert code == 0 and "0 cells run, 1 reused" in out
    monkeypatch.chdir(work.parent)
    assert "0 cells run, 1 reused" in _run(work, capsys, str(work / "net.py") + ":Net")[1]


def test_two_files_with_one_class_name_are_named_apart(work, capsys):
    code, out, err = _run(work, capsys, "a/net.py:Net", "b/net.py:Net")
    assert code == 2 and "Traceback" not in err
    assert ("a/net.py:Net and b/net.py:Net clash on the model id 'Net': give each its own id "
            "(a/net.py:Net=net-a and b/net.py:Net=net-b)") in err
    assert "a model of suite" not in err
    code, out, err = _run(work, capsys, "a/net.py:Net=net-a", "b/net.py:Net=net-b")
    assert code == 0 and "2 cells run, 0 reused" in out, err
    params = _params(work)
    n_in = (params["net-a"] - 1) // 8 - 2
    assert sorted(params) == ["net-a", "net-b"] and _width(params["net-b"], n_in) == 4
    records = {r.model: r for r in ResultStore(work / "r" / "store")}
    assert records["net-a"].adapter == "a/net.py:Net" and records["net-b"].adapter == "b/net.py:Net"


def test_an_id_after_equals_follows_the_suites_id_rules(work, capsys):
    code, _, err = _run(work, capsys, "a/net.py:Net=no good")
    assert code == 2 and "'no good' after '=' is no usable model id" in err and "Traceback" not in err
    code, _, err = _run(work, capsys, "a/net.py:Net=overlap")  # a model of the suite
    assert code == 2 and "model 'overlap' from a/net.py:Net=overlap has the id of a model of suite 'tiny'" in err


def test_evaluate_takes_the_same_id_syntax(work):
    res = compbench.evaluate(str(work / "tiny.yaml"), models=["a/net.py:Net=net-a", "b/net.py:Net=net-b"], tasks=["add"],
                             seeds=1, model_args={"steps": 20})
    assert sorted(r.model for r in res.records) == ["net-a", "net-b"] and res.n_run == 2
    with pytest.raises(SuiteError, match="clash on the model id 'Net'"):
        compbench.evaluate(str(work / "tiny.yaml"), models=["a/net.py:Net", "b/net.py:Net"], tasks=["add"], seeds=1)


def _factory(width: int):
    import torch.nn as nn

    def build(in_shape, n_out):
        return nn.Sequential(nn.Linear(in_shape[0], width), nn.ReLU(), nn.Linear(width, n_out))

    return build


def _build(in_shape, n_out, width=8):
    import torch.nn as nn

    return nn.Sequential(nn.Linear(in_shape[0], width), nn.ReLU(), nn.Linear(width, n_out))


@pytest.mark.parametrize("make", [_factory, lambda w: functools.partial(_build, width=w)], ids=["closure", "partial"])
def test_a_factorys_closure_and_arguments_are_its_identity(work, make):
    kw = dict(tasks=["add"], seeds=1, model_args={"steps": 20}, out=work / "r")
    first = compbench.evaluate(str(work / "tiny.yaml"), models={"f": make(8)}, **kw)
    again = compbench.evaluate(str(work / "tiny.yaml"), models={"f": make(8)}, **kw)
    assert (first.n_run, again.n_run, again.n_cached) == (1, 0, 1)  # the same values: the same model, reused
    other = compbench.evaluate(str(work / "tiny.yaml"), models={"f": make(4)}, **kw)
    assert (other.n_run, other.n_cached) == (1, 0)  # another width: another model, never served the old record
    n_in = (first.records[0].info["n_params"] - 1) // 8 - 2
    assert _width(other.records[0].info["n_params"], n_in) == 4


def test_a_value_that_cannot_be_identified_recomputes_and_says_so(work):
    import torch

    config = types.SimpleNamespace(width=4)  # an object compbench cannot read the identity of

    def build(in_shape, n_out):
        return torch.nn.Sequential(torch.nn.Linear(in_shape[0], config.width), torch.nn.Linear(config.width, n_out))

    kw = dict(tasks=["add"], seeds=1, model_args={"steps": 20}, out=work / "r")
    compbench.evaluate(str(work / "tiny.yaml"), models={"f": build}, **kw)
    again = compbench.evaluate(str(work / "tiny.yaml"), models={"f": build}, **kw)
    assert again.n_run == 1 and any("carries a value compbench cannot identify" in n for n in again.notes)


def test_a_tensor_in_a_closure_is_identified_by_its_values(work):
    import torch

    def make(mask):
        def build(in_shape, n_out):
            return torch.nn.Sequential(torch.nn.Linear(in_shape[0], 4), torch.nn.Linear(4, n_out, bias=bool(mask.sum() > 1)))
        return build

    kw = dict(tasks=["add"], seeds=1, model_args={"steps": 20}, out=work / "r")
    runs = [compbench.evaluate(str(work / "tiny.yaml"), models={"m": make(m)}, **kw).n_run
            for m in (torch.ones(3), torch.ones(3), torch.zeros(3))]
    assert runs == [1, 0, 1]


def test_a_notebook_models_globals_are_its_identity(work):
    """A factory typed in a notebook cell (its source in linecache, no file) reads WIDTH set by another cell."""
    source = textwrap.dedent('''
        import torch

        def build(in_shape, n_out):
            return torch.nn.Sequential(torch.nn.Linear(in_shape[0], WIDTH), torch.nn.Linear(WIDTH, n_out))
    ''')
    linecache.cache["<cell-1>"] = (len(source), None, source.splitlines(True), "<cell-1>")
    kw = dict(tasks=["add"], seeds=1, model_args={"steps": 20}, out=work / "r")
    results = []
    for width in (8, 8, 4):
        scope: dict = {"__name__": "__main__", "WIDTH": width}
        exec(compile(source, "<cell-1>", "exec"), scope)
        results.append(compbench.evaluate(str(work / "tiny.yaml"), models={"nb": scope["build"]}, **kw))
    assert [r.n_run for r in results] == [1, 0, 1]


def test_model_args_are_part_of_a_cells_key(work, capsys):
    assert "1 cells run, 0 reused" in _run(work, capsys, "a/net.py:Net")[1]
    code = main(["run", "--suite", str(work / "tiny.yaml"), "--model", "a/net.py:Net", "--task", "add", "--seeds", "1",
                 "--model-args", "steps=30", "--results", str(work / "r"), "-q"])
    assert code == 0 and "1 cells run, 0 reused" in capsys.readouterr().out


@pytest.mark.slow
def test_the_pytest_plugin_takes_the_same_id_syntax(pytester):
    pytester.makefile(".yaml", tiny=TINY)
    for folder, width in (("a", 8), ("b", 4)):
        (pytester.path / folder).mkdir()
        (pytester.path / folder / "net.py").write_text(NET.format(width=f"WIDTH = {width}"), encoding="utf-8")
    opts = ["-p", "no:cacheprovider", "--compbench-results", "res", "--compbench-device", "cpu", "--collect-only", "-q"]
    result = pytester.runpytest_subprocess("tiny.yaml", *opts, "--compbench-model", "a/net.py:Net=net-a",
                                           "--compbench-model", "b/net.py:Net=net-b")
    result.stdout.fnmatch_lines(["tiny.yaml::net-a::add", "tiny.yaml::net-b::add"], consecutive=False)
    result = pytester.runpytest_subprocess("tiny.yaml", *opts, "--compbench-model", "a/net.py:Net", "--compbench-model", "b/net.py:Net")
    assert result.ret != 0
    result.stdout.fnmatch_lines(["*a/net.py:Net and b/net.py:Net clash on the model id 'Net'*"])
