"""The string aliases of every training object, in one table per family.

An estimator parameter such as ``loss="hinge"``, ``penalty="l2"`` or ``learning_rate=0.1``
becomes an object through its family's :meth:`~skl_ortgrad.optim.base.BaseLearningObject.
select`; this module registers what each string (and a number, and None) stands for, as
scikit-learn's ``_stochastic_gradient.py`` turns its settings into objects through tables.
The estimators add scikit-learn's scaling of ``alpha`` and ``l1_ratio`` themselves
(:mod:`skl_ortgrad.estimators.sgd_parameters`).
"""

from __future__ import annotations

from skl_ortgrad.optim.adam import LearningRateAdam
from skl_ortgrad.optim.losses import (
    AbsoluteLearningLoss,
    BaseLearningLoss,
    ElasticLearningLoss,
    EpsilonInsensitiveLearningLoss,
    HingeLearningLoss,
    HuberLearningLoss,
    ModifiedHuberLearningLoss,
    NegLogLearningLoss,
    PoissonLearningLoss,
    SquaredEpsilonInsensitiveLearningLoss,
    SquaredHingeLearningLoss,
    SquareLearningLoss,
)
from skl_ortgrad.optim.momentum import LearningRateSGDNesterov
from skl_ortgrad.optim.penalties import (
    BaseLearningPenalty,
    ElasticLearningPenalty,
    NoLearningPenalty,
)
from skl_ortgrad.optim.rate import BaseLearningRate
from skl_ortgrad.optim.schedules import SCHEDULES
from skl_ortgrad.optim.sgd import LearningRateSGD

#: scikit-learn's defaults of ``alpha`` and ``l1_ratio`` (``penalty='elasticnet'``).
SKLEARN_ALPHA = 0.0001
SKLEARN_L1_RATIO = 0.15

LEARNING_RATES = {
    ("SGD", "sgd"): (LearningRateSGD, {}),
    **{(schedule,): (LearningRateSGD, {"learning_rate": schedule}) for schedule in SCHEDULES},
    ("SGDNesterov", "Nesterov", "nesterov"): (LearningRateSGDNesterov, {}),
    ("momentum",): (LearningRateSGDNesterov, {"nesterov": False}),
    ("adam", "Adam"): (LearningRateAdam, {}),
}

LOSSES = {
    ("squared_error", "square_error", "l2"): (SquareLearningLoss, {}),
    ("absolute_error", "l1"): (AbsoluteLearningLoss, {}),
    ("elastic",): (ElasticLearningLoss, {}),
    ("huber",): (HuberLearningLoss, {}),
    ("epsilon_insensitive",): (EpsilonInsensitiveLearningLoss, {}),
    ("squared_epsilon_insensitive",): (SquaredEpsilonInsensitiveLearningLoss, {}),
    ("log", "log_loss", "neg_log"): (NegLogLearningLoss, {}),
    ("softmax", "multinomial"): (NegLogLearningLoss, {"probability_function": "softmax"}),
    ("hinge",): (HingeLearningLoss, {}),
    ("perceptron",): (HingeLearningLoss, {"threshold": 0.0}),
    ("squared_hinge",): (SquaredHingeLearningLoss, {}),
    ("modified_huber",): (ModifiedHuberLearningLoss, {}),
    ("poisson",): (PoissonLearningLoss, {}),
}

PENALTIES = {
    ("none",): (NoLearningPenalty, {}),
    # The seed API's names (onnxcustom): the penalty with its own defaults, l1 = l2 = 0.5,
    # so that select("elastic", l1=..., l2=...) reads as the seed writes it.
    ("elastic", "l1l2"): (ElasticLearningPenalty, {}),
    ("l2",): (ElasticLearningPenalty, {"l1": 0.0, "l2": SKLEARN_ALPHA}),
    ("l1",): (ElasticLearningPenalty, {"l1": SKLEARN_ALPHA, "l2": 0.0}),
    ("elasticnet",): (ElasticLearningPenalty, {
        "l1": SKLEARN_ALPHA * SKLEARN_L1_RATIO, "l2": SKLEARN_ALPHA * (1 - SKLEARN_L1_RATIO)}),
}

for _family, _table in ((BaseLearningRate, LEARNING_RATES), (BaseLearningLoss, LOSSES),
                        (BaseLearningPenalty, PENALTIES)):
    for _names, (_klass, _params) in _table.items():
        _family.register_alias(_names, _klass, **_params)
del _family, _table, _names, _klass, _params

BaseLearningRate.register_default(LearningRateSGD)
# A number is LearningRateSGD(eta0=x), its default schedule included, as onnxcustom's
# select reads it; the estimators turn their numbers into constant rates themselves.
BaseLearningRate.register_float(LearningRateSGD, "eta0")
BaseLearningLoss.register_default(SquareLearningLoss)
BaseLearningPenalty.register_default(NoLearningPenalty)
BaseLearningPenalty.register_float(ElasticLearningPenalty, "l2", l1=0.0)
