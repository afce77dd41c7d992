"""scikit-learn's own estimator checks on the SGD estimators.

The expected failures scikit-learn declares for ``SGDRegressor`` and ``SGDClassifier``
themselves (``PER_ESTIMATOR_XFAIL_CHECKS`` in
``sklearn/utils/_test_common/instance_generator.py``): stochastic gradient descent with
sample weights is not equivalent to removing or repeating samples.

``_OPEN_REGRESSOR_ISSUES`` lists checks that fail for a reason of our own, kept visible
(strict xfail: the test fails as soon as one of them passes) until it is decided:
these checks fit on unscaled data (``X ~ N(100, 1)``) on which squared-error SGD with the
default schedule diverges; the estimator raises ``ConvergenceError`` by design (float32
loss reaches inf at epoch 3), where ``SGDRegressor`` clips the loss derivative at 1e12 in
float64 and returns predictions of about -2e13 without an error.
"""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from skl_ortgrad import OnnxSGDClassifier, OnnxSGDRegressor

_SGD_XFAIL = {
    "check_sample_weight_equivalence_on_dense_data": (
        "sample_weight is not equivalent to removing/repeating samples."
    ),
    "check_sample_weight_equivalence_on_sparse_data": (
        "sample_weight is not equivalent to removing/repeating samples."
    ),
}

_DIVERGES = (
    "OPEN ISSUE: squared-error SGD diverges on X ~ N(100, 1) and the estimator raises "
    "ConvergenceError (SGDRegressor clips dloss at 1e12 in float64 instead)."
)
_OPEN_REGRESSOR_ISSUES = {
    "check_fit_idempotent": _DIVERGES,
    "check_fit_check_is_fitted": _DIVERGES,
    "check_n_features_in": _DIVERGES,
}


def _expected_failed_checks(estimator):
    if isinstance(estimator, OnnxSGDRegressor):
        return {**_SGD_XFAIL, **_OPEN_REGRESSOR_ISSUES}
    return _SGD_XFAIL


@parametrize_with_checks(
    [OnnxSGDRegressor(random_state=0), OnnxSGDClassifier(random_state=0)],
    expected_failed_checks=_expected_failed_checks,
)
def test_sklearn_compatible_estimator(estimator, check, request):
    marker = request.node.get_closest_marker("xfail")
    if marker is not None and marker.kwargs.get("reason", "").startswith("OPEN ISSUE"):
        request.node.add_marker(pytest.mark.xfail(reason=marker.kwargs["reason"], strict=True))
    check(estimator)
