"""Epochs of several linear program calls run on staged rows where a core is free (each
call's rows gathered in order and cast: ``skl_ortgrad.runtime.staging``), shared with the
helper thread, or by the calling thread alone where the epoch finds no core free: the
same training, bit for bit, as the program reading the rows at their indices, for fit, a
stream of new blocks, an epoch that Ctrl-C interrupts between two calls, and estimators
training at once in threads."""

import signal
import threading

import numpy as np
import pytest
from _linear_cases import LINEAR_CASES

from skl_ortgrad import OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.runtime import program_run
from skl_ortgrad.runtime.program_run import LinearProgramRun
from skl_ortgrad.runtime.staging import StagedRows
from skl_ortgrad.training import program_choice

RNG = np.random.default_rng(3)
# 3000 rows: 94 batches of 32, an epoch of two calls of the linear program.
X = RNG.standard_normal((4, 3000, 8))
SCORE = X @ RNG.standard_normal(8) + 0.3 * RNG.standard_normal((4, 3000))
TARGETS = {"regressor": SCORE, "binary": (SCORE > 0).astype(int),
           "classes": np.digitize(SCORE, [-0.5, 0.5])}
WEIGHTS = RNG.integers(0, 3, (4, 3000)).astype(float)
CASES = {
    **LINEAR_CASES,
    # Per-step norms (the tol rule), and a validation split.
    "hinge, tol": (OnnxSGDClassifier, {"tol": 1e-3, "max_iter": 5}, "binary"),
    "log loss, early stopping": (OnnxSGDClassifier, {"loss": "log_loss", "tol": 1e-3,
                                                     "early_stopping": True}, "binary"),
}
WAYS = ["by index", "staged by the caller", "staged with the helper"]


@pytest.fixture
def way(monkeypatch, request):
    """Set the way the linear program reads its rows: the free cores its choice sees
    (none: by index), and those each epoch sees (none: the caller stages the rows of the
    staged form itself, as where the load rose since the call chose); return the calls
    that staged rows by the caller alone (``fill``) and with the helper (``start``)."""
    choice, epoch = {"by index": (False, False), "staged by the caller": (True, False),
                     "staged with the helper": (True, True)}[request.param]
    monkeypatch.setattr(program_choice, "helper_core_free", lambda threads: choice)
    monkeypatch.setattr(program_run, "helper_core_free", lambda threads: epoch)
    calls = {"fill": 0, "start": 0}
    for name in calls:
        original = getattr(StagedRows, name)

        def counted(self, *args, _name=name, _original=original):
            calls[_name] += 1
            return _original(self, *args)

        monkeypatch.setattr(StagedRows, name, counted)
    return request.param, calls


def _trained(case, dtype, weighted, interrupt_at=None):
    """fit (3 epochs) on block 0, then partial_fit on blocks 1 to 3 (new arrays), the
    second one interrupted after call ``interrupt_at`` of the program (if given)."""
    cls, params, kind = CASES[case]
    model = cls(**{"max_iter": 3, "tol": None, "random_state": 0, **params})
    weights = (lambda k: {"sample_weight": WEIGHTS[k]}) if weighted else (lambda k: {})
    model.fit(X[0].astype(dtype), TARGETS[kind][0], **weights(0))
    model.fit_epochs = model.n_iter_
    # partial_fit refuses early stopping (scikit-learn's rule).
    model.set_params(early_stopping=False)
    for block in (1, 2, 3):
        arguments = (X[block].astype(dtype), TARGETS[kind][block])
        if block == 2 and interrupt_at is not None:
            with pytest.raises(KeyboardInterrupt):
                _interrupted(interrupt_at, model.partial_fit, *arguments, **weights(block))
        else:
            model.partial_fit(*arguments, **weights(block))
    return model


def _interrupted(call_index, call, *args, **kwargs):
    """``call(*args, **kwargs)`` with a SIGINT raised during the program's call
    ``call_index``."""
    execute = LinearProgramRun._execute
    calls = [0]

    def counting(self, *args):
        calls[0] += 1
        if calls[0] == call_index:
            signal.raise_signal(signal.SIGINT)
        return execute(self, *args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LinearProgramRun, "_execute", counting)
        return call(*args, **kwargs)


def _state(model):
    return {"coef": model.coef_.copy(), "intercept": model.intercept_.copy(),
            "t": model.t_, "n_iter": model.n_iter_, "loss_curve": list(model.loss_curve_)}


def _assert_same(got, want):
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


def _expected(case, dtype, weighted, interrupt_at=None):
    """The state that the program reading its rows by index gives."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(LinearProgramRun, "stages", classmethod(lambda *args: False))
        return _state(_trained(case, dtype, weighted, interrupt_at))


@pytest.mark.parametrize("way", WAYS[1:], indirect=True)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", list(CASES))
def test_staged_rows_train_as_rows_read_by_index(case, dtype, weighted, way):
    name, calls = way
    model = _trained(case, dtype, weighted)
    got = _state(model)
    _assert_same(got, _expected(case, dtype, weighted))
    # Epochs of 2 calls each: the helper stages the first call's rows of every epoch
    # and the second's; alone, the caller stages each call's.
    epochs = model.fit_epochs + 3
    if name == "staged with the helper":
        assert calls["start"] == 2 * epochs
    else:
        assert calls == {"fill": 2 * epochs, "start": 0}


@pytest.mark.parametrize("way", WAYS, indirect=True)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_an_epoch_interrupted_between_staged_calls_goes_on_as_by_index(dtype, way):
    """Ctrl-C during the first call of an epoch: the call ends after it (the helper had
    begun the second call's rows), keeping its steps; the next call trains on."""
    got = _trained("squared error", dtype, False, interrupt_at=1)
    # fit's 3 epochs, a block, the 64 batches of 32 rows of the interrupted call's first
    # program call, a block.
    assert got.t_ == 1 + 3 * 3000 + 3000 + 64 * 32 + 3000
    _assert_same(_state(got), _expected("squared error", dtype, False, interrupt_at=1))


@pytest.mark.parametrize("way", WAYS[2:], indirect=True)
def test_estimators_training_at_once_in_threads_share_the_helper(way):
    """Four estimators trained at once in four threads (a threading joblib backend):
    their gathers queue on the one helper thread, each trains as it does alone."""
    alone = {seed: _state(_stream(seed)) for seed in range(4)}
    together = {}

    def train(seed):
        together[seed] = _state(_stream(seed))

    threads = [threading.Thread(target=train, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads)
    for seed in range(4):
        _assert_same(together[seed], alone[seed])


def _stream(seed):
    """A regressor of ``seed`` after a stream of the four blocks, twice."""
    model = OnnxSGDRegressor(random_state=seed)
    for block in [0, 1, 2, 3] * 2:
        model.partial_fit(X[block], TARGETS["regressor"][block])
    return model
