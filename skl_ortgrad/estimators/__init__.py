"""scikit-learn estimators trained on their ONNX graph by onnxruntime.

Their skl2onnx converters (:mod:`~skl_ortgrad.estimators.converters`) are registered as
soon as skl2onnx is imported, by whoever imports it, or now when it is imported already:
``skl2onnx.to_onnx(pipeline, X)`` finds them, and ``import skl_ortgrad`` does not load
skl2onnx (:mod:`skl_ortgrad._import_hooks`).
"""

from types import ModuleType

from skl_ortgrad._import_hooks import after_import
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


def _register_converters(skl2onnx: ModuleType) -> None:
    # Importing the module registers them.
    from skl_ortgrad.estimators import converters  # noqa: F401


after_import("skl2onnx", _register_converters)
