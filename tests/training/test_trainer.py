"""The trainer as a plain object: configured by name, used by the estimators, wrapped by
the seed API's scikit-learn optimizer."""

import inspect
import pickle

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.datasets import load_diabetes

from skl_ortgrad import LearningRateSGD, OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.training.optimizers_partial import OrtGradientForwardBackwardOptimizer
from skl_ortgrad.training.trainer import Trainer


def test_a_plain_object_configured_by_name(linear_onnx, regression_data):
    X, y = regression_data
    trainer = Trainer(linear_onnx, max_iter=2, batch_size=16, random_state=0)
    assert not isinstance(trainer, BaseEstimator)
    assert not hasattr(trainer, "get_params") and not hasattr(trainer, "set_params")
    rate = LearningRateSGD(eta0=0.05, learning_rate="constant")
    assert trainer.configure(learning_rate=rate, max_iter=3) is trainer
    assert trainer.learning_rate is rate and trainer.max_iter == 3
    trainer.fit(X, y)
    assert trainer.n_iter_ == 3 and len(trainer.train_losses_) == 3
    assert trainer.learning_rate_ is rate


def test_configure_refuses_an_unknown_setting(linear_onnx):
    trainer = Trainer(linear_onnx)
    with pytest.raises(TypeError, match=r"unknown settings \['eta0', 'max_iters'\]"):
        trainer.configure(max_iters=3, eta0=0.1, tol=None)
    # Nothing was set, not even the known setting.
    assert trainer.tol is None and not hasattr(trainer, "max_iters")
    trainer.configure(tol=0.5)
    assert trainer.tol == 0.5


def test_the_seed_wrapper_is_a_trainer_and_an_estimator(linear_onnx, regression_data):
    X, y = regression_data
    opt = OrtGradientForwardBackwardOptimizer(linear_onnx, max_iter=2, random_state=0)
    assert isinstance(opt, Trainer) and isinstance(opt, BaseEstimator)
    assert set(opt.get_params(deep=False)) == set(inspect.signature(Trainer).parameters)
    # Top-level parameters through configure, nested ones through scikit-learn.
    opt.set_params(max_iter=3, learning_rate__eta0=0.02)
    assert opt.max_iter == 3 and opt.learning_rate.eta0 == 0.02
    with pytest.raises(ValueError, match="Invalid parameter 'max_iters'"):
        opt.set_params(max_iters=3)
    copy = clone(opt)
    assert type(copy) is OrtGradientForwardBackwardOptimizer and copy.max_iter == 3
    # Same trainer, same result.
    plain = Trainer(**opt.get_params(deep=False))
    for trainer in (opt, plain):
        trainer.configure(learning_rate=LearningRateSGD(eta0=0.02), random_state=0)
        trainer.fit(X, y)
    np.testing.assert_array_equal(opt.weights_[0], plain.weights_[0])
    assert opt.train_losses_ == plain.train_losses_


@pytest.mark.parametrize("cls", [OnnxSGDRegressor, OnnxSGDClassifier])
def test_the_estimators_train_a_plain_trainer(cls):
    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    y = y > np.median(y) if cls is OnnxSGDClassifier else (y - y.mean()) / y.std()
    model = cls(max_iter=3, tol=None, random_state=0).fit(X, y)
    assert type(model.optimizer_) is Trainer
    # Every call configures it: partial_fit runs one epoch, without tol.
    model.partial_fit(X, y)
    assert (model.optimizer_.max_iter, model.optimizer_.tol) == (1, None)
    assert model.n_iter_ == 4


def test_a_pickle_holding_the_seed_wrapper_still_trains(regression_data):
    """Estimators pickled before the trainer was split off hold the wrapper class: they
    load and resume exactly as a fresh pickle does."""
    X, y = regression_data
    model = OnnxSGDRegressor(max_iter=2, tol=None, random_state=0).fit(X, y)
    old = pickle.loads(pickle.dumps(model))
    old.optimizer_.__class__ = OrtGradientForwardBackwardOptimizer
    old = pickle.loads(pickle.dumps(old))
    assert type(old.optimizer_) is OrtGradientForwardBackwardOptimizer
    new = pickle.loads(pickle.dumps(model))
    for m in (old, new):
        m.partial_fit(X, y)
    np.testing.assert_array_equal(old.coef_, new.coef_)
    assert old.t_ == new.t_ and old.loss_curve_ == new.loss_curve_
