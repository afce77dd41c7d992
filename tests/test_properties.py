"""Property-based tests: over shapes, dtypes, batch sizes, sample weights and label types,
``fit`` and ``predict`` either work, with finite predictions, or raise a clear
``ValueError``; never anything else.

The examples are derandomized (the same in every run) and few, so the file stays fast.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from _estimators import ALL_ESTIMATORS
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.base import is_classifier

from skl_ortgrad import ConvergenceError, LearningRateSGD, OnnxSGDClassifier, OnnxSGDRegressor

ESTIMATORS = ALL_ESTIMATORS

SETTINGS = settings(
    max_examples=20, deadline=None, derandomize=True, database=None,
    # No shrinking: a failing example is reported as drawn (shrinking one took a minute).
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# A ValueError is "clear" when its message says what is wrong with which input.
_CLEAR = (
    "has to be greater than one; got 1 class",
    "Sample weights must contain at least one non-zero number",
    "diverged",
)


@st.composite
def problems(draw, classifier):
    n_samples = draw(st.integers(1, 25))
    n_features = draw(st.integers(1, 5))
    dtype = draw(st.sampled_from([np.float32, np.float64, np.int64]))
    if dtype is np.int64:
        elements = st.integers(-1000, 1000)
    else:
        elements = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False, width=32)
    X = draw(arrays(dtype, (n_samples, n_features), elements=elements))
    if classifier:
        kind = draw(st.sampled_from(["int", "str"]))
        labels = [3, -1, 7] if kind == "int" else ["cat", "dog", "eel"]
        n_classes = draw(st.integers(1, 3))
        y = np.array(draw(st.lists(st.sampled_from(labels[:n_classes]),
                                   min_size=n_samples, max_size=n_samples)))
    else:
        y = draw(arrays(np.float64, n_samples,
                        elements=st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)))
    batch_size = draw(st.sampled_from([1, 2, "auto", n_samples, n_samples + 7]))
    weighted = draw(st.sampled_from(["none", "positive", "with-zeros"]))
    if weighted == "none":
        sample_weight = None
    else:
        low = 0.0 if weighted == "with-zeros" else 0.1
        sample_weight = draw(arrays(np.float64, n_samples, elements=st.floats(low, 10.0)))
    return X, y, sample_weight, batch_size


def _make(estimator, **params):
    """``estimator(**params)``; the SGD classifier with the log loss, whose probabilities
    these tests check (scikit-learn's default hinge loss has no ``predict_proba``)."""
    if estimator is OnnxSGDClassifier:
        params = {"loss": "log_loss", **params}
    return estimator(**params)


def _check(estimator, problem):
    """Fit and predict on ``problem``; return the outcome: "fitted", "diverged" (a
    ConvergenceError, the estimator left unfitted, the error carrying finite weights) or
    "refused" (a clear ValueError)."""
    X, y, sample_weight, batch_size = problem
    model = _make(estimator, batch_size=batch_size, max_iter=3, tol=None, random_state=0)
    try:
        model.fit(X, y, sample_weight=sample_weight)
    except ConvergenceError as exc:
        # A failed first fit leaves the estimator unfitted; the error has the weights.
        assert "smaller learning rate" in str(exc)
        assert "optimizer_" not in vars(model)
        assert all(np.isfinite(w).all() for w in exc.last_finite_weights.values())
        return "diverged"
    except ValueError as exc:
        assert any(text in str(exc) for text in _CLEAR), repr(exc)
        return "refused"
    predictions = model.predict(X)
    assert predictions.shape == (X.shape[0],)
    if is_classifier(model):
        assert set(predictions) <= set(model.classes_)
        assert predictions.dtype.kind == model.classes_.dtype.kind
        proba = model.predict_proba(X)
        assert np.isfinite(proba).all()
        np.testing.assert_allclose(proba.sum(axis=1), 1, rtol=1e-4)
        assert np.isfinite(model.decision_function(X)).all()
    else:
        assert np.isfinite(predictions).all()
    assert all(np.isfinite(w).all() for w in model.optimizer_.weights_)
    return "fitted"


@SETTINGS
@given(problem=problems(classifier=False))
def test_regressor_fit_predict(problem):
    _check(OnnxSGDRegressor, problem)


@SETTINGS
@given(problem=problems(classifier=True))
def test_classifier_fit_predict(problem):
    _check(OnnxSGDClassifier, problem)


@SETTINGS
@given(problem=problems(classifier=True), split=st.integers(1, 24))
def test_classifier_partial_fit_stream(problem, split):
    """Two partial_fit calls (classes given up front) behave like fit."""
    X, y, sample_weight, batch_size = problem
    classes = np.unique(y)
    model = _make(OnnxSGDClassifier, batch_size=batch_size, random_state=0)
    split = min(split, len(y))
    parts = [slice(0, split), slice(split, len(y))]
    try:
        for part in parts:
            if part.start == part.stop:
                continue
            weight = None if sample_weight is None else sample_weight[part]
            model.partial_fit(X[part], y[part], classes=classes, sample_weight=weight)
    except ValueError as exc:
        assert any(text in str(exc) for text in _CLEAR), repr(exc)
        return
    assert set(model.predict(X)) <= set(classes)
    assert np.isfinite(model.predict_proba(X)).all()


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_examples_cover_both_outcomes(estimator):
    """The strategy reaches both successful fits and clear errors (a sanity check of the
    strategy itself, with hand-picked examples)."""
    X = np.arange(12, dtype=np.float64).reshape(6, 2)
    y = np.array(["a", "b"] * 3) if is_classifier(estimator()) else np.arange(6.0)
    assert _check(estimator, (X, y, None, 1)) == "fitted"
    assert _check(estimator, (X, y, np.zeros(6), "auto")) == "refused"


@pytest.mark.parametrize(("estimator", "n_classes"), [
    (OnnxSGDRegressor, 0), (OnnxSGDClassifier, 2), (OnnxSGDClassifier, 3)])
def test_one_feature(estimator, n_classes):
    """One feature: coef and intercept stay two weights trained separately.

    skl2onnx merges initializers with equal values; zero coef and zero intercept of the
    same size (1 feature, 3 classes: both hold 3 zeros) would become one tensor.
    """
    rng = np.random.RandomState(0)
    X = rng.normal(size=(30, 1))
    thresholds = {0: [], 2: [0.0], 3: [-0.5, 0.5]}[n_classes]
    y = np.digitize(X[:, 0], thresholds) if n_classes else 2 * X[:, 0] + 1
    model = estimator(max_iter=20, tol=None, random_state=0).fit(X, y)
    assert model.optimizer_.weights_to_train_ == ["coef", "intercept"]
    assert model.coef_.shape == {0: (1,), 2: (1, 1), 3: (3, 1)}[n_classes]
    assert model.score(X, y) > (0.9 if not n_classes else 0.7)


# -- every call is one transaction ----------------------------------------------------------

_RNG = np.random.RandomState(0)
_X = _RNG.normal(size=(40, 3))
# Classes from column 1: its first 8 rows (the fewest a call uses) hold all three, so a
# refit on a prefix keeps classes_ and later calls on more rows are no unknown labels.
_Y = {"classifier": np.digitize(_X[:, 1], [-0.5, 0.5]), "regressor": _X @ [1.0, -2.0, 0.5]}


def _with_value(X, value):
    X = X.copy()
    X[1, 1] = value
    return X


# name -> (call(model, rows, y), message of the failure: None for a call that works).
_DIVERGING = LearningRateSGD(eta0=1e38, learning_rate="constant")
_CALLS = {
    "fit": (lambda model, rows, y: model.fit(_X[:rows], y[:rows]), None),
    "partial_fit": (lambda model, rows, y: model.partial_fit(_X[:rows], y[:rows]), None),
    "predict": (lambda model, rows, y: model.predict(_X[:rows]), None),
    "fit-nan": (lambda model, rows, y: model.fit(_with_value(_X, np.nan), y),
                "Input X contains NaN"),
    "partial_fit-beyond-float32": (
        lambda model, rows, y: model.partial_fit(_with_value(_X, 1e39), y),
        r"Input X contains a value too large for dtype\('float32'\)"),
    "predict-beyond-float32": (lambda model, rows, y: model.predict(_with_value(_X, -1e39)),
                               r"too large for dtype\('float32'\) in column 1, row 1"),
    "partial_fit-features": (lambda model, rows, y: model.partial_fit(_X[:, :2], y),
                             "X has 2 features"),
    "partial_fit-weights": (
        lambda model, rows, y: model.partial_fit(_X, y, sample_weight=-np.ones(len(y))),
        "Negative values in data passed to `sample_weight`"),
    "fit-diverges": (lambda model, rows, y: model.set_params(learning_rate=_DIVERGING).fit(_X, y),
                     "use a smaller learning rate"),
    "partial_fit-diverges": (
        lambda model, rows, y: model.set_params(learning_rate=_DIVERGING).partial_fit(_X, y),
        "use a smaller learning rate"),
    # Classifiers: a label outside classes_; regressors: a target beyond float32.
    "partial_fit-bad-y": (
        lambda model, rows, y: model.partial_fit(_X, np.where(_X[:, 1] > 1, 7, y)
                                                 if is_classifier(model) else y * 1e39),
        r"Labels \[7\] are not in classes_|Input y contains a value too large"),
}


def _observed(model):
    """Everything that must survive a failed call: predictions (and probabilities), the
    weights and rate state, t_, epochs, losses and the shuffling state."""
    optimizer = model.optimizer_
    rng = optimizer.__dict__.get("_rng")
    outputs = [model.predict(_X)] + ([model.predict_proba(_X)] if is_classifier(model) else [])
    return [*outputs, *optimizer.weights_, *optimizer.lr_state_,
            np.array([optimizer.t_, model.t_, model.n_iter_]), np.array(model.loss_curve_),
            np.array([]) if rng is None else rng.get_state()[1]]


# numpy's warnings on the way to the non-finite loss of the diverging calls.
@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                            "ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("estimator", ESTIMATORS)
@settings(max_examples=8, deadline=None, derandomize=True, database=None,
          phases=(Phase.explicit, Phase.generate),
          suppress_health_check=[HealthCheck.too_slow])
@given(calls=st.lists(st.tuples(st.sampled_from(sorted(_CALLS)), st.integers(8, 40)),
                      min_size=3, max_size=6))
def test_failed_calls_leave_the_model_as_it_was(estimator, calls):
    """Random sequences of good and bad calls on a fitted estimator: every failure
    (bad input, divergence before an epoch of the call ended, a refit included) leaves it
    exactly as before the call, and it goes on working. A fit that diverges after an
    epoch ended keeps that epoch instead (the documented guarantee)."""
    params = {"max_iter": 2, "tol": None, "random_state": 0, "batch_size": 4}
    if estimator is OnnxSGDClassifier:
        # A loss with probabilities whose calls with the huge rate diverge. The log loss
        # does not: the l2 penalty's step clips coef to 0 (as scikit-learn's) and its
        # bounded gradient keeps the intercept, and the loss, finite.
        params["loss"] = "modified_huber"
    model = estimator(**params)
    default_rate = model.get_params()["learning_rate"]
    y = _Y["classifier" if is_classifier(model) else "regressor"]
    model.fit(_X, y)
    for name, rows in calls:
        call, message = _CALLS[name]
        before = [np.copy(value) for value in _observed(model)]
        # The number the optimizer gives the first epoch of the call.
        first_epoch = 1 if name.startswith("fit") else len(model.loss_curve_) + 1
        try:
            call(model, rows, y)
        except ValueError as exc:
            assert message is not None and re.search(message, str(exc)), (name, exc)
            diverged = re.search(r"diverged at epoch (\d+)", str(exc))
            if diverged and int(diverged[1]) > first_epoch:
                assert model.n_iter_ == int(diverged[1]) - 1, (name, exc)
                continue
            after = _observed(model)
            assert len(after) == len(before), name
            for old, new in zip(before, after, strict=True):
                np.testing.assert_array_equal(new, old, err_msg=name)
        else:
            assert message is None, f"{name} did not fail"
        finally:
            model.set_params(learning_rate=default_rate)
