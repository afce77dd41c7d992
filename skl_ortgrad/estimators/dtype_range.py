"""Finite input values that the training dtype cannot hold.

scikit-learn checks that ``X`` is finite in its own dtype (float64 for most input). The
model computes in its ``dtype`` (float32 by default), whose largest value is about
:math:`3.4 \\times 10^{38}`: a float64 value beyond it becomes :math:`\\pm\\infty` once
cast, so a prediction turns infinite and training diverges with an error that blames the
learning rate. :func:`check_dtype_range` refuses such values with a ``ValueError`` naming
where they are, before anything is cast.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def _overflowing(values: Any, dtype: np.dtype) -> np.ndarray:
    """Positions in ``values.data`` (sparse) or ``values.ravel()`` (dense) of the finite
    values that become infinite when cast to ``dtype``."""
    data = values.data if hasattr(values, "toarray") else np.ravel(values)
    with np.errstate(over="ignore"):
        cast = data.astype(dtype)
    return np.flatnonzero(np.isinf(cast) & np.isfinite(data))


def position(values: Any, index: int) -> tuple[int, int | None]:
    """(row, column) of the value at ``index`` in ``values.data`` (CSR matrix) or in
    ``values.ravel()`` (dense, row-major); column None for 1-D ``values``."""
    if hasattr(values, "toarray"):
        # CSR: the row is the segment of indptr holding the position.
        row = int(np.searchsorted(values.indptr, index, side="right")) - 1
        return row, int(values.indices[index])
    if np.ndim(values) == 2:
        row, column = divmod(index, values.shape[1])
        return int(row), int(column)
    return index, None


def describe_position(row: int, column: int | None, feature_names: Any = None) -> str:
    """Where a value is, as the messages say it: ``"in column 3 ('age'), row 7"`` (the
    name when ``feature_names`` are known), or ``"at row 7"`` for 1-D values."""
    if column is None:
        return f"at row {row}"
    label = f" ({feature_names[column]!r})" if feature_names is not None else ""
    return f"in column {column}{label}, row {row}"


def check_dtype_range(
    values: Any, dtype: Any, name: str = "X", feature_names: Any = None
) -> None:
    """Raise a ``ValueError`` if a finite value of ``values`` is infinite in ``dtype``.

    A float64 value :math:`v` becomes infinite in float32 when
    :math:`|v| \\ge 2^{128} - 2^{103}` (it rounds up past the largest float32,
    :math:`2^{128} - 2^{104}`); the check casts only when the largest magnitude exceeds
    ``np.finfo(dtype).max``, so input within range costs one ``min`` and one ``max``.

    Parameters
    ----------
    values : numpy.ndarray (1-D or 2-D) or scipy sparse matrix
        Validated input (``X``, ``y`` or ``sample_weight``).
    dtype : numpy dtype
        The float type the model computes in.
    name : str
        How the message calls ``values``.
    feature_names : array-like of str, optional
        Column names of ``X`` (``feature_names_in_``), named in the message.

    Raises
    ------
    ValueError
        If some value is finite in ``values`` but not once cast to ``dtype``; the
        message gives the first one, its column (and name), its row and the largest
        value of ``dtype``.
    """
    dtype = np.dtype(dtype)
    data = values.data if hasattr(values, "toarray") else np.asarray(values)
    if data.dtype.kind != "f" or data.dtype.itemsize <= dtype.itemsize or data.size == 0:
        return
    limit = float(np.finfo(dtype).max)
    if -limit <= data.min() and data.max() <= limit:
        return
    positions = _overflowing(values, dtype)
    if positions.size == 0:
        return  # beyond the largest value, but rounding down to it
    row, column = position(values, int(positions[0]))
    value = float(values[row] if column is None else values[row, column])
    where = describe_position(row, column, feature_names)
    raise ValueError(
        f"Input {name} contains a value too large for dtype('{dtype.name}') {where}: "
        f"{value!r}, beyond {limit!r} ({positions.size} such value(s)). The model computes "
        f"in {dtype.name}: scale the data, or train with dtype=np.float64."
    )


def check_weight_underflow(weights: np.ndarray, dtype: Any, name: str) -> None:
    """Raise a ``ValueError`` if every positive weight rounds to 0 in ``dtype``.

    A weight below half the smallest positive ``dtype`` value (about 7e-46 in float32)
    weighs nothing once cast. Among weights of ordinary size that changes nothing
    measurable; when all of them are that small, the data weighs nothing at all and a
    weighted mean over it divides by zero.

    Parameters
    ----------
    weights : numpy.ndarray, 1-D, float64
        Validated, non-negative weights (``sample_weight``, times ``class_weight``).
    dtype : numpy dtype
        The float type the model computes in.
    name : str
        How the message calls ``weights``.

    Raises
    ------
    ValueError
        Naming the largest weight, its row, and the way out (float64).
    """
    dtype = np.dtype(dtype)
    if weights.dtype.itemsize <= dtype.itemsize or weights.size == 0:
        return
    row = int(np.argmax(weights))
    largest = float(weights[row])
    if largest > 0 and dtype.type(largest) == 0:
        raise ValueError(
            f"{name}'s positive values all round to 0 in {dtype.name} (the largest is "
            f"{largest:.4g}, at row {row}; the smallest positive {dtype.name} is "
            f"{float(np.finfo(dtype).smallest_subnormal):.4g}): train in float64 "
            "(dtype=numpy.float64), or rescale the weights.")
