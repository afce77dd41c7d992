"""scikit-learn's own estimator checks on the MLP estimators.

scikit-learn declares no expected failure for ``MLPRegressor`` / ``MLPClassifier``; none
is declared here either. The instances compute in float64: the sample-weight equivalence
checks compare weighted and repeated fits to rtol 1e-7, below float32's rounding of sums
taken in a different order (the float32 gap measured 2.4e-7).
"""

import numpy as np
from sklearn.utils.estimator_checks import parametrize_with_checks

from skl_ortgrad import OnnxMLPClassifier, OnnxMLPRegressor


@parametrize_with_checks(
    [
        OnnxMLPRegressor(hidden_layer_sizes=(16,), random_state=0, dtype=np.float64),
        OnnxMLPClassifier(hidden_layer_sizes=(16,), random_state=0, dtype=np.float64),
    ],
)
def test_mlp_sklearn_compatible(estimator, check):
    check(estimator)
