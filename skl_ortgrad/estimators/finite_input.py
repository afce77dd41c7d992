"""scikit-learn's ``validate_data`` with a cheaper check that a dense ``X`` is finite, and
within the range of the dtype the model computes in.

scikit-learn checks that a dense float ``X`` holds no NaN or infinity with one sum over
all of its values (``_assert_all_finite``): 1.8 ms for 100k x 100 float32 on this machine
kind, a tenth of a ``partial_fit`` epoch at the defaults, paid at every call. A
matrix-vector product with a vector of ones finds the same in 0.7 ms (BLAS): a row's sum
is finite when all its values are, and NaN or infinite as soon as one is not. When a sum
is not finite (a non-finite value, or finite values whose sum overflows), scikit-learn's
own check runs and decides, with its own error message (:func:`refuse_non_finite`).

The model reads ``X`` cast to its dtype (float32 by default), which float64 input needs
anyway. Summing the rows of the cast instead of ``X`` also checks the range
(:func:`~skl_ortgrad.estimators.dtype_range.check_dtype_range`): a value NaN or
infinite in ``X``, or finite but too large for the dtype, is NaN or infinite once cast.
The cast and the sums go block by block, each block summed while it is in cache
(:mod:`~skl_ortgrad.runtime.blocks`): one pass over ``X`` for the cast and the checks
together. A CSR ``X`` is checked the same way, by the sum of its stored values once cast
(:func:`cast_csr`): one pass where scikit-learn's finiteness check, the range's ``min``
and ``max`` and the cast made four (2M stored float64 values: 3.7 + 3.7 -> about 1.5 ms
a ``partial_fit`` call, measured by cProfile).
``predict`` goes further: it casts, checks and runs block by block without casting all of
``X`` (:mod:`~skl_ortgrad.estimators.inference`), from :func:`validate_unchecked`; so does
a ``partial_fit`` of a linear model (``rows_as_given``): the linear training
program casts the rows it reads, and a call that does not end finite runs again checked
(:meth:`~skl_ortgrad.estimators.base.BaseOnnxEstimator._train`).

Numpy arrays of floats with numeric 1-D targets, the common case, skip ``validate_data``
itself (:func:`_validated_plainly`): for them it only checks shapes, dtypes and the
targets' finiteness, and sets ``n_features_in_``, but its machinery (dataframe detection,
estimator tags, parameter dispatch) costs 170 µs, more than a tenth of a small fit.
Anything else goes through it, for its conversions, warnings and errors.

scikit-learn's errors for NaN, infinite and string values do not say where they are. Once
a check has failed (never on the fast path), the message is completed with the row and
column of the first offending value (row-major order), and the column's name when ``X``
has feature names (:func:`locate_offending_value`): a second pass over the data, paid
only by input that is refused.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import scipy.sparse as sp
from sklearn import get_config
from sklearn.utils import check_array
from sklearn.utils.validation import validate_data

from skl_ortgrad.estimators.dtype_range import check_dtype_range, describe_position, position
from skl_ortgrad.runtime.blocks import block_rows, share_blocks
from skl_ortgrad.runtime.memory import REUSE_BYTES, populated_empty, small_page_zeros
from skl_ortgrad.training.inputs import reads_as_given


def validate_finite_data(estimator: Any, X: Any, y: Any = "no_validation",
                         graph_dtype: Any = None, rows_as_given: bool = False,
                         **params: Any) -> tuple[Any, Any]:
    """``validate_data(estimator, X, y, **params)``: the same result and the same errors,
    the finiteness of a dense ``X`` checked by its row sums (see the module); with
    ``graph_dtype``, also the range of ``X`` in it (``check_dtype_range``'s error) and
    ``X`` cast to it.

    With ``rows_as_given``, a C-contiguous float ``X`` is neither cast nor checked
    (:func:`~skl_ortgrad.training.inputs.reads_as_given`): the linear training program
    casts the rows it reads if need be, and the caller checks ``X`` only when the call
    does not end finite (the check then raises, or finds a divergence).

    ``params`` must not set ``ensure_all_finite``: ``X`` is always required finite, as
    scikit-learn's default; ``y`` is checked by ``validate_data`` itself.

    Returns
    -------
    validated
        What ``validate_data`` returns: ``X``, or ``(X, y)``.
    graph_X : numpy.ndarray, scipy CSR matrix or None
        With ``graph_dtype``, ``X`` as that dtype (``X`` itself when it is already),
        checked, dense or CSR (:func:`cast_csr`); None without ``graph_dtype``; ``X``
        itself, unchecked, where ``rows_as_given`` applies.
    """
    result = validate_unchecked(estimator, X, y, **params)
    checked = result if isinstance(y, str) and y == "no_validation" else result[0]
    if rows_as_given and reads_as_given(checked, graph_dtype):
        return result, checked
    graph_X, finite = _cast_checked(checked, graph_dtype, order_check=True)
    if not finite:
        refuse_non_finite(estimator, checked, graph_dtype)
    return result, graph_X


def validate_unchecked(estimator: Any, X: Any, y: Any = "no_validation",
                       **params: Any) -> Any:
    """``validate_data(estimator, X, y, ensure_all_finite=False, **params)``, plainly
    where it can (:func:`_validated_plainly`): the caller checks that ``X`` is finite."""
    result = _validated_plainly(estimator, X, y, params)
    if result is None:
        try:
            result = validate_data(estimator, X, y, ensure_all_finite=False, **params)
        except ValueError as error:
            locate_offending_value(error, {"X": X, "y": y})
            raise
    return result


def refuse_non_finite(estimator: Any, X: Any, graph_dtype: Any = None) -> None:
    """Raise scikit-learn's error if ``X`` (validated) holds NaN or infinity, then
    ``check_dtype_range``'s if a value is too large for ``graph_dtype``; return when
    neither (finite values whose row sums overflow)."""
    try:
        check_array(X, accept_sparse=True, dtype=None, ensure_2d=False,
                    estimator=estimator, input_name="X")
    except ValueError as error:
        locate_offending_value(error, {"X": X}, getattr(estimator, "feature_names_in_", None))
        raise
    if graph_dtype is not None:
        check_dtype_range(X, graph_dtype, "X", getattr(estimator, "feature_names_in_", None))


def _cast_checked(X: Any, graph_dtype: Any, order_check: bool = False) -> tuple[Any, bool]:
    """``X`` as ``graph_dtype`` (None without it; ``X`` itself when it has that dtype),
    and whether the row sums of the narrower of the two were all finite; block by block
    (:mod:`~skl_ortgrad.runtime.blocks`). A CSR ``X`` of floats: its values cast
    (:func:`cast_csr`, ``order_check`` passed on) and the sum of the narrower's values
    (None and False for other sparse matrices)."""
    if graph_dtype is not None and _is_float_csr(X):
        cast = cast_csr(X, graph_dtype, order_check)
        narrower = cast if cast.dtype.itemsize < X.dtype.itemsize else X
        with np.errstate(over="ignore", invalid="ignore"):
            return cast, bool(np.isfinite(narrower.data.sum()))
    if graph_dtype is None or not isinstance(X, np.ndarray):
        return None, _row_sums_finite(X)
    if X.dtype == graph_dtype:
        return X, _row_sums_finite(X)
    # The layout astype would give (C for C, F for F): the caller's copy is the same.
    # New memory of small pages: the first write of new huge pages costs more than the
    # cast (:mod:`~skl_ortgrad.runtime.memory`).
    cast = populated_empty(X.shape, graph_dtype,
                           "F" if X.flags.f_contiguous and not X.flags.c_contiguous else "C")
    # The narrower of the two: a wider cast holds every value of X.
    sum_cast = cast.itemsize < X.itemsize
    rows = block_rows(X.shape[1]) if X.ndim == 2 else X.shape[0]
    finite = [True]

    def work(index: int, share: range) -> None:
        for start in share:
            source, target = X[start:start + rows], cast[start:start + rows]
            # Values beyond the dtype become infinite: what the row sums then find.
            with np.errstate(over="ignore", invalid="ignore"):
                np.copyto(target, source, casting="unsafe")
            if finite[0] and not _block_finite(target if sum_cast else source):
                finite[0] = False

    # One thread: numpy's cast releases the GIL, and two threads cast a new 100k x 50
    # float64 block in 5.8-7.0 ms against 8.4-8.6 alone, but case 9's stream, beside
    # scikit-learn's calls, ran no faster with them (ad hoc, 2-core Intel Xeon).
    share_blocks(range(0, X.shape[0], rows), 1, work)
    return cast, finite[0]


def _is_float_csr(X: Any) -> bool:
    return isinstance(X, sp.csr_matrix | sp.csr_array) and X.dtype.kind == "f"


def cast_csr(X: Any, dtype: Any, order_check: bool = False) -> Any:
    """A CSR ``X`` (matrix or array) as ``dtype``: ``X`` itself when it has that dtype,
    else the same kind of matrix over ``X``'s column indices and row pointers (shared:
    scipy's ``astype`` copies them and checks their order again, 2M stored values 2.3 ->
    0.9 ms), its values cast; with ``order_check``, with scipy's canonical-format flag of
    ``X``.

    Training asks for the flag (its loader needs it): computed once per ``X``, scipy
    keeping it on the matrix, a stream of ``partial_fit`` calls on one ``X`` checks its
    order once, not at every call (1 ms for 2M stored values). Prediction does not need
    it. The values lie in memory of small pages: a map reused from a
    call before where it holds at most :data:`~skl_ortgrad.runtime.memory.REUSE_BYTES`
    (:func:`~skl_ortgrad.runtime.memory.populated_empty`; new small pages cost 3.3-4.8 ms
    a cast of 2M values, a reused map 0.9 ms, measured), else faulted as written
    (:func:`~skl_ortgrad.runtime.memory.small_page_zeros`: numpy's new huge pages
    stall at times on the virtual machines measured).
    """
    dtype = np.dtype(dtype)
    if X.dtype == dtype:
        return X
    allocate = (populated_empty if X.data.size * dtype.itemsize <= REUSE_BYTES
                else small_page_zeros)
    values = allocate(X.data.shape, dtype)
    # Values beyond the dtype become infinite: the caller's sum finds them.
    with np.errstate(over="ignore", invalid="ignore"):
        np.copyto(values, X.data, casting="unsafe")
    cast = type(X)((values, X.indices, X.indptr), shape=X.shape, copy=False)
    if order_check:
        cast.has_canonical_format = X.has_canonical_format
    return cast


#: The ``validate_data`` parameters :func:`_validated_plainly` knows the effect of.
_PLAIN_PARAMETERS = frozenset(
    {"reset", "accept_sparse", "dtype", "y_numeric", "multi_output", "ensure_min_samples"})


def _validated_plainly(estimator: Any, X: Any, y: Any, params: dict[str, Any]) -> Any:
    """What ``validate_data(estimator, X, y, ensure_all_finite=False, **params)`` returns
    where that is plain to see, with its effect on ``estimator``; None elsewhere.

    Plain: ``X`` a 2-D numpy array (not a subclass) of one of the ``dtype`` list's types,
    with rows and columns; ``y`` absent, or a 1-D numpy array of numbers (booleans,
    integers, finite floats) of the same length; ``reset``, or the estimator fitted on as
    many columns and without feature names; scikit-learn's array API dispatch off. Then
    ``validate_data`` returns ``X`` itself and ``y`` C-contiguous, and ``reset`` drops
    ``feature_names_in_`` and sets ``n_features_in_``.
    """
    dtypes, reset = params.get("dtype"), params.get("reset", True)
    if (type(X) is not np.ndarray or X.ndim != 2 or 0 in X.shape
            or not isinstance(dtypes, list) or X.dtype not in dtypes
            or not _PLAIN_PARAMETERS.issuperset(params)
            or params.get("ensure_min_samples", 1) > X.shape[0]
            or get_config()["array_api_dispatch"]):
        return None
    without_y = isinstance(y, str) and y == "no_validation"
    if not without_y and (
            type(y) is not np.ndarray or y.ndim != 1 or y.shape[0] != X.shape[0]
            or y.dtype.kind not in "biuf"
            or (y.dtype.kind == "f" and not np.isfinite(y).all())):
        return None
    if reset:
        estimator.__dict__.pop("feature_names_in_", None)
        estimator.n_features_in_ = X.shape[1]
    elif ("feature_names_in_" in estimator.__dict__
          or estimator.__dict__.get("n_features_in_") != X.shape[1]):
        return None
    return X if without_y else (X, np.ascontiguousarray(y))


def _row_sums_finite(X: Any) -> bool:
    """Whether ``X`` is a dense 2-D float array whose row sums are all finite (then so
    are its values); False for anything else (sparse matrices included)."""
    if not isinstance(X, np.ndarray) or X.dtype.kind != "f" or X.ndim != 2:
        return False
    with np.errstate(over="ignore", invalid="ignore"):
        sums = X @ np.ones(X.shape[1], dtype=X.dtype)
    return bool(np.isfinite(sums).all())


def _block_finite(block: np.ndarray) -> bool:
    """Whether the sum of ``block`` (a block of rows in cache) is finite: then so are its
    values. numpy's sum, not BLAS's row sums: OpenBLAS's threads took 55 ms against 14 ms
    for the blocks of 20,000 x 50 float32 of a 100k-row cast (measured on this machine
    kind, another process on the second core)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(block.sum()))


