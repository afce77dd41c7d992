r"""scikit-learn's SGD parameters turned into training objects.

``SGDRegressor`` and ``SGDClassifier`` minimize

.. math::

    \frac{1}{n} \sum_i s_i\, \ell(y_i, x_i^\top w + b) + \alpha R(w), \qquad
    R(w) = \frac{1 - \rho}{2} \|w\|_2^2 + \rho \|w\|_1

(:math:`\rho` = ``l1_ratio``: 0 for ``'l2'``, 1 for ``'l1'``), one sample at a time, with
the step :math:`\eta_t` of ``learning_rate``. The tables below give the same loss
(``loss``, ``epsilon``), the same penalty
(:class:`~skl_ortgrad.ElasticLearningPenalty` with :math:`l_1 = \alpha\rho`,
:math:`l_2 = \alpha(1 - \rho)`) and the same schedule, for mini-batches of :math:`b` rows:
a step along the batch's mean gradient of :math:`b\, \eta_t` moves the weights about as
far as :math:`b` per-sample steps
(:class:`~skl_ortgrad.optim.scaled.ScaledLearningRate`), and the penalty
compounds its :math:`b` decays. With ``batch_size=1`` both are exactly scikit-learn's.

A mean-gradient step beyond :math:`1 / L` oscillates or diverges where per-sample steps
do not: with :math:`b > 1` the rate is capped at :math:`1 / L`,
:math:`L = c\, \lambda_{max}(E[\tilde x \tilde x^\top])` the curvature of the mean loss
(:math:`c` the largest second derivative of the loss: 1 for the squared error, 2 for the
squared hinge, squared epsilon-insensitive and modified Huber losses, 1/4 for the log
loss, 1/2 for the softmax; 1 for the piecewise linear losses, whose large early steps
otherwise make the margins oscillate; :math:`\tilde x = (x, 1)` for the intercept).
The losses whose gradient grows with the residual (:data:`QUADRATIC_TAILS`) diverge
beyond it where a few rows are much longer than the others: their cap is
:math:`\frac{1}{L} \frac{b}{b - 1 + \kappa}`, with the rows' spread :math:`\kappa
\ge 1` (:func:`~skl_ortgrad.estimators.curvature.curvature`), half the step a batch's
update shrinks the error under, in mean square. Measured: the default classifier with
``loss='squared_hinge'`` on the standardized digits (:math:`\kappa` about 70, 3 splits)
diverged under :math:`1 / L` (held-out accuracy 0.63-0.84 in 7 epochs, its loss growing
a hundredfold an epoch; scikit-learn 0.92-0.94) and reaches 0.94-0.97 under the new
cap; two of its ten one-vs-rest problems alone diverged.

The cap decays as the schedule does over the batches taken, :math:`\eta_{max}\,
\eta_{k} / \eta_1` at :math:`k = 1 + (t - 1) / b` batches
(:class:`~skl_ortgrad.optim.scaled.ScaledLearningRate`'s ``decaying_cap``; a constant
schedule keeps it): per-sample SGD decays its rate over its steps. A cap that stayed
held the classifier's ``'optimal'`` rate there for tens of epochs (:math:`b \eta_t`
falls below it after :math:`b / (\alpha \eta_{max})` samples), where the objective of
steps at a constant rate stops improving by ``tol`` within a few epochs, short of the
accuracy. Measured at the defaults (held-out accuracy, mean over splits; ad hoc,
December 2026): 3,000 generated rows of 20 features, 3 classes, 0.655 in 6-10 epochs
-> 0.729 in 55-59 (scikit-learn 0.729 in 89-93), two classes 0.916 -> 0.923 (0.921);
iris 0.895 -> 0.926 (0.926); breast cancer 0.961 in 11-19 epochs -> 0.965 in 11-25
(0.948 in 30-48); wine 0.987 either way (0.973); digits 0.941 in 15-25 -> 0.945 in 20-47
(0.942 in 168-218); ``bench/bench_sparse.py``'s text-like binary fit 0.8193 in 13-14
epochs -> 0.8176 in 12-14 (0.8202), its 5 classes 0.6481 -> 0.6477 (0.6489), the same
epochs. The small fits take more epochs: ``bench/bench_small_fit.py``'s default fit,
2.06x-2.19x -> 2.23x-2.42x scikit-learn's time (two runs each).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from skl_ortgrad.optim import BaseLearningRate, LearningRateSGD
from skl_ortgrad.optim.losses import BaseLearningLoss, NegLogLearningLoss
from skl_ortgrad.optim.passive_aggressive import VARIANTS as PASSIVE_AGGRESSIVE
from skl_ortgrad.optim.passive_aggressive import PassiveAggressiveRate
from skl_ortgrad.optim.penalties import (
    BaseLearningPenalty,
    ElasticLearningPenalty,
    NoLearningPenalty,
)
from skl_ortgrad.optim.scaled import ScaledLearningRate

REGRESSION_LOSSES = ("squared_error", "huber", "epsilon_insensitive",
                     "squared_epsilon_insensitive")
CLASSIFICATION_LOSSES = ("hinge", "log_loss", "modified_huber", "squared_hinge",
                         "perceptron", *REGRESSION_LOSSES)
#: scikit-learn's default ``epsilon``.
DEFAULT_EPSILON = 0.1
# Losses whose parameter is scikit-learn's ``epsilon``.
_EPSILON_LOSSES = {"huber", "epsilon_insensitive", "squared_epsilon_insensitive"}
# Largest second derivative of the smooth losses (kind -> c). The piecewise linear ones
# take c = 1 (Huber, epsilon-insensitive): their batch steps do not diverge but, uncapped,
# the early 'optimal' steps (32 x 10 per batch) throw the weights so far that the margins
# oscillate for many epochs (measured: classifiers below the majority class with Huber or
# epsilon-insensitive losses). The hinge (and perceptron) takes c = 1/16, a cap that only
# tames those first steps: at c = 1 it held the classifiers' default rate flat for tens
# of epochs and fit stopped early on the noisy plateau (test accuracy, defaults, 5 seeds:
# iris 0.874 at c = 1, 0.895 at 1/16, scikit-learn 0.926; 66,667 x 100 generated binary
# 0.7155 in 6 epochs, 0.7549 in 88, scikit-learn 0.7537 in 64; breast cancer, digits and
# wine stay at or above scikit-learn's, in fewer epochs: 13-20 instead of 24-78. Of 1,
# 1/4, 1/8, 1/16, 1/32 and no cap, 1/16 took the fewest epochs on those datasets while
# every accuracy stayed above scikit-learn's or within 0.04 of it).
_CURVATURE = {"squared_error": 1.0, "squared_epsilon_insensitive": 2.0, "squared_hinge": 2.0,
              "log": 0.25, "softmax_log": 0.5, "modified_huber": 2.0, "hinge": 1.0 / 16}
_L1_RATIO = {"l2": 0.0, "l1": 1.0}
#: The losses whose gradient grows with the residual or the margin's shortfall: their cap
#: also follows the rows' spread (see the module's docstring).
QUADRATIC_TAILS = frozenset({"squared_error", "squared_hinge", "squared_epsilon_insensitive"})


#: ``batch_size="auto"``: the smallest batch and the largest, and the fewest batches an
#: epoch keeps when the batch grows (see :func:`auto_batch_size`).
AUTO_BATCH, AUTO_BATCH_MAX, AUTO_MIN_BATCHES = 32, 256, 384


def auto_batch_size(n_rows: int) -> int:
    r"""``batch_size="auto"`` of the linear models for a first training call on
    ``n_rows`` rows: 32 rows, doubled while an epoch keeps at least 384 batches, up to
    256 (32 below 24,576 rows, 64 from 24,576, 128 from 49,152, 256 from 98,304).

    The rate follows the batch (:func:`sgd_learning_rate`: :math:`b\,\eta_t`, capped at
    :math:`1 / L`), so an epoch moves the weights about as far, in fewer onnxruntime
    steps: per epoch on 100k x 100 float32 at the defaults, 256 rows took 0.36x (squared
    error) and 0.56x (binary hinge) of scikit-learn's, 32 rows 0.62x and 0.96x; held-out
    scores at scikit-learn's or above on those problems, and on the test suite's small
    datasets, which keep 32 rows.
    """
    batch = AUTO_BATCH
    while batch < AUTO_BATCH_MAX and n_rows >= AUTO_MIN_BATCHES * batch * 2:
        batch *= 2
    return batch


def sgd_loss(loss: str | BaseLearningLoss, epsilon: float) -> BaseLearningLoss:
    """The loss object of ``loss`` (an object is returned as is).

    ``'log_loss'`` is the exact logistic loss, as scikit-learn's (no clipping epsilon).
    """
    if isinstance(loss, BaseLearningLoss):
        return loss
    if loss == "log_loss":
        return NegLogLearningLoss(eps=0.0)
    params = {"epsilon": float(epsilon)} if loss in _EPSILON_LOSSES else {}
    return BaseLearningLoss.select(loss, **params)


def loss_functions(names: tuple[str, ...]) -> dict[str, tuple[Any, ...]]:
    """scikit-learn's class attribute ``loss_functions`` for the loss ``names``: each
    name -> (the loss class, then the values of its parameters at the default
    ``epsilon``), as scikit-learn's (name -> Cython loss class, then its arguments)."""
    table = {}
    for name in names:
        loss = sgd_loss(name, DEFAULT_EPSILON)
        table[name] = (type(loss), *loss.get_params().values())
    return table


