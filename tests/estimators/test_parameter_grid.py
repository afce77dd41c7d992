"""Every configuration of scikit-learn's SGD parameters either trains a model as good as
scikit-learn's own estimator with the same parameters on the same data, or is refused at
``fit`` as scikit-learn refuses it, in its words (the passive-aggressive schedules with
another loss than theirs).

How each cell is compared (scores on the 200 training rows, ``max_iter=20``):

* regression: R^2 at least scikit-learn's minus 0.001 (measured gaps are below 1e-4 where
  scikit-learn does not diverge; it diverges with ``'optimal'`` and a squared loss), and
  above the mean's 0;
* classification: accuracy at least scikit-learn's minus 0.02, 4 of the 200 rows (the
  measured gaps are at most 3 rows: mini-batches and single samples visit the rows in
  other orders, and scikit-learn's own accuracy moves by as much between shuffles), and
  above the majority class's;
* the perceptron, and the hinge without a penalty: the last iterate on data no
  hyperplane separates has no limit (the perceptron's accuracy ranges over 0.5-0.76 from
  one shuffle to the next, the unpenalized hinge's over 0.665-0.78 here, scikit-learn's
  over 0.505-0.74 with 'optimal'), so one fit says nothing: five shuffles of each, and
  the mean may not be lower than scikit-learn's by more than two standard errors of the
  difference;
* regression with a loss of bounded gradient (Huber, epsilon-insensitive) and the
  ``'optimal'`` schedule: scikit-learn's per-sample steps start at 10 with alpha=1e-4, a
  mini-batch step is capped at the curvature's 1 / L (``sgd_parameters``), and the
  targets (standard deviation 108) are 1000 epsilons away: progress is per step, and 20
  epochs of 7 steps are not 20 epochs of 200 (measured: R^2 0.16 against 0.9999). Those
  cells are compared at convergence (``max_iter=1000``, both stop by ``tol``; 250-270
  epochs for Huber, 33-36 for epsilon-insensitive against scikit-learn's 25-106).
"""

import itertools
import re

import numpy as np
import pytest
from sklearn.datasets import make_classification, make_regression
from sklearn.linear_model import SGDClassifier, SGDRegressor
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.estimators.sgd_parameters import CLASSIFICATION_LOSSES, REGRESSION_LOSSES

PENALTIES = ["l2", "l1", "elasticnet", None]
SCHEDULES = ["optimal", "invscaling", "constant", "adaptive", "pa1", "pa2"]
#: The one loss of each estimator's passive-aggressive schedules: scikit-learn refuses the
#: others at fit, in words the package repeats.
PASSIVE_AGGRESSIVE_LOSS = {"classifier": "hinge", "regressor": "epsilon_insensitive"}
#: (loss, schedule) of the regressor compared at convergence (see the module docstring).
AT_CONVERGENCE = {("huber", "optimal"), ("epsilon_insensitive", "optimal")}
R2_MARGIN = 0.001
ACCURACY_MARGIN = 0.02
SHUFFLES = range(5)


def _data(classifier: bool, n_classes: int = 2):
    if classifier:
        X, y = make_classification(200, 6, n_informative=4, n_classes=n_classes,
                                   random_state=0)
    else:
        X, y = make_regression(200, 6, noise=1.0, random_state=0)
    return StandardScaler().fit_transform(X), y


def _refusal(schedule, loss, kind):
    """scikit-learn's message where it refuses ``schedule`` with ``loss`` for an estimator
    of ``kind``; None where it trains."""
    expected = PASSIVE_AGGRESSIVE_LOSS[kind]
    if schedule in ("pa1", "pa2") and loss != expected:
        return f"Learning rate '{schedule}' only works with loss '{expected}'."
    return None


def _check(ours, theirs, X, y, baseline, margin):
    """``ours`` is refused as ``theirs`` (the scikit-learn estimator with the same
    parameters) is, with its message, or scores at least ``theirs`` minus ``margin``,
    and above ``baseline``."""
    kind = "classifier" if isinstance(ours, OnnxSGDClassifier) else "regressor"
    message = _refusal(ours.learning_rate, ours.loss, kind)
    if message is not None:
        for model in (ours, theirs):
            with pytest.raises(ValueError, match=re.escape(message)):
                model.fit(X, y)
        return
    ours.fit(X, y)
    assert np.isfinite(ours.coef_).all() and np.isfinite(ours.intercept_).all()
    score = ours.score(X, y)
    assert score > baseline
    assert score >= theirs.fit(X, y).score(X, y) - margin


def _check_shuffles(ours, theirs, X, y):
    """Five shuffles of each: ``ours``' mean score is not below ``theirs``' by more than
    two standard errors of the difference of the means."""
    scores = [[model.set_params(random_state=seed).fit(X, y).score(X, y) for seed in SHUFFLES]
              for model in (ours, theirs)]
    (ours_mean, theirs_mean), (ours_var, theirs_var) = (
        np.mean(scores, axis=1), np.var(scores, axis=1, ddof=1))
    error = np.sqrt((ours_var + theirs_var) / len(SHUFFLES))
    assert ours_mean >= theirs_mean - 2 * error, scores


@pytest.mark.parametrize(
    ("loss", "penalty", "schedule"),
    list(itertools.product(REGRESSION_LOSSES, PENALTIES, SCHEDULES)),
)
def test_regressor_grid(loss, penalty, schedule):
    X, y = _data(classifier=False)
    max_iter = 1000 if (loss, schedule) in AT_CONVERGENCE else 20
    params = {"loss": loss, "penalty": penalty, "learning_rate": schedule,
              "max_iter": max_iter, "random_state": 0}
    # R^2 of the constant predictor (the mean) is 0.
    _check(OnnxSGDRegressor(**params), SGDRegressor(**params), X, y, baseline=0.0,
           margin=R2_MARGIN)


@pytest.mark.parametrize(
    ("loss", "penalty", "schedule"),
    list(itertools.product(CLASSIFICATION_LOSSES, PENALTIES, SCHEDULES)),
)
def test_classifier_grid(loss, penalty, schedule):
    X, y = _data(classifier=True)
    params = {"loss": loss, "penalty": penalty, "learning_rate": schedule, "max_iter": 20,
              "random_state": 0}
    ours, theirs = OnnxSGDClassifier(**params), SGDClassifier(**params)
    if (loss == "perceptron" or (loss == "hinge" and penalty is None)) and (
            _refusal(schedule, loss, "classifier") is None):
        _check_shuffles(ours, theirs, X, y)
        return
    _check(ours, theirs, X, y, baseline=np.bincount(y).max() / len(y),
           margin=ACCURACY_MARGIN)


@pytest.mark.parametrize("loss", CLASSIFICATION_LOSSES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_classifier_multiclass_and_dtypes(loss, dtype):
    X, y = _data(classifier=True, n_classes=3)
    params = {"loss": loss, "max_iter": 20, "random_state": 0}
    ours, theirs = OnnxSGDClassifier(**params, dtype=dtype), SGDClassifier(**params)
    if loss == "perceptron":
        _check_shuffles(ours, theirs, X, y)
        return
    _check(ours, theirs, X, y, baseline=np.bincount(y).max() / len(y),
           margin=ACCURACY_MARGIN)


@pytest.mark.parametrize("loss", REGRESSION_LOSSES)
def test_regressor_float64(loss):
    X, y = _data(classifier=False)
    params = {"loss": loss, "max_iter": 20, "random_state": 0}
    _check(OnnxSGDRegressor(**params, dtype=np.float64), SGDRegressor(**params), X, y,
           baseline=0.0, margin=R2_MARGIN)
