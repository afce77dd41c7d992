"""The trainer and the training objects; ``ConvergenceError`` is importable from here as
from onnxcustom's ``training`` package."""

from skl_ortgrad.exceptions import ConvergenceError

__all__ = ["ConvergenceError"]