#: Values tested at once when looking for the first non-finite one (bounded memory).
_SCAN_VALUES = 1 << 20
_NOT_FLOAT = "could not convert string to float"


def locate_offending_value(error: ValueError, inputs: dict[str, Any],
                           feature_names: Any = None) -> None:
    """Complete the message of ``error``, scikit-learn's refusal of one of ``inputs``
    (``{"X": X, "y": y}``, ``{"sample_weight": w}``...), with where the first offending
    value is, in place: the caller re-raises ``error``.

    ``Input X contains NaN.`` becomes ``Input X contains NaN in column 3 ('age'), row
    7.``, scikit-learn's following lines kept; ``Input y contains infinity...`` gets ``at
    row 5``; a string of ``X`` that is no number gives ``could not convert string to
    float: 'abc' in column 1, row 4 of X``. Messages of other errors, or values that
    cannot be found, are left as they are.
    """
    first, newline, rest = str(error).partition("\n")
    located = first
    for name, values in inputs.items():
        if first.startswith(f"Input {name} contains "):
            test = np.isnan if "NaN" in first else np.isinf
            where = _non_finite_position(values, test, feature_names if name == "X" else None)
            if where is not None:
                located = f"{first.rstrip('.')} {where}."
    if first.startswith(_NOT_FLOAT) and "X" in inputs:
        X = inputs["X"]
        cell = _unconvertible_cell(X)
        if cell is not None:
            row, column, complaint = cell
            names = X.columns if hasattr(X, "columns") else None
            located = f"{complaint} {describe_position(row, column, names)} of X"
    if located != first:
        error.args = (f"{located}{newline}{rest}", *error.args[1:])


