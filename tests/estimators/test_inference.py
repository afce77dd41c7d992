"""predict's engine: blocks and threads give the graph's own results, every non-finite
value is refused in scikit-learn's words (through the outputs for a linear score), and
predictions that overflow float32 are computed again in float64."""

import re
import threading
import time

import numpy as np
import pytest
import scipy.sparse as sp
from onnxruntime import InferenceSession
from sklearn.datasets import load_iris

from skl_ortgrad import (
    OnnxMLPClassifier,
    OnnxMLPRegressor,
    OnnxSGDClassifier,
    OnnxSGDRegressor,
)
from skl_ortgrad.estimators.finite_input import _cast_checked
from skl_ortgrad.runtime import blocks, threads
from skl_ortgrad.runtime.sessions import io_names

RNG = np.random.default_rng(0)
X = RNG.standard_normal((300, 6))
Y = X @ RNG.standard_normal(6) + 0.1 * RNG.standard_normal(300)
LABELS = np.digitize(Y, [-1.0, 1.0])  # three classes


def _error(call):
    with pytest.raises(ValueError) as info:
        call()
    return str(info.value)


def _served(model, data):
    """The exported graph's outputs on ``data`` cast to float32, one run."""
    onx = model.to_onnx()
    session = InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {"X": data.astype(np.float32)}), strict=True))


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of the fewest rows (``BLOCK_ROWS``), a thread per 100 values and 3 cores:
    many blocks, shared by 3 threads."""
    monkeypatch.setattr(blocks, "BLOCK_VALUES", 1)
    monkeypatch.setattr(blocks, "THREAD_VALUES", 100)
    monkeypatch.setattr(blocks, "free_cores", lambda: 3)


def _one_run(model, data):
    """What one run of the inference graph on all of ``data`` (as float32) gives."""
    session = model._session()
    inputs, names = io_names(session)
    feeds = dict(zip(model.optimizer_.weights_to_train_, model.optimizer_.served_weights(),
                     strict=True))
    feeds[inputs[0]] = data.astype(np.float32)
    return dict(zip(names, session.run(names, feeds), strict=True))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("order", ["C", "F"])
def test_blocks_and_threads_give_one_runs_results(small_blocks, dtype, order):
    """Blocks of a multiple of ``BLOCK_ROWS`` rows in 3 threads: the values of one run on
    all the rows, and the labels and probabilities of the exported graph."""
    data = np.asarray(np.tile(X, (4, 1)), dtype=dtype, order=order)  # 1200 rows, 7 blocks
    labels = np.tile(LABELS, 4)
    classifier = OnnxSGDClassifier(loss="log_loss", max_iter=5, random_state=0).fit(
        data, labels)
    served = _served(classifier, data)
    np.testing.assert_array_equal(classifier.predict(data), served["label"])
    np.testing.assert_array_equal(classifier.predict_proba(data), served["probabilities"])
    np.testing.assert_array_equal(classifier.decision_function(data),
                                  _one_run(classifier, data)[classifier._template_.score])
    regressor = OnnxSGDRegressor(max_iter=5, random_state=0).fit(data, np.tile(Y, 4))
    np.testing.assert_array_equal(regressor.predict(data),
                                  _one_run(regressor, data)["variable"].ravel())
    mlp = OnnxMLPClassifier(hidden_layer_sizes=(4,), max_iter=3, random_state=0).fit(
        data, labels)
    one_run = _one_run(mlp, data)
    np.testing.assert_array_equal(mlp.predict(data), one_run["label"])
    np.testing.assert_array_equal(mlp.predict_proba(data), one_run["probabilities"])


def test_threads_by_size_and_cores(monkeypatch):
    monkeypatch.setattr(blocks, "free_cores", lambda: 4)
    size = blocks.THREAD_VALUES
    assert blocks.block_threads(size - 1) == 1
    assert blocks.block_threads(3 * size) == 3
    assert blocks.block_threads(100 * size) == 4
    # Sessions of 2 intra-op threads each: half as many.
    assert blocks.block_threads(100 * size, n_threads=2) == 2
    assert blocks.block_threads(100 * size, n_threads=8) == 1


def test_usable_cores_follow_omp_num_threads(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    cores = threads.usable_cores()
    assert cores >= 1
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert threads.usable_cores() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "not a number")
    assert threads.usable_cores() == cores


def test_blocks_go_to_free_threads_once_each_and_errors_come_back():
    seen = {}
    first_taken = threading.Event()

    def work(index, share):
        if index:
            first_taken.wait()
        for start in share:
            seen[start] = (index, threading.get_ident())
            if index == 0:
                first_taken.set()
                time.sleep(0.2)  # a busy calling thread: the helpers take the rest

    blocks.share_blocks(range(0, 20, 2), 3, work)
    assert sorted(seen) == list(range(0, 20, 2))
    by_thread = {}
    for index, ident in seen.values():
        by_thread.setdefault(index, set()).add(ident)
    assert by_thread[0] == {threading.get_ident()}
    # A thread per index, at most 3.
    assert all(len(idents) == 1 for idents in by_thread.values())
    assert len(set.union(*by_thread.values())) == len(by_thread) <= 3
    assert sum(index == 0 for index, _ in seen.values()) == 1

    ran = []

    def fail(index, share):
        for start in share:
            ran.append(start)
            if start == 2:
                raise KeyError("block 2")
            time.sleep(0.001)

    with pytest.raises(KeyError, match="block 2"):
        blocks.share_blocks(range(100), 3, fail)
    assert len(ran) < 50  # no block handed out after the failure


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_the_fit_casts_and_checks_in_blocks(small_blocks, dtype):
    """The fit's cast in blocks: X's values as the graph's dtype, and the
    NaN of any block found."""
    data = np.tile(X, (4, 1)).astype(dtype)
    cast, finite = _cast_checked(data, np.float32 if dtype == np.float64 else np.float64)
    assert finite
    np.testing.assert_array_equal(cast, data.astype(cast.dtype))
    for row in (0, 700, 1199):
        bad = data.copy()
        bad[row, 3] = np.nan
        assert not _cast_checked(bad, np.float32)[1]


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("row", [0, 150, 299])
def test_linear_scores_find_non_finite_values_where_the_weight_is_zero(
        small_blocks, value, dtype, row):
    """NaN or infinity times a zero weight is NaN: the outputs show it, and the error is
    scikit-learn's, whichever block and thread the row falls in."""
    for model in (OnnxSGDClassifier(max_iter=3, random_state=0).fit(X, LABELS),
                  OnnxSGDRegressor(max_iter=3, random_state=0).fit(X, Y)):
        assert model._linear_score()
        weights = model.optimizer_.weights_
        weights[0][2] = 0  # coef of column 2
        data = X.astype(dtype)
        data[row, 2] = value
        word = "NaN" if np.isnan(value) else "infinity"
        for method in ("predict", "decision_function", "predict_proba"):
            if hasattr(model, method):
                message = _error(lambda m=model, f=method, d=data: getattr(m, f)(d))
                assert message.startswith(f"Input X contains {word}"), message
                # scikit-learn names the estimator for NaN (it suggests an imputer).
                assert (type(model).__name__ in message) == (word == "NaN")


