"""Staged rows: a call's rows gathered in order and cast, by the caller or shared with
the helper thread, exactly as ``features[indices].astype(dtype)``."""

import threading
import warnings

import numpy as np
import pytest

from skl_ortgrad.runtime import staging
from skl_ortgrad.runtime.staging import CAST_ROWS, StagedRows

RNG = np.random.default_rng(0)
# Several parts of CAST_ROWS rows, the last one short.
# Columns from float32's subnormals to beyond its range.
FEATURES = RNG.standard_normal((3 * CAST_ROWS + 100, 5)) * [1e-40, 1e-3, 1.0, 1e20, 1e39]
INDICES = RNG.permutation(len(FEATURES))[:2 * CAST_ROWS + 37]

PAIRS = [(np.float64, np.float32), (np.float32, np.float32), (np.float32, np.float64),
         (np.float64, np.float64)]


def _features(dtype):
    with np.errstate(over="ignore"):
        return FEATURES.astype(dtype)


@pytest.mark.parametrize(("features_dtype", "dtype"), PAIRS)
@pytest.mark.parametrize("helped", [False, True], ids=["caller", "caller and helper"])
def test_staged_rows_are_the_rows_gathered_and_cast(features_dtype, dtype, helped):
    features = _features(features_dtype)
    staged = StagedRows(len(INDICES) + 5, 5, dtype, features_dtype)
    with warnings.catch_warnings():
        # Values beyond float32 become infinities, as onnxruntime's Cast: no warning.
        warnings.simplefilter("error")
        if helped:
            staged.start("key", 1, features, INDICES)
            assert staged.wait() == "key"
        else:
            staged.fill(1, features, INDICES)
    with np.errstate(over="ignore"):
        expected = features[INDICES].astype(dtype)
    got = staged.buffers[1][:len(INDICES)]
    assert got.dtype == dtype
    np.testing.assert_array_equal(got, expected)
    if dtype == np.float32 and features_dtype == np.float64:
        assert np.isinf(got).any()


def test_the_helper_and_the_caller_share_the_parts(monkeypatch):
    """Each part of a started gather is written once, by the helper or by the caller once
    it waits; the parts the helper has not begun when the caller waits are the
    caller's."""
    takers = []
    take = np.take
    started = threading.Event()
    release = threading.Event()

    def recording(*args, **kwargs):
        helper = threading.current_thread() is not threading.main_thread()
        takers.append("helper" if helper else "caller")
        if helper and not started.is_set():
            started.set()
            release.wait(5)
        return take(*args, **kwargs)

    monkeypatch.setattr(staging.np, "take", recording)
    staged = StagedRows(len(INDICES), 5, np.float64, np.float64)
    staged.start(0, 0, FEATURES, INDICES)
    started.wait(5)
    # The helper holds its first part: the caller takes every other one.
    threading.Timer(0.2, release.set).start()
    assert staged.wait() == 0
    parts = -(-len(INDICES) // CAST_ROWS)
    assert sorted(takers) == ["caller"] * (parts - 1) + ["helper"]
    np.testing.assert_array_equal(staged.buffers[0][:len(INDICES)], FEATURES[INDICES])


def test_a_discarded_gather_ends_and_gives_no_key():
    staged = StagedRows(len(INDICES), 5, np.float64, np.float64)
    assert staged.wait() is None
    staged.start("a", 0, FEATURES, INDICES)
    assert staged.wait(discard=True) is None
    assert staged.wait() is None
    # Starting another leaves the pending one first.
    staged.start("b", 0, FEATURES, INDICES)
    staged.start("c", 1, FEATURES, INDICES[:10])
    assert staged.wait() == "c"
    np.testing.assert_array_equal(staged.buffers[1][:10], FEATURES[INDICES[:10]])


@pytest.mark.parametrize("failing_thread", ["helper", "caller"])
def test_an_exception_of_either_thread_is_raised_by_the_wait(monkeypatch, failing_thread):
    """The helper's exception, or the caller's in its share, is raised by the wait, once
    the helper ended; the gather is then over, its rows not staged."""
    take = np.take
    helper_started, release = threading.Event(), threading.Event()

    def failing(*args, **kwargs):
        helper = threading.current_thread() is not threading.main_thread()
        first = helper and not helper_started.is_set()
        if first:
            helper_started.set()
        if helper == (failing_thread == "helper"):
            raise MemoryError("no room")
        if first:
            # The caller gets a share.
            release.wait(5)
        return take(*args, **kwargs)

    staged = StagedRows(len(INDICES), 5, np.float64, np.float64)
    monkeypatch.setattr(staging.np, "take", failing)
    staged.start("key", 0, FEATURES, INDICES)
    # The helper has begun its first part (and raised there, or holds it).
    helper_started.wait(5)
    threading.Timer(0.2, release.set).start()
    with pytest.raises(MemoryError, match="no room"):
        staged.wait()
    monkeypatch.undo()
    assert staged.wait() is None


def test_a_forked_child_starts_its_own_helper(monkeypatch):
    """The parent's helper thread does not run in a child made by fork: the child's first
    gather starts a thread of its own (its process id differs)."""
    parent = staging.helper_thread()
    monkeypatch.setattr(staging, "_HELPER", staging._HELPER)
    assert staging.helper_thread() is parent
    monkeypatch.setattr(staging.os, "getpid", lambda: -1)
    child = staging.helper_thread()
    assert child is not parent
    assert child.submit(lambda: 42).result(timeout=5) == 42


def test_a_forked_child_leaves_the_parents_pending_gather(monkeypatch):
    """A gather the parent's helper had begun never ends in a child made by fork (no
    such thread there): the child's wait leaves it, and its rows are not staged."""
    staged = StagedRows(len(INDICES), 5, np.float64, np.float64)
    never = threading.Event()
    monkeypatch.setattr(staging.np, "take", lambda *args, **kwargs: never.wait(30))
    staged.start("key", 0, FEATURES, INDICES)
    monkeypatch.setattr(staging.os, "getpid", lambda: -1)
    assert staged.wait() is None
    assert staged.wait(discard=True) is None
    never.set()
