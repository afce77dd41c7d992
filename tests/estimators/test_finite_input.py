"""validate_finite_data: scikit-learn's validate_data, its results and its errors, with
the finiteness of a dense X checked by row sums."""

import re

import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from sklearn.linear_model import SGDRegressor
from sklearn.utils.validation import validate_data

from skl_ortgrad import OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.estimators import finite_input
from skl_ortgrad.estimators.finite_input import validate_finite_data
from skl_ortgrad.runtime import batches, memory

RNG = np.random.default_rng(0)
X = RNG.standard_normal((40, 5)).astype(np.float32)
Y = RNG.standard_normal(40)


def _error(call):
    with pytest.raises(ValueError) as info:
        call()
    return str(info.value)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_same_result_as_validate_data(dtype):
    data = (X * 10).astype(dtype)
    (got_X, got_y), cast = validate_finite_data(SGDRegressor(), data, Y,
                                                dtype=[np.float64, np.float32])
    want_X, want_y = validate_data(SGDRegressor(), data, Y, dtype=[np.float64, np.float32])
    np.testing.assert_array_equal(got_X, want_X)
    assert got_X.dtype == want_X.dtype and np.array_equal(got_y, want_y)
    assert cast is None
    alone, cast = validate_finite_data(SGDRegressor(), data, dtype=[np.float64, np.float32])
    np.testing.assert_array_equal(alone, want_X)
    assert cast is None


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("dense", [True, False])
def test_validate_data_s_error_with_where_the_value_is(value, dense):
    """scikit-learn's message, its first line completed with the value's column and row."""
    data = X.astype(np.float64)
    data[7, 3] = value
    data = data if dense else sp.csr_matrix(data)
    want = _error(lambda: validate_data(SGDRegressor(), data, Y, accept_sparse="csr"))
    got = _error(lambda: validate_finite_data(SGDRegressor(), data, Y, accept_sparse="csr"))
    first, _, rest = want.partition("\n")
    assert got == f"{first[:-1]} in column 3, row 7.\n{rest}".rstrip("\n")
    assert re.match(r"Input X contains (NaN|infinity).* in column 3, row 7\.", got)


@pytest.mark.parametrize("dense", [True, False])
def test_the_first_value_in_row_major_order_is_named(dense):
    """Several non-finite values: the first row holding one, and its first column; NaN
    before infinity, as scikit-learn's message names NaN when there is one."""
    data = X.astype(np.float64)
    data[9, 0] = data[4, 4] = data[4, 2] = np.nan
    data[1, 1] = np.inf
    data = data if dense else sp.csr_matrix(data)
    message = _error(lambda: validate_finite_data(SGDRegressor(), data, accept_sparse="csr"))
    assert message.startswith("Input X contains NaN in column 2, row 4.\n")
    data[[4, 4, 9], [2, 4, 0]] = 1.0
    message = _error(lambda: validate_finite_data(SGDRegressor(), data, accept_sparse="csr"))
    assert message.startswith(
        "Input X contains infinity or a value too large for dtype('float64') in column 1, "
        "row 1.")


def test_the_column_s_name_is_given_for_a_dataframe():
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
    frame.iloc[12, 4] = np.nan
    message = _error(lambda: OnnxSGDRegressor().fit(frame, Y))
    assert message.startswith("Input X contains NaN in column 4 ('f4'), row 12.\n")
    model = OnnxSGDRegressor(max_iter=2, tol=None).fit(frame.fillna(0.0), Y)
    frame.iloc[2, 0] = -np.inf
    assert _error(lambda: model.predict(frame)).startswith(
        "Input X contains NaN in column 4 ('f4'), row 12.")


@pytest.mark.parametrize("shape", ["1-D", "2-D"])
def test_a_non_finite_y_is_refused_with_its_row(shape):
    y = Y.copy() if shape == "1-D" else np.c_[Y, Y]
    y[5] = np.nan
    multi = shape == "2-D"
    want = _error(lambda: validate_data(SGDRegressor(), X, y, multi_output=multi))
    got = _error(lambda: validate_finite_data(SGDRegressor(), X, y, multi_output=multi))
    where = "in column 0, row 5" if multi else "at row 5"
    assert want.startswith("Input y contains NaN.")
    assert got == want.replace("Input y contains NaN.", f"Input y contains NaN {where}.")


