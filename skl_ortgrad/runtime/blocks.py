"""The rows of an array in blocks that stay in cache, shared among threads.

A block of :data:`BLOCK_VALUES` values (4 MiB of float32) is cast, checked and run while
the caches hold it, so that one pass over an array larger than them does several things
(:mod:`~skl_ortgrad.estimators.finite_input`, :mod:`~skl_ortgrad.estimators.inference`).
numpy's casts and reductions and onnxruntime's ``run`` release the GIL: the blocks are
shared among threads, one per :data:`THREAD_VALUES` values up to the cores the process
may use that other processes leave free (:func:`block_threads`), each thread taking the
next block when it is free (:func:`share_blocks`); small arrays take the calling thread
alone, which starts nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

from skl_ortgrad.runtime.threads import free_cores

#: Values of a block: cast, summed and run while in cache. Measured on 200k x 50 float64
#: predictions: 2**16 values cost 1.5x the time of 2**18 (a run and a cast call per
#: block), 2**20 about 10% less than 2**18.
BLOCK_VALUES = 2**20
#: Values per thread (a thread costs about 0.1 ms to start and join; 2**20 float64
#: values take about 1 ms to cast and score).
THREAD_VALUES = 2**20


def block_threads(n_values: int, n_threads: int = 1) -> int:
    """Threads sharing the blocks of ``n_values`` values, each running sessions of
    ``n_threads`` intra-op threads: one per :data:`THREAD_VALUES`, all together using at
    most the cores other processes leave free
    (:func:`~skl_ortgrad.runtime.threads.free_cores`)."""
    if n_values < 2 * THREAD_VALUES:
        return 1
    return max(1, min(free_cores() // max(1, n_threads), n_values // THREAD_VALUES))


def block_rows(n_columns: int, multiple: int = 1) -> int:
    """Rows of a block of :data:`BLOCK_VALUES` values, a multiple of ``multiple``."""
    return multiple * max(1, BLOCK_VALUES // (multiple * max(1, n_columns)))


def share_blocks(starts: range, threads: int, work: Callable[[int, Iterator[int]], None]) -> None:
    """Call ``work(k, share)`` in ``threads`` threads (fewer when there are fewer blocks),
    the calling thread being ``k = 0``: ``share`` yields block starts of ``starts``, each
    to one thread only, the next one to whichever thread asks first.

    Blocks are handed out as threads become free, not split in advance: on a machine
    whose cores other processes also use, a thread that is descheduled does fewer blocks
    instead of keeping the others waiting for its share. The first exception of any
    thread is raised again here, after all ended; once one is raised, no thread gets
    another block.
    """
    threads = max(1, min(threads, len(starts)))
    pending = iter(starts)
    lock = threading.Lock()
    failed: list[BaseException] = []

    def share() -> Iterator[int]:
        while not failed:
            with lock:
                start = next(pending, None)
            if start is None:
                return
            yield start

    def run(index: int) -> None:
        try:
            work(index, share())
        except BaseException as exc:  # raised again by the calling thread
            failed.append(exc)

    helpers = [threading.Thread(target=run, args=(k,), daemon=True)
               for k in range(1, threads)]
    for helper in helpers:
        helper.start()
    run(0)
    for helper in helpers:
        helper.join()
    if failed:
        raise failed[0]
