"""Training quality against scikit-learn on datasets that ship with it."""

import numpy as np
import pytest
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris, make_regression
from sklearn.linear_model import SGDRegressor
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import (
    AbsoluteLearningLoss,
    ElasticLearningLoss,
    LearningRateSGD,
    NegLogLearningLoss,
    OnnxSGDClassifier,
    OnnxSGDRegressor,
)


def _split(X, y):
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test


def test_diabetes_close_to_sgd_regressor():
    X_train, X_test, y_train, y_test = _split(*load_diabetes(return_X_y=True))
    ours = OnnxSGDRegressor(random_state=0).fit(X_train, y_train)
    theirs = SGDRegressor(random_state=0).fit(X_train, y_train)
    assert ours.score(X_test, y_test) >= theirs.score(X_test, y_test) - 0.02
    assert ours.coef_.shape == (10,) and ours.intercept_.shape == (1,)
    assert len(ours.loss_curve_) == ours.n_iter_ < 1000  # tol stopped it
    assert ours.loss_curve_[-1] < ours.loss_curve_[0]


@pytest.mark.parametrize(
    "loss", [AbsoluteLearningLoss(), "huber", "epsilon_insensitive", ElasticLearningLoss()],
    ids=["absolute_error", "huber", "epsilon_insensitive", "elastic"],
)
def test_regression_losses_train(loss):
    X, y = make_regression(n_samples=400, n_features=5, noise=1.0, random_state=0)
    X_train, X_test, y_train, y_test = _split(X, y / y.std())
    model = OnnxSGDRegressor(
        loss=loss, learning_rate=LearningRateSGD(eta0=0.05, learning_rate="constant"),
        random_state=0,
    )
    assert model.fit(X_train, y_train).score(X_test, y_test) > 0.95


def test_breast_cancer_pipeline():
    X_train, X_test, y_train, y_test = train_test_split(
        *load_breast_cancer(return_X_y=True), random_state=0)
    pipe = make_pipeline(StandardScaler(), OnnxSGDClassifier(loss="log_loss", random_state=0))
    assert pipe.fit(X_train, y_train).score(X_test, y_test) >= 0.95
    clf = pipe[-1]
    assert clf.coef_.shape == (1, 30) and clf.intercept_.shape == (1,)
    proba = pipe.predict_proba(X_test)
    np.testing.assert_allclose(proba.sum(axis=1), 1, rtol=1e-5)
    np.testing.assert_array_equal(pipe.predict(X_test), clf.classes_[proba.argmax(axis=1)])


def test_iris_string_labels():
    X, y = load_iris(return_X_y=True)
    names = np.array(["setosa", "versicolor", "virginica"])
    X_train, X_test, y_train, y_test = _split(X, names[y])
    # The softmax cross-entropy (the former default for multiclass problems).
    softmax = NegLogLearningLoss(eps=0.0, probability_function="softmax")
    clf = OnnxSGDClassifier(loss=softmax, random_state=0).fit(X_train, y_train)
    np.testing.assert_array_equal(clf.classes_, names)
    assert clf.score(X_test, y_test) >= 0.9
    assert clf.coef_.shape == (3, 4) and clf.decision_function(X_test).shape == (38, 3)
    np.testing.assert_allclose(clf.predict_proba(X_test).sum(axis=1), 1, rtol=1e-5)
    np.testing.assert_allclose(
        clf.predict_log_proba(X_test), np.log(clf.predict_proba(X_test)), rtol=1e-6)


@pytest.mark.parametrize("loss", ["log_loss", "hinge", "modified_huber"])
def test_one_vs_rest_and_margin_losses(loss):
    X, y = load_iris(return_X_y=True)
    X_train, X_test, y_train, y_test = _split(X, y)
    # scikit-learn's 'optimal' schedule applied per mini-batch, unscaled: the rate these
    # thresholds were set with (the default now multiplies it by the batch size).
    rate = LearningRateSGD.scikit_learn_optimal()
    clf = OnnxSGDClassifier(loss=loss, learning_rate=rate, random_state=0)
    assert clf.fit(X_train, y_train).score(X_test, y_test) >= 0.85
    binary = OnnxSGDClassifier(loss=loss, learning_rate=rate, random_state=0)
    X_train, X_test, y_train, y_test = _split(*load_breast_cancer(return_X_y=True))
    assert binary.fit(X_train, y_train).score(X_test, y_test) >= 0.95


def test_random_state_reproducible():
    X_train, _, y_train, _ = _split(*load_diabetes(return_X_y=True))
    first = OnnxSGDRegressor(random_state=3, max_iter=5, tol=None).fit(X_train, y_train)
    second = OnnxSGDRegressor(random_state=3, max_iter=5, tol=None).fit(X_train, y_train)
    other = OnnxSGDRegressor(random_state=4, max_iter=5, tol=None).fit(X_train, y_train)
    np.testing.assert_array_equal(first.coef_, second.coef_)
    assert not np.array_equal(first.coef_, other.coef_)


def test_partial_fit_continues_t_and_counts_its_epoch_in_n_iter():
    X_train, _, y_train, _ = _split(*load_diabetes(return_X_y=True))
    model = OnnxSGDRegressor(random_state=0, batch_size=100)
    model.partial_fit(X_train, y_train)
    assert model.t_ == 1 + len(X_train) and model.n_iter_ == 1
    model.partial_fit(X_train, y_train)
    # n_iter_: the epochs of the last call, as scikit-learn's.
    assert model.t_ == 1 + 2 * len(X_train) and model.n_iter_ == 1
    assert len(model.loss_curve_) == 2


def test_early_stopping_uses_validation_score():
    X_train, _, y_train, _ = _split(*load_breast_cancer(return_X_y=True))
    clf = OnnxSGDClassifier(early_stopping=True, random_state=0, n_iter_no_change=3)
    clf.fit(X_train, y_train)
    assert len(clf.validation_scores_) == clf.n_iter_
    assert clf.best_validation_score_ == max(clf.validation_scores_) > 0.9


def test_warm_start_continues_from_fitted_weights():
    X_train, _, y_train, _ = _split(*load_diabetes(return_X_y=True))
    """As scikit-learn: a warm fit continues from the weights and restarts the schedule,
    which is a fit from coef_init / intercept_init."""
    model = OnnxSGDRegressor(shuffle=False, max_iter=3, tol=None, warm_start=True)
    model.fit(X_train, y_train)
    t_first, coef, intercept = model.t_, model.coef_.copy(), model.intercept_.copy()
    model.fit(X_train, y_train)
    assert model.t_ == t_first and model.n_iter_ == 3
    explicit = OnnxSGDRegressor(shuffle=False, max_iter=3, tol=None).fit(
        X_train, y_train, coef_init=coef, intercept_init=intercept)
    np.testing.assert_array_equal(model.coef_, explicit.coef_)
    assert not np.array_equal(model.coef_, coef)
    model.set_params(warm_start=False).fit(X_train, y_train)
    np.testing.assert_array_equal(model.coef_, coef)
