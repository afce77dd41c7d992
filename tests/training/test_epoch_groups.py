"""Several epochs of a small dataset in one call of the linear program (the trainer's
``_epoch_group``) against the same epochs one call each (``GROUP_STEPS = 0``): the same
weights, ``t_``, ``n_iter_``, loss curve and generator state, bit for bit; groups end
where the ``tol`` rule could stop; a divergence, non-finite weights or Ctrl-C in a group
leave the state the epochs one by one leave."""

from __future__ import annotations

import os
import pickle
import signal

import numpy as np
import pytest
import scipy.sparse as sp
from _calls import called_with, record_calls

from skl_ortgrad import (
    ConvergenceError,
    ElasticLearningPenalty,
    OnnxSGDClassifier,
    OnnxSGDRegressor,
)
from skl_ortgrad.optim.scaled import ScaledLearningRate
from skl_ortgrad.runtime.program_run import LinearProgramRun
from skl_ortgrad.training import program_choice
from skl_ortgrad.training.sgd_learning_rate import LearningRateSGD

#: 200 rows at batch 32: 7 batches an epoch (the last of 8 rows), 18 epochs per call.
N_ROWS = 200
RNG = np.random.default_rng(3)
X = RNG.standard_normal((N_ROWS, 5)).astype(np.float32)
SCORE = X @ RNG.standard_normal(5).astype(np.float32)
Y_REG = SCORE + 0.3 * RNG.standard_normal(N_ROWS).astype(np.float32)
Y_BIN = (SCORE + 0.5 * RNG.standard_normal(N_ROWS) > 0).astype(np.int64)
Y_CLASSES = np.digitize(SCORE + 0.5 * RNG.standard_normal(N_ROWS), [-1.0, 0.0, 1.0])


@pytest.fixture
def groups(monkeypatch):
    """The epochs of every grouped call."""
    return record_calls(monkeypatch, LinearProgramRun, "run_epochs")


def _alone(monkeypatch, call):
    """``call()`` with every epoch a call of its own."""
    return called_with(monkeypatch, LinearProgramRun, "GROUP_STEPS", 0, call)


def _assert_same_state(model, expected):
    """The same weights, ``t_``, ``n_iter_``, loss curve and generator state."""
    def state(model):
        generator = model.optimizer_.__dict__.get("_rng")
        return (model.t_, model.n_iter_, list(model.loss_curve_),
                None if generator is None else generator.get_state()[1].tolist())

    for a, b in zip(model.optimizer_.weights_, expected.optimizer_.weights_, strict=True):
        np.testing.assert_array_equal(a, b)
    assert state(model) == state(expected)


CASES = [
    (OnnxSGDRegressor, {}, None),
    (OnnxSGDRegressor, {"tol": None, "max_iter": 40}, None),
    (OnnxSGDRegressor, {"n_iter_no_change": 3, "tol": 1e-2}, None),
    (OnnxSGDRegressor, {"n_iter_no_change": 2}, None),
    (OnnxSGDRegressor, {"learning_rate": "adaptive", "eta0": 0.05, "tol": 1e-2}, None),
    (OnnxSGDRegressor, {"shuffle": False}, None),
    # The proximal form, and the string penalties' cumulative L1 part after the step.
    (OnnxSGDRegressor, {"penalty": ElasticLearningPenalty(l1=1.5e-3, l2=8.5e-3),
                       "alpha": 0.01}, None),
    (OnnxSGDRegressor, {"penalty": "l1", "alpha": 0.05}, None),
    (OnnxSGDRegressor, {"penalty": "elasticnet", "alpha": 0.05, "tol": None,
                        "max_iter": 40}, "weights"),
    (OnnxSGDRegressor, {"dtype": np.float64}, None),
    (OnnxSGDRegressor, {"learning_rate": ScaledLearningRate(
        LearningRateSGD(eta0=0.05, learning_rate="invscaling"), per_epoch=True)}, None),
    (OnnxSGDRegressor, {}, "weights"),
    (OnnxSGDClassifier, {}, None),
    (OnnxSGDClassifier, {"loss": "log_loss"}, None),
    (OnnxSGDClassifier, {"loss": "perceptron", "penalty": None}, None),
    (OnnxSGDClassifier, {"class_weight": "balanced"}, None),
    (OnnxSGDClassifier, {}, "weights"),
]