def sgd_penalty(
    penalty: str | BaseLearningPenalty | None, alpha: float, l1_ratio: float, rows: int
) -> BaseLearningPenalty:
    r"""The penalty object of ``penalty``: :math:`\alpha R(w)` applied after every step of a
    mini-batch of ``rows`` rows (an object is returned as is)."""
    if isinstance(penalty, BaseLearningPenalty):
        return penalty
    if penalty is None:
        return NoLearningPenalty()
    if penalty == "elasticnet" and l1_ratio is None:
        raise ValueError("l1_ratio must be set when penalty is 'elasticnet'")
    ratio = float(l1_ratio) if penalty == "elasticnet" else _L1_RATIO[penalty]
    # scikit-learn's cumulative L1 penalty, after each step (exact zeros).
    return ElasticLearningPenalty(
        l1=float(alpha) * ratio, l2=float(alpha) * (1.0 - ratio), rows=int(rows),
        cumulative=True,
    )


#: scikit-learn's ``SPARSE_INTERCEPT_DECAY``: on sparse data, the intercept's step is
#: multiplied by it (``intercept_decay`` of ``make_dataset`` and ``_plain_sgd``).
SPARSE_INTERCEPT_DECAY = 0.01


def sgd_learning_rate(
    params: dict[str, Any], loss: BaseLearningLoss, rows: int, stable_step: float,
    mean_weight: float = 1.0, sparse: bool = False, row_spread: float = 1.0,
    decaying_cap: bool = True,
) -> BaseLearningRate:
    r"""The learning-rate object of an SGD estimator's parameters for batches of ``rows``.

    Parameters
    ----------
    params : dict
        ``learning_rate`` (a schedule name or an object, returned as is), ``eta0``,
        ``power_t``, ``alpha`` and ``fit_intercept``.
    loss : BaseLearningLoss
        The loss trained, for the cap.
    rows : int
        Rows per mini-batch, :math:`b`.
    stable_step : float
        :math:`1 / \lambda_{max}(E[\tilde x \tilde x^\top])` on the training data
        (:func:`~skl_ortgrad.estimators.curvature.stable_step`).
    mean_weight : float
        :math:`\bar s`, the mean sample weight: a batch's gradient is the sum of the
        weighted rows' over :math:`b`, about :math:`\bar s` times the mean gradient, so
        the cap is divided by it.
    sparse : bool
        The features are sparse: with ``params['fit_intercept']``, the intercept's step
        is multiplied by ``SPARSE_INTERCEPT_DECAY`` (plain SGD's ``step_factors``
        ``(1.0, 0.01)``), as scikit-learn's SGD does on sparse data.
    row_spread : float
        :math:`\kappa \ge 1`, the rows' spread on the training data
        (:func:`~skl_ortgrad.estimators.curvature.curvature`): the cap of a loss of
        :data:`QUADRATIC_TAILS` is multiplied by :math:`b / (b - 1 + \kappa)` (1 keeps it
        :math:`1 / L`).
    decaying_cap : bool
        The cap decays as the schedule does over the batches taken
        (:class:`~skl_ortgrad.optim.scaled.ScaledLearningRate`'s ``decaying_cap``);
        False: it stays, as in the models fitted by release 0.1.0.

    Raises
    ------
    ValueError
        For the passive-aggressive schedules ``'pa1'``/``'pa2'``
        (:class:`~skl_ortgrad.optim.passive_aggressive.PassiveAggressiveRate`, ``eta0``
        its :math:`C`, ``params['intercept']`` the intercept where it is not trained)
        with batches of more than one row, whose every row's step depends on its loss,
        and for ``'optimal'`` with ``alpha=0`` (scikit-learn's error).
    """
    schedule = params["learning_rate"]
    if isinstance(schedule, BaseLearningRate):
        return schedule
    factors = (1.0, SPARSE_INTERCEPT_DECAY) if sparse and params["fit_intercept"] else None
    if schedule in PASSIVE_AGGRESSIVE:
        if rows != 1:
            raise ValueError(
                f"learning_rate={schedule!r} (passive-aggressive) sets every row's step "
                "from that row's loss: it trains one row a batch; use batch_size=1 or "
                f"'auto', got {rows}.")
        return PassiveAggressiveRate(C=float(params["eta0"]), variant=schedule, loss=loss,
                                     intercept=params.get("intercept"),
                                     step_factors=factors)
    alpha = float(params["alpha"])
    if schedule == "optimal":
        if alpha == 0:
            raise ValueError(
                "alpha must be > 0 since learning_rate is 'optimal'. alpha is used to "
                "compute the optimal learning rate."
            )
        rate = LearningRateSGD.scikit_learn_optimal(alpha, step_factors=factors)
    else:
        rate = LearningRateSGD(
            eta0=float(params["eta0"]), power_t=float(params["power_t"]),
            learning_rate="constant" if schedule == "adaptive" else schedule,
            step_factors=factors,
        )
    max_eta = None
    if rows > 1:
        max_eta = min(stable_step, 1.0) / _CURVATURE.get(loss.kind, 1.0) / max(
            float(mean_weight), np.finfo(np.float64).tiny)
        if loss.kind in QUADRATIC_TAILS:
            max_eta *= rows / (rows - 1 + float(row_spread))
        if not math.isfinite(max_eta):
            # Weights near 0 (1e-300) move nothing: no step to cap.
            max_eta = None
    return ScaledLearningRate(rate, scale=float(rows), max_eta=max_eta,
                              adaptive=schedule == "adaptive", decaying_cap=decaying_cap)
