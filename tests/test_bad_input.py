"""Bad input, case by case: a clear error whose message is checked, and a fitted
estimator left exactly as it was (weights, ``t_``, ``n_iter_``, classes, feature names,
shuffling state, predictions).

Every estimator in ``ESTIMATORS`` runs every row of the table that applies to it; add
an estimator there and it is covered.
"""

from __future__ import annotations

import copy

import numpy as np
import onnx
import pandas as pd
import pytest
from _estimators import ALL_ESTIMATORS
from onnx import TensorProto, numpy_helper
from onnx import helper as oh
from sklearn.base import is_classifier
from sklearn.datasets import load_iris
from sklearn.utils._param_validation import InvalidParameterError

from skl_ortgrad.gradient.forward_backward import OrtGradientForwardBackward

ESTIMATORS = ALL_ESTIMATORS

_X, _Y = load_iris(return_X_y=True)
X = (_X - _X.mean(axis=0)) / _X.std(axis=0)
Y = _Y
COLUMNS = ["sepal_l", "sepal_w", "petal_l", "petal_w"]


def _fit(estimator, frame=False):
    model = estimator(random_state=0, max_iter=3, tol=None)
    return model.fit(pd.DataFrame(X, columns=COLUMNS) if frame else X, Y)


@pytest.fixture(scope="module")
def fitted():
    """One fitted estimator per (class, fitted on a DataFrame); tests get deep copies."""
    cache = {}

    def get(estimator, frame=False):
        if (estimator, frame) not in cache:
            cache[estimator, frame] = _fit(estimator, frame)
        return copy.deepcopy(cache[estimator, frame])

    return get


def _fitted_state(model):
    """Everything a bad call must leave untouched."""
    optimizer = model.optimizer_
    rng = optimizer.__dict__.get("_rng")
    state = {
        "weights": [w.copy() for w in optimizer.weights_],
        "lr_state": [s.copy() for s in optimizer.lr_state_],
        "optimizer.t_": optimizer.t_,
        "t_": model.t_,
        "n_iter_": model.n_iter_,
        "loss_curve_": list(model.loss_curve_),
        # The fitted weight attributes of whichever kind of estimator this is.
        **{name: np.copy(getattr(model, name)) for name in ("coef_", "intercept_")
           if hasattr(model, name)},
        **{name: [np.copy(w) for w in getattr(model, name)]
           for name in ("coefs_", "intercepts_") if hasattr(model, name)},
        "n_features_in_": model.n_features_in_,
        "feature_names_in_": getattr(model, "feature_names_in_", None),
        "classes_": getattr(model, "classes_", None),
        "rng": None if rng is None else (rng.get_state()[1].copy(), rng.get_state()[2]),
    }
    return state


def _assert_same_state(before, after):
    assert before.keys() == after.keys()
    for key, value in before.items():
        other = after[key]
        if key == "rng":
            assert (value is None) == (other is None), key
            if value is not None:
                np.testing.assert_array_equal(value[0], other[0])
                assert value[1] == other[1]
        elif isinstance(value, list) and value and isinstance(value[0], np.ndarray):
            assert len(value) == len(other), key
            for a, b in zip(value, other, strict=True):
                np.testing.assert_array_equal(a, b, err_msg=key)
        elif value is None or other is None:
            assert value is other, f"{key}: {value!r} became {other!r}"
        else:
            np.testing.assert_array_equal(value, other, err_msg=key)


# -- the table ---------------------------------------------------------------------------
#
# A row: (id, method, arguments, exception, message, which estimators).
# ``arguments`` builds (X, y, sample_weight, extra keyword arguments) for the call.
# ``which``: "all", "classifier" or "regressor".


def _with(array, index, value, dtype=float):
    array = np.array(array, dtype=dtype, copy=True)
    array.flat[index] = value
    return array


def _w(value=1.0, index=None):
    weights = np.ones(len(Y))
    if index is None:
        weights[:] = value
    else:
        weights[index] = value
    return weights


