"""Suite loading: valid suites expand correctly; malformed ones are rejected with file:line:field."""

from __future__ import annotations

import textwrap

import pytest

from compbench.suite import SuiteError, load_suite, parse_suite
from tiny_suites import SUITES, scenario, suite_text

GOOD = """\
name: tiny
seeds: 2
tasks:
  - id: add
    family: additive
    params: {anchors: [[4], [4]]}
  - id: te
    family: transitive_equivalence
models:
  - id: k
    adapter: kernel
    params: {kernel: overlap, weights: [0.0, 0.3, 1.0]}
  - id: m
    adapter: mlp
    params: {width: 16, max_steps: 5}
    sweep: {init_scale: [0.01, 1.0]}
expectations:
  - claim: at_chance
    source: {paper: compbench, threshold: a test fixture}
    models: [k]
    tasks: [te]
"""


def issues_of(text: str) -> list[str]:
    with pytest.raises(SuiteError) as exc:
        parse_suite(textwrap.dedent(text), "bad.yaml")
    return [str(i) for i in exc.value.issues]


def test_good_suite_expands_sweeps_and_seeds():
    loaded = parse_suite(GOOD, "good.yaml")
    assert [m.id for m in loaded.models] == ["k", "m[init_scale=0.01]", "m[init_scale=1]"]
    assert loaded.models[0].seeds == (0,)  # kernel machines are deterministic: one seed
    assert loaded.models[1].seeds == (0, 1)
    assert loaded.models[1].params.init_scale == 0.01
    assert [t.id for t in loaded.tasks_for(loaded.models[0])] == ["add", "te"]


@pytest.mark.parametrize("name", sorted(p.stem for p in SUITES.glob("*.yaml")))
def test_every_test_scenario_is_a_valid_suite_and_reads_back_through_overrides(name):
    """tests/suites/*.yaml: each parses, and suite_text with an override changes that key alone."""
    loaded = parse_suite(scenario(name), f"{name}.yaml")
    renamed = parse_suite(suite_text(name, name="renamed"), "renamed.yaml")
    assert renamed.name == "renamed" and [m.id for m in renamed.models] == [m.id for m in loaded.models]
    assert [t.id for t in renamed.suite.tasks] == [t.id for t in loaded.suite.tasks]


