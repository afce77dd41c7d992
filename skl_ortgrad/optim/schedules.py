r"""Step size schedules :math:`\eta(t)`: ``learning_rate``'s values, as scikit-learn's
:class:`~sklearn.linear_model.SGDRegressor` defines them, with ``t`` the samples seen plus one
(scikit-learn's ``t_``; with ``batch_size=1`` its per-sample ``t``, with larger batches the
same pace per epoch):

* ``'constant'``: :math:`\eta_t = \eta_0`;
* ``'invscaling'``: :math:`\eta_t = \eta_0 / t^{p}` with :math:`p` = ``power_t``;
* ``'optimal'``: :math:`\eta_t = 1 / (\alpha (t_0 + t - 1))` with
  :math:`t_0 = 1 / (\alpha\, \eta_{init})`, :math:`\eta_{init} = \tau / \max(1,
  \ell'(-\tau, 1))` and :math:`\tau = \sqrt{1 / \sqrt{\alpha}}`, the heuristic of
  scikit-learn (Léon Bottou's "typical weight"). Every loss of this package decreases
  when the score moves towards the label, so :math:`\ell'(-\tau, 1) \le 0` and
  :math:`\eta_{init} = \tau` (:func:`typical_eta0`): :math:`t_0 = 1 / (\alpha \tau)`.

Each is a vectorized function of the float64 ``t`` of every batch of an epoch (the trainer
computes an epoch's rates at once); the update rules (:mod:`skl_ortgrad.optim.sgd`,
:mod:`~skl_ortgrad.optim.momentum`, :mod:`~skl_ortgrad.optim.adam`) hold the parameters.
"""

from __future__ import annotations

import math

import numpy as np

#: The schedules' names, ``learning_rate``'s values.
SCHEDULES = ("constant", "invscaling", "optimal")


def checked_times(ts: np.ndarray) -> np.ndarray:
    """``ts`` as float64, after checking that every ``t >= 1``.

    Raises
    ------
    ValueError
        If some ``t < 1``.
    """
    ts = np.asarray(ts, dtype=np.float64)
    if ts.size and ts.min() < 1:
        raise ValueError(
            f"t counts samples seen plus one and starts at 1, got {ts.min():g}."
        )
    return ts


def constant(ts: np.ndarray, eta0: float) -> np.ndarray:
    r""":math:`\eta_t = \eta_0` for every ``t`` of ``ts``."""
    return np.full(ts.shape, float(eta0))


def invscaling(ts: np.ndarray, eta0: float, power_t: float) -> np.ndarray:
    r""":math:`\eta_t = \eta_0 / t^{p}` for every ``t`` of ``ts``."""
    return float(eta0) / ts ** float(power_t)


def optimal(ts: np.ndarray, eta0: float, alpha: float) -> np.ndarray:
    r""":math:`\eta_t = 1 / (\alpha (t_0 + t - 1))`, :math:`t_0 = 1 / (\alpha \eta_0)`, for
    every ``t`` of ``ts``: Bottou's schedule, which starts at :math:`\eta_0` and decays as
    :math:`1 / (\alpha t)`."""
    alpha = float(alpha)
    t0 = 1.0 / (alpha * float(eta0))
    return 1.0 / (alpha * (t0 + ts - 1))


def typical_eta0(alpha: float) -> float:
    r"""scikit-learn's :math:`\eta_{init} = \tau = \sqrt{1/\sqrt{\alpha}}` of ``'optimal'``."""
    return math.sqrt(1.0 / math.sqrt(alpha))
