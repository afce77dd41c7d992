"""Constructor parameters: names memoized per class, validation per set of values;
scikit-learn's, faster."""

import inspect

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone

from skl_ortgrad import (
    LearningRateSGD,
    OnnxMLPClassifier,
    OnnxSGDClassifier,
    OnnxSGDRegressor,
    SquareLearningLoss,
    _params,
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


@pytest.fixture
def validations(monkeypatch):
    """The parameter sets scikit-learn's validation ran on (the memo emptied first)."""
    _params.VALIDATED.clear()
    seen = []
    original = _params.validate_parameter_constraints

    def validate(constraints, params, caller_name):
        seen.append(dict(params))
        return original(constraints, params, caller_name=caller_name)

    monkeypatch.setattr(_params, "validate_parameter_constraints", validate)
    yield seen
    _params.VALIDATED.clear()


def test_validation_once_per_class_and_values(validations):
    OnnxSGDRegressor(alpha=0.01)._validate_params()
    OnnxSGDRegressor(alpha=0.01)._validate_params()
    assert len(validations) == 1
    OnnxSGDRegressor(alpha=np.float64(0.01))._validate_params()  # another type
    OnnxSGDRegressor(alpha=0.02)._validate_params()
    OnnxSGDClassifier(alpha=0.01)._validate_params()
    assert len(validations) == 4


@pytest.mark.parametrize(("params", "message"), [
    ({"alpha": -1.0}, "The 'alpha' parameter of OnnxSGDRegressor must be"),
    ({"max_iter": 1.0}, "The 'max_iter' parameter of OnnxSGDRegressor must be"),
    ({"learning_rate": "fast"}, "The 'learning_rate' parameter of OnnxSGDRegressor must"),
])
def test_invalid_values_raise_every_time(validations, params, message):
    """Scikit-learn's error, at every call: a failed validation is not remembered (nor
    mistaken for a valid value comparing equal: 1.0 for 1)."""
    OnnxSGDRegressor(max_iter=1)._validate_params()
    for _ in range(2):
        with pytest.raises(ValueError, match=message):
            OnnxSGDRegressor(**params)._validate_params()
    assert len(validations) == 3


def test_values_that_may_change_are_validated_every_time(validations):
    rate = LearningRateSGD()
    for model in [OnnxSGDClassifier(class_weight={0: 1.0, 1: 2.0}),
                  OnnxSGDRegressor(random_state=np.random.RandomState(0)),
                  OnnxSGDRegressor(learning_rate=rate)]:
        model._validate_params()
        model._validate_params()
    assert len(validations) == 6