_DATA_ROWS = [
    # (id, X, y, sample_weight, exception, message)
    ("nan-X", _with(X, 7, np.nan), Y, None, ValueError, "Input X contains NaN"),
    ("inf-X", _with(X, 3, np.inf), Y, None, ValueError, "Input X contains infinity"),
    ("-inf-X", _with(X, 3, -np.inf), Y, None, ValueError, "Input X contains infinity"),
    ("nan-y", X, _with(Y, 5, np.nan), None, ValueError, "Input y contains NaN"),
    ("inf-y", X, _with(Y, 5, np.inf), None, ValueError, "Input y contains infinity"),
    ("nan-weight", X, Y, _w(np.nan, 4), ValueError, "Input sample_weight contains NaN"),
    ("inf-weight", X, Y, _w(np.inf, 4), ValueError, "Input sample_weight contains infinity"),
    ("negative-weight", X, Y, _w(-1.0, 4), ValueError,
     "Negative values in data passed to `sample_weight`"),
    ("zero-weights", X, Y, _w(0.0), ValueError,
     "Sample weights must contain at least one non-zero number"),
    # Finite in float64, infinite in the float32 the model computes in.
    ("X-beyond-float32", _with(X, 5, 1e39), Y, None, ValueError,
     r"Input X contains a value too large for dtype\('float32'\) in column 1, row 1: 1e\+39"),
    ("weight-beyond-float32", X, Y, _w(1e39, 4), ValueError,
     r"Input sample_weight contains a value too large for dtype\('float32'\) at row 4"),
    ("weight-length", X, Y, np.ones(len(Y) - 1), ValueError,
     r"sample_weight.shape == \(149,\), expected \(150,\)"),
    ("string-X", np.full(X.shape, "a"), Y, None, ValueError, "could not convert string to float"),
    ("object-X", np.array([[1.0, "x", 2.0, 3.0]] * len(Y), dtype=object), Y, None, ValueError,
     "could not convert string to float: 'x'"),
    ("complex-X", X + 1j, Y, None, ValueError, "Complex data not supported"),
    ("1-D-X", X[:, 0], Y, None, ValueError, "Expected 2D array, got 1D array instead"),
    ("3-D-X", X[:, :, None], Y, None, ValueError, "Found array with dim 3"),
    ("zero-rows", X[:0], Y[:0], None, ValueError, r"Found array with 0 sample\(s\)"),
    ("zero-features", X[:, :0], Y, None, ValueError, r"Found array with 0 feature\(s\)"),
    ("y-length", X, Y[:-1], None, ValueError, "inconsistent numbers of samples: \\[150, 149\\]"),
    ("multi-output-y", X, np.c_[Y, Y], None, ValueError,
     r"y should be a 1d array, got an array of shape \(150, 2\)"),
]

ROWS = []
for _id, _Xb, _yb, _sw, _exc, _msg in _DATA_ROWS:
    _which = "single-output" if _id == "multi-output-y" else "all"
    for _method in ("fit", "partial_fit"):
        ROWS.append((f"{_method}-{_id}", _method, (_Xb, _yb, _sw, {}), _exc, _msg, _which))
    if _id == "multi-output-y":
        # A multilabel classifier takes 2-D indicators, not several columns of classes.
        ROWS.append((f"fit-{_id}", "fit", (_Xb, _yb, _sw, {}), ValueError,
                     "Multioutput target data is not supported with label binarization",
                     "multi-label"))
