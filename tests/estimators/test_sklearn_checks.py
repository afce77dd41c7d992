"""scikit-learn's own estimator checks on the SGD estimators.

The expected failures are those scikit-learn's own test suite declares for
``SGDRegressor`` and ``SGDClassifier`` (its ``PER_ESTIMATOR_XFAIL_CHECKS`` table):
stochastic gradient descent with sample weights is not equivalent to removing or
repeating samples. They are not xfails, which pass whatever the error: each must fail,
with the assertion that says so (a check that starts passing, or fails for another
reason, fails the test).
"""

import pytest
from sklearn.utils.estimator_checks import estimator_checks_generator, parametrize_with_checks

from skl_ortgrad import OnnxSGDClassifier, OnnxSGDRegressor

ESTIMATORS = [OnnxSGDRegressor(random_state=0), OnnxSGDClassifier(random_state=0)]

_NOT_EQUIVALENT = (
    r"Comparing the output of OnnxSGD(Regressor\.predict|Classifier\.decision_function) "
    r"revealed that fitting with `sample_weight` is not equivalent to fitting with removed "
    r"or repeated data points\."
)
#: Check name -> the message of the AssertionError it must raise.
EXPECTED_FAILURES = {
    "check_sample_weight_equivalence_on_dense_data": _NOT_EQUIVALENT,
    "check_sample_weight_equivalence_on_sparse_data": _NOT_EQUIVALENT,
}


def _name(check) -> str:
    return check.func.__name__


@parametrize_with_checks(ESTIMATORS)
def test_sklearn_compatible_estimator(estimator, check):
    expected = EXPECTED_FAILURES.get(_name(check))
    if expected is None:
        check(estimator)
        return
    with pytest.raises(AssertionError, match=expected):
        check(estimator)


@pytest.mark.parametrize("estimator", ESTIMATORS, ids=lambda e: type(e).__name__)
def test_expected_failures_are_checks_scikit_learn_runs(estimator):
    """A renamed or dropped check would leave its expected failure unused."""
    names = {_name(check) for _, check in estimator_checks_generator(estimator)}
    assert set(EXPECTED_FAILURES) <= names
