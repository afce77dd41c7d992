"""onnxcustom's module name for the learning rates (the seed API), now in
:mod:`skl_ortgrad.optim`; pickles of release 0.1.0 name their classes here."""

from skl_ortgrad.optim import (
    BaseLearningRate,
    LearningRateAdam,
    LearningRateSGD,
    LearningRateSGDNesterov,
)

__all__ = ["BaseLearningRate", "LearningRateAdam", "LearningRateSGD", "LearningRateSGDNesterov"]