ROWS += [
    ("partial_fit-n-features", "partial_fit", (X[:, :3], Y, None, {}), ValueError,
     "X has 3 features, but .* is expecting 4 features", "all"),
    ("predict-n-features", "predict", (X[:, :3],), ValueError,
     "X has 3 features, but .* is expecting 4 features", "all"),
    ("predict-nan", "predict", (_with(X, 2, np.nan),), ValueError, "Input X contains NaN", "all"),
    ("predict-1-D", "predict", (X[0],), ValueError, "Expected 2D array", "all"),
    ("predict-string", "predict", (np.full(X.shape, "a"),), ValueError,
     "could not convert string to float", "all"),
    ("predict-zero-rows", "predict", (X[:0],), ValueError, r"0 sample\(s\)", "all"),
    ("predict-beyond-float32", "predict", (_with(X, 2, -1e39),), ValueError,
     r"Input X contains a value too large for dtype\('float32'\) in column 2, row 0: "
     r"-1e\+39", "all"),
    ("fit-y-beyond-float32", "fit", (X, _with(Y, 5, 1e39), None, {}), ValueError,
     r"Input y contains a value too large for dtype\('float32'\) at row 5", "regressor"),
    ("partial_fit-y-beyond-float32", "partial_fit", (X, _with(Y, 5, -1e39), None, {}),
     ValueError, r"Input y contains a value too large for dtype\('float32'\) at row 5",
     "regressor"),
    ("fit-string-y", "fit", (X, np.array(["a", "b", "c"])[Y], None, {}), ValueError,
     "y must be numeric for a regressor", "regressor"),
    ("fit-single-class", "fit", (X, np.zeros(len(Y), dtype=int), None, {}), ValueError,
     r"The number of classes has to be greater than one; got 1 class: \[0\]", "classifier"),
    ("fit-single-class-new-features", "fit", (X[:, :3], np.ones(len(Y), dtype=int), None, {}),
     ValueError, "has to be greater than one; got 1 class", "classifier"),
    ("partial_fit-unknown-label", "partial_fit", (X, np.where(Y == 2, 7, Y), None, {}),
     ValueError, r"Labels \[7\] are not in classes_=\[0, 1, 2\]", "classifier"),
    ("partial_fit-classes-changed", "partial_fit", (X, Y, None, {"classes": [0, 1, 2, 3]}),
     ValueError, r"`classes=\[0, 1, 2, 3\]` is not the same as on last call to partial_fit, "
     r"was: array\(\[0, 1, 2\]\)", "classifier"),
    ("partial_fit-continuous-y", "partial_fit", (X, Y + 0.5, None, {}), ValueError,
     "Unknown label type", "classifier"),
]


def _applies(which, estimator):
    tags = estimator().__sklearn_tags__()
    multi_label = tags.classifier_tags is not None and tags.classifier_tags.multi_label
    if which == "single-output":
        # Multi-output y is valid input for a multi-output regressor (OnnxMLPRegressor),
        # a multilabel indicator for a multilabel classifier (OnnxMLPClassifier).
        return not tags.target_tags.multi_output and not multi_label
    if which == "multi-label":
        return multi_label
    return which == "all" or (which == "classifier") == is_classifier(estimator())


def _call(model, method, arguments):
    if method == "predict":
        return model.predict(*arguments)
    X_, y_, sample_weight, extra = arguments
    if method == "partial_fit" and is_classifier(model):
        extra = {"classes": None, **extra}
    return getattr(model, method)(X_, y_, sample_weight=sample_weight, **extra)


_CASES = [
    pytest.param(estimator, row, id=f"{estimator.__name__}-{row[0]}")
    for estimator in ESTIMATORS
    for row in ROWS
    if _applies(row[5], estimator)
]


@pytest.mark.parametrize(("estimator", "row"), _CASES)
def test_bad_input_row(fitted, estimator, row):
    _, method, arguments, exception, message, _ = row
    model = fitted(estimator)
    before, predictions = _fitted_state(model), model.predict(X)
    with pytest.raises(exception, match=message):
        _call(model, method, arguments)
    _assert_same_state(before, _fitted_state(model))
    np.testing.assert_array_equal(model.predict(X), predictions)


def test_the_table_covers_every_estimator():
    for estimator in ESTIMATORS:
        ids = {row[0] for row in ROWS if _applies(row[5], estimator)}
        assert len(ids) >= 40, (estimator, len(ids))


