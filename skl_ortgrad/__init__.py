"""scikit-learn compatible estimators trained by onnxruntime-training."""

from skl_ortgrad.exceptions import ConvergenceError

__version__ = "0.1.0"
__all__ = ["ConvergenceError"]
