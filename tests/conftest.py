"""Shared fixtures: small skl2onnx graphs in the form the training engine needs."""

import signal
import warnings

import numpy as np
import pytest
from _backends import AVAILABLE
from skl2onnx import to_onnx
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LinearRegression
from sklearn.neural_network import MLPRegressor

from skl_ortgrad.graph.model import TARGET_OPSET
from skl_ortgrad.runtime import program_run
from skl_ortgrad.training import program_choice


@pytest.fixture(params=AVAILABLE)
def backend(request):
    """Every gradient backend this Python is configured with (tests/_backends.py), in turn."""
    return request.param


@pytest.fixture(autouse=True)
def no_free_core(monkeypatch):
    """Training calls find no core free for the helper thread, whatever the machine's
    load: a call's program form depends on it (the same training either way), and tests
    count the programs built. The tests of staged rows set the free cores themselves."""
    monkeypatch.setattr(program_choice, "helper_core_free", lambda threads: False)
    monkeypatch.setattr(program_run, "helper_core_free", lambda threads: False)


@pytest.fixture
def default_sigint():
    """Python's default SIGINT handler (KeyboardInterrupt) for the test, the runner's back
    after it: the Ctrl-C tests run the same under a terminal and under a background runner
    (a job started without job control inherits SIGINT ignored)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="session")
def regression_data():
    rng = np.random.RandomState(0)
    X = rng.randn(200, 4).astype(np.float32)
    coef = np.array([1.5, -2.0, 0.5, 3.0], dtype=np.float32)
    y = (X @ coef + 0.7 + 0.01 * rng.randn(200)).astype(np.float32)
    return X, y


@pytest.fixture(scope="session")
def linear_onnx(regression_data):
    X, y = regression_data
    model = LinearRegression().fit(X[:20], y[:20] * 0 + 1)
    return to_onnx(model, X[:1], target_opset=TARGET_OPSET, black_op={"LinearRegressor"})


@pytest.fixture(scope="session")
def mlp_onnx(regression_data):
    X, y = regression_data
    model = MLPRegressor(hidden_layer_sizes=(5,), activation="tanh", max_iter=5, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    return model, to_onnx(model, X[:1], target_opset=TARGET_OPSET)
