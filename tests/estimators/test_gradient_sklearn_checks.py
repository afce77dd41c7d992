"""scikit-learn's own estimator checks on the fine-tuning estimators, with no expected
failure.

The wrapped estimator is not fitted here, so each check's first ``fit`` fits it on the
check's data and then fine-tunes it.
"""

from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.utils.estimator_checks import parametrize_with_checks

from skl_ortgrad import OnnxGradientClassifier, OnnxGradientRegressor


@parametrize_with_checks([
    OnnxGradientRegressor(Ridge(), random_state=0),
    OnnxGradientClassifier(LogisticRegression(), random_state=0),
])
def test_gradient_sklearn_compatible(estimator, check):
    check(estimator)
