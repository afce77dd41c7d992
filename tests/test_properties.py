"""Property-based tests: over shapes, dtypes, batch sizes, sample weights and label types,
``fit`` and ``predict`` either work, with finite predictions, or raise a clear
``ValueError``; never anything else.

The examples are derandomized (the same in every run) and few, so the file stays fast.
"""

from __future__ import annotations

import numpy as np
import pytest
from _estimators import ALL_ESTIMATORS
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from sklearn.base import is_classifier

from skl_ortgrad import ConvergenceError, OnnxSGDClassifier, OnnxSGDRegressor

ESTIMATORS = ALL_ESTIMATORS

SETTINGS = settings(
    max_examples=20, deadline=None, derandomize=True, database=None,
    # No shrinking: a failing example is reported as drawn (shrinking one took a minute).
    phases=(Phase.explicit, Phase.generate),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# A ValueError is "clear" when its message says what is wrong with which input.
_CLEAR = (
    "at least 2 classes", "Sample weights must contain at least one non-zero number",
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


def _check(estimator, problem):
    X, y, sample_weight, batch_size = problem
    model = estimator(batch_size=batch_size, max_iter=3, tol=None, random_state=0)
    try:
        model.fit(X, y, sample_weight=sample_weight)
    except ConvergenceError as exc:
        # Divergence keeps a usable estimator with the last finite weights.
        assert "smaller learning rate" in str(exc)
    except ValueError as exc:
        assert any(text in str(exc) for text in _CLEAR), repr(exc)
        return
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
    model = OnnxSGDClassifier(batch_size=batch_size, random_state=0)
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
    _check(estimator, (X, y, None, 1))
    _check(estimator, (X, y, np.zeros(6), "auto"))


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
