"""Intra-op threads of a training step (n_threads='auto')."""

import numpy as np
import pytest

from skl_ortgrad import OnnxMLPClassifier, OnnxSGDRegressor
from skl_ortgrad.runtime import threads


def test_small_steps_take_one_thread_large_ones_every_core(monkeypatch):
    monkeypatch.setattr(threads, "usable_cores", lambda: 4)
    assert threads.training_threads(threads.PARALLEL_WORK - 1) == 1
    assert threads.training_threads(threads.PARALLEL_WORK) == 4


@pytest.mark.parametrize(("make", "features", "expected"), [
    # 3 x (784*256 + 256 + 256*128 + 128 + 128*10 + 10) x 200 = 141M: every core
    (lambda: OnnxMLPClassifier(hidden_layer_sizes=(256, 128), max_iter=1), 784, "cores"),
    # 3 x (100*128 + 128 + 128*10 + 10) x 200 = 8.5M: one
    (lambda: OnnxMLPClassifier(hidden_layer_sizes=(128,), max_iter=1), 100, 1),
    (lambda: OnnxSGDRegressor(max_iter=1), 1000, 1),
])
def test_auto_resolves_by_the_step_of_the_model(monkeypatch, make, features, expected):
    monkeypatch.setattr(threads, "usable_cores", lambda: 3)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, features)).astype(np.float32)
    y = rng.integers(0, 10, 300)
    model = make().fit(X, y)
    assert model.optimizer_.n_threads == (3 if expected == "cores" else expected)
    assert make().set_params(n_threads=2).fit(X, y).optimizer_.n_threads == 2
