"""The training objects, river-style, one concept a module: step size schedules
(:mod:`~skl_ortgrad.optim.schedules`), update rules (:mod:`~skl_ortgrad.optim.sgd`,
:mod:`~skl_ortgrad.optim.momentum`, :mod:`~skl_ortgrad.optim.adam`, and
:mod:`~skl_ortgrad.optim.scaled` for a rule whose rate is scaled and capped,
:mod:`~skl_ortgrad.optim.passive_aggressive` for the step of a linear model that reads
its row's loss), losses
(:mod:`~skl_ortgrad.optim.losses`), penalties (:mod:`~skl_ortgrad.optim.penalties`,
:mod:`~skl_ortgrad.optim.loss_penalty`), and the string aliases of all of them
(:mod:`~skl_ortgrad.optim.aliases`).

Each object emits the ONNX graph of what it contributes and steps with numpy; none knows
the training loop or the gradient backends (:mod:`skl_ortgrad.training` and
:mod:`skl_ortgrad.gradient` use them, not the other way round).
"""

from skl_ortgrad.optim import aliases as _aliases  # noqa: F401  (registers the aliases)
from skl_ortgrad.optim.adam import LearningRateAdam
from skl_ortgrad.optim.base import BaseLearningObject
from skl_ortgrad.optim.loss_penalty import L2LossPenalty
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
from skl_ortgrad.optim.passive_aggressive import PassiveAggressiveRate
from skl_ortgrad.optim.penalties import (
    BaseLearningPenalty,
    ElasticLearningPenalty,
    NoLearningPenalty,
)
from skl_ortgrad.optim.rate import BaseLearningRate
from skl_ortgrad.optim.scaled import ScaledLearningRate
from skl_ortgrad.optim.sgd import LearningRateSGD

__all__ = [
    "AbsoluteLearningLoss",
    "BaseLearningLoss",
    "BaseLearningObject",
    "BaseLearningPenalty",
    "BaseLearningRate",
    "ElasticLearningLoss",
    "ElasticLearningPenalty",
    "EpsilonInsensitiveLearningLoss",
    "HingeLearningLoss",
    "HuberLearningLoss",
    "L2LossPenalty",
    "LearningRateAdam",
    "LearningRateSGD",
    "LearningRateSGDNesterov",
    "ModifiedHuberLearningLoss",
    "NegLogLearningLoss",
    "NoLearningPenalty",
    "PassiveAggressiveRate",
    "PoissonLearningLoss",
    "ScaledLearningRate",
    "SquareLearningLoss",
    "SquaredEpsilonInsensitiveLearningLoss",
    "SquaredHingeLearningLoss",
]
