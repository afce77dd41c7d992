"""A failure in the middle of training loses nothing.

- divergence: a non-finite loss stops training within the batch, with a message naming
  epoch, batch, learning rate and the last finite losses; the estimator is as before the
  call and the error carries the weights of the last finite epoch;
- interruption: Ctrl-C stops at the end of the batch being computed, any other exception
  leaves consistent weights, and ``n_iter_``/``t_`` tell how far training got;
- persistence: a pickled ``partial_fit`` stream resumed in another process gives the very
  weights of the uninterrupted stream; pickles from another version are detected;
- long runs: no memory growth over 20,000 ``partial_fit`` calls; ``predict`` from several
  threads at once gives the single-threaded results;
- one transaction per call: a call that fails (divergence before any epoch ends, any
  exception but Ctrl-C) leaves every estimator exactly as before it, refits included;
  finite values beyond float32 train or fail clearly; ``classes=`` follows
  scikit-learn's ``partial_fit`` contract; a stream of calls of varying sizes keeps two
  training sessions.
"""

from __future__ import annotations

import copy
import gc
import io
import os
import pickle
import re
import signal
import subprocess
import sys
import threading
import tracemalloc
import warnings
from concurrent.futures import ThreadPoolExecutor

import joblib
import numpy as np
import pytest
from _estimators import ALL_ESTIMATORS
from scipy import sparse as sp
from sklearn.base import is_classifier
from sklearn.datasets import load_iris
from sklearn.linear_model import LogisticRegression, SGDClassifier

import skl_ortgrad
from skl_ortgrad import (
    ConvergenceError,
    ElasticLearningPenalty,
    LearningRateSGD,
    NegLogLearningLoss,
    NoLearningPenalty,
    OnnxGradientClassifier,
    OnnxMLPClassifier,
    OnnxMLPRegressor,
    OnnxSGDClassifier,
    OnnxSGDRegressor,
    _version,
)
from skl_ortgrad.estimators.curvature import stable_step
from skl_ortgrad.runtime.step import OrtGradientStep
from skl_ortgrad.training import program_choice
from skl_ortgrad.training import state as training_state
from skl_ortgrad.training.caches import transient

ESTIMATORS = [OnnxSGDRegressor, OnnxSGDClassifier]

_X, Y = load_iris(return_X_y=True)
X = (_X - _X.mean(axis=0)) / _X.std(axis=0)
BATCH = 10
BATCHES_PER_EPOCH = len(Y) // BATCH  # 15


def _model(estimator, **params):
    defaults = {
        "random_state": 0, "max_iter": 4, "tol": None, "batch_size": BATCH,
        "learning_rate": LearningRateSGD(eta0=0.01, learning_rate="constant"),
    }
    return estimator(**{**defaults, **params})


def _partial_fit(model, X_, y_, **kwargs):
    if is_classifier(model):
        kwargs.setdefault("classes", np.unique(Y))
    return model.partial_fit(X_, y_, **kwargs)


def _weights(model):
    return [w.copy() for w in model.optimizer_.weights_]


def _assert_weights(actual, expected):
    assert len(actual) == len(expected)
    for a, b in zip(actual, expected, strict=True):
        np.testing.assert_array_equal(a, b)


def _assert_consistent(model):
    """The scikit-learn attributes are those of the optimizer's weights."""
    weights = dict(zip(model.optimizer_.weights_to_train_, model.optimizer_.weights_,
                       strict=True))
    np.testing.assert_array_equal(model.coef_.ravel(), weights["coef"].T.ravel())
    np.testing.assert_array_equal(model.intercept_.ravel(), weights["intercept"].ravel())
    assert model.t_ == model.optimizer_.t_
    predicted = model.predict(X)
    assert predicted.shape == (len(X),)
    if is_classifier(model):
        assert np.isin(predicted, model.classes_).all()
        assert np.isfinite(model.decision_function(X)).all()
    else:
        assert np.isfinite(predicted).all()


def _patch_steps(monkeypatch, hook):
    """Replace the k-th SGD update (k = 1, 2, ...) by ``hook(k, rate, weights,
    gradients, state, eta, update)``, where ``update(eta)`` is the real one; return the
    list of calls (one entry per update)."""
    calls = []
    original = LearningRateSGD.stepper

    def stepper(rate, weights, gradients, state):
        update = original(rate, weights, gradients, state)

        def step(eta):
            calls.append(1)
            return hook(len(calls), rate, weights, gradients, state, eta, update)

        return step

    monkeypatch.setattr(LearningRateSGD, "stepper", stepper)
    return calls


def _patch_runs(monkeypatch, hook=None):
    """Count the forward+backward runs of training steps, calling ``hook(k)`` before
    the k-th; return the list of calls."""
    calls = []
    original = OrtGradientStep.run

    def run(self, feeds):
        calls.append(1)
        if hook is not None:
            hook(len(calls))
        return original(self, feeds)

    monkeypatch.setattr(OrtGradientStep, "run", run)
    return calls


