"""The process-wide caches: the bounded cache itself, its keys, the session cache, and
that sharing sessions between estimators (threads, pickles) changes no result."""

import copy
import pickle
import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from sklearn.datasets import load_breast_cancer
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import OnnxSGDClassifier
from skl_ortgrad._cache import BoundedCache, Unfreezable, digest, freeze
from skl_ortgrad.runtime.options import session_options
from skl_ortgrad.runtime.sessions import SESSIONS, cached_session, io_names

CPU = ["CPUExecutionProvider"]


def _add_model(constant: float = 1.0) -> onnx.ModelProto:
    """y = x + constant, on float [N, 2]."""
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "c"], ["y"])], "add",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])],
        [helper.make_tensor("c", TensorProto.FLOAT, [1, 2], [constant, constant])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.fixture(scope="module")
def breast_cancer():
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), y


# -- BoundedCache ------------------------------------------------------------------------


def test_bounded_cache_hits_misses_and_builds_once():
    cache = BoundedCache(4)
    built = []

    def build(value):
        built.append(value)
        return value

    assert cache.get("a", lambda: build(1)) == 1
    assert cache.get("a", lambda: build(2)) == 1
    assert cache.get("b", lambda: build(3)) == 3
    assert built == [1, 3]
    assert cache.info() == (1, 2, 4, 2)
    cache.clear()
    assert cache.info() == (0, 0, 4, 0)


def test_bounded_cache_forgets_the_least_recently_used():
    cache = BoundedCache(2)
    cache.get("a", lambda: 1)
    cache.get("b", lambda: 2)
    cache.get("a", lambda: 0)  # a is now more recent than b
    cache.get("c", lambda: 3)
    assert len(cache) == 2
    assert cache.get("a", lambda: -1) == 1
    assert cache.get("b", lambda: -2) == -2  # forgotten, built again
    with pytest.raises(ValueError, match="maxsize"):
        BoundedCache(0)


def test_bounded_cache_under_four_threads():
    cache = BoundedCache(8)
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        try:
            for key in rng.integers(0, 16, 2000):
                assert cache.get(int(key), lambda key=key: int(key) * 10) == int(key) * 10
        except AssertionError as exc:  # pragma: no cover - what the test looks for
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    info = cache.info()
    assert info.hits + info.misses == 8000
    assert info.currsize == 8


# -- keys --------------------------------------------------------------------------------


def test_freeze_tells_values_apart():
    assert freeze(1) != freeze(1.0) != freeze(True)
    assert freeze([1, 2]) != freeze((1, 2))
    assert freeze({"b": 1, "a": 2}) == freeze({"a": 2, "b": 1})
    assert freeze(np.zeros(3)) != freeze(np.zeros(3, dtype=np.float32))
    assert freeze(np.zeros(3)) != freeze(np.zeros((3, 1)))
    # An array too long for repr to show whole still differs in its last value.
    big = np.zeros(5000)
    other = big.copy()
    other[-1] = 1
    assert freeze(big) != freeze(other)
    with pytest.raises(Unfreezable):
        freeze(object())
    with pytest.raises(Unfreezable):
        freeze(lambda: 0)
    assert digest(b"abc") != digest(b"abd")


# -- sessions ----------------------------------------------------------------------------


def test_cached_session_hit_and_miss():
    model = _add_model(1.5)
    options = session_options(1, 3)
    before = SESSIONS.info()
    first = cached_session(model, options, CPU)
    # The same bytes (ModelProto or serialized) and equal options: the same session.
    assert cached_session(model.SerializeToString(), session_options(1, 3), CPU) is first
    # Anything that matters changes the session.
    assert cached_session(_add_model(2.5), options, CPU) is not first
    assert cached_session(model, session_options(2, 3), CPU) is not first
    assert cached_session(model, options, CPU, [{"arena_extend_strategy": "kSameAsRequested"}]
                          ) is not first
    after = SESSIONS.info()
    assert after.hits - before.hits >= 1
    x = np.ones((3, 2), dtype=np.float32)
    np.testing.assert_allclose(first.run(None, {"x": x})[0], x + 1.5)


def test_profiling_sessions_are_never_shared(tmp_path):
    options = session_options(1, 3)
    options.enable_profiling = True
    options.profile_file_prefix = str(tmp_path / "profile")
    model = _add_model(3.5)
    before = SESSIONS.info()
    first = cached_session(model, options, CPU)
    second = cached_session(model, options, CPU)
    assert second is not first
    assert SESSIONS.info() == before  # neither looked up nor stored
    first.end_profiling()
    second.end_profiling()


def test_cached_sessions_run_from_four_threads():
    model = _add_model(4.5)
    results, sessions = {}, set()

    def work(seed):
        session = cached_session(model, session_options(1, 3), CPU)
        sessions.add(id(session))
        x = np.random.default_rng(seed).standard_normal((64, 2)).astype(np.float32)
        results[seed] = all(
            np.array_equal(session.run(None, {"x": x})[0], x + np.float32(4.5))
            for _ in range(200)
        )

    threads = [threading.Thread(target=work, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == dict.fromkeys(range(4), True)
    assert len(sessions) == 1


# -- estimators sharing sessions ---------------------------------------------------------


def _fit(X, y, alpha):
    return OnnxSGDClassifier(loss="log_loss", alpha=alpha, random_state=0, max_iter=20,
                             tol=None).fit(X, y)


def test_estimators_fitted_in_four_threads_match_sequential_fits(breast_cancer):
    """Four estimators training at once on shared step sessions: each keeps its own
    output buffers, so the results are those of fits one after the other."""
    X, y = breast_cancer
    alphas = [1e-5, 1e-4, 1e-3, 1e-2]
    expected = [_fit(X, y, alpha).coef_ for alpha in alphas]
    fitted = {}

    def work(index):
        fitted[index] = _fit(X, y, alphas[index]).coef_

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for index, coef in enumerate(expected):
        np.testing.assert_array_equal(fitted[index], coef)


def test_pickle_and_deepcopy_after_fit_predict_the_same(breast_cancer):
    X, y = breast_cancer
    model = _fit(X, y, 1e-4)
    proba = model.predict_proba(X)  # builds (or finds) the inference session
    for restored in (pickle.loads(pickle.dumps(model)), copy.deepcopy(model)):
        np.testing.assert_array_equal(restored.predict(X), model.predict(X))
        np.testing.assert_array_equal(restored.predict_proba(X), proba)
        # Training goes on from the restored state as from the original.
        again = copy.deepcopy(model)
        restored.partial_fit(X, y)
        again.partial_fit(X, y)
        np.testing.assert_array_equal(restored.coef_, again.coef_)


def test_io_names_read_once_per_session():
    session = cached_session(_add_model(3.0), session_options(1), CPU)
    names = io_names(session)
    assert names == (("x",), ("y",))
    assert io_names(session) is names
    two_outputs = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["a", "a"], ["s"]), helper.make_node("Mul", ["a", "a"], ["p"])],
        "two", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [1]) for name in ("p", "s")]),
        opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    assert io_names(cached_session(two_outputs, session_options(1), CPU)) == (("a",),
                                                                              ("p", "s"))
