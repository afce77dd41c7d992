"""Case 5: the floor of one epoch, and ours as a multiple of it.

An epoch must at least read X and y once: bytes(X + y) / memory bandwidth, the bandwidth
measured by a large numpy copy (bytes read + bytes written over the time). It must also do
the arithmetic: 2·n·d FLOPs forward and as many backward, over the float32 matmul
throughput of one thread (ours runs one intra-op thread). The floor is the larger of the
two; at these shapes it is the memory one by far.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from _common import Table, interleaved, print_tables, quiet_warnings, rounds, torch_or_none
from bench_linear import ETA, N_FEATURES, N_ROWS, NumpyLinear, TorchLoop, make_data
from threadpoolctl import threadpool_limits

from skl_ortgrad import LearningRateSGD, OnnxSGDRegressor


def memory_bandwidth(n_bytes: int = 256 * 2**20, repeat: int = 7) -> float:
    """Bytes per second of a large numpy copy, counting the read and the write."""
    src = np.ones(n_bytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    best = interleaved({"copy": lambda: np.copyto(dst, src)}, n_rounds=repeat, warmup=1)
    return 2 * src.nbytes / best["copy"]


def matmul_flops(n: int = 1024, repeat: int = 5, threads: int = 1) -> float:
    """float32 FLOP/s of an n x n matmul with ``threads`` BLAS threads."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    with threadpool_limits(threads):
        t = interleaved({"mm": lambda: a @ b}, n_rounds=repeat, warmup=1)["mm"]
    return 2 * n**3 / t


def run() -> list[Table]:
    quiet_warnings()
    X, y, _, _ = make_data()
    bandwidth = memory_bandwidth()
    flops1 = matmul_flops(threads=1)
    flops2 = matmul_flops(threads=2)
    n_bytes = X.nbytes + y.nbytes
    floor_bw = n_bytes / bandwidth
    floor_flops = 4 * N_ROWS * N_FEATURES / flops1
    floor = max(floor_bw, floor_flops)
    torch = torch_or_none()
    candidates: dict[str, Callable[[], Any]] = {}
    for bs in (1000, 10_000):
        est = OnnxSGDRegressor(
            max_iter=1, tol=None, batch_size=bs, random_state=0,
            learning_rate=LearningRateSGD(eta0=ETA[1000], learning_rate="constant"),
        ).fit(X, y)
        candidates[f"ours partial_fit, batch {bs}"] = lambda est=est: est.partial_fit(X, y)
        noshuffle = OnnxSGDRegressor(
            max_iter=1, tol=None, batch_size=bs, shuffle=False,
            learning_rate=LearningRateSGD(eta0=ETA[1000], learning_rate="constant"),
            random_state=0,
        ).fit(X, y)
        candidates[f"ours partial_fit, batch {bs}, shuffle=False"] = (
            lambda est=noshuffle: est.partial_fit(X, y))
        loop = NumpyLinear(bs, ETA[1000])
        candidates[f"numpy loop, batch {bs}"] = lambda loop=loop: loop.epoch(X, y)
        if torch is not None:
            tl = TorchLoop(N_FEATURES, 1, bs, ETA[1000], threads=1)
            candidates[f"torch (1 thread), batch {bs}"] = lambda tl=tl: tl.epoch(X, y)
    times = interleaved(candidates, n_rounds=rounds(5), warmup=1)
    machine = Table(
        "Measured machine limits", ["quantity", "value"],
    )
    machine.add("memory bandwidth (256 MiB numpy copy, read + write)",
                f"{bandwidth / 1e9:.2f} GB/s")
    machine.add("float32 matmul 1024^3, 1 thread", f"{flops1 / 1e9:.1f} GFLOP/s")
    machine.add("float32 matmul 1024^3, 2 threads", f"{flops2 / 1e9:.1f} GFLOP/s")
    machine.add(f"epoch bytes (X + y, {N_ROWS // 1000}k x {N_FEATURES} float32)",
                f"{n_bytes / 1e6:.1f} MB")
    machine.add("floor from bandwidth: bytes / bandwidth", f"{floor_bw * 1e3:.2f} ms")
    machine.add("floor from FLOPs: 4·n·d / (1-thread matmul rate)",
                f"{floor_flops * 1e3:.3f} ms")
    table = Table(
        f"Epoch time against the floor ({floor * 1e3:.2f} ms), linear regression "
        f"{N_ROWS // 1000}k x {N_FEATURES}",
        ["contender", "ms/epoch", "x floor", "within 3x floor"],
    )
    for name, value in times.items():
        table.add(name, value * 1e3, f"{value / floor:.1f}x", "yes" if value <= 3 * floor else "NO")
    table.notes += [
        f"median of {rounds(5)} interleaved rounds after 1 warm-up.",
        "a shuffled epoch moves at least 3 x bytes(X) with a permuted copy (read X, write "
        "the buffer, read it back in batches): its own floor is about 3x the one above.",
    ]
    return [machine, table]


if __name__ == "__main__":
    print_tables(run())