@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_graphs_not_linear_in_x_check_the_row_sums(small_blocks, value):
    model = OnnxMLPRegressor(hidden_layer_sizes=(3,), max_iter=2, random_state=0).fit(X, Y)
    assert not model._linear_score()
    data = X.copy()
    data[200, 4] = value
    assert _error(lambda: model.predict(data)).startswith("Input X contains")
    # Finite values whose row sums overflow are predicted (in float64 where the hidden
    # layer overflows float32).
    big = np.full((2, 6), np.finfo(np.float32).max / 2, dtype=np.float32)
    assert np.isfinite(model.predict(big)).all()


def test_values_beyond_float32_are_refused_in_the_range_words(small_blocks):
    model = OnnxSGDRegressor(max_iter=3, random_state=0).fit(X, Y)
    data = X.copy()
    data[123, 1] = 1e39
    assert _error(lambda: model.predict(data)).startswith(
        "Input X contains a value too large for dtype('float32') in column 1, row 123")


def _overflowing_rows(coef, value=3e38, dtype=np.float32):
    """Four rows, the middle two of ``value`` times the signs of ``coef`` (and their
    opposite): scores of magnitude ``value`` times the sum of the weights' magnitudes."""
    data = X[:4].astype(dtype)
    data[1] = value * np.sign(coef)
    data[2] = -data[1]
    return data


