"""Errors in the estimator's words, naming the parameter and the value (issue 32): each
refused call leaves a fitted estimator as it was."""

from __future__ import annotations

import pickle
import re

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression
from sklearn.utils._param_validation import InvalidParameterError

from skl_ortgrad import (
    OnnxGradientRegressor,
    OnnxMLPClassifier,
    OnnxMLPRegressor,
    OnnxSGDClassifier,
    OnnxSGDRegressor,
)

RNG = np.random.RandomState(0)
X = RNG.randn(60, 4)
Y = X @ np.array([1.0, 2.0, 3.0, 4.0]) + 0.5
LABELS = (Y > 0.5).astype(int)
TINY = np.full(len(X), 1e-300)


@pytest.mark.parametrize("weight", [np.nan, np.inf, -1.0])
@pytest.mark.parametrize("estimator", [OnnxSGDClassifier])
def test_class_weight_that_is_not_a_finite_non_negative_number(estimator, weight):
    model = estimator(random_state=0, max_iter=2, tol=None).fit(X, LABELS)
    before = pickle.dumps(model.coef_), model.t_
    model.set_params(class_weight={0: weight})
    with pytest.raises(ValueError, match=re.escape(
            f"class_weight must give every class a finite weight >= 0, got {weight!r} for "
            "class 0.")):
        model.fit(X, LABELS)
    assert (pickle.dumps(model.coef_), model.t_) == before


@pytest.mark.parametrize("make", [
    lambda: OnnxSGDRegressor(random_state=0),
    lambda: OnnxSGDClassifier(random_state=0),
    lambda: OnnxMLPRegressor(solver="lbfgs", max_iter=5, random_state=0),
    lambda: OnnxMLPClassifier(solver="adam", max_iter=5, random_state=0),
])
def test_sample_weight_that_rounds_to_zero_in_float32(make):
    model = make()
    target = LABELS if "Classifier" in type(model).__name__ else Y
    with pytest.raises(ValueError, match=re.escape(
            "sample_weight's positive values all round to 0 in float32 (the largest is "
            "1e-300, at row 0; the smallest positive float32 is 1.401e-45): train in "
            "float64 (dtype=numpy.float64), or rescale the weights.")):
        model.fit(X, target, sample_weight=TINY)
    assert not hasattr(model, "optimizer_")


def test_sample_weight_of_1e_300_trains_in_float64():
    """scikit-learn accepts such weights; so does float64 training (L-BFGS divided by
    their sum, zero once cast to float32), and the SGD classifier's rate cap (the inverse
    of their mean overflows: nothing to cap)."""
    params = {"solver": "lbfgs", "max_iter": 20, "random_state": 0, "dtype": np.float64,
              "alpha": 0.0}
    mlp = OnnxMLPRegressor(**params).fit(X, Y, sample_weight=TINY)
    plain = OnnxMLPRegressor(**params).fit(X, Y)
    # Only the ratios of the weights matter to the mean loss (scikit-learn's L2 term is
    # divided by their sum: none here).
    np.testing.assert_allclose(mlp.optimizer_.train_losses_[0],
                               plain.optimizer_.train_losses_[0], rtol=1e-9)
    assert np.isfinite(mlp.predict(X)).all()
    sgd = OnnxSGDClassifier(random_state=0, dtype=np.float64)
    sgd.fit(X, LABELS, sample_weight=TINY)
    assert np.isfinite(sgd.decision_function(X)).all()


@pytest.mark.parametrize("estimator", [OnnxMLPRegressor, OnnxMLPClassifier, OnnxSGDRegressor])
@pytest.mark.parametrize("fraction", [0.0])
def test_validation_fraction_out_of_range_with_early_stopping(estimator, fraction):
    """scikit-learn's MLPs accept 0.0 and fail in train_test_split's words."""
    model = estimator(early_stopping=True, validation_fraction=fraction, max_iter=3)
    target = LABELS if estimator is OnnxMLPClassifier else Y
    with pytest.raises(InvalidParameterError, match=re.escape(
            f"The 'validation_fraction' parameter of {estimator.__name__} must be a float "
            f"in the range (0.0, 1.0)")):
        model.fit(X, target)


def test_gradient_refit_of_a_fitted_model_on_another_width():
    model = OnnxGradientRegressor(LinearRegression().fit(X, Y), max_iter=2).fit(X, Y)
    predictions = model.predict(X)
    with pytest.raises(ValueError, match=re.escape(
            "X has 3 features, but LinearRegression is expecting 4 features as input: "
            "fine-tuning starts from its fitted weights. Pass an unfitted estimator to fit "
            "data of another width.")):
        model.fit(X[:, :3], Y)
    np.testing.assert_array_equal(model.predict(X), predictions)
    # An unfitted one refits on any width, as scikit-learn's estimators do.
    unfitted = OnnxGradientRegressor(LinearRegression(), max_iter=2).fit(X, Y)
    unfitted.fit(X[:, :3], Y)
    assert unfitted.n_features_in_ == 3 and unfitted.predict(X[:, :3]).shape == (len(X),)


def test_fine_tuning_a_model_at_its_optimum_is_no_failure():
    """A fitted LinearRegression's steps are below the weights' rounding: nothing moves,
    and that is not the 'every step rounded away' refusal (the rate is not zero)."""
    model = OnnxGradientRegressor(LinearRegression().fit(X, Y), max_iter=2).fit(X, Y)
    np.testing.assert_allclose(model.predict(X), Y, atol=1e-4)


def test_a_few_weights_below_float32_among_others_are_accepted():
    """One weight of 1e-300 among weights of 1 weighs nothing either way."""
    weights = np.ones(len(X))
    weights[3] = 1e-300
    model = OnnxSGDRegressor(random_state=0, max_iter=3, tol=None)
    model.fit(X, Y, sample_weight=weights)
    assert np.isfinite(model.predict(X)).all()