@pytest.mark.parametrize(("estimator", "params", "weights"), CASES)
def test_groups_train_as_single_epochs(monkeypatch, groups, estimator, params, weights):
    y = Y_REG if estimator is OnnxSGDRegressor else Y_BIN
    sample_weight = RNG.uniform(0.2, 2.0, N_ROWS) if weights else None

    def fit():
        model = estimator(random_state=0, **params)
        return model.fit(X, y, sample_weight=sample_weight)

    model = fit()
    assert max(groups) > 1
    assert sum(groups) <= model.n_iter_
    expected = _alone(monkeypatch, fit)
    _assert_same_state(model, expected)


@pytest.mark.parametrize("loss", ["hinge", "log_loss"])
def test_one_vs_rest_groups_train_as_single_epochs(monkeypatch, groups, loss):
    """Four classes, one output each in the linear program: grouped as one call per
    epoch, bit for bit."""
    def fit():
        return OnnxSGDClassifier(loss=loss, random_state=0).fit(X, Y_CLASSES)

    model = fit()
    assert max(groups) > 1 and model.coef_.shape == (4, 5)
    _assert_same_state(model, _alone(monkeypatch, fit))


def test_group_sizes(groups):
    """Without ``tol``, 18 epochs a call, then the remaining ones; with it, a group ends
    where the rule could stop: at most ``n_iter_no_change`` epochs after the last
    improvement (never more than one with ``n_iter_no_change=1``)."""
    OnnxSGDRegressor(max_iter=40, tol=None, random_state=0).fit(X, Y_REG)
    assert groups == [18, 18, 4]
    groups.clear()
    model = OnnxSGDRegressor(random_state=0, n_iter_no_change=3, tol=1e-2).fit(X, Y_REG)
    assert groups[0] == 3 and all(1 < size <= 3 for size in groups)
    assert sum(groups) <= model.n_iter_  # a group of 1 is an epoch of its own
    groups.clear()
    OnnxSGDRegressor(random_state=0, n_iter_no_change=1).fit(X, Y_REG)
    assert groups == []


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("case", ["verbose", "early stopping", "sparse", "partial_fit",
                                  "large"])
def test_no_group(groups, case, capsys):
    """Epochs reported one by one, validated, sparse, of partial_fit, or too many batches
    for one call: one call each."""
    params = {"random_state": 0, "max_iter": 6, "tol": None}
    if case == "verbose":
        OnnxSGDRegressor(verbose=1, **params).fit(X, Y_REG)
    elif case == "early stopping":
        OnnxSGDRegressor(early_stopping=True, **{**params, "tol": 1e-3}).fit(X, Y_REG)
    elif case == "sparse":
        OnnxSGDRegressor(**params).fit(sp.csr_matrix(X), Y_REG)
    elif case == "partial_fit":
        model = OnnxSGDRegressor(random_state=0)
        for _ in range(3):
            model.partial_fit(X, Y_REG)
    else:
        rows = RNG.standard_normal((5000, 5)).astype(np.float32)
        OnnxSGDRegressor(**params).fit(rows, rows[:, 0])
    assert groups == []


def test_divergence_in_a_group(monkeypatch, groups):
    """The rate explodes in epoch 5: the group's losses are not finite, nothing of it is
    kept, and the epochs one by one stop at the batch the per-epoch path stops at, with
    its message and last finite weights (those the error carries; the estimator stays
    unfitted)."""
    start = 1 + 4 * N_ROWS + 3 * 32
    schedule = LearningRateSGD.schedule
    monkeypatch.setattr(
        LearningRateSGD, "schedule",
        lambda self, ts: np.where(np.asarray(ts) >= start, 1e38, schedule(self, ts)))

    def diverge():
        model = OnnxSGDRegressor(
            tol=None, max_iter=10, random_state=0, penalty=None,
            learning_rate=LearningRateSGD(eta0=0.01, learning_rate="constant"))
        with pytest.raises(ConvergenceError) as info:
            model.fit(X, Y_REG)
        assert "optimizer_" not in vars(model)
        return list(info.value.last_finite_weights.values()), str(info.value)

    weights, message = diverge()
    assert groups == [10]
    assert "at epoch 5" in message
    expected, expected_message = _alone(monkeypatch, diverge)
    assert message == expected_message
    assert any(np.any(w != 0) for w in weights)
    for a, b in zip(weights, expected, strict=True):
        np.testing.assert_array_equal(a, b)


