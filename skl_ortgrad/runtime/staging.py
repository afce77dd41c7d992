"""The rows of a linear program's call, gathered and cast in order before it runs.

The dense linear program reads its batches by row index
(:class:`~skl_ortgrad.runtime.program_run.LinearProgramRun`). Read from the features as
given, in a shuffled order, every row is a wait on memory, and float64 rows of a float32
model are cast batch by batch. Staged, the rows of a call are gathered in numpy, in the
order the call reads them, and cast to the program's type, into a buffer that the call
then reads one row after the other, from the caches. Where a core is free, the helper
thread (:func:`helper_thread`) stages the next call's rows while the current call runs:
numpy's ``take`` and casts and onnxruntime's ``run`` all release the GIL. Without one,
staging costs what it saves, and the program reads its rows by index
(:meth:`~skl_ortgrad.runtime.program_run.LinearProgramRun.stages`).

Measured on blocks of 100k x 50 float64 rows of a float32 model (a call of 32 steps of
256 rows, one onnxruntime thread, 2-core Intel Xeon, December 2026): the call gathering
and casting its rows itself 1.1-1.3 ms; staging them 0.4 ms where the block is in the
caches, 0.6-0.7 ms where it is not, and the call on them 0.34 ms. A block's
``partial_fit`` (medians of 30-60 interleaved rounds, five runs, ad hoc): 12.4-13.7 ms
reading the rows by index, 9.9-11.9 ms staged with the helper.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Hashable
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np

_HELPER: tuple[int, ThreadPoolExecutor] | None = None
_HELPER_LOCK = threading.Lock()

#: Rows gathered at a time before their cast, so that the cast reads them from the
#: caches (a chunk's float64 rows at once and then cast: 1.4x the time).
CAST_ROWS = 1024


def helper_thread() -> ThreadPoolExecutor:
    """The process's helper thread, started when first asked for (a forked child starts
    its own: the parent's thread does not run there)."""
    global _HELPER
    with _HELPER_LOCK:
        if _HELPER is None or _HELPER[0] != os.getpid():
            _HELPER = os.getpid(), ThreadPoolExecutor(1, "skl_ortgrad-rows")
        return _HELPER[1]


class StagedRows:
    """Two buffers of ``rows`` rows of ``n_columns`` values of the program's ``dtype``:
    the rows of a call are written into one (:meth:`start`, :meth:`fill`) while a call
    reads the other.

    A call's rows are gathered :data:`CAST_ROWS` at a time, each part by whichever
    thread takes it first: the helper thread from :meth:`start` on, the caller once it
    asks for them (:meth:`wait`), after its own call. Gathering in a shuffled order
    waits on memory, and two cores wait on more rows at once: neither the helper nor
    the caller waits long for the other (the call of 32 steps of 256 rows of 100k x 50
    float64 rows: 0.27-0.36 ms, median of 40 blocks; gathering and casting its rows 0.4
    ms where the block is in the caches, 0.6-0.7 ms where it is not, both ad hoc).

    At most one gather is pending: :meth:`wait` ends it before another starts, and
    before the caller changes what it reads (the indices, the features).

    Parameters
    ----------
    rows : int
        Rows of the largest call.
    n_columns : int
    dtype : numpy dtype
        The program's.
    features_dtype : numpy dtype
        The features' type: rows of another type are cast (as onnxruntime's ``Cast``,
        to nearest, an overflow to an infinity).
    """

    def __init__(self, rows: int, n_columns: int, dtype: np.dtype,
                 features_dtype: np.dtype) -> None:
        self.buffers = tuple(np.empty((rows, n_columns), dtype=dtype) for _ in range(2))
        # One per thread: the caller's, the helper's.
        self._scratch = tuple(
            None if np.dtype(features_dtype) == np.dtype(dtype)
            else np.empty((CAST_ROWS, n_columns), dtype=features_dtype) for _ in range(2))
        # The key, the gather, the helper's future and the process that started it.
        self._pending: tuple[Hashable, _Gather, Future, int] | None = None

    def fill(self, slot: int, features: np.ndarray, indices: np.ndarray) -> None:
        """Write ``features[indices]`` into the first rows of buffer ``slot``, cast, in
        the calling thread."""
        _Gather(self.buffers[slot], features, indices).run(self._scratch[0])

    def start(self, key: Hashable, slot: int, features: np.ndarray,
              indices: np.ndarray) -> None:
        """:meth:`fill`, begun on the helper thread; :meth:`wait` returns ``key`` once
        done."""
        self.wait(discard=True)
        gather = _Gather(self.buffers[slot], features, indices)
        self._pending = (key, gather, helper_thread().submit(gather.run, self._scratch[1]),
                         os.getpid())

    def wait(self, discard: bool = False) -> Hashable | None:
        """End the pending gather, if any, taking the parts the helper has not begun
        (``discard``: leaving them undone); return its key, or None when none was
        pending or it was discarded (the helper's exception, if it raised, is raised
        here)."""
        if self._pending is None:
            return None
        key, gather, future, pid = self._pending
        if pid != os.getpid():
            # A child made by fork: the parent's helper never ends the gather here.
            self._pending = None
            return None
        try:
            if discard:
                gather.stop()
            else:
                try:
                    gather.run(self._scratch[0])
                except BaseException:
                    # Parts are left unwritten: the rows are not staged.
                    gather.stop()
                    raise
        finally:
            # The helper's part ends before the buffer is read or written again.
            try:
                future.result()
            finally:
                # Still pending where the wait itself was interrupted (Ctrl-C).
                if future.done():
                    self._pending = None
        return None if discard else key


class _Gather:
    """``out[:n] = features[indices]`` (``n`` indices), cast, in parts of
    :data:`CAST_ROWS` rows that the threads calling :meth:`run` share."""

    def __init__(self, out: np.ndarray, features: np.ndarray, indices: np.ndarray) -> None:
        self.out, self.features, self.indices = out, features, indices
        # next() of a count is atomic under the GIL: each part goes to one thread.
        self._parts = itertools.count()
        self._stopped = False

    def stop(self) -> None:
        """Hand out no more parts."""
        self._stopped = True

    def run(self, scratch: np.ndarray | None) -> None:
        """Gather parts until none is left, through ``scratch`` (rows of the features'
        type, None where no cast is needed). The indices must be rows of the features:
        ``mode="clip"`` writes into the output directly, where numpy's default gathers
        into a copy first (2.6x slower, measured)."""
        n = len(self.indices)
        with np.errstate(over="ignore"):
            while not self._stopped:
                start = next(self._parts) * CAST_ROWS
                if start >= n:
                    return
                part = self.indices[start:start + CAST_ROWS]
                out = self.out[start:start + len(part)]
                if scratch is None:
                    np.take(self.features, part, axis=0, out=out, mode="clip")
                else:
                    np.take(self.features, part, axis=0, out=scratch[:len(part)],
                            mode="clip")
                    np.copyto(out, scratch[:len(part)], casting="unsafe")