@pytest.mark.parametrize("kind", ["str array", "object array", "list", "dataframe"])
def test_a_string_that_is_no_number_is_named_with_its_cell(kind):
    cells = X.astype(object)
    cells[6, 3] = "abc"
    cells[6, 4] = "later in the row"
    cells[30, 0] = "a later row"
    names = [f"f{i}" for i in range(X.shape[1])]
    data = {"str array": cells.astype(str), "object array": cells,
            "list": cells.tolist(), "dataframe": pd.DataFrame(cells, columns=names)}[kind]
    message = _error(lambda: OnnxSGDRegressor().fit(data, Y))
    label = " ('f3')" if kind == "dataframe" else ""
    assert message == f"could not convert string to float: 'abc' in column 3{label}, row 6 of X"


def test_any_named_input_can_be_located():
    """What base.py's sample_weight check could use: the name in the message decides."""
    weights = np.ones(6)
    weights[4] = np.inf
    error = ValueError("Input sample_weight contains infinity or a value too large.")
    finite_input.locate_offending_value(error, {"sample_weight": weights})
    assert str(error) == "Input sample_weight contains infinity or a value too large at row 4."
    other = ValueError("Input X contains NaN.")
    finite_input.locate_offending_value(other, {"sample_weight": weights})
    assert str(other) == "Input X contains NaN."


def test_valid_input_is_never_searched(monkeypatch):
    """The search for the offending value runs only once a check has failed."""
    def searched(*args):
        raise AssertionError("searched")

    monkeypatch.setattr(finite_input, "locate_offending_value", searched)
    for data in (X, X.astype(np.float64), sp.csr_matrix(X), pd.DataFrame(X)):
        validate_finite_data(SGDRegressor(), data, Y, accept_sparse="csr",
                             graph_dtype=np.float32, dtype=[np.float64, np.float32])


def test_finite_values_whose_row_sum_overflows_pass():
    big = np.full((3, 4), np.finfo(np.float32).max, dtype=np.float32)
    assert not finite_input._row_sums_finite(big)
    np.testing.assert_array_equal(validate_finite_data(SGDRegressor(), big, dtype=None)[0], big)


def test_row_sums_find_every_non_finite_value():
    data = RNG.standard_normal((30, 6))
    assert finite_input._row_sums_finite(data)
    for row, column in [(0, 0), (29, 5), (12, 3)]:
        for value in (np.nan, np.inf, -np.inf):
            bad = data.copy()
            bad[row, column] = value
            assert not finite_input._row_sums_finite(bad)


