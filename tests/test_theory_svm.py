"""The direct libsvm path of kernel_svm / kernel_svr equals sklearn's SVC / SVR on the same Gram."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.svm import SVC, SVR

from compbench.tasks import make_task
from compbench.theory import kernel_svm, kernel_svr, overlap_kernel


@pytest.mark.parametrize("weights", [[0, 0.1, 0.3, 1], [0, 0.2035, 0.5012, 1], [0, 0.05, 0.2, 1]])
@pytest.mark.parametrize("preset", ["CD-1", "CD-3"])
def test_kernel_svm_equals_sklearn_svc(weights, preset):
    t = make_task("context_dependence", preset=preset)
    tr = t.train_mask
    K = overlap_kernel(t.cells, t.cells, weights)
    ref = SVC(kernel="precomputed", C=1e10).fit(K[np.ix_(tr, tr)], t.y[tr]).decision_function(K[:, tr])
    ours, converged = kernel_svm(K[np.ix_(tr, tr)], K[:, tr], t.y[tr])
    assert converged
    np.testing.assert_allclose(ours, ref, atol=1e-9)


def test_kernel_svr_equals_sklearn_svr_and_reports_non_convergence():
    t = make_task("additive", anchors=[[4], [4]])
    tr = t.train_mask
    K = overlap_kernel(t.cells, t.cells, [0, 0.3, 1])
    ref = SVR(kernel="precomputed", C=1e10, epsilon=0.1).fit(K[np.ix_(tr, tr)], t.y[tr]).predict(K[:, tr])
    ours, converged = kernel_svr(K[np.ix_(tr, tr)], K[:, tr], t.y[tr])
    assert converged
    np.testing.assert_allclose(ours, ref, atol=1e-9)
    assert kernel_svr(K[np.ix_(tr, tr)], K[:, tr], t.y[tr], max_iter=2)[1] is False


def test_libsvm_prints_nothing(capfd):
    """libsvm's C solver log (`obj = …, nSV = …`) must not reach stdout: a CD sweep makes 10,000 fits."""
    from sklearn.svm import _libsvm

    _libsvm.set_verbosity_wrap(1)  # as if something earlier in the process had turned it on
    x = np.random.default_rng(0).normal(size=(12, 3))
    K = x @ x.T
    y = np.where(x[:, 0] > 0, 1.0, -1.0)
    kernel_svm(K, K, y)
    kernel_svr(K, K, x[:, 1])
    out, err = capfd.readouterr()
    assert out == "" and err == ""
