"""Which training loss fits which task: the one rule the suite check, the MLP and the deep adapters share.

Kept free of torch so that validating a suite, or listing adapters, imports none.
"""

from __future__ import annotations

__all__ = ["CLASS_LOSSES", "loss_problem"]

CLASS_LOSSES = ("cross_entropy", "categorical_hinge")  # K scores per sample against integer classes


def loss_problem(loss: str, task_kind: str) -> str | None:
    """Why `loss` cannot train on a task of kind `task_kind` (classification|regression|multiclass), or None."""
    if loss in CLASS_LOSSES and task_kind != "multiclass":
        return f"loss: {loss} needs a multi-class task (integer classes), this one is {task_kind}; use loss: mse"
    if loss == "logistic" and task_kind != "classification":
        return (
            f"loss: logistic needs a ±1 classification task (one output), this one is {task_kind}; use loss: mse"
            + (" or cross_entropy" if task_kind == "multiclass" else "")
        )
    return None