def test_classifier_predictions_overflowing_float32_are_computed_in_float64():
    model = OnnxSGDClassifier(loss="log_loss", max_iter=5, random_state=0).fit(X, LABELS)
    data = _overflowing_rows(model.coef_[0])
    coef, intercept = model.coef_.astype(np.float64), model.intercept_.astype(np.float64)
    exact = data.astype(np.float64) @ coef.T + intercept
    served = _served(model, data)
    # float32 scores overflow (the probabilities may look finite: ties of saturated
    # sigmoids).
    assert not np.isfinite(_one_run(model, data)[model._template_.score][1:3]).all()
    scores = model.decision_function(data)
    assert scores.dtype == np.float64
    np.testing.assert_allclose(scores, exact, rtol=1e-6)
    np.testing.assert_array_equal(model.predict(data), model.classes_[exact.argmax(axis=1)])
    proba = model.predict_proba(data)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1)
    # The other rows are float32's results.
    np.testing.assert_array_equal(proba[[0, 3]], served["probabilities"][[0, 3]])


def test_regressor_predictions_overflowing_float32_are_computed_in_float64():
    model = OnnxSGDRegressor(max_iter=5, random_state=0).fit(X, Y)  # float64 data
    data = _overflowing_rows(model.coef_)
    exact = data.astype(np.float64) @ model.coef_ + model.intercept_
    assert np.abs(exact[1:3]).min() > np.finfo(np.float32).max
    prediction = model.predict(data)
    assert prediction.dtype == np.float64
    np.testing.assert_allclose(prediction, exact, rtol=1e-6)
    sparse = model.predict(sp.csr_matrix(data))
    np.testing.assert_allclose(sparse, exact, rtol=1e-6)


def test_predictions_the_returned_dtype_cannot_hold_are_refused():
    """Fitted on float32 data, the regressor returns float32: a prediction beyond it is
    an error, not an infinity."""
    model = OnnxSGDRegressor(max_iter=5, random_state=0).fit(X.astype(np.float32), Y)
    message = _error(lambda: model.predict(_overflowing_rows(model.coef_)))
    assert message.startswith("The prediction of row 1 of X is too large for "
                              "dtype('float32')")


def test_a_float64_model_refuses_predictions_float64_cannot_hold():
    model = OnnxSGDRegressor(max_iter=5, random_state=0, dtype=np.float64).fit(X, Y)
    data = _overflowing_rows(model.coef_, 1e308, np.float64)
    message = _error(lambda: model.predict(data))
    assert re.match(r"The prediction of row 1 of X is NaN or infinite in float64", message)


def test_output_sessions_compute_one_output_and_the_score():
    X_iris, y_iris = load_iris(return_X_y=True)
    model = OnnxSGDClassifier(loss="log_loss", max_iter=5, random_state=0).fit(X_iris, y_iris)
    template = model._template_
    names = {o.name for o in model._session("probabilities").get_outputs()}
    assert names == {"probabilities", template.score}
    assert {o.name for o in model._session(template.score).get_outputs()} == {template.score}
    assert model._session() is model._session(None)
    np.testing.assert_array_equal(model.predict_proba(X_iris),
                                  _served(model, X_iris)["probabilities"])


def test_estimators_fitted_from_one_cached_template_share_its_sessions():
    """Sessions take the weights as inputs: every estimator fitted from the same cached
    template serves through the same ones, built by the first predict; an estimator
    with other session options gets its own, and so does a template changed by its
    initial weights (a fixed intercept is part of the graph)."""
    first = OnnxSGDRegressor(max_iter=3, random_state=0).fit(X, Y)
    second = OnnxSGDRegressor(max_iter=3, random_state=1, alpha=0.1).fit(X, Y)
    assert first._template_ is not second._template_
    score = first._template_.score
    assert first._session(score) is second._session(score)
    other = OnnxSGDRegressor(max_iter=3, random_state=0, n_threads=2).fit(X, Y)
    assert other._session(score) is not first._session(score)
    assert other._template_.sessions is first._template_.sessions
    assert second.set_params(n_threads=2)._session(score) is other._session(score)
    second.set_params(n_threads="auto")
    fixed = OnnxSGDRegressor(max_iter=3, random_state=0, fit_intercept=False).fit(
        X, Y, intercept_init=[5.0])
    plain = OnnxSGDRegressor(max_iter=3, random_state=0, fit_intercept=False).fit(X, Y)
    assert fixed._template_.sessions is not plain._template_.sessions
    for model in (first, second, other, fixed, plain):
        np.testing.assert_array_equal(model.predict(X).astype(np.float32),
                                      _one_run(model, X)["variable"].ravel())
    for model, intercept in ((fixed, 5.0), (plain, 0.0)):
        assert model.intercept_ == intercept
        np.testing.assert_allclose(model.predict(X), X @ model.coef_ + intercept,
                                   rtol=1e-5, atol=1e-4)
