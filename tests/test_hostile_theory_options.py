"""`Adapter.theory_options()` is typed (compbench.theory.options.TheoryOptions); a user's adapter that returns a plain
dict, as file models and third-party adapters do, keeps working, and a bad one is named by adapter and key."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest

import compbench
from compbench.adapters.base import Adapter, theory_options_of
from compbench.testing import check_adapter
from compbench.theory.options import TheoryOptions, TheoryOptionsError
from tiny_suites import kernel_suite

# Kernel ridge regression with the linear kernel (its own theory, λ = 0.1), its options as a dict, typed, or bad.
RIDGE = textwrap.dedent('''
    import numpy as np
    from compbench.adapters import Adapter, Fitted, TheoryOptions


    def _k(a, b):
        return np.asarray(a.x, float).reshape(len(a), -1) @ np.asarray(b.x, float).reshape(len(b), -1).T


    class DictRidge(Adapter):
        deterministic = True

        def kernel(self, a, b):
            return _k(a, b)

        def fit_seeds(self, train, evaluate, seeds):
            K, Ke = _k(train, train), _k(evaluate, train)
            return [Fitted(Ke @ np.linalg.solve(K + 0.1 * np.eye(len(train)), train.y)) for _ in seeds]

        def theory_options(self):
            return {"objective": "ridge", "ridge": np.float64(0.1)}


    class TypedRidge(DictRidge):
        def theory_options(self):
            return TheoryOptions("ridge", ridge=0.1)


    class BadRidge(DictRidge):
        def theory_options(self):
            return {"objective": "ridge", "lambda": 0.1}
''')


@pytest.fixture(scope="module")
def ridge_run(tmp_path_factory):
    """The three file models beside a kernel suite, run through the CLI, then read back through evaluate()."""
    from tiny_suites import cli

    tmp = tmp_path_factory.mktemp("opts")
    (tmp / "ridge.py").write_text(RIDGE, encoding="utf-8")
    (tmp / "suite.yaml").write_text(kernel_suite("opts", "leak", relu=False), encoding="utf-8")
    models = [f"{tmp / 'ridge.py'}:{name}" for name in ("DictRidge", "TypedRidge", "BadRidge")]
    argv = ["run", "--suite", str(tmp / "suite.yaml"), "--results", str(tmp / "out"), "--format", "csv", "-q"]
    result = cli(*argv, *(a for m in models for a in ("--model", m)))
    stored = compbench.evaluate(str(tmp / "suite.yaml"), models=models, out=tmp / "out")
    return result, {(r.model, r.task): r for r in stored.records}


def test_a_dict_and_typed_options_give_the_same_theory(ridge_run):
    _, records = ridge_run
    for task in ("add", "te"):
        plain, typed = records["DictRidge", task], records["TypedRidge", task]
        assert plain.status.value == typed.status.value == "ok", (plain.error, typed.error)
        assert plain.theory_objective == typed.theory_objective == "ridge"
        np.testing.assert_array_equal(np.asarray(plain.theory_predictions, float), np.asarray(typed.theory_predictions, float))
        # The adapter fits the machine its options name: its theory is its own output.
        assert typed.metrics["theory_max_abs_diff"] < 1e-9


def test_a_bad_key_is_one_error_line_naming_the_adapter_and_the_key(ridge_run):
    result, records = ridge_run
    bad = records["BadRidge", "add"]
    assert bad.status.value == "error" and bad.error is not None
    # A file model's adapter is named by its reference (ridge.py:BadRidge), as in every other contract error.
    assert bad.error.message.startswith("adapter '") and \
        "ridge.py:BadRidge' broke the adapter contract: theory_options() has unknown keys 'lambda' (known: " in bad.error.message
    assert "theory-options" in bad.error.contract_breaks
    assert result.rc == 1
    lines = [line for line in result.text.splitlines() if "'lambda'" in line]
    assert lines and all("BadRidge" in line or "broke the adapter contract" in line for line in lines), result.text
    assert "Traceback" not in result.text


class _Returns(Adapter):
    options: object = None

    def theory_options(self):
        return self.options


@pytest.mark.parametrize(("options", "said"), [
    ({"objective": "ridge", "lambda": 0.1}, "adapter 'mine': theory_options() has unknown keys 'lambda' (known: objective, ridge, C, epsilon, max_iter)"),
    ({"objective": "ols"}, "adapter 'mine': theory_options() objective 'ols' is not one of min_norm, ridge, svm, svr"),
    ({"objective": "svm", "C": 0}, "adapter 'mine': theory_options() C must be a finite number > 0, got 0"),
    ({"objective": "ridge", "ridge": True}, "adapter 'mine': theory_options() ridge must be a finite number ≥ 0, got True"),
    ({"ridge": 0.1}, "adapter 'mine': theory_options() has no 'objective'"),
    (["min_norm"], "adapter 'mine': theory_options() must return TheoryOptions or a dict, got list"),
])
def test_the_one_conversion_refuses_in_one_line(options, said):
    adapter = type("Mine", (_Returns,), {"options": options})(None)
    with pytest.raises(TheoryOptionsError) as caught:
        theory_options_of(adapter, "mine")
    assert str(caught.value).startswith(said) and "\n" not in str(caught.value)


def test_the_typed_options_are_frozen_checked_and_read_from_a_dict():
    assert TheoryOptions.of({"objective": "svr", "C": 2, "epsilon": np.float32(0.5), "max_iter": np.int64(7)}) == \
        TheoryOptions("svr", C=2.0, epsilon=0.5, max_iter=7)
    assert TheoryOptions.of({"objective": "ridge", "ridge": 0}).min_norm and not TheoryOptions("ridge", 0.1).min_norm
    assert not TheoryOptions("svm").regression
    with pytest.raises(TheoryOptionsError, match="objective 'ols'"):
        TheoryOptions("ols")  # type: ignore[arg-type]
    with pytest.raises(AttributeError):
        TheoryOptions().ridge = 1.0  # type: ignore[misc]


def test_the_conformance_kit_takes_typed_options():
    class Typed(Adapter):
        def kernel(self, a, b):
            return np.asarray(a.x, float) @ np.asarray(b.x, float).T

        def fit_seeds(self, train, evaluate, seeds):
            from compbench.adapters import Fitted

            K, Ke = self.kernel(train, train), self.kernel(evaluate, train)
            return [Fitted(Ke @ np.linalg.solve(K + 0.1 * np.eye(len(train)), train.y)) for _ in seeds]

        def theory_options(self):
            return TheoryOptions("ridge", 0.1)

    report = check_adapter(Typed, images=False)
    assert report.ok, report