@pytest.mark.parametrize("cls", [OnnxSGDRegressor, OnnxSGDClassifier])
def test_estimators_refuse_non_finite_input_in_scikit_learn_words(cls):
    y = (Y > 0).astype(int)
    model = cls(max_iter=2, tol=None, random_state=0).fit(X, y)
    bad = X.copy()
    bad[3, 1] = np.nan
    message = _error(lambda: cls(max_iter=2).fit(bad, y))
    assert message.startswith("Input X contains NaN in column 1, row 3.\n")
    assert cls.__name__ in message
    assert _error(lambda: model.predict(bad)).startswith(
        "Input X contains NaN in column 1, row 3.\n")
    bad[3, 1] = np.inf
    assert _error(lambda: model.partial_fit(bad, y)).startswith(
        "Input X contains infinity or a value too large for dtype('float32') in column 1, "
        "row 3.")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_graph_input_is_x_cast_and_checked(dtype):
    """With the graph's dtype: ``X`` as that dtype (``X`` itself when it is already),
    its finiteness and range checked through the cast."""
    data = (X * 10).astype(dtype)
    (got, _), cast = validate_finite_data(SGDRegressor(), data, Y, graph_dtype=np.float32,
                                          dtype=[np.float64, np.float32])
    assert cast.dtype == np.float32 and (cast is got) == (dtype == np.float32)
    np.testing.assert_array_equal(cast, data.astype(np.float32))
    (got, _), cast = validate_finite_data(SGDRegressor(), sp.csr_matrix(data), Y,
                                          accept_sparse="csr", graph_dtype=np.float32)
    assert sp.issparse(cast) and cast.dtype == np.float32
    assert (cast is got) == (dtype == np.float32)
    np.testing.assert_array_equal(cast.toarray(), data.astype(np.float32))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_sparse_x_is_checked_by_the_sum_of_its_cast_values(monkeypatch, dtype):
    """A finite CSR ``X`` passes on the sum of its values as the graph's dtype, without
    scikit-learn's check and the range's (one pass); a NaN, an infinity or a value too
    large for the graph's dtype makes that sum non-finite, and the errors are those
    checks' own."""
    refused = []
    checks = finite_input.refuse_non_finite

    def refuse(*args):
        refused.append(args)
        return checks(*args)

    monkeypatch.setattr(finite_input, "refuse_non_finite", refuse)
    data = sp.csr_matrix(np.where(np.abs(X) > 1, X, 0).astype(dtype))
    validate_finite_data(SGDRegressor(), data, Y, accept_sparse="csr", graph_dtype=np.float32)
    assert not refused
    for value, words in ((np.nan, "NaN"), (np.inf, "infinity"),
                         (1e39, "a value too large for dtype('float32')")):
        if dtype == np.float32 and value == 1e39:
            continue
        bad = data.copy()
        bad.data[3] = value
        row, column = bad.nonzero()[0][3], bad.indices[3]
        message = _error(lambda bad=bad: validate_finite_data(
            SGDRegressor(), bad, Y, accept_sparse="csr", graph_dtype=np.float32))
        assert message.startswith(f"Input X contains {words}")
        assert f"in column {column}, row {row}" in message
    assert len(refused) == 3 - (dtype == np.float32)


def test_the_sparse_cast_carries_scipy_s_canonical_check():
    """With ``order_check`` (training), the cast keeps the canonical-format flag of
    ``X``, computed on ``X`` (scipy keeps it there: the next call on the same ``X`` does
    not scan its indices again), and the loader's CSR matrix made from a CSR array keeps
    it too; without (prediction), nothing scans the indices."""
    data = sp.csr_array(np.where(np.abs(X) > 1, X, 0).astype(np.float64))
    finite_input.cast_csr(data, np.float32)
    assert "_has_canonical_format" not in vars(data)
    (_, _), cast = validate_finite_data(SGDRegressor(), data, Y, accept_sparse="csr",
                                        graph_dtype=np.float32)
    assert vars(data)["_has_canonical_format"] and vars(cast)["_has_canonical_format"]
    assert vars(batches._canonical(cast))["_has_canonical_format"]
    # Duplicates: not canonical; the loader sums them in a copy.
    doubled = sp.csr_array((np.ones(2), np.array([1, 1]), np.array([0, 2])), shape=(1, 3))
    assert not finite_input.cast_csr(doubled, np.float32, True).has_canonical_format
    np.testing.assert_array_equal(batches._canonical(
        finite_input.cast_csr(doubled, np.float32, True)).toarray(), [[0, 2, 0]])


@pytest.mark.parametrize("container", [sp.csr_matrix, sp.csr_array])
def test_a_sparse_graph_input_casts_the_values_and_shares_the_indices(container):
    """A float64 CSR ``X`` reaches a float32 graph as the same kind of matrix, its values
    as ``astype``'s, its column indices and row pointers those of ``X`` (not copied)."""
    data = container(np.where(np.abs(X) > 1, X, 0).astype(np.float64))
    got = OnnxSGDRegressor()._graph_input(data, np.dtype(np.float32), None)
    assert type(got) is container and got.dtype == np.float32 and got.shape == data.shape
    assert np.shares_memory(got.indices, data.indices)
    assert np.shares_memory(got.indptr, data.indptr)
    np.testing.assert_array_equal(got.toarray(), data.astype(np.float32).toarray())


