"""A linear probe: the ridge fit of a task's factors on a representation's features (what it knows, linearly).

Reizinger et al.'s linear identifiability says a representation that has identified the factors
holds them as a linear map of its features, so a linear read-out fitted on the training cells
recovers them on the held-out cells too. The probe fits that read-out, with an intercept, on the
training samples and predicts every evaluation sample: scoring then compares it with the factors
exactly as it compares the network's own read-out (compbench.scoring.metrics.factor_metrics).
"""

from __future__ import annotations

import numpy as np

# λ as a share of the features' summed variance: it damps only directions that carry less than about a thousandth
# of the features' mean variance (where an unregularised fit would chase noise or extrapolate wildly off a few
# training cells), and leaves an exact linear map's held-out R² within 1e-5 of 1 (tests/test_probe.py).
PROBE_RIDGE = 1e-3


def linear_probe(features_train: np.ndarray, targets: np.ndarray, features_eval: np.ndarray,
                 ridge: float = PROBE_RIDGE) -> np.ndarray:
    """The ridge probe's predictions on `features_eval` (n_eval × K), fitted on (`features_train`, `targets`)."""
    phi = np.asarray(features_train, dtype=np.float64).reshape(len(features_train), -1)
    phi_ev = np.asarray(features_eval, dtype=np.float64).reshape(len(features_eval), -1)
    y = np.asarray(targets, dtype=np.float64)
    y2 = y.reshape(len(y), -1)
    mu, y_mu = phi.mean(axis=0), y2.mean(axis=0)
    centred = phi - mu
    # λ scaled by the features' own size, so the probe does not depend on the layer's units
    lam = ridge * max(float(np.mean(centred**2)), np.finfo(np.float64).tiny) * len(phi)
    if phi.shape[1] <= len(phi):  # primal: (ΦᵀΦ + λI) w = Φᵀy
        w = np.linalg.solve(centred.T @ centred + lam * np.eye(phi.shape[1]), centred.T @ (y2 - y_mu))
        out = (phi_ev - mu) @ w + y_mu
    else:  # dual: fewer samples than features
        alpha = np.linalg.solve(centred @ centred.T + lam * np.eye(len(phi)), y2 - y_mu)
        out = (phi_ev - mu) @ (centred.T @ alpha) + y_mu
    return out if y.ndim == 2 else out[:, 0]
