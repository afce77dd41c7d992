"""onnxcustom's module name for the losses (the seed API), now
:mod:`skl_ortgrad.optim.losses`; pickles of release 0.1.0 name their classes here."""

from skl_ortgrad.optim import (
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

__all__ = [
    "AbsoluteLearningLoss",
    "BaseLearningLoss",
    "ElasticLearningLoss",
    "EpsilonInsensitiveLearningLoss",
    "HingeLearningLoss",
    "HuberLearningLoss",
    "ModifiedHuberLearningLoss",
    "NegLogLearningLoss",
    "PoissonLearningLoss",
    "SquareLearningLoss",
    "SquaredEpsilonInsensitiveLearningLoss",
    "SquaredHingeLearningLoss",
]