def test_bundled_kernel_limits_suite_is_valid():
    loaded = load_suite("kernel-limits")
    groups = {m.group for m in loaded.models}
    assert {"kernel-relu", "mlp-lazy", "mlp-rich", "cd-svm", "cd-minnorm"} <= groups
    assert sum(m.group == "cd-svm" for m in loaded.models) == 2500
    claims = {e.claim for e in loaded.suite.expectations}
    assert claims == {"matches_kernel", "at_chance", "beats_kernel", "additive", "slope_below_one", "near_theory", "ordered", "near"}
    assert all(e.source is not None for e in loaded.suite.expectations)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # 1. invalid YAML syntax
        ("name: x\ntasks: [\n", "bad.yaml:3: invalid YAML"),
        # 2. wrong type of a top-level field
        (GOOD.replace("seeds: 2", "seeds: many"), "bad.yaml:2: seeds:"),
        # 3. unknown task family, with a suggestion
        (GOOD.replace("family: additive", "family: additve"), "bad.yaml:5: tasks[0].family: unknown task family 'additve'; did you mean 'additive'"),
        # 4. unknown adapter, with a suggestion
        (GOOD.replace("adapter: mlp", "adapter: mpl"), "bad.yaml:14: models[1].adapter: unknown adapter 'mpl'; did you mean 'mlp'"),
        # 5. invalid split: a value never seen in training
        (GOOD.replace("anchors: [[4], [4]]", "anchors: [[4], []]"), "bad.yaml:6: tasks[0].params: invalid task:"),
        # 6. missing required field
        (GOOD.replace("    family: transitive_equivalence\n", ""), "bad.yaml:7: tasks[1].family: Field required"),
        # 7. unknown field in a task
        (GOOD.replace("    family: transitive_equivalence\n", "    family: transitive_equivalence\n    colour: red\n"), "bad.yaml:9: tasks[1].colour: unknown field 'colour'"),
        # 8. adapter param of the wrong type
        (GOOD.replace("width: 16", "width: wide"), "bad.yaml:15: models[1].params.width:"),
        # 9. unknown adapter param
        (GOOD.replace("width: 16", "widht: 16"), "bad.yaml:15: models[1].params.widht: unknown field 'widht'"),
        # 10. unknown task param
        (GOOD.replace("anchors: [[4], [4]]", "anchor: [[4], [4]]"), "bad.yaml:6: tasks[0].params.anchor: unknown field 'anchor'"),
        # 11. expectation with an unknown claim
        (GOOD.replace("claim: at_chance", "claim: at_random"), "bad.yaml:18: expectations[0].claim:"),
        # 12. expectation pattern matching nothing
        (GOOD.replace("tasks: [te]", "tasks: [tee]"), "bad.yaml:21: expectations[0].tasks[0]: pattern 'tee' matches no task"),
        # 13. duplicate ids
        (GOOD.replace("id: te", "id: add"), "bad.yaml:7: tasks[1].id: duplicate id 'add'"),
        # 14. a python object tag is refused by safe loading
        ("name: !!python/object/apply:os.system ['true']\n", "bad.yaml:1: invalid YAML"),
        # 15. a sweep path that does not exist in a list
        (GOOD.replace("sweep: {init_scale: [0.01, 1.0]}", "sweep: {width.3: [1, 2]}"), "bad.yaml:16: models[1].sweep.width.3: cannot set sweep path"),
        # 16. empty test set
        (GOOD.replace("params: {anchors: [[4], [4]]}", "params: {anchors: [[0,1,2,3,4,5,6,7,8], [4]]}"), "bad.yaml:6: tasks[0].params: invalid task:"),
        # 17. the document is not a mapping
        ("- just\n- a list\n", "bad.yaml:1: a suite must be a YAML mapping"),
    ],
)
def test_malformed_suites_are_rejected_with_location(text, expected):
    issues = issues_of(text)
    assert any(i.startswith(expected) for i in issues), issues


def test_missing_suite_file_lists_bundled_suites(tmp_path):
    with pytest.raises(SuiteError, match="no such suite file .*kernel-limits"):
        load_suite(tmp_path / "nope.yaml")


def test_profile_overrides_params_and_seeds():
    text = GOOD + "profiles:\n  full:\n    seeds: 4\n    params: {m: {width: 64}}\n"
    loaded = parse_suite(text, "good.yaml", profile="full")
    mlp = [m for m in loaded.models if m.group == "m"]
    assert all(m.params.width == 64 and m.params.max_steps == 5 and m.seeds == (0, 1, 2, 3) for m in mlp)
    assert parse_suite(text, "good.yaml").models[1].params.width == 16
    with pytest.raises(SuiteError, match=r"good.yaml:\d+: profiles.full.params.mm: profile names unknown model 'mm'"):
        parse_suite(text.replace("{m: {width", "{mm: {width"), "good.yaml", profile="full")
    with pytest.raises(SuiteError, match="no profile 'fast' in this suite \\(profiles: full\\)"):
        parse_suite(text, "good.yaml", profile="fast")


