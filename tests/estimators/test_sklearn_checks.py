"""scikit-learn's own estimator checks on the SGD estimators.

The expected failures are those scikit-learn's own test suite declares for
``SGDRegressor`` and ``SGDClassifier`` (its ``PER_ESTIMATOR_XFAIL_CHECKS`` table):
stochastic gradient descent with sample weights is not equivalent to removing or
repeating samples.
"""

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

def _expected_failed_checks(estimator):
    return _SGD_XFAIL


@parametrize_with_checks(
    [OnnxSGDRegressor(random_state=0), OnnxSGDClassifier(random_state=0)],
    expected_failed_checks=_expected_failed_checks,
)
def test_sklearn_compatible_estimator(estimator, check):
    check(estimator)