class _Snapshots:
    """Record the weights before each update: ``before[k]`` holds the weights after ``k``
    complete batches. An update starts with the penalty's step (then the gradient
    step, scikit-learn's order), so the weights are read there."""

    def __init__(self, monkeypatch):
        self.before = []
        trained = []
        rate_stepper = LearningRateSGD.stepper

        def stepper_of(rate, weights, gradients, state):
            # Built once per epoch, before the penalty's: all the trained weights.
            trained[:] = [weights]
            return rate_stepper(rate, weights, gradients, state)

        monkeypatch.setattr(LearningRateSGD, "stepper", stepper_of)
        for penalty_class in (ElasticLearningPenalty, NoLearningPenalty):
            original = penalty_class.stepper

            def stepper(penalty, weights, _original=original):
                step = _original(penalty, weights)

                def recorded(eta):
                    self.before.append([w.copy() for w in trained[0]])
                    step(eta)

                return recorded

            monkeypatch.setattr(penalty_class, "stepper", stepper)


@pytest.fixture(scope="module")
def reference():
    """Weights after every batch of an uninterrupted 4-epoch fit, per estimator."""
    cache = {}

    def get(estimator):
        if estimator not in cache:
            with pytest.MonkeyPatch.context() as monkeypatch:
                snapshots = _Snapshots(monkeypatch)
                model = _model(estimator).fit(X, Y)
            cache[estimator] = [*snapshots.before, _weights(model)]
        return cache[estimator]

    return get


# -- divergence ------------------------------------------------------------------------


_DIVERGED = re.compile(
    r"Training diverged at epoch (\d+), batch (\d+): the loss is (nan|inf) with learning rate "
    r"eta=1e\+38\. Last finite loss: ([-+.\deinf]+) \(mean of the previous batch\), "
    r"([-+.\deinf]+) \(mean of the last complete epoch\)\. The estimator is as it was "
    r"before the call; the last finite weights are the error's last_finite_weights; use a "
    r"smaller learning rate\."
)


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_divergence_stops_within_the_batch(monkeypatch, estimator):
    """From the third batch of epoch 3 on, the rate explodes: the loss becomes
    non-finite a batch or two later; training stops there. The first fit fails as a
    whole: the estimator stays unfitted, the error carries the weights of epoch 2."""
    start = 1 + 2 * len(Y) + 2 * BATCH  # t_ at the third batch of the third epoch
    schedule = LearningRateSGD.schedule
    monkeypatch.setattr(
        LearningRateSGD, "schedule",
        lambda self, ts: np.where(np.asarray(ts) >= start, 1e38, schedule(self, ts)))
    forward = _patch_runs(monkeypatch)
    # No penalty: an L2 decay clipped at zero would zero the coefficients at eta=1e38.
    model = _model(estimator, max_iter=10, penalty=None)
    with pytest.raises(ConvergenceError) as info:
        model.fit(X, Y)
    match = _DIVERGED.fullmatch(str(info.value))
    assert match, str(info.value)
    epoch, batch = int(match[1]), int(match[2])
    assert epoch == 3 and batch >= 3, str(info.value)
    # Stopped at once: no forward after the one that gave the non-finite loss.
    assert len(forward) == 2 * BATCHES_PER_EPOCH + batch + 1
    assert np.isfinite(float(match[4])) and np.isfinite(float(match[5]))
    assert sorted(vars(model)) == sorted(vars(_model(estimator, max_iter=10, penalty=None)))

    # The weights of the end of epoch 2, on the same (per-batch) path: the instrumented
    # steps kept the training program off.
    monkeypatch.undo()
    with monkeypatch.context() as patch:
        patch.setattr(program_choice, "PROGRAM_STEPS", 1)
        expected = _model(estimator, max_iter=2, penalty=None).fit(X, Y)
    reached = info.value.last_finite_weights
    assert list(reached) == expected.optimizer_.weights_to_train_
    _assert_weights(list(reached.values()), _weights(expected))
    assert float(match[5]) == pytest.approx(expected.loss_curve_[-1], rel=1e-6)

    # Still usable: a smaller rate trains.
    model.set_params(learning_rate=LearningRateSGD(eta0=0.001, learning_rate="constant"))
    _partial_fit(model, X, Y)
    assert model.n_iter_ == 1 and np.isfinite(model.loss_curve_).all()
    assert np.isfinite(model.decision_function(X) if is_classifier(model)
                       else model.predict(X)).all()


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_overflowing_weights_count_as_divergence(monkeypatch, estimator):
    """A finite loss but an update that made the weights infinite (last batch of an
    epoch, so no further forward sees it) is divergence too."""
    def overflow(k, rate, weights, gradients, state, eta, update):
        update(eta)
        if k == 2 * BATCHES_PER_EPOCH:
            weights[0][...] = np.inf

    model = _model(estimator, max_iter=1).fit(X, Y)
    expected = _weights(model)
    calls = _patch_steps(monkeypatch, overflow)
    _partial_fit(model, X, Y)  # epoch 2 (call 15..29 of the patched rate: none yet)
    calls.clear()
    calls.extend([1] * BATCHES_PER_EPOCH)
    expected = _weights(model)
    before = _everything(model)
    with pytest.raises(ConvergenceError, match=r"diverged at epoch 3, batch 14: the weights "
                                               r"are inf") as info:
        _partial_fit(model, X, Y)
    _assert_everything_kept(model, before)
    # The start of the epoch that diverged: the weights of before the call.
    _assert_weights(list(info.value.last_finite_weights.values()), expected)
    # The model of before the call: its last call's one epoch, two in all.
    assert model.n_iter_ == 1 and len(model.loss_curve_) == 2
    _assert_consistent(model)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("loss", [
    NegLogLearningLoss(eps=0.0, probability_function="sigmoid"),
    NegLogLearningLoss(eps=0.0, probability_function="softmax"),
    NegLogLearningLoss(),  # eps=1e-5: a capped loss
], ids=["log-sigmoid", "log-softmax", "log-capped"])
def test_log_losses_are_finite_at_extreme_scores(loss, dtype):
    if loss.probability_function == "softmax":
        scores = np.array([[1e4, -1e4, 0], [-1e4, 1e4, 0], [1e4, 1e4, -1e4], [0, 0, 1e4]],
                          dtype=dtype)
        labels = np.array([[0, 1, 0], [0, 1, 0], [0, 0, 1], [1, 0, 0]], dtype=dtype)
    else:
        scores = np.array([[1e4], [-1e4], [1e4], [-1e4]], dtype=dtype)
        labels = np.array([[0], [1], [1], [0]], dtype=dtype)
    value, gradient = loss.loss_gradient(labels, scores)
    assert np.isfinite(value) and np.isfinite(gradient).all(), (value, gradient)
    assert np.abs(gradient).max() <= 1 + 1e-6
    if loss.eps == 0:
        # Wrong by 1e4 (or 2e4 for the softmax): the loss grows linearly, the gradient
        # stays at full strength on the wrong rows.
        assert value >= 1e4
        assert np.abs(gradient).max() == pytest.approx(1, abs=1e-6)


