"""How many intra-op threads a training step gets (``n_threads="auto"``).

A step's arithmetic is about three multiply-adds per trained value and row (the forward
product, and the two products of its gradient). Below :data:`PARALLEL_WORK` of them a
step takes tens of microseconds, and a second thread costs more in synchronization than
it saves (a linear model's step, a small MLP's); above, the step's matrix products are
split over the cores the process may use.
"""

from __future__ import annotations

import os

#: Multiply-adds per step from which a step runs on every available core: a
#: 100-128-10 MLP at batch 200 does 8.4M (one thread), 784-256-128-10 141M (all).
PARALLEL_WORK = 2.5e7


def usable_cores() -> int:
    """Cores this process may run on, at most ``OMP_NUM_THREADS`` when it is set (joblib
    sets it in its workers to share the cores among them)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    limit = os.environ.get("OMP_NUM_THREADS", "")
    return max(1, min(cores, int(limit))) if limit.isdigit() and int(limit) > 0 else cores


#: Where Linux says how many threads are runnable now ("running/total", 4th field).
LOADAVG = "/proc/loadavg"


def free_cores() -> int:
    """:func:`usable_cores`, less the cores other threads of the machine are running on
    now, at least 1: on Linux, the machine's cores minus the runnable threads that
    ``LOADAVG`` counts (the calling one aside); :func:`usable_cores` where it cannot be
    read.

    A task split among threads waits for its slowest one: on cores that other processes
    keep busy, the system sets some of its threads aside for milliseconds while they
    hold a share of the work. A 200k x 50 prediction, one thread against two, with two
    other processes busy on the 2 cores of this machine kind: 3.8 against 4.7 ms (median
    of 25 interleaved rounds), where two threads on idle cores take 20% less than one.
    """
    cores = usable_cores()
    try:
        with open(LOADAVG, encoding="ascii") as file:
            runnable = int(file.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return cores
    return max(1, min(cores, (os.cpu_count() or cores) - (runnable - 1)))


def helper_core_free(threads: int) -> bool:
    """Whether a core is free for the helper thread (:mod:`~skl_ortgrad.runtime.staging`)
    beside a session of ``threads`` intra-op threads (0: onnxruntime's default, every
    core): :func:`free_cores` more than ``threads``."""
    return 0 < threads < free_cores()


def training_threads(multiply_adds: float) -> int:
    """Intra-op threads for a training step of ``multiply_adds``: 1 below
    :data:`PARALLEL_WORK`, else every usable core."""
    return usable_cores() if multiply_adds >= PARALLEL_WORK else 1
