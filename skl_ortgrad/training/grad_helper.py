"""``onnx_derivative``'s public path (seed API); it lives in
:mod:`skl_ortgrad.gradient.derivative`."""

from skl_ortgrad.gradient.derivative import DerivativeOptions, onnx_derivative, random_feed

__all__ = ["DerivativeOptions", "onnx_derivative", "random_feed"]