def test_non_finite_weights_reject_the_group(monkeypatch, groups):
    """Finite losses but a weight that is not (the hinge loss is 0 for an infinite
    margin): nothing of the group is kept; the epochs run one by one (here: train)."""
    original = LinearProgramRun.run_epochs

    def poisoned(self, epochs):
        original(self, epochs)
        self.new_weights[0][0] = np.inf

    monkeypatch.setattr(LinearProgramRun, "run_epochs", poisoned)

    def fit():
        return OnnxSGDClassifier(max_iter=12, tol=None, random_state=0).fit(X, Y_BIN)

    model = fit()
    expected = _alone(monkeypatch, fit)
    _assert_same_state(model, expected)
    assert np.isfinite(model.coef_).all()


@pytest.mark.usefixtures("default_sigint")
def test_ctrl_c_during_a_group(monkeypatch):
    """SIGINT during a grouped call: the call completes, its epochs are recorded, then
    KeyboardInterrupt; the state is that of a fit of as many epochs."""
    original = LinearProgramRun.run_epochs

    def run_epochs(self, epochs):
        os.kill(os.getpid(), signal.SIGINT)
        return original(self, epochs)

    monkeypatch.setattr(LinearProgramRun, "run_epochs", run_epochs)
    model = OnnxSGDRegressor(max_iter=30, tol=None, random_state=0)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X, Y_REG)
    assert model.optimizer_.epochs_completed_ == 18
    assert model.t_ == 1 + 18 * N_ROWS
    expected = _alone(monkeypatch, lambda: OnnxSGDRegressor(
        max_iter=18, tol=None, random_state=0).fit(X, Y_REG))
    np.testing.assert_array_equal(model.coef_, expected.coef_)
    assert list(model.loss_curve_) == list(expected.loss_curve_)


def test_group_capacity(monkeypatch):
    """Epochs per call: as many as fit in GROUP_STEPS steps reading at most GROUP_VALUES
    feature values, at least 1."""
    bindings = []
    original = LinearProgramRun.__init__

    def init(self, *args):
        original(self, *args)
        bindings.append(self.epochs_per_call)

    monkeypatch.setattr(LinearProgramRun, "__init__", init)
    OnnxSGDRegressor(max_iter=1, tol=None).fit(X, Y_REG)
    wide = RNG.standard_normal((N_ROWS, 1000)).astype(np.float32)
    OnnxSGDRegressor(max_iter=1, tol=None).fit(wide, Y_REG)  # 2**19 // 32000: 16 steps
    monkeypatch.setattr(LinearProgramRun, "GROUP_STEPS", 10)
    OnnxSGDRegressor(max_iter=1, tol=None).fit(X, Y_REG)
    assert bindings == [128 // 7, 16 // 7, 1]
    assert program_choice.BINDINGS[program_choice.LinearProgram] is LinearProgramRun


def test_grouped_fits_use_the_program_from_one_full_batch(monkeypatch, groups):
    """40 rows (one full batch and one of 8): ``fit`` runs groups, the same state as one
    call per epoch and, to rounding, as the per-batch path; a ``partial_fit`` of those rows
    (one epoch) runs per batch, below ``_LINEAR_MIN_BATCHES``."""
    def fit():
        return OnnxSGDRegressor(random_state=0).fit(X[:40], Y_REG[:40])

    model = fit()
    assert groups and max(groups) > 1
    expected = _alone(monkeypatch, fit)
    _assert_same_state(model, expected)
    with monkeypatch.context() as patch:
        patch.setattr(program_choice, "PROGRAM_STEPS", 1)
        per_batch = fit()
    assert (per_batch.n_iter_, per_batch.t_) == (model.n_iter_, model.t_)
    np.testing.assert_allclose(model.coef_, per_batch.coef_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(model.loss_curve_, per_batch.loss_curve_, rtol=1e-5)

    calls = []
    monkeypatch.setattr(LinearProgramRun, "schedule", lambda self, *args: calls.append(1))
    OnnxSGDRegressor(random_state=0).partial_fit(X[:100], Y_REG[:100])
    assert calls == []


def test_warm_started_fits_and_pickles(monkeypatch, groups):
    """A fit, pickled, then warm-started twice: the same state as with one call per
    epoch."""
    def fits():
        model = OnnxSGDClassifier(max_iter=7, tol=None, random_state=0, warm_start=True)
        model = pickle.loads(pickle.dumps(model.fit(X, Y_BIN)))
        model.set_params(max_iter=5).fit(X, Y_BIN)
        return model.set_params(tol=1e-3, max_iter=30).fit(X, Y_BIN)

    model = fits()
    assert len(groups) >= 3
    expected = _alone(monkeypatch, fits)
    _assert_same_state(model, expected)