@pytest.mark.parametrize("estimator", [
    pytest.param("binary", id="binary"), pytest.param("multiclass", id="multiclass")])
def test_classifier_trains_on_from_extreme_scores(estimator):
    X_, y_ = (X[Y < 2], Y[Y < 2]) if estimator == "binary" else (X, Y)
    loss = ("log_loss" if estimator == "binary"
            else NegLogLearningLoss(eps=0.0, probability_function="softmax"))
    model = _model(OnnxSGDClassifier, max_iter=1, loss=loss).fit(X_, y_)
    for w in model.optimizer_.weights_:
        w *= -1e4 / np.abs(model.decision_function(X_)).max()  # wrong by 1e4
    scores = model.decision_function(X_)
    assert 5e3 < np.abs(scores).max() <= 1.01e4
    proba = model.predict_proba(X_)
    assert np.isfinite(proba).all()
    np.testing.assert_allclose(proba.sum(axis=1), 1, rtol=1e-5)
    model.set_params(learning_rate=LearningRateSGD(eta0=1e-3, learning_rate="constant"))
    model.partial_fit(X_, y_)
    assert np.isfinite(model.loss_curve_[-1]) and model.loss_curve_[-1] > 1
    assert all(np.isfinite(w).all() for w in model.optimizer_.weights_)


# -- interruption ----------------------------------------------------------------------

N_DONE = 20  # batches completed before the interruption: epoch 2, batch 5


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_interrupt_in_forward_keeps_last_completed_batch(monkeypatch, reference, estimator):
    def interrupt(k):
        if k == N_DONE + 1:
            raise KeyboardInterrupt

    _patch_runs(monkeypatch, interrupt)
    model = _model(estimator)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X, Y)
    monkeypatch.undo()
    _assert_weights(_weights(model), reference(estimator)[N_DONE])
    assert model.t_ == 1 + N_DONE * BATCH
    assert model.n_iter_ == N_DONE // BATCHES_PER_EPOCH == len(model.loss_curve_)
    assert model.optimizer_.n_iter_ == model.n_iter_
    _assert_consistent(model)
    _partial_fit(model, X, Y)  # and it trains on
    assert model.n_iter_ == 1 and len(model.loss_curve_) == 2


def _split_update(monkeypatch, action):
    """At batch ``N_DONE + 1``, update the first weight, call ``action``, update the rest."""
    def split(k, rate, weights, gradients, state, eta, update):
        if k != N_DONE + 1:
            return update(eta)
        rate.update_weights(weights[:1], gradients[:1], state[:1], eta)
        action()
        return rate.update_weights(weights[1:], gradients[1:], state[1:], eta)

    _patch_steps(monkeypatch, split)


@pytest.mark.usefixtures("default_sigint")
@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_ctrl_c_in_the_middle_of_an_update_waits_for_the_batch_end(
        monkeypatch, reference, estimator):
    """SIGINT between the updates of two weights: the batch completes, then training
    stops with KeyboardInterrupt; Python's handler is back afterwards."""
    _split_update(monkeypatch, lambda: os.kill(os.getpid(), signal.SIGINT))
    model = _model(estimator)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X, Y)
    monkeypatch.undo()
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    _assert_weights(_weights(model), reference(estimator)[N_DONE + 1])
    assert model.t_ == 1 + (N_DONE + 1) * BATCH
    assert model.n_iter_ == 1
    _assert_consistent(model)


