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


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity where the system tells)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def training_threads(multiply_adds: float) -> int:
    """Intra-op threads for a training step of ``multiply_adds``: 1 below
    :data:`PARALLEL_WORK`, else every available core."""
    return available_cores() if multiply_adds >= PARALLEL_WORK else 1
