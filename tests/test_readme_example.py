"""docs/how-to/network-adapter.md's example (moved there from the README) runs as printed: registered, trained, theory-scored."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from compbench.cli import main  # noqa: E402

README = Path(__file__).resolve().parent.parent / "docs" / "how-to" / "network-adapter.md"  # was the README's section

SUITE = """\
name: readme-example
seeds: 2
tasks:
  - {id: sym, family: symmetry, params: {variant: partial_exposure}, encoding: {name: digits, samples_per_cell: 2}}
models:
  - {id: placeholder, adapter: convnet, params: {width: 0.125, epochs: 1}}
"""


def example_code() -> str:
    section = README.read_text(encoding="utf-8").split("# Plugging in a new architecture", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.S).group(1)


@pytest.mark.filterwarnings("ignore:adapter 'pixel-mlp' .* has no source file")  # exec'd: expected
def test_readme_network_adapter_example_runs_through_a_suite(tmp_path, capsys):
    from compbench.adapters import get_adapter

    namespace: dict = {}
    exec(compile(example_code(), str(README), "exec"), namespace)  # registers "pixel-mlp"
    cls = get_adapter("pixel-mlp")
    assert cls is namespace["PixelMLP"] and cls.Params().width == 256
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    out = tmp_path / "out"
    code = main(["run", "--suite", str(suite), "--out", str(out), "--quiet", "--model", "pixel-mlp", "--device", "cpu"])
    assert code == 0, capsys.readouterr()
    import pandas as pd

    records = pd.read_csv(out / "records.csv")
    assert list(records.model) == ["pixel-mlp", "pixel-mlp"] and set(records.status) == {"ok"}
    assert (records.theory_kernel == "empirical_ntk_at_init").all() and records.theory_r2.notna().all()
    assert (records["info.n_params"] == 128 * 256 + 256 + 256 + 1).all()  # 1×8×16 pixels → 256 → 1


def test_an_adapter_without_source_file_warns_that_its_edits_are_not_tracked():
    from compbench.runner.cells import code_version

    exec(compile(example_code().replace('"pixel-mlp"', '"pixel-mlp-2"'), "<notebook>", "exec"), {})
    with pytest.warns(UserWarning, match="'pixel-mlp-2' .* has no source file.*--force"):
        version = code_version("pixel-mlp-2")
    assert len(version) == 12