@pytest.mark.usefixtures("default_sigint")
def test_ctrl_c_at_the_last_batch_still_interrupts(monkeypatch, reference):
    """The interrupt held during the very last batch is raised once training ends."""
    def last(k, rate, weights, gradients, state, eta, update):
        update(eta)
        if k == 4 * BATCHES_PER_EPOCH:
            os.kill(os.getpid(), signal.SIGINT)

    _patch_steps(monkeypatch, last)
    model = _model(OnnxSGDRegressor)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X, Y)
    monkeypatch.undo()
    _assert_weights(_weights(model), reference(OnnxSGDRegressor)[-1])
    assert model.n_iter_ == 4


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_exception_tearing_an_update_rolls_back_to_the_epoch_start(
        monkeypatch, reference, estimator):
    """An exception raised between the updates of two weights (here a KeyboardInterrupt
    raised by code, not by a signal) cannot be deferred: the half-updated weights are
    replaced by the consistent state of the start of the epoch."""
    def interrupt():
        raise KeyboardInterrupt

    _split_update(monkeypatch, interrupt)
    model = _model(estimator)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X, Y)
    monkeypatch.undo()
    epoch_start = BATCHES_PER_EPOCH * (N_DONE // BATCHES_PER_EPOCH)
    _assert_weights(_weights(model), reference(estimator)[epoch_start])
    assert model.t_ == 1 + epoch_start * BATCH
    assert model.n_iter_ == 1
    _assert_consistent(model)


def test_interrupted_partial_fit_keeps_completed_batches(monkeypatch, reference):
    model = _model(OnnxSGDRegressor)
    # Per batch, as the reference (its snapshots instrument every step): the training
    # program would give the same weights to rounding only.
    with monkeypatch.context() as patch:
        patch.setattr(program_choice, "PROGRAM_STEPS", 1)
        _partial_fit(model, X, Y)
    def interrupt(k):
        if k == 6:
            raise KeyboardInterrupt

    _patch_runs(monkeypatch, interrupt)
    with pytest.raises(KeyboardInterrupt):
        _partial_fit(model, X, Y)
    monkeypatch.undo()
    # partial_fit and fit shuffle the same way: the reference holds these batches.
    _assert_weights(_weights(model), reference(OnnxSGDRegressor)[BATCHES_PER_EPOCH + 5])
    # n_iter_: the epochs this call completed (none), as scikit-learn's.
    assert (model.n_iter_, model.t_) == (0, 1 + (BATCHES_PER_EPOCH + 5) * BATCH)
    _assert_consistent(model)


# -- persistence -----------------------------------------------------------------------

_RESUME = """
import pickle, sys
import numpy as np
with open(sys.argv[1], "rb") as f:
    models, chunks = pickle.load(f)
out = {}
for name, model in models.items():
    for X_, y_ in chunks:
        model.partial_fit(X_, y_)
    for i, w in enumerate(model.optimizer_.weights_):
        out[f"{name}-w{i}"] = w
    out[f"{name}-t"] = np.array(model.t_)
    out[f"{name}-n_iter"] = np.array(model.n_iter_)
    out[f"{name}-predict"] = model.predict(chunks[0][0])
np.savez(sys.argv[2], **out)
"""


def test_pickled_stream_resumes_identically_in_a_new_process(tmp_path):
    rng = np.random.RandomState(1)
    order = rng.permutation(len(Y))
    chunks = [(X[idx], Y[idx]) for idx in np.array_split(order, 10)]
    full, half = {}, {}
    for estimator in ESTIMATORS:
        name = estimator.__name__
        # batch_size=4 with shuffle: every chunk is permuted by the estimator's generator.
        full[name] = estimator(random_state=3, batch_size=4)
        half[name] = estimator(random_state=3, batch_size=4)
        for i, (X_, y_) in enumerate(chunks):
            _partial_fit(full[name], X_, y_)
            if i < 5:
                _partial_fit(half[name], X_, y_)
    path, result = tmp_path / "stream.pkl", tmp_path / "resumed.npz"
    with open(path, "wb") as f:
        pickle.dump((half, chunks[5:]), f)
    subprocess.run([sys.executable, "-c", _RESUME, str(path), str(result)], check=True,
                   timeout=120)
    resumed = np.load(result)
    for name, model in full.items():
        for i, w in enumerate(model.optimizer_.weights_):
            np.testing.assert_array_equal(resumed[f"{name}-w{i}"], w, err_msg=name)
        assert int(resumed[f"{name}-t"]) == model.t_
        assert int(resumed[f"{name}-n_iter"]) == model.n_iter_ == 1
        np.testing.assert_array_equal(resumed[f"{name}-predict"], model.predict(chunks[5][0]))


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_joblib_and_deepcopy_round_trips_resume_identically(estimator):
    model = _model(estimator, max_iter=2).fit(X, Y)
    buffer = io.BytesIO()
    joblib.dump(model, buffer)
    buffer.seek(0)
    copies = [joblib.load(buffer), copy.deepcopy(model), pickle.loads(pickle.dumps(model))]
    _partial_fit(model, X, Y)
    for other in copies:
        _partial_fit(other, X, Y)
        _assert_weights(_weights(other), _weights(model))
        np.testing.assert_array_equal(other.predict(X), model.predict(X))


def test_pickle_of_an_unreadable_state_format_is_refused(monkeypatch):
    model = _model(OnnxSGDRegressor, max_iter=1).fit(X, Y)
    monkeypatch.setattr(training_state, "STATE_FORMAT", 99)
    data = pickle.dumps(model)
    monkeypatch.undo()
    version = skl_ortgrad.__version__
    with pytest.raises(ValueError, match=(
            rf"pickled by skl_ortgrad {re.escape(version)} \(training state format 99\); "
            rf"skl_ortgrad {re.escape(version)} reads format 1 only\. .*to_onnx\(\)")):
        pickle.loads(data)


def test_pickle_of_another_version_warns_and_works(monkeypatch):
    model = _model(OnnxSGDClassifier, max_iter=1).fit(X, Y)
    monkeypatch.setattr(_version, "__version__", "0.0.1")
    data = pickle.dumps(model)
    monkeypatch.undo()
    with pytest.warns(skl_ortgrad.PickleVersionWarning,
                      match=r"pickled by skl_ortgrad 0\.0\.1 and is loaded by skl_ortgrad"):
        loaded = pickle.loads(data)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    # A pickle from this very version loads silently.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pickle.loads(pickle.dumps(model))


def test_pickle_without_version_fields_loads():
    """Pickles written before the fields existed are format 1."""
    optimizer = _model(OnnxSGDRegressor, max_iter=1).fit(X, Y).optimizer_
    state = optimizer.__getstate__()
    del state["_skl_ortgrad_version"], state["_state_format"]
    clone = type(optimizer).__new__(type(optimizer))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clone.__setstate__(state)
    _assert_weights(clone.weights_, optimizer.weights_)
    assert "_skl_ortgrad_version" not in clone.__dict__


# -- long runs ---------------------------------------------------------------------------


def _rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="RSS read from /proc")
@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_20000_partial_fit_calls_do_not_grow_memory(estimator):
    """RSS over 20,000 calls (native and Python memory); tracemalloc over the 1,000 calls
    that follow, projected to 20,000 (tracing every allocation makes a call 4 times
    slower: tracing all 20,000 took minutes). The loss curve grows by design: one float
    per call, about 0.8 MB for 20,000."""
    rng = np.random.RandomState(0)
    batches = [(X[idx], Y[idx]) for idx in
               (rng.choice(len(Y), 8, replace=False) for _ in range(64))]
    model = _model(estimator, batch_size=4)
    for X_, y_ in batches * 3:  # warm-up: sessions, caches, allocator pools
        _partial_fit(model, X_, y_)
    gc.collect()
    rss_before = _rss_mb()
    for i in range(20_000):
        X_, y_ = batches[i % len(batches)]
        _partial_fit(model, X_, y_)
    gc.collect()
    rss_growth = _rss_mb() - rss_before
    tracemalloc.start()
    python_before = tracemalloc.get_traced_memory()[0]
    for i in range(1_000):
        X_, y_ = batches[i % len(batches)]
        _partial_fit(model, X_, y_)
    gc.collect()
    python_growth = 20 * (tracemalloc.get_traced_memory()[0] - python_before) / 2**20
    tracemalloc.stop()
    message = (f"{estimator.__name__}: 20,000 partial_fit calls grew the process by "
               f"{rss_growth:.2f} MB (RSS); Python objects grow by {python_growth:.2f} MB "
               "per 20,000 calls (tracemalloc over 1,000 calls, times 20)")
    print(message)
    assert rss_growth < 20 and python_growth < 20, message
    assert model.n_iter_ == 1 and len(model.loss_curve_) == 21_000 + 3 * len(batches)
    assert np.isfinite(model.loss_curve_[-1])