# -- pandas column names -------------------------------------------------------------------

_FRAME = pd.DataFrame(X, columns=COLUMNS)
_FRAME_ROWS = [
    ("reordered", _FRAME[COLUMNS[::-1]], "Feature names must be in the same order"),
    ("renamed", _FRAME.rename(columns={"petal_w": "petal_width"}),
     "Feature names unseen at fit time:\n- petal_width"),
]


@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("method", ["predict", "partial_fit"])
@pytest.mark.parametrize(("case", "frame", "message"), _FRAME_ROWS, ids=[r[0] for r in _FRAME_ROWS])
def test_dataframe_columns_must_match(fitted, estimator, method, case, frame, message):
    model = fitted(estimator, frame=True)
    before, predictions = _fitted_state(model), model.predict(_FRAME)
    with pytest.raises(ValueError, match=message):
        if method == "predict":
            model.predict(frame)
        else:
            _call(model, "partial_fit", (frame, Y, None, {}))
    _assert_same_state(before, _fitted_state(model))
    np.testing.assert_array_equal(model.predict(_FRAME), predictions)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_failed_refit_keeps_feature_names(fitted, estimator):
    """A fit that fails on its input must not forget the names of the previous fit."""
    model = fitted(estimator, frame=True)
    before = _fitted_state(model)
    with pytest.raises(ValueError, match="Input X contains NaN"):
        model.fit(_with(X, 0, np.nan), Y)
    _assert_same_state(before, _fitted_state(model))


# -- parameters --------------------------------------------------------------------------


def _sklearn_validated(estimator):
    """SGD and MLP estimators validate ``loss``/``penalty``/``learning_rate`` as
    scikit-learn does; the fine-tuning estimators resolve the package's aliases."""
    return not estimator.__name__.startswith("OnnxGradient")


def _is_mlp(estimator):
    return estimator.__name__.startswith("OnnxMLP")


def _unknown(param, sklearn_allowed, alias_kind, alias_allowed):
    """Expected (exception, message) of ``param='nope'``: scikit-learn's message for the
    SGD and MLP estimators, the alias resolver's for the fine-tuning ones."""

    def expected(estimator):
        if _sklearn_validated(estimator):
            return InvalidParameterError, (
                rf"The '{param}' parameter of \w+ must be a str among \{{[^}}]*"
                rf"{sklearn_allowed}[^}}]*\}}.* Got 'nope' instead")
        return ValueError, rf"Unknown {alias_kind} 'nope'; valid aliases are \[.*{alias_allowed}"

    return expected


# A row: (params, expected(estimator) -> (exception, message), applies(estimator)).
_PARAM_ROWS = [
    ({"max_iter": -1}, lambda estimator: (
        InvalidParameterError,
        r"The 'max_iter' parameter of \w+ must be an int in the range \[1, inf\)\. Got -1"),
     lambda estimator: True),
    ({"batch_size": 0}, lambda estimator: (
        InvalidParameterError,
        r"The 'batch_size' parameter of \w+ must be a str among \{'auto'\} or an int in the "
        r"range \[1, inf\)\. Got 0"),
     lambda estimator: True),
    # scikit-learn's MLPs accept validation_fraction=0.0 ([0, 1)), its SGD ones do not.
    ({"validation_fraction": 1.5}, lambda estimator: (
        InvalidParameterError,
        r"The 'validation_fraction' parameter of \w+ must be a float in the range "
        + (r"\[0\.0, 1\.0\)" if _is_mlp(estimator) else r"\(0\.0, 1\.0\)")),
     lambda estimator: True),
    ({"alpha": -1}, lambda estimator: (
        InvalidParameterError,
        r"The 'alpha' parameter of \w+ must be a float in the range \[0\.0, inf\)\. Got -1"),
     lambda estimator: "alpha" in estimator().get_params()),
    ({"learning_rate": "nope"},
     _unknown("learning_rate", "'invscaling'", "learning rate", "'invscaling'"),
     lambda estimator: True),
    ({"loss": "nope"},
     _unknown("loss", "'squared_error'", "learning loss", "'squared_error'"),
     lambda estimator: "loss" in estimator().get_params()),
    ({"penalty": "nope"},
     _unknown("penalty", "'l2'", "learning penalty", "'l2'"),
     lambda estimator: "penalty" in estimator().get_params()),
]