@pytest.mark.parametrize(("reuse_bytes", "allocator"), [
    (2**25, "populated_empty"), (64, "small_page_zeros")])
def test_a_large_sparse_cast_lies_on_small_pages(monkeypatch, reuse_bytes, allocator):
    """The values of a large sparse ``X`` cast for the graph come from a map that later
    calls reuse (:func:`~skl_ortgrad.runtime.memory.populated_empty`) up to
    ``REUSE_BYTES``, else from :func:`~skl_ortgrad.runtime.memory.small_page_zeros` (maps
    here: the thresholds lowered)."""
    made = []

    def recorded(name):
        def recording(shape, dtype):
            made.append((name, shape, np.dtype(dtype)))
            return getattr(memory, name)(shape, dtype)
        return recording

    for name in ("populated_empty", "small_page_zeros"):
        monkeypatch.setattr(finite_input, name, recorded(name))
    monkeypatch.setattr(memory, "POPULATE_BYTES", 64)
    monkeypatch.setattr(finite_input, "REUSE_BYTES", reuse_bytes)
    data = sp.random(200, 50, density=0.2, format="csr", random_state=0)
    got = OnnxSGDRegressor()._graph_input(data, np.dtype(np.float32), None)
    assert made == [(allocator, (data.nnz,), np.dtype(np.float32))]
    np.testing.assert_array_equal(got.data, data.data.astype(np.float32))
    assert np.shares_memory(got.indices, data.indices)


@pytest.mark.parametrize("order", ["C", "F"])
def test_a_large_cast_is_astype_s_in_its_layout(order):
    """A cast of 4 MiB or more lies in memory of its own
    (:func:`~skl_ortgrad.runtime.memory.populated_empty`): the values and the layout of
    ``astype``, and the non-finite values found as in a small one."""
    data = np.asarray(np.random.default_rng(0).standard_normal((30_000, 40)), order=order)
    (got, _), cast = validate_finite_data(SGDRegressor(), data, np.zeros(len(data)),
                                          graph_dtype=np.float32)
    expected = data.astype(np.float32)
    assert got is data and cast.strides == expected.strides and cast.nbytes >= 2**22
    np.testing.assert_array_equal(cast, expected)
    data[29_999, 39] = np.nan
    assert _error(lambda: validate_finite_data(SGDRegressor(), data, np.zeros(len(data)),
                                               graph_dtype=np.float32)).startswith(
        "Input X contains NaN")


@pytest.mark.parametrize("dense", [True, False])
def test_the_graph_dtype_range_is_checked_with_check_dtype_range_words(dense):
    data = X.astype(np.float64)
    data[7, 3] = 1e39
    data = data if dense else sp.csr_matrix(data)
    message = _error(lambda: validate_finite_data(
        SGDRegressor(), data, Y, accept_sparse="csr", graph_dtype=np.float32))
    assert message.startswith(
        "Input X contains a value too large for dtype('float32') in column 3, row 7: 1e+39")
    # NaN first, in scikit-learn's words, as without the range.
    data[0, 0] = np.nan
    message = _error(lambda: validate_finite_data(
        SGDRegressor(), data, Y, accept_sparse="csr", graph_dtype=np.float32))
    assert message.startswith("Input X contains NaN")


def test_values_in_range_whose_float32_row_sums_overflow_pass():
    """float64 values just below float32's largest: the cast's row sums overflow, the
    checks then find every value finite and in range."""
    big = np.full((3, 4), 3e38)
    (got, _), cast = validate_finite_data(SGDRegressor(), big, Y[:3], graph_dtype=np.float32)
    np.testing.assert_array_equal(got, big)
    np.testing.assert_array_equal(cast, big.astype(np.float32))
    assert np.isfinite(cast).all()


def test_a_wider_graph_dtype_sums_x_itself(monkeypatch):
    """float32 input to a float64 model: X's own sums decide, block by block (the cast
    holds every value of X), and the cast is the graph input."""
    summed = []
    monkeypatch.setattr(finite_input, "_block_finite",
                        lambda X: summed.append(X.dtype) or True)
    (got, _), cast = validate_finite_data(SGDRegressor(), X, Y, graph_dtype=np.float64,
                                          dtype=[np.float32, np.float64])
    assert summed == [np.float32] and got is X
    assert cast.dtype == np.float64
    np.testing.assert_array_equal(cast, X)


