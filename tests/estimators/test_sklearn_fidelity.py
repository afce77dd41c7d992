"""What scikit-learn's own test files check of the estimators (issue #31): the early
stopping split, ``n_iter_`` after ``partial_fit``, the cumulative L1 penalty, the ``tol``
objective with sample weights, the MLP's best validation weights; each against
scikit-learn or a numpy reference."""

import numpy as np
import pytest
from sklearn.datasets import load_diabetes, load_iris
from sklearn.linear_model import SGDClassifier, SGDRegressor
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import OnnxSGDClassifier, OnnxSGDRegressor


def _scaled(load, rows):
    X, y = load(return_X_y=True)
    return StandardScaler().fit_transform(X)[:rows], y[:rows]


@pytest.mark.parametrize(("ours", "theirs"), [
    (OnnxSGDClassifier, SGDClassifier), (OnnxSGDRegressor, SGDRegressor)],
    ids=["classifier", "regressor"])
def test_early_stopping_splits_the_rows_scikit_learn_splits(ours, theirs):
    """Per sample, the early-stopping fit trains on scikit-learn's training rows, in their
    order, whether ``random_state`` is a seed or a ``RandomState``: same weights."""
    X, y = _scaled(load_iris if ours is OnnxSGDClassifier else load_diabetes, 150)
    y = y if ours is OnnxSGDClassifier else (y - 150) / 80
    for seed in (3, np.random.RandomState(3)):
        params = {"early_stopping": True, "validation_fraction": 0.3, "shuffle": False,
                  "tol": None, "max_iter": 3, "eta0": 0.01, "learning_rate": "constant"}
        reference = theirs(**params, random_state=3).fit(X, y)
        model = ours(**params, random_state=seed, batch_size=1, dtype=np.float64).fit(X, y)
        np.testing.assert_allclose(model.coef_, reference.coef_, rtol=1e-10, atol=1e-12)


def test_early_stopping_refuses_zero_weights_on_the_validation_rows_in_sklearn_words():
    X, y = load_iris(return_X_y=True)
    for estimator in (SGDClassifier, OnnxSGDClassifier):
        with pytest.raises(ValueError, match=r"^The sample weights for validation set are all "
                           r"zero, consider using a different random state\.$"):
            estimator(early_stopping=True, validation_fraction=0.4, random_state=0).fit(
                X, y, sample_weight=np.zeros(len(y)))