@pytest.mark.parametrize("estimator", ESTIMATORS)
def test_predict_from_four_threads_matches_single_thread(estimator):
    X_big = np.repeat(X, 20, axis=0) + np.random.RandomState(0).normal(0, 0.1, (3000, 4))
    # A loss with probabilities, for predict_proba.
    params = {"loss": "log_loss"} if estimator is OnnxSGDClassifier else {}
    model = _model(estimator, max_iter=2, **params).fit(X, Y)
    methods = ["predict"] + (["predict_proba", "decision_function"]
                             if is_classifier(model) else [])
    expected = {m: getattr(model, m)(X_big) for m in methods}
    # A fresh copy: the inference session is built lazily, by the threads themselves.
    shared = pickle.loads(pickle.dumps(model))
    barrier = threading.Barrier(4)

    def work(seed):
        barrier.wait()
        rng = np.random.RandomState(seed)
        results = []
        for _ in range(25):
            method = methods[rng.randint(len(methods))]
            start = rng.randint(0, 2000)
            results.append((method, start, getattr(shared, method)(X_big[start:start + 1000])))
        return results

    with ThreadPoolExecutor(4) as pool:
        outputs = list(pool.map(work, range(4)))
    for results in outputs:
        for method, start, value in results:
            np.testing.assert_array_equal(value, expected[method][start:start + 1000])