def _plain_cases():
    import pandas as pd

    y_float = RNG.standard_normal(40)
    return {
        # name: (X, y, reset, fitted with names, taken plainly)
        "float64": (X.astype(np.float64), y_float, True, False, True),
        "float32 int labels": (X, (y_float > 0).astype(np.int64), True, False, True),
        "fortran order": (np.asfortranarray(X), y_float, True, False, True),
        "strided y": (X, np.repeat(y_float, 2)[::2], True, False, True),
        "bool y": (X, y_float > 0, True, False, True),
        "no y": (X, "no_validation", True, False, True),
        "refit drops names": (X, y_float, True, True, True),
        "predict": (X, "no_validation", False, False, True),
        "predict, fitted with names": (X, "no_validation", False, True, False),
        "float16 X": (X.astype(np.float16), y_float, True, False, False),
        "int X": ((X * 10).astype(np.int64), y_float, True, False, False),
        "list X": (X.tolist(), y_float, True, False, False),
        "dataframe": (pd.DataFrame(X, columns=list("abcde")), y_float, True, False, False),
        "column y": (X, y_float[:, None], True, False, False),
        "string y": (X, np.where(y_float > 0, "a", "b"), True, False, False),
        "object y": (X, y_float.astype(object), True, False, False),
        "NaN in y": (X, np.where(y_float > 1, np.nan, y_float), True, False, False),
        "short y": (X, y_float[:-1], True, False, False),
        "no rows": (X[:0], y_float[:0], True, False, False),
        "1-D X": (X[:, 0], y_float, True, False, False),
    }


@pytest.mark.parametrize("case", list(_plain_cases()))
def test_plain_arrays_skip_validate_data_with_its_effects(case):
    """Float arrays with 1-D numeric targets skip validate_data: the same arrays come
    back, the estimator gets the same n_features_in_ and loses feature_names_in_ as
    validate_data leaves it; anything else goes to validate_data (its conversions,
    warnings and errors)."""
    data, y, reset, named, plain = _plain_cases()[case]

    def estimator():
        model = SGDRegressor()
        if named:
            model.feature_names_in_ = np.array(list("abcde"), dtype=object)
        if named or not reset:
            model.n_features_in_ = 5
        return model

    params = {"reset": reset, "accept_sparse": "csr", "dtype": [np.float64, np.float32],
              "y_numeric": False, "multi_output": False, "ensure_min_samples": 1}
    if isinstance(y, str):  # predict's parameters
        params = {"reset": reset, "accept_sparse": "csr", "dtype": [np.float32, np.float64]}
    ours = estimator()
    got = finite_input._validated_plainly(ours, data, y, params)
    assert (got is not None) == plain
    if not plain:
        return
    theirs = estimator()
    want = validate_data(theirs, data, y, ensure_all_finite=False, **params)
    for a, b in zip(got if isinstance(got, tuple) else (got,),
                    want if isinstance(want, tuple) else (want,), strict=True):
        assert a.dtype == b.dtype and a.flags.c_contiguous == b.flags.c_contiguous
        np.testing.assert_array_equal(a, b)
    assert (got[0] if isinstance(got, tuple) else got) is data
    assert vars(ours).keys() == vars(theirs).keys()
    assert ours.__dict__.get("n_features_in_") == theirs.__dict__.get("n_features_in_")


def test_plain_path_off_with_array_api_dispatch(monkeypatch):
    monkeypatch.setattr(finite_input, "get_config", lambda: {"array_api_dispatch": True})
    assert finite_input._validated_plainly(SGDRegressor(), X, Y, {"dtype": [np.float32]}) is None


def test_plain_path_refuses_unknown_parameters():
    assert finite_input._validated_plainly(
        SGDRegressor(), X, Y, {"dtype": [np.float32], "ensure_min_features": 2}) is None
