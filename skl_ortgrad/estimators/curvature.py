r"""The curvature of a linear layer's mean squared error on the training data: the
largest stable step of a mean-gradient update, which caps the mini-batch rates
(:mod:`skl_ortgrad.estimators.sgd_parameters`) and sets the default rate of the
``OnnxGradient*`` estimators."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

_CURVATURE_ROWS = 2_000  # rows the curvature is measured on (evenly spaced)
_EXACT_COLUMNS = 256  # up to this many columns, an eigen-decomposition; above, iterations
_POWER_ITERATIONS = 100


def stable_step(X: Any, dtype: Any = None) -> float:
    """See :func:`_stable_step`; underflows, which its clipping to the smallest normal
    float64 expects (data near 1e300), pass whatever the caller's ``np.errstate``."""
    with np.errstate(under="ignore", over="ignore"):
        return _stable_step(X, dtype)


def _stable_step(X: Any, dtype: Any = None) -> float:
    r""":math:`1 / \lambda_{max}(E[\tilde x \tilde x^\top])`, :math:`\tilde x = (x, 1)`, over
    the rows of a dense or sparse ``X`` (inf when X is zero, or holds NaN or infinity
    where measured), as the model reads them: cast to ``dtype`` if given (the same value
    from ``X`` as from ``X`` cast first).

    :math:`\lambda_{max}` is the curvature of the mean squared error of a linear layer
    with an intercept trained on ``X``: a step along the mean gradient below
    :math:`2 / \lambda_{max}` is stable, and :math:`1 / \lambda_{max}` is the largest
    step that converges without oscillating along that direction. It is measured on at
    most 2,000 evenly spaced rows: exactly (``numpy.linalg.eigvalsh`` of the
    :math:`(d + 1)^2` second moment) up to 255 features, by power iteration above (to a
    relative change of :math:`10^{-7}`, from below). With :math:`m = \max_{ij} |x_{ij}|`
    over the measured rows, it is computed on :math:`(x / m, 1 / m)` in float64 and
    :math:`\lambda_{max} = m^2 \lambda_{max}((x / m, 1 / m))`: no square overflows,
    whatever the finite values, and the result is kept at or above the smallest normal
    float64 so that it stays a valid (positive) learning rate.
    """
    rows = X[:: max(1, -(-X.shape[0] // _CURVATURE_ROWS))]
    if dtype is not None:
        rows = rows.astype(dtype, copy=False)
    # Only the measured rows are squared: their largest value is the scale (no pass over
    # all of X, which took 2.6 ms of a first partial_fit on 100k x 50). X is read whole
    # only when those rows are zero, to tell a zero X; a cast rounds monotonically, so
    # the largest value of X cast is X's cast.
    scale = _largest(rows) or float(np.asarray(_largest(X), dtype=rows.dtype))
    if scale == 0.0 or not math.isfinite(scale):
        # Not finite: rows read unchecked (a first partial_fit), which will not train
        # finite either and run again checked.
        return math.inf
    column = 1.0 / scale
    if rows.shape[1] < _EXACT_COLUMNS:
        # (x / m, 1 / m) written into one buffer: no copy of the scaled rows to stack.
        augmented = np.empty((rows.shape[0], rows.shape[1] + 1))
        np.divide(rows.toarray() if hasattr(rows, "toarray") else rows, scale,
                  out=augmented[:, :-1])
        augmented[:, -1] = column
        curvature = float(np.linalg.eigvalsh(augmented.T @ augmented / rows.shape[0])[-1])
    else:
        rows = rows.astype(np.float64) / scale  # sparse rows stay sparse
        vector, intercept, curvature = np.ones(rows.shape[1]), 1.0, 0.0
        for _ in range(_POWER_ITERATIONS):
            # E[x~ x~^T] v for v = (vector, intercept), without forming the matrix.
            projection = rows @ vector + column * intercept
            vector = rows.T @ projection / rows.shape[0]
            intercept = column * float(projection.mean())
            norm = math.sqrt(float(vector @ vector) + intercept * intercept)
            vector, intercept = vector / norm, intercept / norm
            converged = abs(norm - curvature) <= 1e-7 * norm
            curvature = norm
            if converged:
                break
    return max(1.0 / curvature / scale / scale, np.finfo(np.float64).tiny)


def _largest(X: Any) -> float:
    """:math:`\\max_{ij} |x_{ij}|` of a dense or sparse ``X`` (0 when it stores nothing)."""
    data = X.data if hasattr(X, "toarray") else X
    return max(float(data.max(initial=0.0)), -float(data.min(initial=0.0)))
