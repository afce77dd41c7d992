"""The trainer as a plain object: configured by name, used by the estimators, wrapped by
the seed API's scikit-learn optimizer."""

import inspect
import pickle

import numpy as np
import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.datasets import load_diabetes

from skl_ortgrad import LearningRateSGD, OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.training import program_choice
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
    assert model.n_iter_ == 1 and len(model.loss_curve_) == 4


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


@pytest.mark.parametrize(("rows", "verbose", "path"), [
    (16, 0, "epochs grouped"), (16, 1, "per batch"), (8, 1, "program chunks")])
@pytest.mark.parametrize("weighted_mean", [True, False])
def test_epoch_loss_of_weighted_rows(monkeypatch, capsys, weighted_mean, rows, verbose,
                                     path):
    """With sample weights, the epoch's loss is scikit-learn's MLP loss under
    ``weighted_mean`` (the mean over the rows of each batch's weighted mean loss), else the
    mean over the rows' weights; checked in float64 at weights that do not move (a rate of
    1e-300) on 40 rows, the rows 16 to 31 weighing nothing, on each path."""
    from skl2onnx import to_onnx
    from sklearn.linear_model import LinearRegression

    from skl_ortgrad.runtime.program_run import LinearProgramRun

    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + rng.standard_normal(40)
    weights = rng.uniform(0.2, 3.0, 40)
    weights[16:32] = 0.0
    fitted = LinearRegression().fit(X[:10], y[:10] * 0.5)
    trainer = Trainer(to_onnx(fitted, X[:1], black_op={"LinearRegressor"}), max_iter=2,
                      batch_size=rows, shuffle=False, tol=None, weighted_mean=weighted_mean,
                      verbose=verbose,
                      learning_rate=LearningRateSGD(eta0=1e-300, learning_rate="constant"))
    if path == "per batch":
        # Programs off: the linear program would run two full batches of a fit.
        monkeypatch.setattr(program_choice, "PROGRAM_STEPS", 1)
    calls = {"epochs grouped": [], "program chunks": []}
    for name, method in (("epochs grouped", "run_epochs"), ("program chunks", "run")):
        original = getattr(LinearProgramRun, method)
        monkeypatch.setattr(LinearProgramRun, method,
                            lambda self, n, o=original, c=calls[name]: (c.append(n), o(self, n)))
    trainer.fit(X, y, sample_weight=weights)
    assert [name for name, made in calls.items() if made] == (
        [] if path == "per batch" else [path])
    residuals = X @ fitted.coef_ + fitted.intercept_ - y
    batches = [slice(start, start + rows) for start in range(0, 40, rows)]
    sums = [0.5 * float(weights[b] @ residuals[b] ** 2) for b in batches]
    totals = [weights[b].sum() for b in batches]
    if weighted_mean:
        sizes = [len(range(40)[b]) for b in batches]
        expected = sum(s * n / t for s, n, t in zip(sums, sizes, totals, strict=True)
                       if t) / 40
    else:
        expected = sum(sums) / weights.sum()
    np.testing.assert_allclose(trainer.train_losses_, [expected] * 2, rtol=1e-12)


def test_a_rate_held_per_epoch():
    """``ScaledLearningRate(per_epoch=True)``: every batch of an epoch steps with the
    schedule's rate at the epoch's first ``t`` (scikit-learn's MLPs change their
    'invscaling' rate at the end of each epoch), checked against numpy in float64 over 3
    epochs of batches of 16, 16 and 8 rows."""
    from skl2onnx import to_onnx
    from sklearn.linear_model import LinearRegression

    from skl_ortgrad.optim.scaled import ScaledLearningRate

    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.3
    fitted = LinearRegression().fit(X[:10], y[:10] * 0.5)
    eta0, power = 0.1, 0.5
    rate = ScaledLearningRate(
        LearningRateSGD(eta0=eta0, power_t=power, learning_rate="invscaling"),
        per_epoch=True)
    trainer = Trainer(to_onnx(fitted, X[:1], black_op={"LinearRegressor"}), max_iter=3,
                      batch_size=16, shuffle=False, tol=None, learning_rate=rate)
    trainer.fit(X, y)
    w, b = fitted.coef_.copy(), float(fitted.intercept_)
    for epoch in range(3):
        eta = eta0 / (1 + epoch * len(X)) ** power
        for start in range(0, len(X), 16):
            xb, yb = X[start:start + 16], y[start:start + 16]
            r = xb @ w + b - yb
            w, b = w - eta * xb.T @ r / len(xb), b - eta * r.sum() / len(xb)
    coef, intercept = trainer.get_state()
    np.testing.assert_allclose(coef.ravel(), w, rtol=1e-12)
    np.testing.assert_allclose(intercept.ravel(), [b], rtol=1e-12)
    assert trainer.t_ == 1 + 3 * len(X)
