"""The kernel machine a model's training corresponds to (`Adapter.theory_options()`), typed, and its one conversion
from the plain dict a user's adapter may return."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, get_args

import numpy as np

from compbench.errors import CompbenchError

Objective = Literal["min_norm", "ridge", "svm", "svr", "linearised_gd", "gln_program"]
OBJECTIVES: tuple[str, ...] = get_args(Objective)
# min_norm and ridge fit f₀ + K(K + λ)⁺(y − f₀); the max-margin ones fit ±1 or real targets and ignore f₀.
REGRESSION_OBJECTIVES = ("min_norm", "ridge")
# (lowest value, whether the lowest is excluded) of each real-valued option.
_BOUNDS = {"ridge": (0.0, False), "C": (0.0, True), "epsilon": (0.0, False)}


class TheoryOptionsError(CompbenchError, ValueError):
    """Theory options the engine cannot use (an unknown key, a missing or unknown objective, a bad value)."""

    def __init__(self, problems: list[str] | tuple[str, ...], adapter: str | None = None) -> None:
        self.problems, self.adapter = tuple(problems), adapter
        super().__init__((f"adapter {adapter!r}: " if adapter else "") + "; ".join(problems))


@dataclass(frozen=True)
class TheoryOptions:
    """What the theory engine solves for a model: `objective` (min_norm: gradient descent on MSE from f₀; ridge:
    with `ridge` λ ≥ 0; svm / svr: max-margin with `C` > 0, `epsilon` ≥ 0 and `max_iter` (-1: no limit);
    linearised_gd and gln_program: the adapter gives the prediction itself, `Fitted.theory_predictions`)."""

    objective: Objective = "min_norm"
    ridge: float = 0.0
    C: float = 1e10
    epsilon: float = 0.1
    max_iter: int = -1

    def __post_init__(self) -> None:
        problems = _problems({f.name: getattr(self, f.name) for f in fields(self)})
        if problems:
            raise TheoryOptionsError(problems)

    @classmethod
    def of(cls, value: Any) -> TheoryOptions:
        """`value` as TheoryOptions: itself when typed, else a plain dict (file models' and third parties') checked key
        by key (it must name its `objective`); raises TheoryOptionsError listing every problem."""
        if isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise TheoryOptionsError([f"theory_options() must return TheoryOptions or a dict, got {type(value).__name__}"])
        known = [f.name for f in fields(cls)]
        problems = []
        if "objective" not in value:
            problems.append(f"theory_options() has no 'objective' (one of {', '.join(OBJECTIVES)})")
        unknown = [k for k in value if k not in known]
        if unknown:
            problems.append(f"theory_options() has unknown keys {', '.join(map(repr, unknown))} (known: {', '.join(known)})")
        given = {k: v for k, v in value.items() if k in known and v is not None}  # None: the default
        problems += _problems(given)
        if problems:
            raise TheoryOptionsError(problems)
        typed: dict[str, Any] = {k: int(v) if k == "max_iter" else float(v) if k in _BOUNDS else str(v) for k, v in given.items()}
        return cls(**typed)

    @property
    def regression(self) -> bool:
        """Whether the objective is a kernel regression (min_norm or ridge), which starts from the network's f₀."""
        return self.objective in REGRESSION_OBJECTIVES

    @property
    def min_norm(self) -> bool:
        """Whether the solve is the min-norm one (a regression with no ridge), the one a SymmetricFactor serves."""
        return self.regression and self.ridge == 0

    def predict(self, K_train: np.ndarray, K_eval: np.ndarray, y_train: np.ndarray, *, f0_train: np.ndarray | None = None,
                f0_eval: np.ndarray | None = None, factor: object | None = None) -> np.ndarray:
        """This kernel machine's predictions on the evaluation samples (compbench.theory.predict.theory_predictions);
        f₀ and `factor` serve the regression objectives only."""
        from compbench.theory.predict import theory_predictions

        regression = self.regression
        return theory_predictions(K_train, K_eval, y_train, self.objective, self.ridge,
                                  f0_train=f0_train if regression else None, f0_eval=f0_eval if regression else None,
                                  C=self.C, epsilon=self.epsilon, max_iter=self.max_iter,
                                  factor=factor if regression else None)


def _problems(options: Mapping[str, Any]) -> list[str]:
    """What is wrong with each given option's value (a missing one takes its default)."""
    problems = []
    for key, v in options.items():
        if key == "objective" and v not in OBJECTIVES:
            problems.append(f"theory_options() objective {v!r} is not one of {', '.join(OBJECTIVES)}")
        elif key in _BOUNDS:
            low, strict = _BOUNDS[key]
            number = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, (bool, np.bool_))
            if not (number and math.isfinite(v) and (v > low if strict else v >= low)):
                problems.append(f"theory_options() {key} must be a finite number {'>' if strict else '≥'} {low:g}, got {v!r}")
        elif key == "max_iter" and (isinstance(v, bool) or not isinstance(v, (int, np.integer))):
            problems.append(f"theory_options() max_iter must be an int (-1: no limit), got {v!r}")
    return problems
