"""The forward/backward engine's public path (seed API); it lives in
:mod:`skl_ortgrad.gradient.forward_backward`."""

from skl_ortgrad.gradient.forward_backward import (
    OrtGradientForwardBackward,
    OrtGradientForwardBackwardFunction,
)

__all__ = ["OrtGradientForwardBackward", "OrtGradientForwardBackwardFunction"]
