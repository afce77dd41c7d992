"""Every configuration of scikit-learn's SGD parameters either trains a model that beats
a constant predictor or is refused at ``fit`` with a message."""

import itertools

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.estimators.sgd_parameters import CLASSIFICATION_LOSSES, REGRESSION_LOSSES

PENALTIES = ["l2", "l1", "elasticnet", None]
SCHEDULES = ["optimal", "invscaling", "constant", "adaptive", "pa1", "pa2"]
# What the package refuses, and why (the message must say it).
REFUSED = {"pa1": "passive-aggressive", "pa2": "passive-aggressive"}
def _data(classifier: bool, n_classes: int = 2):
    if classifier:
        X, y = make_classification(200, 6, n_informative=4, n_classes=n_classes,
                                   random_state=0)
    else:
        X, y = make_regression(200, 6, noise=1.0, random_state=0)
    return StandardScaler().fit_transform(X), y


def _check(model, X, y, schedule, baseline):
    if schedule in REFUSED:
        with pytest.raises(ValueError, match=REFUSED[schedule]):
            model.fit(X, y)
        return
    model.fit(X, y)
    assert np.isfinite(model.coef_).all() and np.isfinite(model.intercept_).all()
    assert model.score(X, y) > baseline


@pytest.mark.parametrize(
    ("loss", "penalty", "schedule"),
    list(itertools.product(REGRESSION_LOSSES, PENALTIES, SCHEDULES)),
)
def test_regressor_grid(loss, penalty, schedule):
    X, y = _data(classifier=False)
    model = OnnxSGDRegressor(loss=loss, penalty=penalty, learning_rate=schedule,
                             max_iter=20, random_state=0)
    # R^2 of the constant predictor (the mean) is 0.
    _check(model, X, y, schedule, baseline=0.0)


@pytest.mark.parametrize(
    ("loss", "penalty", "schedule"),
    list(itertools.product(CLASSIFICATION_LOSSES, PENALTIES, SCHEDULES)),
)
def test_classifier_grid(loss, penalty, schedule):
    X, y = _data(classifier=True)
    model = OnnxSGDClassifier(loss=loss, penalty=penalty, learning_rate=schedule,
                              max_iter=20, random_state=0)
    _check(model, X, y, schedule, baseline=np.bincount(y).max() / len(y))


@pytest.mark.parametrize("loss", CLASSIFICATION_LOSSES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_classifier_multiclass_and_dtypes(loss, dtype):
    X, y = _data(classifier=True, n_classes=3)
    model = OnnxSGDClassifier(loss=loss, max_iter=20, random_state=0, dtype=dtype)
    _check(model, X, y, "optimal", baseline=np.bincount(y).max() / len(y))


@pytest.mark.parametrize("loss", REGRESSION_LOSSES)
def test_regressor_float64(loss):
    X, y = _data(classifier=False)
    model = OnnxSGDRegressor(loss=loss, max_iter=20, random_state=0, dtype=np.float64)
    _check(model, X, y, "invscaling", baseline=0.0)
