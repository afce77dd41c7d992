"""scikit-learn estimators trained on their ONNX graph by onnxruntime."""

from skl_ortgrad.estimators import converters  # noqa: F401  (registers the skl2onnx converters)
from skl_ortgrad.estimators.gradient import OnnxGradientClassifier, OnnxGradientRegressor
from skl_ortgrad.estimators.mlp import OnnxMLPClassifier, OnnxMLPRegressor
from skl_ortgrad.estimators.sgd import OnnxSGDClassifier, OnnxSGDRegressor

__all__ = [
    "OnnxGradientClassifier",
    "OnnxGradientRegressor",
    "OnnxMLPClassifier",
    "OnnxMLPRegressor",
    "OnnxSGDClassifier",
    "OnnxSGDRegressor",
]
