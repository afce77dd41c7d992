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
    r""":math:`1 / \lambda_{max}(E[\tilde x \tilde x^\top])` of :func:`curvature`."""
    return curvature(X, dtype)[0]


def curvature(X: Any, dtype: Any = None, spread: bool = False) -> tuple[float, float]:
    r"""``(stable step, row spread)`` of the rows of a dense or sparse ``X`` as the model
    reads them: cast to ``dtype`` if given (the same values from ``X`` as from ``X``
    cast first). ``spread=False``: the spread is not measured (1.0).

    The stable step is :math:`1 / \lambda`, :math:`\lambda = \lambda_{max}(\Sigma)`,
    :math:`\Sigma = E[\tilde x \tilde x^\top]`, :math:`\tilde x = (x, 1)` (inf when X is
    zero, or holds NaN or infinity where measured). :math:`\lambda` is the curvature of
    the mean squared error of a linear layer with an intercept trained on ``X``: a step
    along the mean gradient below :math:`2 / \lambda` is stable, and :math:`1 /
    \lambda` is the largest step that converges without oscillating along that
    direction.

    The row spread is :math:`\kappa = \rho / \lambda^2 \ge 1`, :math:`\rho =
    \lambda_{max}(E[\lVert\tilde x\rVert^2 \tilde x \tilde x^\top])`: how much heavier
    than the mean curvature the rows are one at a time. A mini-batch of :math:`b` rows
    steps along :math:`A = \frac1b \sum_B \tilde x \tilde x^\top` (times the loss's
    curvature :math:`c`), whose mean is :math:`\Sigma` and whose mean square is
    :math:`\frac1b E[\lVert\tilde x\rVert^2 \tilde x \tilde x^\top] + (1 - \frac1b)
    \Sigma^2`: along :math:`\Sigma`'s top direction, the error of a quadratic loss
    shrinks in mean square while the step keeps :math:`1 - 2\eta c\lambda + \eta^2 c^2
    (\rho / b + (1 - 1/b)\lambda^2) < 1`, that is :math:`\eta < 2 b / (c \lambda
    (\kappa + b - 1))`: :math:`2 / (c\lambda)` for large batches, less where a few rows
    are much longer than the others (the digits' standardized pixels: :math:`\kappa`
    about 70; Gaussian features about :math:`d`).

    Both are measured on at most 2,000 evenly spaced rows: exactly
    (``numpy.linalg.eigvalsh`` of the :math:`(d + 1)^2` moments) up to 255 features, by
    power iteration above (to a relative change of :math:`10^{-7}`, from below). With
    :math:`m = \max_{ij} |x_{ij}|` over the measured rows, they are computed on
    :math:`(x / m, 1 / m)` in float64, :math:`\lambda = m^2 \lambda((x / m, 1 / m))`, the
    spread on :math:`(x / u, 1 / u)`, :math:`u = \max(m, 1)` (a ratio of moments of the
    same degree, the same as on :math:`(x, 1)`): no
    square overflows, whatever the finite values, and the step
    is kept at or above the smallest normal float64 so that it stays a valid (positive)
    learning rate. Underflows, which that clipping expects (data near 1e300), pass
    whatever the caller's ``np.errstate``.
    """
    with np.errstate(under="ignore", over="ignore"):
        measured = _measured(X, dtype)
        if measured is None:
            return math.inf, 1.0
        rows, scale = measured
        column = 1.0 / scale
        top = _top_eigenvalue(rows, column)
        step = max(1.0 / top / scale / scale, np.finfo(np.float64).tiny)
        if not spread:
            return step, 1.0
        # The spread is scale-free: measured on (x / u, 1 / u), u = max(m, 1), whose
        # values are at most 1 (no product of squares overflows, whatever the scale).
        unit = max(scale, 1.0)
        scaled = rows.astype(np.float64) / unit
        squares = (np.asarray(scaled.multiply(scaled).sum(axis=1)).ravel()
                   if hasattr(scaled, "toarray") else np.einsum("ij,ij->i", scaled, scaled))
        squares += 1.0 / (unit * unit)
        if unit != scale:
            # Values all below 1 (m < 1): lambda again, on (x, 1) instead of (x / m, 1 / m).
            top = _top_eigenvalue(rows, 1.0 / unit)
        return step, max(1.0, _top_eigenvalue(rows, 1.0 / unit, squares) / (top * top))


def _measured(X: Any, dtype: Any) -> tuple[Any, float] | None:
    """The measured rows of ``X`` (cast to ``dtype`` if given) and their scale :math:`m`;
    None where there is nothing to measure (a zero ``X``) or it is not finite."""
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
        return None
    return rows, scale


def _top_eigenvalue(rows: Any, column: float, weights: np.ndarray | None = None) -> float:
    r""":math:`\lambda_{max}(E[w\, \tilde x \tilde x^\top])` of the scaled rows
    :math:`\tilde x = (x / m, 1 / m)` (``column`` is :math:`1 / m`), each weighing
    ``weights`` (1 without)."""
    scale = 1.0 / column
    if rows.shape[1] < _EXACT_COLUMNS:
        # (x / m, 1 / m) written into one buffer: no copy of the scaled rows to stack.
        augmented = np.empty((rows.shape[0], rows.shape[1] + 1))
        np.divide(rows.toarray() if hasattr(rows, "toarray") else rows, scale,
                  out=augmented[:, :-1])
        augmented[:, -1] = column
        weighted = augmented if weights is None else augmented * weights[:, None]
        return float(np.linalg.eigvalsh(weighted.T @ augmented / rows.shape[0])[-1])
    rows = rows.astype(np.float64) / scale  # sparse rows stay sparse
    vector, intercept, curvature = np.ones(rows.shape[1]), 1.0, 0.0
    for _ in range(_POWER_ITERATIONS):
        # E[w x~ x~^T] v for v = (vector, intercept), without forming the matrix.
        projection = rows @ vector + column * intercept
        if weights is not None:
            projection = projection * weights
        vector = rows.T @ projection / rows.shape[0]
        intercept = column * float(projection.mean())
        norm = math.sqrt(float(vector @ vector) + intercept * intercept)
        vector, intercept = vector / norm, intercept / norm
        converged = abs(norm - curvature) <= 1e-7 * norm
        curvature = norm
        if converged:
            break
    return curvature


def _largest(X: Any) -> float:
    """:math:`\\max_{ij} |x_{ij}|` of a dense or sparse ``X`` (0 when it stores nothing)."""
    data = X.data if hasattr(X, "toarray") else X
    return max(float(data.max(initial=0.0)), -float(data.min(initial=0.0)))