# -- one transaction per call ------------------------------------------------------------

Y_REG = X @ np.array([1.0, -2.0, 0.5, 3.0])


def _targets(model):
    return Y if is_classifier(model) else Y_REG


def _everything(model):
    """What a failed call must leave as it was: the optimizer (same object), its weights,
    rate state, ``t_``, losses and shuffling state, and the fitted attributes."""
    optimizer = model.optimizer_
    rng = optimizer.__dict__.get("_rng")
    return {
        "optimizer": optimizer,
        "weights": [w.copy() for w in optimizer.weights_],
        "lr_state": [s.copy() for s in optimizer.lr_state_],
        "t": (optimizer.t_, model.t_, model.n_iter_),
        "losses": (list(optimizer.train_losses_), list(model.loss_curve_)),
        "rng": None if rng is None else rng.get_state()[1].copy(),
        "attributes": sorted(vars(model)),
        "classes": getattr(model, "classes_", None),
        "predictions": model.predict(X),
    }


def _assert_everything_kept(model, before):
    after = _everything(model)
    assert after["optimizer"] is before["optimizer"]
    for key in ("weights", "lr_state"):
        _assert_weights(after[key], before[key])
    for key in ("t", "losses", "attributes"):
        assert after[key] == before[key], key
    for key in ("rng", "classes", "predictions"):
        np.testing.assert_array_equal(after[key], before[key], err_msg=key)


def _no_penalty(model):
    """The parameter that removes the penalty: the MLPs' L2 is ``alpha``."""
    if isinstance(model, (OnnxMLPRegressor, OnnxMLPClassifier)):
        return {"alpha": 0.0}
    return {"penalty": None}


# numpy's warnings on the way to the non-finite loss that stops training.
_OVERFLOWS = pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning",
                                        "ignore:invalid value encountered:RuntimeWarning")


@_OVERFLOWS
@pytest.mark.parametrize("method", ["fit", "partial_fit"])
@pytest.mark.parametrize("estimator", ALL_ESTIMATORS)
def test_divergence_before_any_epoch_keeps_the_model_of_before_the_call(estimator, method):
    """A rate of 1e38 diverges in the first epoch of the call: a refit (a new optimizer)
    as well as a partial_fit leave the fitted estimator exactly as it was."""
    model = _model(estimator, max_iter=2)
    model.fit(X, _targets(model))
    before = _everything(model)
    model.set_params(learning_rate=LearningRateSGD(eta0=1e38, learning_rate="constant"),
                     **_no_penalty(model))
    with pytest.raises(ConvergenceError, match=r"Training diverged at epoch \d+, batch"):
        getattr(model, method)(X, _targets(model))
    _assert_everything_kept(model, before)
    model.set_params(learning_rate=LearningRateSGD(eta0=1e-3, learning_rate="constant"))
    model.partial_fit(X, _targets(model))
    assert model.n_iter_ == 1 and len(model.loss_curve_) == 3
    assert np.isfinite(model.loss_curve_).all()


@_OVERFLOWS
@pytest.mark.parametrize("method", ["fit", "fit-warm-start"])
@pytest.mark.parametrize("solver", ["sgd", "adam"])
def test_divergence_after_finite_epochs_keeps_the_model_of_before_the_call(solver, method):
    """learning_rate_init=1e10 on a fitted MLP: the call diverges after epochs that ended
    finite (the issue's reproducer); it changes nothing, and the error carries the weights
    of the last finite epoch."""
    model = OnnxMLPRegressor(hidden_layer_sizes=(4,), solver=solver, max_iter=3, tol=None,
                             random_state=0, warm_start=method == "fit-warm-start")
    model.fit(X, Y_REG)
    before = _everything(model)
    model.set_params(learning_rate_init=1e10)
    with pytest.raises(ConvergenceError, match="as it was before the call") as info:
        model.fit(X, Y_REG)
    _assert_everything_kept(model, before)
    reached = info.value.last_finite_weights
    assert list(reached) == model.optimizer_.weights_to_train_
    assert all(np.isfinite(w).all() for w in reached.values())


@pytest.mark.parametrize("where", ["forward", "update"])
@pytest.mark.parametrize("method", ["fit-warm-start", "partial_fit"])
def test_any_other_exception_in_training_restores_the_call_start(monkeypatch, where, method):
    """An exception at the sixth batch (in onnxruntime's call, or tearing an update) leaves
    the estimator as before the call: not even the five batches done remain."""
    model = _model(OnnxSGDClassifier, max_iter=1, warm_start=method == "fit-warm-start")
    model.fit(X, Y)
    before = _everything(model)

    def fail(k):
        if k == 6:
            raise RuntimeError("onnxruntime failed")

    def fail_update(k, rate, weights, gradients, state, eta, update):
        fail(k)
        update(eta)

    if where == "forward":
        _patch_runs(monkeypatch, fail)
    else:
        _patch_steps(monkeypatch, fail_update)
    with pytest.raises(RuntimeError, match="onnxruntime failed"):
        (model.fit if method == "fit-warm-start" else model.partial_fit)(X, Y)
    monkeypatch.undo()
    _assert_everything_kept(model, before)


