"""The trainer's data: cast to the graph's dtype and shapes, checked when the caller did
not check it."""

from __future__ import annotations

from typing import Any

import numpy as np


def reads_as_given(X: Any, dtype: Any) -> bool:
    """Whether the linear training program can read the rows of ``X`` as they are for a
    model computing in ``dtype`` (float32 or float64): a C-contiguous 2-D numpy array of
    float32 or float64 (of another type than the model's, every batch is cast as it is
    gathered, as numpy's cast rounds)."""
    floats = (np.float32, np.float64)
    return (type(X) is np.ndarray and X.ndim == 2 and X.dtype in floats
            and X.flags.c_contiguous and np.dtype(dtype) in floats)


def as_arrays(X: Any, y: Any, sample_weight: Any, dtype: np.dtype,
              rows_as_given: bool = False) -> tuple[list[Any], bool]:
    """Cast the data to ``dtype`` and the graph's shapes: ``([X, y(, sample_weight)],
    weighted)``, ``y`` as a column when 1-D, ``X`` dense or sparse as given; with
    ``rows_as_given``, a dense ``X`` the linear program reads as it is
    (:func:`reads_as_given`) is not cast (see
    :meth:`~skl_ortgrad.training.trainer.Trainer.cast`).

    Raises
    ------
    ValueError
        For ``X`` of another rank, or row counts that differ.
    """
    if getattr(X, "ndim", None) != 2:
        raise ValueError(
            f"X must be a 2-D array or sparse matrix, got {getattr(X, 'ndim', type(X))} "
            "dimension(s); reshape a single feature with X.reshape(-1, 1)."
        )
    if not (rows_as_given and reads_as_given(X, dtype)):
        X = X.astype(dtype, copy=False)
    y = np.asarray(y, dtype=dtype)
    if y.ndim == 1:
        y = y.reshape((-1, 1))
    if X.shape[0] != y.shape[0]:
        raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}.")
    if sample_weight is None:
        return [X, y], False
    sample_weight = np.asarray(sample_weight, dtype=dtype).reshape((-1,))
    if sample_weight.shape[0] != X.shape[0]:
        raise ValueError(
            f"sample_weight has {sample_weight.shape[0]} values for {X.shape[0]} rows."
        )
    return [X, y, sample_weight], True


def checked_arrays(X: Any, y: Any, sample_weight: Any,
                   dtype: np.dtype) -> tuple[list[Any], bool]:
    """:func:`as_arrays` after checking the values, before anything changes.

    The estimators validate their input the scikit-learn way and skip this second pass
    over the data; called directly, the trainer refuses here what would otherwise surface
    later as a divergence.

    Raises
    ------
    ValueError
        For no rows, non-finite values, negative or all-zero sample weights.
    """
    arrays, weighted = data = as_arrays(X, y, sample_weight, dtype)
    X, y = arrays[:2]
    if X.shape[0] == 0:
        raise ValueError("X has 0 rows: there is nothing to train on.")
    if not np.isfinite(X.data if hasattr(X, "toarray") else X).all():
        raise ValueError("X contains NaN or infinity: remove or impute those values.")
    if not np.isfinite(y).all():
        raise ValueError("y contains NaN or infinity: remove or impute those values.")
    if weighted:
        sample_weight = arrays[2]
        if not np.isfinite(sample_weight).all() or (sample_weight < 0).any():
            raise ValueError("sample_weight must be finite and non-negative.")
        if not sample_weight.any():
            raise ValueError(
                "sample_weight is zero everywhere: no row would be trained on."
            )
    return data