def _param_cases(rows):
    return [
        pytest.param(estimator, params, *expected(estimator),
                     id=f"{next(iter(params))}-{estimator.__name__}")
        for params, expected, applies in rows
        for estimator in ESTIMATORS
        if applies(estimator)
    ]


def test_parameter_rows_cover_every_parameter_of_each_estimator():
    """Each estimator meets every invalid-parameter row whose parameter it has."""
    for estimator in ESTIMATORS:
        names = set(estimator().get_params())
        for params, _, applies in _PARAM_ROWS:
            assert applies(estimator) == (next(iter(params)) in names), (estimator, params)


@pytest.mark.parametrize(("estimator", "params", "exception", "message"),
                         _param_cases(_PARAM_ROWS))
def test_invalid_parameters_raise_at_fit(fitted, estimator, params, exception, message):
    # __init__ only stores: scikit-learn validates in fit.
    fresh = estimator(**params)
    with pytest.raises(exception, match=message):
        fresh.fit(X, Y)
    assert not hasattr(fresh, "optimizer_")

    model = fitted(estimator)
    before = _fitted_state(model)
    model.set_params(**params)
    with pytest.raises(exception, match=message):
        model.fit(X, Y)
    _assert_same_state(before, _fitted_state(model))


@pytest.mark.parametrize(("estimator", "params", "exception", "message"),
                         _param_cases(_PARAM_ROWS[1:]))
def test_invalid_parameters_raise_at_partial_fit(fitted, estimator, params, exception,
                                                 message):
    """scikit-learn's SGD estimators validate their parameters at every partial_fit."""
    model = fitted(estimator)
    before = _fitted_state(model)
    model.set_params(**params)
    with pytest.raises(exception, match=message):
        _call(model, "partial_fit", (X, Y, None, {}))
    _assert_same_state(before, _fitted_state(model))


# -- the engine ----------------------------------------------------------------------------


def _graph(dead_weight=True, weight_type=TensorProto.FLOAT):
    """Y = X @ W1 (+ an int64 initializer K); W2 feeds a node whose result is no output."""
    nodes = [oh.make_node("MatMul", ["X", "W1"], ["Y"])]
    if dead_weight:
        nodes.append(oh.make_node("Add", ["X", "W2"], ["dead"]))
    inits = [
        numpy_helper.from_array(
            np.ones((2, 1), dtype=onnx.helper.tensor_dtype_to_np_dtype(weight_type)), "W1"),
        numpy_helper.from_array(np.ones((1, 2), dtype=np.float32), "W2"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "K"),
    ]
    graph = oh.make_graph(
        nodes, "g", [oh.make_tensor_value_info("X", weight_type, [None, 2])],
        [oh.make_tensor_value_info("Y", weight_type, [None, 1])], inits,
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)], ir_version=10)


@pytest.mark.parametrize(("weights", "dead", "message"), [
    (["W1", "nope"], True, r"Unknown weights \['nope'\]: the model's initializers are "
                           r"\['K', 'W1', 'W2'\]"),
    (["W1", "K"], True, r"Weights \['K'\] are not floating point tensors"),
    (["W1", "W2"], True, r"Weights \['W2'\] do not reach the outputs \['Y'\]"),
    (["W2"], True, r"Weights \['W2'\] do not reach the outputs"),
    # W2 feeds no node at all: onnxruntime would silently drop it.
    (["W1", "W2"], False, r"Weights \['W2'\] do not reach the outputs"),
], ids=["unknown", "integer", "dead-branch", "only-dead", "unused"])
def test_engine_rejects_bad_weights(weights, dead, message):
    with pytest.raises(ValueError, match=message):
        OrtGradientForwardBackward(_graph(dead), weights_to_train=weights)


