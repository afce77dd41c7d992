"""scikit-learn compatible estimators whose weights onnxruntime trains on ONNX graphs (with
onnxruntime-training's gradient builder or skl_ortgrad's own standard-ONNX reverse mode).

onnxruntime and skl2onnx are loaded by the first fit, predict or conversion, not by this
import (:mod:`skl_ortgrad._import_hooks`).
"""

# First: whoever imports onnxruntime first, its import must not configure the root logger.
from skl_ortgrad import _logging  # noqa: F401
from skl_ortgrad._version import __version__ as __version__
from skl_ortgrad.estimators import (
    OnnxGradientClassifier,
    OnnxGradientRegressor,
    OnnxMLPClassifier,
    OnnxMLPRegressor,
    OnnxSGDClassifier,
    OnnxSGDRegressor,
)
from skl_ortgrad.estimators.persistence import load, save
from skl_ortgrad.exceptions import ConvergenceError, PickleVersionWarning
from skl_ortgrad.optim import (
    BaseLearningRate,
    LearningRateAdam,
    LearningRateSGD,
    LearningRateSGDNesterov,
)
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
from skl_ortgrad.optim.penalties import (
    BaseLearningPenalty,
    ElasticLearningPenalty,
    NoLearningPenalty,
)

__all__ = [
    "AbsoluteLearningLoss",
    "BaseLearningLoss",
    "BaseLearningPenalty",
    "BaseLearningRate",
    "ConvergenceError",
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
    "OnnxGradientClassifier",
    "OnnxGradientRegressor",
    "OnnxMLPClassifier",
    "OnnxMLPRegressor",
    "OnnxSGDClassifier",
    "OnnxSGDRegressor",
    "PickleVersionWarning",
    "PoissonLearningLoss",
    "SquareLearningLoss",
    "SquaredEpsilonInsensitiveLearningLoss",
    "SquaredHingeLearningLoss",
    "load",
    "save",
]
