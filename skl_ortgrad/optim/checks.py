"""Checks of the training objects' parameters and arguments, shared by every family.

The objects validate where they are used (``set_params`` bypasses ``__init__``), so the
checks run at every epoch: the common cases take no abstract-class test.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import numpy as np

from skl_ortgrad.graph.model import OPSET

# Oldest opset whose Add/Sub/Mul broadcast numpy-style and whose kernels exist in
# onnxruntime for float16/float/double: older graphs are not worth supporting.
MIN_OPSET = 13


def check_opset(opset: int) -> None:
    """Raise ``ValueError`` unless ``opset`` is an integer in ``[MIN_OPSET, OPSET]``."""
    if not isinstance(opset, numbers.Integral) or not MIN_OPSET <= opset <= OPSET:
        raise ValueError(f"opset must be an integer in [{MIN_OPSET}, {OPSET}], got {opset!r}.")


def check_n_tensors(n_tensors: int) -> None:
    """Raise ``ValueError`` unless ``n_tensors`` is a positive integer."""
    if not isinstance(n_tensors, numbers.Integral) or n_tensors < 1:
        raise ValueError(f"n_tensors must be a positive integer, got {n_tensors!r}.")


def check_lists(weights: list[np.ndarray], gradients: list[np.ndarray]) -> None:
    """Raise ``ValueError`` unless every weight has a gradient of its shape."""
    if len(weights) != len(gradients):
        raise ValueError(f"{len(weights)} weights but {len(gradients)} gradients.")
    for i, (w, g) in enumerate(zip(weights, gradients, strict=True)):
        if w.shape != g.shape:
            raise ValueError(f"Weight {i} has shape {w.shape} but its gradient {g.shape}.")


def finite(value: Any) -> bool:
    """Whether ``value`` is a finite real number (not a bool)."""
    if type(value) is float or type(value) is int:
        return math.isfinite(value)
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def positive(value: Any) -> bool:
    """Whether ``value`` is a finite real number above 0."""
    return finite(value) and value > 0


def check_step_factors(factors: Any) -> None:
    """Raise ``ValueError`` unless ``factors`` (a rule's ``step_factors``) is None or
    finite numbers above 0."""
    if factors is not None and not all(positive(factor) for factor in factors):
        raise ValueError(f"step_factors must be finite numbers > 0, got {factors!r}.")


def per_weight_factors(factors: Any, n_weights: int) -> tuple[float, ...]:
    """One step factor per weight: ``factors``, or 1.0 for each where None.

    Raises
    ------
    ValueError
        If ``factors`` does not hold ``n_weights`` factors.
    """
    if factors is None:
        return (1.0,) * n_weights
    if len(factors) != n_weights:
        raise ValueError(f"step_factors holds {len(factors)} factors for {n_weights} "
                         "trained weights.")
    return tuple(float(factor) for factor in factors)