def test_profile_overrides_task_params():
    text = GOOD + "profiles:\n  big:\n    task_params: {add: {anchors: [[0, 4], [0, 4]]}}\n"
    default, big = parse_suite(text, "good.yaml"), parse_suite(text, "good.yaml", profile="big")
    add = {t.id: t for t in big.suite.tasks}["add"]
    assert add.params == {"anchors": [[0, 4], [0, 4]]} and {t.id: t for t in default.suite.tasks}["add"].params == {"anchors": [[4], [4]]}
    # the task is built from the profile's params: the cells in rows or columns 0 and 4 of the 9 × 9
    # grid train, 2·9 + 2·9 − 4 = 32, against 9 + 9 − 1 = 17 for the anchor 4 alone
    from compbench.tasks import make_task

    assert make_task("additive", **add.params).train_mask.sum() == 32
    assert make_task("additive", anchors=[[4], [4]]).train_mask.sum() == 17
    with pytest.raises(SuiteError, match=r"good.yaml:\d+: profiles.big.task_params.nope: profile names unknown task 'nope'"):
        parse_suite(text.replace("{add: {anchors", "{nope: {anchors"), "good.yaml", profile="big")
    with pytest.raises(SuiteError, match=r"good.yaml:6: tasks\[0\].params: anchor index 99 of component 0 is out of range 0..8 \(with profile 'big'\)"):
        parse_suite(text.replace("anchors: [[0, 4], [0, 4]]", "anchors: [[0, 99], [0, 4]]"), "good.yaml", profile="big")


def test_encoding_parameters_are_validated_with_file_line_and_field():
    found = issues_of(
        """\
        name: enc
        tasks:
          - id: a
            family: additive
            encoding:
              name: digits
              samples_per_cel: 3
              layout: diagonal
          - id: b
            family: additive
            encoding: {name: onehot, foo: 1}
        models:
          - {id: k, adapter: kernel, params: {weights: [0.0, 0.3, 1.0]}}
        """
    )
    assert "bad.yaml:7: tasks[0].encoding.samples_per_cel: unknown field 'samples_per_cel'" in found
    assert any(i.startswith("bad.yaml:8: tasks[0].encoding.layout:") and "'side_by_side', 'channels' or 'paper'" in i for i in found)
    assert any(i.startswith("bad.yaml:11: tasks[1].encoding:") and "takes no parameters" in i for i in found)
    assert len(found) == 3


def test_valid_image_encoding_parameters_pass():
    loaded = parse_suite(
        textwrap.dedent(
            """\
            name: enc
            tasks:
              - {id: a, family: additive, encoding: {name: digits, samples_per_cell: 2, layout: channels}}
            models:
              - {id: k, adapter: kernel, params: {weights: [0.0, 0.3, 1.0]}}
            """
        )
    )
    assert loaded.suite.tasks[0].encoding_params == {"samples_per_cell": 2, "layout": "channels"}


def test_every_bundled_suite_and_profile_validates():
    from compbench.suite import bundled_dir

    paths = sorted(bundled_dir("suites").glob("*.yaml"))
    assert {p.stem for p in paths} >= {"kernel-limits", "kernel-limits-images"}
    for path in paths:
        loaded = load_suite(path)
        for profile in loaded.suite.profiles:
            with_profile = load_suite(path, profile=profile)
            assert [m.id for m in with_profile.models] == [m.id for m in loaded.models]
    full = load_suite("kernel-limits-images", profile="full")
    convnet = next(m for m in full.models if m.id == "convnet")
    assert convnet.params.width == 1.0 and convnet.seeds == tuple(range(10))


def test_a_profile_overrides_encodings_per_task_or_for_all():
    from compbench.suite import SuiteError, load_suite, parse_suite

    images = load_suite("kernel-limits-images", "mnist")
    assert {t.encoding_params["source"] for t in images.suite.tasks} == {"mnist-5k"}
    assert images.suite.tasks[0].encoding_params["samples_per_cell"] == 4  # merged over the task's own
    assert load_suite("kernel-limits-images").suite.tasks[0].encoding_params.get("source", "digits") == "digits"
    text = """
name: p
tasks:
  - {id: a, family: additive, params: {anchors: [[4], [4]]}}
  - {id: b, family: additive, params: {anchors: [[4], [4]]}, encoding: {name: onehot}}
models:
  - {id: k, adapter: kernel, params: {kernel: relu_ntk}}
profiles:
  x: {encodings: {b: {name: khot}}}
  bad: {encodings: {c: {}}}
"""
    loaded = parse_suite(text, profile="x")
    assert [t.encoding_name for t in loaded.suite.tasks] == ["onehot", "khot"]
    with pytest.raises(SuiteError, match="profile names unknown task 'c'"):
        parse_suite(text, profile="bad")
