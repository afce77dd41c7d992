"""Continue training fitted scikit-learn models and pipelines on new data."""

import warnings

import numpy as np
import pytest
from onnxruntime import InferenceSession
from sklearn.base import clone
from sklearn.datasets import load_diabetes, make_classification
from sklearn.ensemble import RandomForestRegressor
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.linear_model import LogisticRegression, Ridge, SGDClassifier
from sklearn.neighbors import KNeighborsRegressor
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVR

from skl_ortgrad import LearningRateAdam, OnnxGradientClassifier, OnnxGradientRegressor


def _serve(model, X):
    session = InferenceSession(model.SerializeToString())
    return session.run(None, {"X": X.astype(np.float32)})


@pytest.fixture(scope="module")
def drifted_regression():
    X, y = load_diabetes(return_X_y=True)
    y = y.copy()
    y[200:] = 1.3 * y[200:] + 20  # the relation changed on the new data
    return X[:200], y[:200], X[200:], y[200:]


@pytest.mark.parametrize("final, rate", [
    (Ridge(), 0.01),
    (MLPRegressor(hidden_layer_sizes=(8,), max_iter=2000, random_state=0),
     LearningRateAdam(eta0=0.01)),
])
def test_regression_pipeline_adapts_to_new_data(drifted_regression, final, rate):
    X_old, y_old, X_new, y_new = drifted_regression
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fitted = make_pipeline(StandardScaler(), final).fit(X_old, y_old)
    before = fitted.score(X_new, y_new)
    frozen_scale = fitted[0].scale_.copy()
    tuned = OnnxGradientRegressor(fitted, learning_rate=rate, random_state=0)
    tuned.fit(X_new, y_new)
    assert tuned.score(X_new, y_new) > before + 0.2
    # estimator_ carries the trained weights and predicts like the graph.
    np.testing.assert_allclose(tuned.estimator_.predict(X_new), tuned.predict(X_new),
                               rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(_serve(tuned.to_onnx(), X_new)[0].ravel(),
                               tuned.predict(X_new), rtol=1e-4, atol=1e-3)
    # The preprocessing stayed frozen and the original model is untouched.
    np.testing.assert_array_equal(tuned.estimator_[0].scale_, frozen_scale)
    assert fitted.score(X_new, y_new) == before


@pytest.fixture(scope="module")
def drifted_classification():
    X, y = make_classification(n_samples=1200, n_features=6, n_informative=4,
                               n_classes=3, random_state=0)
    X_new = X[600:].copy()
    X_new[:, :3] *= -1  # three features of the new data changed sign
    return X[:600], y[:600], X_new, y[600:]


@pytest.mark.parametrize("final", [
    LogisticRegression(),
    SGDClassifier(loss="log_loss", random_state=0),
    MLPClassifier(hidden_layer_sizes=(16,), max_iter=1000, random_state=0),
])
@pytest.mark.parametrize("n_classes", [2, 3])
def test_classification_pipeline_adapts_to_new_data(drifted_classification, final,
                                                    n_classes):
    X_old, y_old, X_new, y_new = drifted_classification
    if n_classes == 2:
        y_old, y_new = (y_old > 0).astype(int), (y_new > 0).astype(int)
    labels = np.array(["a", "b", "c"])
    y_old, y_new = labels[y_old], labels[y_new]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        fitted = make_pipeline(StandardScaler(), final).fit(X_old, y_old)
        refit = make_pipeline(StandardScaler(), clone(final)).fit(X_new, y_new)
    before, ceiling = fitted.score(X_new, y_new), refit.score(X_new, y_new)
    tuned = OnnxGradientClassifier(fitted, learning_rate=0.05, random_state=0)
    tuned.fit(X_new, y_new)
    np.testing.assert_array_equal(tuned.classes_, labels[:n_classes])
    # Most of the way from the stale model to a model refitted on the new data.
    after = tuned.score(X_new, y_new)
    assert after >= before + 0.7 * (ceiling - before), (before, after, ceiling)
    proba = tuned.predict_proba(X_new)
    np.testing.assert_allclose(tuned.estimator_.predict_proba(X_new), proba,
                               rtol=1e-4, atol=1e-5)
    label, served = _serve(tuned.to_onnx(), X_new)
    np.testing.assert_array_equal(label, tuned.predict(X_new))
    np.testing.assert_allclose(served, proba, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("final, operator", [
    (RandomForestRegressor(n_estimators=2, random_state=0), "TreeEnsembleRegressor"),
    (SVR(), "SVMRegressor"),
    (KNeighborsRegressor(n_neighbors=2), "TopK"),
])
def test_untrainable_final_step_is_named(final, operator):
    X, y = load_diabetes(return_X_y=True)
    fitted = make_pipeline(StandardScaler(), final).fit(X, y)
    step = fitted.steps[-1][0]
    with pytest.raises(ValueError, match=rf"Step '{step}' .* cannot be trained.*{operator}"):
        OnnxGradientRegressor(fitted).fit(X, y)


def test_unfitted_estimator_is_fitted_first():
    X, y = load_diabetes(return_X_y=True)
    template = make_pipeline(StandardScaler(), Ridge())
    tuned = OnnxGradientRegressor(template, max_iter=1).fit(X, y)
    with pytest.raises(NotFittedError):
        template.predict(X)  # the given estimator stays as it was
    reference = make_pipeline(StandardScaler(), Ridge()).fit(X, y)
    assert abs(tuned.score(X, y) - reference.score(X, y)) < 0.05


def test_partial_fit_streams_new_data(drifted_regression):
    X_old, y_old, X_new, y_new = drifted_regression
    fitted = make_pipeline(StandardScaler(), Ridge()).fit(X_old, y_old)
    tuned = OnnxGradientRegressor(fitted, learning_rate=0.01, random_state=0)
    scores = []
    for _ in range(30):
        for chunk in np.array_split(np.arange(len(X_new)), 4):
            tuned.partial_fit(X_new[chunk], y_new[chunk])
        scores.append(tuned.score(X_new, y_new))
    assert scores[-1] > scores[0] > fitted.score(X_new, y_new)


def test_classifier_partial_fit_takes_the_fitted_classes():
    X, y = make_classification(n_samples=300, n_features=5, n_classes=3, n_informative=3,
                               random_state=0)
    fitted = make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y)
    tuned = OnnxGradientClassifier(fitted, random_state=0).partial_fit(X, y)
    np.testing.assert_array_equal(tuned.classes_, [0, 1, 2])
    with pytest.raises(ValueError, match="classes must be passed"):
        OnnxGradientClassifier(LogisticRegression()).partial_fit(X, y)