def test_refit_on_huge_finite_X_whose_steps_round_away_is_refused():
    """X around 1e30 fits float32 but its squared norm does not: the default rate is
    computed without overflow (about 1e-60), inside the transaction, and rounds away in
    float32: no step moves the weights. The fit says so and changes nothing (scikit-learn
    raises too); in float64 the same data trains."""
    model = OnnxSGDRegressor(max_iter=3, tol=None, random_state=0).fit(X, Y_REG)
    before = _everything(model)
    with pytest.raises(ConvergenceError, match=(
            r"Training did not change the weights: every step rounded away in float32 "
            r"\(learning rate eta=\d.*e-6\d, which is 0 in float32, for values of X up to "
            r".*e\+30\), the loss staying "
            r".*The estimator is as it was before the call; scale X")):
        model.fit(X * 1e30, Y_REG)
    _assert_everything_kept(model, before)
    with pytest.raises(ConvergenceError, match="every step rounded away"):
        OnnxSGDRegressor(max_iter=3, tol=None, random_state=0).fit(X * 1e30, Y_REG)
    wide = OnnxSGDRegressor(max_iter=3, tol=None, random_state=0, dtype=np.float64)
    wide.fit(X * 1e30, Y_REG)
    assert np.all(wide.coef_ != 0)


@pytest.mark.parametrize("scale", [1e10, 1e15, 1e20])
def test_huge_finite_X_below_the_rounding_trains_well(scale):
    """Up to X x 1e20 the default rate, scaled to the data, learns (scikit-learn's
    SGDRegressor returns garbage there)."""
    model = OnnxSGDRegressor(random_state=0).fit(X * scale, Y_REG)
    assert model.score(X * scale, Y_REG) > 0.95


def test_a_loss_of_zero_moves_nothing_and_is_not_refused():
    """Rows whose margins are all satisfied (hinge, no penalty): no step to take, the
    weights stay, and that is no failure."""
    model = _model(OnnxSGDClassifier, loss="hinge", penalty=None).fit(X, Y_REG > 0)
    rows = np.abs(model.decision_function(X)) > 1.1
    assert rows.sum() >= 5
    weights, t = _weights(model), model.t_
    model.partial_fit(X[rows], model.predict(X[rows]))
    assert model.loss_curve_[-1] == 0 and model.t_ == t + rows.sum()
    _assert_weights(_weights(model), weights)


@_OVERFLOWS
@pytest.mark.parametrize("estimator", [OnnxMLPRegressor, OnnxMLPClassifier])
def test_partial_fit_on_huge_X_never_leaves_silent_non_finite_results(estimator):
    """X x 1e18 on a fitted sgd-solver MLP: the call either diverges (ConvergenceError,
    nothing changed) or leaves finite weights whose predictions are finite."""
    model = estimator(hidden_layer_sizes=(5,), solver="sgd", max_iter=5, random_state=0)
    model.fit(X, _targets(model))
    before = _everything(model)
    try:
        model.partial_fit(X * 1e18, _targets(model))
    except ConvergenceError as error:
        assert "as it was before the call" in str(error)
        _assert_everything_kept(model, before)
        return
    assert all(np.isfinite(w).all() for w in model.optimizer_.weights_)
    outputs = model.predict_proba(X) if is_classifier(model) else model.predict(X)
    assert np.isfinite(outputs).all()


def test_stable_step_holds_any_finite_data():
    dense = np.random.RandomState(0).normal(size=(50, 3))
    augmented = np.hstack([dense, np.ones((50, 1))])
    expected = 1 / np.linalg.eigvalsh(augmented.T @ augmented / 50).max()
    assert stable_step(dense) == pytest.approx(expected, rel=1e-8)
    assert stable_step(sp.csr_matrix(dense)) == pytest.approx(expected, rel=1e-8)
    # At that scale the intercept's column no longer counts.
    huge = dense.astype(np.float32) * np.float32(1e30)
    assert stable_step(huge) == pytest.approx(
        1e-60 / np.linalg.eigvalsh(dense.T @ dense / 50).max(), rel=1e-5)
    assert stable_step(dense * 1e300) == np.finfo(np.float64).tiny  # 1e-600 underflows
    assert stable_step(np.zeros((4, 2))) == np.inf


