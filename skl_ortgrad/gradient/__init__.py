"""Gradient backends: a model, a loss and weight names in, a gradient graph out.

See :mod:`skl_ortgrad.gradient.backend` for the contract and the registry,
:mod:`skl_ortgrad.gradient.reverse` and :mod:`skl_ortgrad.gradient.rules` for the
standard-ONNX differentiator.
"""

from skl_ortgrad.gradient.backend import (
    BACKEND_NAMES,
    GradientGraph,
    build_gradient,
    resolve_backend,
    training_available,
)

__all__ = [
    "BACKEND_NAMES",
    "GradientGraph",
    "build_gradient",
    "resolve_backend",
    "training_available",
]
