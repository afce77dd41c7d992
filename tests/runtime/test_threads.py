"""Intra-op threads of a training step (n_threads='auto'); the free cores (prediction's
blocks, the helper thread of staged rows)."""

import numpy as np
import pytest

from skl_ortgrad import OnnxMLPClassifier, OnnxSGDRegressor
from skl_ortgrad.runtime import threads


def test_small_steps_take_one_thread_large_ones_every_core(monkeypatch):
    monkeypatch.setattr(threads, "usable_cores", lambda: 4)
    assert threads.training_threads(threads.PARALLEL_WORK - 1) == 1
    assert threads.training_threads(threads.PARALLEL_WORK) == 4


@pytest.mark.parametrize(("loadavg", "expected"), [
    ("0.10 0.20 0.30 1/120 4321\n", 4),  # only the calling thread runs: every core
    ("2.00 1.50 1.00 3/120 4321\n", 2),  # two other threads run
    ("9.00 8.00 7.00 12/120 4321\n", 1),  # busier than the cores: still one
    ("not the format", 4),
    (None, 4),  # no such file (not Linux)
])
def test_free_cores_leave_the_cores_other_threads_run_on(monkeypatch, tmp_path, loadavg,
                                                         expected):
    monkeypatch.setattr(threads, "usable_cores", lambda: 4)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 4)
    path = tmp_path / "loadavg"
    if loadavg is not None:
        path.write_text(loadavg, encoding="ascii")
    monkeypatch.setattr(threads, "LOADAVG", str(path))
    assert threads.free_cores() == expected


def test_free_cores_count_the_whole_machine_against_the_usable_ones(monkeypatch, tmp_path):
    """Threads running on cores the process may not use leave its own free."""
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    monkeypatch.setattr(threads.os, "cpu_count", lambda: 16)
    path = tmp_path / "loadavg"
    path.write_text("5.0 5.0 5.0 7/300 1\n", encoding="ascii")
    monkeypatch.setattr(threads, "LOADAVG", str(path))
    assert threads.free_cores() == 2


@pytest.mark.parametrize(("threads_", "free", "expected"), [
    (1, 2, True), (1, 1, False), (2, 2, False), (2, 3, True),
    (0, 8, False),  # onnxruntime's default: every core
])
def test_the_helper_needs_a_core_beside_the_sessions_threads(monkeypatch, threads_, free,
                                                             expected):
    monkeypatch.setattr(threads, "free_cores", lambda: free)
    assert threads.helper_core_free(threads_) is expected


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