def test_engine_rejects_gradient_of_another_dtype():
    engine = OrtGradientForwardBackward(_graph(), weights_to_train=["W1"])
    function = engine.new_instance()
    x = np.ones((3, 2), dtype=np.float32)
    w1 = np.ones((2, 1), dtype=np.float32)
    function.forward([x, w1], training=True)
    with pytest.raises(TypeError, match="Gradient of output 0 has dtype float64, the graph "
                                        "expects float32"):
        function.backward([np.ones((3, 1), dtype=np.float64)])
    with pytest.raises(ValueError, match="backward expects 1 output gradients"):
        function.backward([])
    # The right dtype still works afterwards.
    function.forward([x, w1], training=True)
    gradient = function.backward([np.ones((3, 1), dtype=np.float32)])
    # The input's gradient comes first (seed 001), then W1's.
    np.testing.assert_allclose(gradient[1].numpy(), x.T @ np.ones((3, 1)))


# -- the optimizer -------------------------------------------------------------------------

_OPT_ROWS = [
    ("nan-X", lambda: (_with(X, 1, np.nan), Y, None), "X contains NaN or infinity"),
    ("inf-y", lambda: (X, np.where(np.arange(len(Y)) == 3, np.inf, Y), None),
     "y contains NaN or infinity"),
    ("nan-weight", lambda: (X, Y, _w(np.nan, 2)), "sample_weight must be finite"),
    ("negative-weight", lambda: (X, Y, _w(-1.0, 2)), "finite and non-negative"),
    ("zero-weights", lambda: (X, Y, np.zeros(len(Y))), "sample_weight is zero everywhere"),
    ("1-D-X", lambda: (X[:, 0], Y, None), "X must be a 2-D array"),
    ("3-D-X", lambda: (X[:, :, None], Y, None), "X must be a 2-D array"),
    ("zero-rows", lambda: (X[:0], Y[:0], None), "X has 0 rows"),
    ("y-length", lambda: (X, Y[:-1], None), "X has 150 rows but y has 149"),
    ("weight-length", lambda: (X, Y, np.ones(3)), "sample_weight has 3 values for 150 rows"),
]


@pytest.fixture(scope="module")
def fitted_optimizer():
    from skl2onnx import to_onnx
    from sklearn.linear_model import LinearRegression

    from skl_ortgrad.graph.model import TARGET_OPSET
    from skl_ortgrad.training.optimizers_partial import OrtGradientForwardBackwardOptimizer

    onx = to_onnx(LinearRegression().fit(X, Y), X[:1].astype(np.float32),
                  target_opset=TARGET_OPSET, black_op={"LinearRegressor"})
    optimizer = OrtGradientForwardBackwardOptimizer(onx, max_iter=2, random_state=0)
    return optimizer.fit(X.astype(np.float32), Y)


@pytest.mark.parametrize("method", ["fit", "partial_fit"])
@pytest.mark.parametrize(("row", "make", "message"), _OPT_ROWS, ids=[r[0] for r in _OPT_ROWS])
def test_optimizer_bad_input_changes_nothing(fitted_optimizer, method, row, make, message):
    optimizer = copy.deepcopy(fitted_optimizer)
    before = ([w.copy() for w in optimizer.weights_], optimizer.t_,
              list(optimizer.train_losses_))
    X_bad, y_bad, weights = make()
    with pytest.raises(ValueError, match=message):
        getattr(optimizer, method)(X_bad, y_bad, sample_weight=weights)
    for a, b in zip(optimizer.weights_, before[0], strict=True):
        np.testing.assert_array_equal(a, b)
    assert (optimizer.t_, optimizer.train_losses_) == before[1:]
