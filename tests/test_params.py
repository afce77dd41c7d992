"""Constructor parameter names, memoized per class: scikit-learn's, faster."""

import inspect

import pytest
from sklearn.base import BaseEstimator, clone

from skl_ortgrad import (
    LearningRateSGD,
    OnnxMLPClassifier,
    OnnxSGDClassifier,
    OnnxSGDRegressor,
    SquareLearningLoss,
)
from skl_ortgrad._params import param_names
from skl_ortgrad.training.optimizers_partial import OrtGradientForwardBackwardOptimizer
from skl_ortgrad.training.trainer import Trainer


@pytest.mark.parametrize("cls", [OnnxSGDRegressor, OnnxSGDClassifier, OnnxMLPClassifier,
                                 LearningRateSGD, SquareLearningLoss,
                                 OrtGradientForwardBackwardOptimizer, Trainer])
def test_the_names_scikit_learn_reads(cls):
    expected = BaseEstimator._get_param_names.__func__(cls)
    assert param_names(cls) == expected == sorted(inspect.signature(cls).parameters)
    if issubclass(cls, BaseEstimator):
        assert cls._get_param_names() == expected


def test_a_copy_every_time():
    names = param_names(OnnxSGDRegressor)
    names.append("spurious")
    assert "spurious" not in param_names(OnnxSGDRegressor)
    assert "spurious" not in OnnxSGDRegressor().get_params()


def test_scikit_learns_error_for_varargs():
    class Loose(BaseEstimator):
        def __init__(self, *args):
            self.args = args

    with pytest.raises(RuntimeError, match="scikit-learn estimators should always specify"):
        param_names(Loose)


def test_get_params_set_params_and_clone_unchanged():
    model = OnnxSGDClassifier(alpha=0.01, learning_rate=LearningRateSGD(eta0=0.2))
    params = model.get_params()
    assert params["alpha"] == 0.01 and params["learning_rate__eta0"] == 0.2
    model.set_params(learning_rate__eta0=0.3, alpha=0.02)
    copy = clone(model)
    assert copy.alpha == 0.02 and copy.learning_rate.eta0 == 0.3
    assert copy.learning_rate is not model.learning_rate
    assert repr(copy).startswith("OnnxSGDClassifier(alpha=0.02")
