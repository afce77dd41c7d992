"""The linear SGD models that the linear training program trains, by case: the estimator,
its parameters, and the kind of target ("regressor", "binary" or "classes")."""

from __future__ import annotations

import numpy as np

from skl_ortgrad import OnnxSGDClassifier, OnnxSGDRegressor

LINEAR_CASES = {
    "squared error": (OnnxSGDRegressor, {}, "regressor"),
    "squared error, elastic net": (OnnxSGDRegressor, {"penalty": "elasticnet"}, "regressor"),
    "squared error, float64 model": (OnnxSGDRegressor, {"dtype": np.float64}, "regressor"),
    "hinge": (OnnxSGDClassifier, {}, "binary"),
    "log loss": (OnnxSGDClassifier, {"loss": "log_loss"}, "binary"),
    "hinge, 3 classes": (OnnxSGDClassifier, {}, "classes"),
}