def test_stable_step_of_rows_read_as_given_is_that_of_x_cast():
    """stable_step(X, dtype) measures the rows as the model reads them: the cast's value,
    from a scale taken on the measured rows (every third of 5,000 here) or, where those
    are zero, on all of X; inf where a measured row holds NaN or infinity."""
    X = np.random.RandomState(0).normal(size=(5000, 6)) * 1e3
    X[1, 2] = 1e30  # not measured
    assert stable_step(X, np.float32) == stable_step(X.astype(np.float32))
    zero = np.zeros((5000, 6))
    zero[1, 2] = -7.3
    assert stable_step(zero, np.float32) == stable_step(zero.astype(np.float32))
    assert stable_step(zero) == pytest.approx(1.0)  # the intercept's curvature alone
    for value in (np.nan, np.inf, 1e39):
        bad = X.copy()
        bad[3, 0] = value
        assert stable_step(bad, np.float32) == np.inf


@_OVERFLOWS
def test_huge_X_on_a_fitted_classifier_keeps_it():
    """The issue's reproducer: 1e30 rows make the loss NaN in the first epoch (the hinge
    loss with scikit-learn's 'optimal' rate as an object: used as given, no cap)."""
    model = _model(OnnxSGDClassifier, max_iter=2, loss="hinge").fit(X, Y)
    before = _everything(model)
    model.set_params(learning_rate=LearningRateSGD.scikit_learn_optimal())
    with pytest.raises(ConvergenceError, match="diverged at epoch 1"):
        model.fit(X * 1e30, Y)
    _assert_everything_kept(model, before)


# -- classes= as scikit-learn's partial_fit ---------------------------------------------------

def _fine_tuning_sgd(**params):
    """Fine-tuning of an unfitted SGDClassifier, which learns absent classes through its
    partial_fit (an unfitted LogisticRegression cannot: see the next test)."""
    return OnnxGradientClassifier(SGDClassifier(loss="log_loss", random_state=0), **params)


@pytest.mark.parametrize("estimator", [OnnxSGDClassifier, OnnxMLPClassifier, _fine_tuning_sgd],
                         ids=lambda make: make.__name__)
def test_classes_may_name_labels_absent_from_y(estimator):
    """partial_fit(classes=[0, 1, 2, 3]) with three labels in y: four classes, a fourth
    column of probabilities; then the same classes or None, anything else refused with
    scikit-learn's message, the estimator untouched."""
    # A loss with probabilities, for predict_proba.
    model = _model(estimator, **({"loss": "log_loss"} if estimator is OnnxSGDClassifier
                                  else {}))
    model.partial_fit(X, Y, classes=[0, 1, 2, 3])
    np.testing.assert_array_equal(model.classes_, [0, 1, 2, 3])
    assert model.predict_proba(X).shape == (len(Y), 4)
    before = _everything(model)
    with pytest.raises(ValueError, match=(
            r"^`classes=\[0, 1, 2\]` is not the same as on last call to partial_fit, "
            r"was: array\(\[0, 1, 2, 3\]\)$")):
        model.partial_fit(X, Y, classes=[0, 1, 2])
    _assert_everything_kept(model, before)
    model.partial_fit(X, Y, classes=[3, 2, 1, 0])
    model.partial_fit(X, Y)
    assert model.n_iter_ == 1 and len(model.loss_curve_) == 3


def test_unfitted_estimator_without_partial_fit_cannot_learn_absent_classes():
    model = OnnxGradientClassifier(LogisticRegression(), random_state=0)
    with pytest.raises(ValueError, match=(
            r"classes=\[0, 1, 2, 3\] names labels absent from y \(\[3\]\), but "
            r"LogisticRegression is not fitted and has no partial_fit")):
        model.partial_fit(X, Y, classes=[0, 1, 2, 3])
    assert not {"classes_", "optimizer_", "estimator_"} & set(vars(model))
    model.partial_fit(X, Y, classes=[0, 1, 2])  # a first call again, which works
    np.testing.assert_array_equal(model.classes_, [0, 1, 2])


def test_classes_of_a_fitted_base_must_match():
    base = LogisticRegression().fit(X, Y)
    model = OnnxGradientClassifier(base, random_state=0)
    with pytest.raises(ValueError, match=(
            r"^`classes=\[0, 1, 5\]` is not the same as the classes of the fitted "
            r"LogisticRegression, was: array\(\[0, 1, 2\]\)$")):
        model.partial_fit(X, Y, classes=[0, 1, 5])
    assert "optimizer_" not in vars(model)
    model.partial_fit(X, Y, classes=[2, 1, 0])
    np.testing.assert_array_equal(model.classes_, [0, 1, 2])


# -- training sessions ---------------------------------------------------------------------


@pytest.mark.parametrize("estimator", [OnnxSGDRegressor, OnnxSGDClassifier])
def test_stream_of_varying_sizes_keeps_two_training_sessions(estimator):
    """Calls of 1 to 40 rows and of 70 (batch_size 'auto' = 32): the full batches of 32
    rows run on one static-shape session, every other size on one dynamic session."""
    model = estimator(random_state=0)
    for n in [*range(1, 41), 70]:
        _partial_fit(model, X[:n], _targets(model)[:n])
    engines = transient(model.optimizer_).engines.built()
    sessions = [sorted(engine._steps, key=str) for engine in engines]
    assert sessions == [[32, None]]