def _non_finite_position(values: Any, test: Any, feature_names: Any) -> str | None:
    """Where the first value of ``values`` (dense or CSR, 1-D or 2-D) for which ``test``
    holds is; None if there is none, or ``values`` is not numeric."""
    if not hasattr(values, "toarray"):
        values = np.asarray(values)
    data = values.data if hasattr(values, "toarray") else values.reshape(-1)
    if data.dtype.kind not in "fc":
        return None
    for start in range(0, data.size, _SCAN_VALUES):
        hits = np.flatnonzero(test(data[start:start + _SCAN_VALUES]))
        if hits.size:
            row, column = position(values, start + int(hits[0]))
            if hasattr(values, "toarray"):
                # A CSR row's stored values need not be sorted by column.
                span = slice(values.indptr[row], values.indptr[row + 1])
                column = int(values.indices[span][test(values.data[span])].min())
            return describe_position(row, column, feature_names)
    return None


def _unconvertible_cell(X: Any) -> tuple[int, int, str] | None:
    """(row, column, float()'s complaint) of the first cell of a 2-D ``X`` (row-major
    order) that is no number; None if there is none.

    Each column is cast whole; a column that fails is searched by halving the prefix that
    fails, so the search costs a few casts of the column, not a Python loop over cells.
    """
    columns = ([X.iloc[:, j].to_numpy() for j in range(X.shape[1])] if hasattr(X, "iloc")
               else list(np.asarray(X, dtype=object).T) if np.ndim(X) == 2 else [])
    best = None
    for j, column in enumerate(columns):
        rows = len(column) if best is None else best[0]  # a later column wins if above
        if rows == 0 or not _fails(column[:rows]):
            continue
        low, high = 1, rows  # the shortest failing prefix is column[:high]
        while low < high:
            middle = (low + high) // 2
            low, high = (low, middle) if _fails(column[:middle]) else (middle + 1, high)
        best = (high - 1, j)
    if best is None:
        return None
    row, j = best
    try:
        float(columns[j][row])
    except (TypeError, ValueError) as complaint:
        return row, j, str(complaint)
    return None


def _fails(values: np.ndarray) -> bool:
    """Whether ``values`` cannot be cast to float64 as a whole."""
    try:
        np.asarray(values).astype(np.float64)
    except (TypeError, ValueError):
        return True
    return False
