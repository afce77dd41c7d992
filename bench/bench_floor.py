"""Case 5: the floor of one epoch, and ours as a multiple of it.

An epoch must at least read X and y once: bytes(X + y) / memory bandwidth, the bandwidth
measured by a large numpy copy (bytes read + bytes written over the time). It must also do
the arithmetic: 2·n·d FLOPs forward and as many backward, over the float32 matmul
throughput of one thread (ours runs one intra-op thread). The floor is the larger of the
two; at these shapes it is the memory one by far.

At the default batch (32 rows) the floor is onnxruntime's instead: the last table times,
on the binary problem of case 6 (50k x 100 float32, hinge loss), the linear training
program alone (the whole epoch in one call, its inputs ready) and a ``Scan`` whose step
only gathers the batch's rows and runs the two ``Gemm`` every linear step needs (scores,
update), against scikit-learn's epoch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from _common import (
    Table,
    interleaved,
    interleaved_runs,
    print_tables,
    quiet_warnings,
    ratio_spread,
    rounds,
    torch_or_none,
)
from bench_linear import ETA, N_FEATURES, N_ROWS, NumpyLinear, TorchLoop, make_data
from onnx import TensorProto, helper
from onnxruntime import InferenceSession
from sklearn.linear_model import SGDClassifier
from threadpoolctl import threadpool_limits

from skl_ortgrad import LearningRateSGD, OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.runtime.options import session_options
from skl_ortgrad.training.program import linear_program

STEP_ROWS, STEP_FEATURES, STEP_N = 32, 100, 50_000


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
    return [machine, table, step_floor_table()]


def _gemm_scan(n_features: int, rows: int) -> Any:
    """A Scan whose step gathers its rows and runs the linear step's two Gemm."""
    def info(name: str, elem: int, shape: list[Any]) -> Any:
        return helper.make_tensor_value_info(name, elem, shape)

    f = TensorProto.FLOAT
    body = helper.make_graph(
        [helper.make_node("Gather", ["X", "rows_b"], ["batch"], axis=0),
         helper.make_node("Gemm", ["w_b", "batch"], ["score"], transB=1),
         helper.make_node("Gemm", ["score", "batch", "w_b"], ["w_new"], alpha=-1e-9)],
        "step", [info("w_b", f, [1, n_features]), info("rows_b", TensorProto.INT64, [rows])],
        [info("w_new", f, [1, n_features]), info("score", f, [1, rows])])
    scan = helper.make_node("Scan", ["w", "rows"], ["w_out", "scores"], body=body,
                            num_scan_inputs=1)
    graph = helper.make_graph(
        [scan], "floor", [info("w", f, [1, n_features]), info("X", f, [None, n_features]),
                          info("rows", TensorProto.INT64, [None, rows])],
        [info("w_out", f, [1, n_features]), info("scores", f, [None, 1, rows])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                             ir_version=10)


def step_floor_table() -> Table:
    """One epoch at batch 32 of the binary hinge problem: scikit-learn's, ours, the
    linear program alone, and a Scan of the step's two Gemm alone."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((STEP_N, STEP_FEATURES), dtype=np.float32)
    y = (X @ rng.standard_normal(STEP_FEATURES).astype(np.float32) > 0).astype(np.int64)
    n_steps = STEP_N // STEP_ROWS
    rows = rng.permutation(STEP_N)[:n_steps * STEP_ROWS].reshape(n_steps, STEP_ROWS)
    program = linear_program("hinge", STEP_FEATURES, n_steps, STEP_ROWS, l2=True)
    target = np.where(y[rows] > 0, 1.0, -1.0).astype(np.float32).reshape(-1)
    per_row = {"rows": rows.reshape(-1), "target": target,
               "step_weight": (-1e-4 * target).astype(np.float32)}
    table_ = program.scalar_table(np.full(n_steps, 1e-3), np.full(n_steps, 1 / STEP_ROWS),
                                  l2=1e-4, rows=STEP_ROWS)
    weights = [np.zeros((STEP_FEATURES, 1), np.float32), np.zeros(1, np.float32)]
    feeds = program.feeds(X, per_row, table_, weights, 0, n_steps)
    options = session_options(1)
    linear = InferenceSession(program.model.SerializeToString(), options,
                              providers=["CPUExecutionProvider"])
    floor = InferenceSession(_gemm_scan(STEP_FEATURES, STEP_ROWS).SerializeToString(),
                             options, providers=["CPUExecutionProvider"])
    floor_feeds = {"w": np.zeros((1, STEP_FEATURES), np.float32), "X": X, "rows": rows}
    ours = OnnxSGDClassifier(random_state=0).partial_fit(X, y, classes=[0, 1])
    theirs = SGDClassifier(random_state=0).partial_fit(X, y, classes=[0, 1])
    runs = interleaved_runs({
        "scikit-learn SGDClassifier().partial_fit": lambda: theirs.partial_fit(X, y),
        "ours OnnxSGDClassifier().partial_fit": lambda: ours.partial_fit(X, y),
        "the hinge program alone (8 nodes per step)": lambda: linear.run(None, feeds),
        "a Scan of Gather + 2 Gemm per step (3 nodes)": lambda: floor.run(None, floor_feeds),
    }, n_rounds=rounds(5), warmup=1)
    reference = "scikit-learn SGDClassifier().partial_fit"
    table = Table(
        f"Batch 32 against onnxruntime's floor: binary hinge, {STEP_N // 1000}k x "
        f"{STEP_FEATURES} float32, one epoch ({n_steps} steps)",
        ["contender", "ms/epoch", "µs/step", "/ scikit-learn"],
        notes=[f"median of {rounds(5)} interleaved rounds after 1 warm-up; the programs "
               "run the whole epoch in one call, their inputs ready (no Python, no "
               "shuffle, no input validation)."],
    )
    for name, values in runs.items():
        median = float(np.median(values))
        table.add(name, median * 1e3, median / n_steps * 1e6,
                  ratio_spread(runs, name, reference))
    table.headlines.append((
        "floor of a batch-32 step (Gather + 2 Gemm in a Scan), binary 50k x 100: / "
        "SGDClassifier epoch",
        ratio_spread(runs, "a Scan of Gather + 2 Gemm per step (3 nodes)", reference)))
    return table


if __name__ == "__main__":
    print_tables(run())
