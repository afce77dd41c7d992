"""Session options: what they hold, what tells two apart, and the unoptimized copy."""

import numpy as np
import pytest
from onnxruntime import ExecutionMode, GraphOptimizationLevel, InferenceSession, SessionOptions
from sklearn.datasets import load_digits

from skl_ortgrad import OnnxMLPClassifier
from skl_ortgrad.runtime.options import (
    ALLOW_SPINNING,
    options_key,
    session_options,
    unoptimized_session_options,
)
from skl_ortgrad.runtime.sessions import SESSIONS


def _spinning(options: SessionOptions) -> str | None:
    try:
        return options.get_session_config_entry(ALLOW_SPINNING)
    except RuntimeError:
        return None


def test_options_key_holds_threads_optimization_and_log_level():
    base = session_options(1, 3)
    assert options_key(base) == options_key(session_options(1, 3))
    assert options_key(base) != options_key(session_options(2, 3))
    assert options_key(base) != options_key(session_options(1, 0))
    unoptimized = session_options(1, 3)
    unoptimized.graph_optimization_level = GraphOptimizationLevel.ORT_DISABLE_ALL
    assert options_key(base) != options_key(unoptimized)


@pytest.mark.parametrize("threads", [0, 2, 4])
def test_threads_of_a_session_of_several_sleep_between_tasks(threads):
    assert _spinning(session_options(threads)) == "0"
    # One thread has no pool, and a prediction's threads spin: onnxruntime's default.
    assert _spinning(session_options(1)) is None
    assert _spinning(session_options(threads, spin=True)) is None


def test_options_key_holds_the_spinning_entry():
    spinning, sleeping = SessionOptions(), SessionOptions()
    spinning.add_session_config_entry(ALLOW_SPINNING, "1")
    sleeping.add_session_config_entry(ALLOW_SPINNING, "0")
    keys = {options_key(SessionOptions()), options_key(spinning), options_key(sleeping)}
    assert len(keys) == 3


def test_unoptimized_session_options_copy():
    options = SessionOptions()
    options.intra_op_num_threads = 3
    options.execution_mode = ExecutionMode.ORT_PARALLEL
    copy = unoptimized_session_options(options)
    assert copy.graph_optimization_level == GraphOptimizationLevel.ORT_DISABLE_ALL
    assert copy.intra_op_num_threads == 3
    assert copy.execution_mode == ExecutionMode.ORT_PARALLEL
    assert options.graph_optimization_level == GraphOptimizationLevel.ORT_ENABLE_ALL
    default = unoptimized_session_options()
    assert default.graph_optimization_level == GraphOptimizationLevel.ORT_DISABLE_ALL


def test_unoptimized_copy_keeps_the_callers_spinning_or_sets_the_packages():
    # Unset: the package's rule by the threads.
    assert _spinning(unoptimized_session_options(session_options(2))) == "0"
    three = SessionOptions()
    three.intra_op_num_threads = 3
    assert _spinning(unoptimized_session_options(three)) == "0"
    assert _spinning(unoptimized_session_options(session_options(1))) is None
    # Set by the caller: kept, whatever the threads.
    spinning = SessionOptions()
    spinning.intra_op_num_threads = 2
    spinning.add_session_config_entry(ALLOW_SPINNING, "1")
    assert _spinning(unoptimized_session_options(spinning)) == "1"
    assert _spinning(spinning) == "1"


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_an_mlp_on_two_threads_trains_on_sessions_that_do_not_spin(monkeypatch, dtype):
    """The training sessions of an MLP on two threads (a float64 one runs its gradient
    graph unoptimized) have threads that sleep; its prediction's, and one-thread
    sessions (the probe that folds the gradient graph's shapes), keep onnxruntime's
    default."""
    built = []
    init = InferenceSession.__init__

    def record(self, model, sess_options=None, *args, **kwargs):
        built.append(sess_options)
        init(self, model, sess_options, *args, **kwargs)

    monkeypatch.setattr(InferenceSession, "__init__", record)
    SESSIONS.clear()
    X, y = load_digits(return_X_y=True)
    model = OnnxMLPClassifier(hidden_layer_sizes=(7,), max_iter=2, n_threads=2,
                              random_state=0).fit(X[:200].astype(dtype), y[:200])
    training = list(built)
    assert [options.intra_op_num_threads for options in training].count(2) >= 1
    for options in training:
        assert _spinning(options) == ("0" if options.intra_op_num_threads == 2 else None)
    del built[:]
    model.predict(X[:10].astype(dtype))
    assert [options.intra_op_num_threads for options in built] == [2]
    assert _spinning(built[0]) is None
