"""What every estimator shares (``skl_ortgrad.estimators.base``): regression targets."""

import numpy as np
import pytest
from _estimators import ALL_ESTIMATORS
from sklearn.base import is_regressor
from sklearn.datasets import load_diabetes
from sklearn.linear_model import SGDRegressor
from sklearn.preprocessing import StandardScaler

REGRESSORS = [e for e in ALL_ESTIMATORS if is_regressor(e())]
X, Y = load_diabetes(return_X_y=True)
X = StandardScaler().fit_transform(X)[:60]
Y = (Y[:60] - Y.mean()) / Y.std()


@pytest.mark.parametrize("as_strings", [
    lambda y: y.astype(str),
    lambda y: y.astype(str).astype(object),
    lambda y: np.char.encode(y.astype(str)),
    lambda y: [str(v) for v in y],
], ids=["str", "object", "bytes", "list"])
@pytest.mark.parametrize("estimator", REGRESSORS)
def test_numbers_written_as_strings_are_numbers(estimator, as_strings):
    """As SGDRegressor, which casts y with numpy: "1.5" is 1.5."""
    strings = as_strings(Y)
    SGDRegressor(max_iter=2, tol=None).fit(X, strings)  # what scikit-learn accepts
    model = estimator(max_iter=2, tol=None, random_state=0).fit(X, strings)
    expected = estimator(max_iter=2, tol=None, random_state=0).fit(X, Y)
    np.testing.assert_array_equal(model.predict(X), expected.predict(X))


@pytest.mark.parametrize(("values", "message"), [
    (["1.5", "a"], r"y must be numeric for a regressor; its values could not be converted "
                   r"to float: could not convert string to float: .*'a'"),
    (["1.5", "nan"], "y contains NaN or infinity"),
    ([1.5, float("inf")], "y contains NaN or infinity"),
])
@pytest.mark.parametrize("estimator", REGRESSORS)
def test_strings_that_are_no_finite_numbers_are_refused(estimator, values, message):
    y = np.array(values * 30, dtype=object if isinstance(values[0], float) else str)
    with pytest.raises(ValueError, match=message):
        estimator(max_iter=2).fit(X, y)
