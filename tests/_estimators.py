"""Every estimator of the package, as constructors taking the shared parameters."""

from sklearn.linear_model import LogisticRegression, Ridge

from skl_ortgrad import (
    OnnxGradientClassifier,
    OnnxGradientRegressor,
    OnnxMLPClassifier,
    OnnxMLPRegressor,
    OnnxSGDClassifier,
    OnnxSGDRegressor,
)


def _fine_tuning(cls, estimator):
    """A constructor of ``cls(estimator, **params)`` named after both."""

    def make(**params):
        return cls(estimator, **params)

    make.__name__ = f"{cls.__name__}[{type(estimator).__name__}]"
    return make


ALL_ESTIMATORS = [
    OnnxSGDRegressor,
    OnnxSGDClassifier,
    OnnxMLPRegressor,
    OnnxMLPClassifier,
    _fine_tuning(OnnxGradientRegressor, Ridge()),
    _fine_tuning(OnnxGradientClassifier, LogisticRegression()),
]
