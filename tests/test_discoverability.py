"""`compbench list` / `show`, `--model NAME --model-args`, tags, and the validation of claims and inputs."""

from __future__ import annotations

import pandas as pd
import pytest

from compbench.cli import main
from compbench.suite import SuiteError, parse_suite
from tiny_suites import scenario

TINY = scenario("discover")  # tests/suites/discover.yaml


def test_list_shows_every_kind_with_one_line_each(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for heading in ("suites:", "task families:", "encodings:", "adapters:", "claims:", "report formats:"):
        assert f"\n{heading}\n" in f"\n{out}"
    assert "  at_chance                Held-out accuracy within `tolerance` of ½" in out
    assert "  timm:<name>" in out and "  table " in out and "  predictions " in out


def test_show_prints_parameters_with_defaults(capsys):
    assert main(["show", "mlp"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("mlp (adapter; from compbench.adapters.mlp.MLPAdapter")
    assert "  width: int (default 1000)" in out and "tags: networks" in out
    assert main(["show", "ordered"]) == 0
    out = capsys.readouterr().out
    assert "metric: str (required) — the metric whose statistic is ordered" in out and "kinds: classification, regression" in out
    assert main(["show", "onehot"]) == 0
    assert "(no parameters)" in capsys.readouterr().out
    assert main(["show", "kernal"]) == 2
    assert "nothing is registered as 'kernal'" in capsys.readouterr().err


def test_added_model_with_args_is_judged_by_tag_claims(tmp_path, capsys):
    (tmp_path / "tiny.yaml").write_text(TINY)
    out = tmp_path / "out"
    code = main(["run", "--suite", str(tmp_path / "tiny.yaml"), "--out", str(out), "--quiet", "--format", "csv",
                 "--model", "mlp", "--model-args", "width=32,lr=0.05,max_steps=200,center=true"])
    printed = capsys.readouterr().out
    assert "adding adapter 'mlp' with parameters width=32,lr=0.05,max_steps=200,center=true" in printed
    records = pd.read_csv(out / "records.csv")
    assert set(records.model) == {"mlp"} and sorted(set(records.seed)) == [0, 1]
    # Both @networks claims judged the added MLP, and the run says how it did.
    assert "mlp: " in printed and "mlp: the suite's claims about it: " in printed
    lines = [line for line in printed.splitlines() if line.startswith("  PASS") or line.startswith("  FAIL")]
    assert any("nets-at-chance [at_chance] mlp on te" in line for line in lines)
    assert any("nets-leak [slope_below_one] mlp on add" in line for line in lines)
    expectations = pd.read_csv(out / "expectations.csv")
    assert set(expectations.subject) == {"mlp"}  # the suite's own model did not run: its verdicts are left out
    assert code in (0, 1)


def test_model_args_errors(tmp_path, capsys):
    (tmp_path / "tiny.yaml").write_text(TINY)
    base = ["run", "--suite", str(tmp_path / "tiny.yaml"), "--out", str(tmp_path / "o"), "--quiet"]
    assert main([*base, "--model", "mlp", "--model-args", "widht=3"]) == 2
    assert "adapter 'mlp': widht: Extra inputs are not permitted" in capsys.readouterr().err
    assert main([*base, "--model-args", "width=3"]) == 2
    assert "give --model too" in capsys.readouterr().err
    assert main([*base, "--model", "mlp", "--model-args", "width"]) == 2
    assert "key=value pairs" in capsys.readouterr().err


def suite_error(text: str) -> str:
    with pytest.raises(SuiteError) as err:
        parse_suite(text, "s.yaml")
    return str(err.value)


def test_claims_are_validated_against_task_kinds_metrics_and_params():
    msg = suite_error(TINY.replace("tasks: [te], tolerance: 0.5", "tasks: [add], tolerance: 0.5"))
    assert "s.yaml:9: expectations[0].tasks[0]: claim 'at_chance' applies to classification tasks; task 'add' is regression" in msg
    msg = suite_error(TINY.replace("tolerance: 0.5}", "tolerance: 0.5, metric: heldout_acc}"))
    assert "s.yaml:9: expectations[0].metric: unknown field 'metric': claim 'at_chance' takes tolerance" in msg
    msg = suite_error(TINY.replace("claim: at_chance", "claim: at_chanse"))
    assert "s.yaml:9: expectations[0].claim: unknown claim 'at_chanse'; did you mean 'at_chance'?" in msg
    msg = suite_error(TINY + "  - {source: {paper: compbench, threshold: a test fixture}, claim: ordered, models: [ntk], tasks: [te, add], metric: heldout_mse2}\n")
    assert "s.yaml:11: expectations[2].metric: claim 'ordered' does not use metric 'heldout_mse2'" in msg
    msg = suite_error(TINY + "  - {source: {paper: compbench, threshold: a test fixture}, claim: ordered, models: [ntk], tasks: [te], metric: heldout_acc}\n")
    assert "expectations[2].tasks: 'ordered' needs at least 2 entries" in msg
    msg = suite_error(TINY.replace('"@networks", ntk', '"@networks", ntk2'))
    assert "s.yaml:10: expectations[1].models[1]: pattern 'ntk2' matches no model" in msg


def test_an_adapter_that_cannot_take_the_inputs_is_a_validation_error():
    msg = suite_error(TINY.replace("  - {id: ntk, adapter: kernel, params: {kernel: relu_ntk}}",
                                   "  - {id: ntk, adapter: kernel, params: {kernel: relu_ntk}}\n  - {id: cnn, adapter: convnet}"))
    assert ("s.yaml:8: models[1].adapter: adapter 'convnet' takes image inputs, but task(s) 'te', 'add' have other inputs"
            in msg)


def test_suite_tags_select_models():
    loaded = parse_suite(TINY.replace("params: {kernel: relu_ntk}}", "params: {kernel: relu_ntk}, tags: [reference]}")
                         .replace('"@networks", ntk', '"@reference"'), "s.yaml")
    assert loaded.tags == {"ntk": {"kernels", "reference"}}


def test_a_max_margin_model_on_a_regression_task_is_a_validation_error():
    """#14 item 10: this suite validated, then crashed in the SVM theory solve at run time."""
    msg = suite_error(TINY.replace("params: {kernel: relu_ntk}}", "params: {kernel: relu_ntk}}\n  - {id: logit, adapter: mlp, params: {loss: logistic}}"))
    assert ("s.yaml:8: models[1].params: loss: logistic trains a max-margin model that needs ±1 targets, "
            "but task(s) 'add' are regression") in msg
    msg = suite_error(TINY.replace("params: {kernel: relu_ntk}}", "params: {kernel: relu_ntk, objective: svm}}"))
    assert "s.yaml:7: models[0].params: objective: svm trains a max-margin model" in msg
    parse_suite(TINY.replace("params: {kernel: relu_ntk}}", "params: {kernel: relu_ntk, objective: svm}, tasks: [te]}")
                .replace(', ntk], tasks: [add]', '], tasks: [add]'), "s.yaml")


def test_docs_suite_example_validates():
    """docs/reference/suite-schema.md's example suite (the README's before) validates and means what its comments say."""
    from pathlib import Path

    readme = (Path(__file__).parents[1] / "docs" / "reference" / "suite-schema.md").read_text()
    block = readme[readme.index("# Writing a suite"):].split("```yaml\n", 1)[1].split("```", 1)[0]
    loaded = parse_suite(block, "suite-schema.md")
    assert [m.id for m in loaded.models] == [f"mlp[init_scale={v}]" for v in ("0.001", "0.01", "0.1", "1")]
    assert loaded.tags["mlp[init_scale=0.001]"] == {"networks", "rich-candidates"}
    assert [e.claim for e in loaded.suite.expectations] == ["slope_below_one", "above"]
    full = parse_suite(block, "suite-schema.md", profile="full")  # its profile, as the comments describe it
    assert {m.params.width for m in full.models} == {4096} and full.models[0].seeds == tuple(range(10))
    assert full.suite.tasks[0].params == {"anchors": [[0, 4], [0, 4]]}


@pytest.mark.parametrize("loss", ["cross_entropy", "categorical_hinge"])
def test_a_class_loss_on_a_task_without_classes_is_a_validation_error(loss):
    # Both class losses, one rule (compbench.losses): before, categorical_hinge on a scalar task
    # validated and became an error record at run time.
    text = (
        "name: s\n"
        "tasks:\n"
        "  - {id: add, family: additive, params: {anchors: [[4], [4]]}, encoding: {name: digits}}\n"
        "models:\n"
        f"  - {{id: cnn, adapter: convnet, params: {{loss: {loss}}}}}\n"
    )
    msg = suite_error(text)
    assert f"s.yaml:5: models[0].params: loss: {loss} needs a multiclass task, but task(s) 'add' are not" in msg
