"""Case 5: the floor of one epoch, and ours as a multiple of it.

An epoch must at least read X and y once: bytes(X + y) / memory bandwidth, the bandwidth
measured by a large numpy copy (bytes read + bytes written over the time). It must also do
the arithmetic: 2·n·d FLOPs forward and as many backward, over the float32 matmul
throughput of one thread (ours runs one intra-op thread). The floor is the larger of the
two; at these shapes it is the memory one by far.

At the default batch (32 rows) the floor is onnxruntime's instead: the last two tables
time, on the binary problem of case 6 (50k x 100 float32, hinge loss) and on its
regression (100k x 100, squared error), the linear training program alone (the whole
epoch in one call, its inputs ready) and a ``Scan`` whose step only gathers the batch's
rows and runs the two ``Gemm`` every linear step needs (scores, update), against
scikit-learn's epoch. Where the program alone is above half of scikit-learn's epoch, no
work on the Python around it can bring the estimator to the speed issue's 0.5x.
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
from sklearn.linear_model import SGDClassifier, SGDRegressor
from threadpoolctl import threadpool_limits

from skl_ortgrad import LearningRateSGD, OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.runtime.options import session_options
from skl_ortgrad.runtime.program_run import LinearProgramRun
from skl_ortgrad.training.programs import linear_program

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
    return [machine, table, *(step_floor_table(task) for task in STEP_TASKS)]


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


def program_epoch(loss: str, X: np.ndarray, y: np.ndarray, rows: int = STEP_ROWS,
                  epochs: int = 1) -> Callable[[], Any]:
    """``epochs`` epochs of the linear training program alone, as the defaults run them
    (``loss``, the L2 decay, batches of ``rows``): a callable running every batch of
    ``(X, y)``, its inputs ready (a fixed permutation per epoch, each short last batch
    padded with rows of step weight 0), one epoch in one onnxruntime call, several in
    calls of as many epochs as fit in ``LinearProgramRun.GROUP_STEPS`` steps, as a
    ``fit`` runs them. What no Python work around it can go under."""
    X = np.ascontiguousarray(X, dtype=np.float32)
    n_steps = -(-X.shape[0] // rows)
    rng = np.random.default_rng(0)
    order = np.zeros((epochs, n_steps * rows), dtype=np.int64)
    for epoch in range(epochs):
        order[epoch, :X.shape[0]] = rng.permutation(X.shape[0])
    order = order.ravel()
    labels = np.asarray(y, dtype=np.float32)[order]
    target = 2 * labels - 1 if loss == "hinge" else labels
    step_weight = np.full((epochs, n_steps * rows), 1e-4, dtype=np.float32)
    step_weight[:, X.shape[0]:] = 0
    step_weight = step_weight.ravel()
    program = linear_program(loss, X.shape[1], n_steps, rows, l2=True)
    per_row = {"rows": order, "target": target.astype(np.float32),
               "step_weight": (-step_weight * target if loss == "hinge" else step_weight)}
    table = program.scalar_table(np.full(epochs * n_steps, 1e-3),
                                 np.full(epochs * n_steps, 1 / rows), l2=1e-4, rows=rows)
    weights = [np.zeros((X.shape[1], 1), np.float32), np.zeros(1, np.float32)]
    per_call = n_steps if epochs == 1 else n_steps * max(
        1, LinearProgramRun.GROUP_STEPS // n_steps)
    calls = [program.feeds(X, per_row, table, weights, first,
                           min(per_call, epochs * n_steps - first))
             for first in range(0, epochs * n_steps, per_call)]
    session = InferenceSession(program.model.SerializeToString(), session_options(1),
                               providers=["CPUExecutionProvider"])
    return lambda: [session.run(None, feeds) for feeds in calls]


def gemm_floor_epoch(X: np.ndarray, rows: int = STEP_ROWS) -> Callable[[], Any]:
    """One epoch of :func:`_gemm_scan` over ``X``: a step that only gathers its rows and
    runs the two ``Gemm`` every linear step needs, in one call."""
    n_steps = X.shape[0] // rows
    order = np.random.default_rng(0).permutation(X.shape[0])[:n_steps * rows]
    session = InferenceSession(_gemm_scan(X.shape[1], rows).SerializeToString(),
                               session_options(1), providers=["CPUExecutionProvider"])
    feeds = {"w": np.zeros((1, X.shape[1]), np.float32), "X": X,
             "rows": order.reshape(n_steps, rows)}
    return lambda: session.run(None, feeds)


#: task -> (title, loss of the program, scikit-learn's estimator, ours, rows): the
#: estimators' defaults.
STEP_TASKS = {
    "binary": ("binary hinge", "hinge", SGDClassifier, OnnxSGDClassifier, STEP_N),
    "regression": ("regression, squared error", "squared_error", SGDRegressor,
                   OnnxSGDRegressor, N_ROWS),
}


def step_floor_table(task: str) -> Table:
    """One epoch at batch 32 of ``task`` (:data:`STEP_TASKS`): scikit-learn's, ours, the
    linear program alone, and a Scan of the step's two Gemm alone."""
    title, loss, theirs_cls, ours_cls, n_rows = STEP_TASKS[task]
    body = linear_program(loss, STEP_FEATURES, 1, STEP_ROWS, l2=True).model.graph.node[0]
    nodes = len(body.attribute[0].g.node)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((n_rows, STEP_FEATURES), dtype=np.float32)
    score = X @ rng.standard_normal(STEP_FEATURES).astype(np.float32)
    if task == "binary":
        y = (score > 0).astype(np.int64)
        extra = {"classes": [0, 1]}
    else:
        y = (score + rng.standard_normal(n_rows, dtype=np.float32)).astype(np.float32)
        extra = {}
    n_steps = -(-n_rows // STEP_ROWS)
    ours = ours_cls(random_state=0).partial_fit(X, y, **extra)
    theirs = theirs_cls(random_state=0).partial_fit(X, y, **extra)
    reference = f"scikit-learn {theirs_cls.__name__}().partial_fit"
    alone = f"the {loss} program alone ({nodes} nodes per step)"
    floor = "a Scan of Gather + 2 Gemm per step (3 nodes)"
    runs = interleaved_runs({
        reference: lambda: theirs.partial_fit(X, y),
        f"ours {ours_cls.__name__}().partial_fit": lambda: ours.partial_fit(X, y),
        alone: program_epoch(loss, X, y),
        floor: gemm_floor_epoch(X),
    }, n_rounds=rounds(5), warmup=1)
    table = Table(
        f"Batch 32 against onnxruntime's floor: {title}, {n_rows // 1000}k x "
        f"{STEP_FEATURES} float32, one epoch ({n_steps} steps)",
        ["contender", "ms/epoch", "µs/step", "/ scikit-learn"],
        notes=[f"median of {rounds(5)} interleaved rounds after 1 warm-up; the programs "
               "run the whole epoch in one call, their inputs ready (no Python, no "
               "shuffle, no input validation); the estimators at their defaults (L2 "
               "penalty: one node more)."],
    )
    for name, values in runs.items():
        median = float(np.median(values))
        table.add(name, median * 1e3, median / n_steps * 1e6,
                  ratio_spread(runs, name, reference))
    short = f"{title}, {n_rows // 1000}k x {STEP_FEATURES}"
    table.headlines.append((
        f"floor of a batch-32 step (Gather + 2 Gemm in a Scan), {short}: / "
        f"{theirs_cls.__name__} epoch", ratio_spread(runs, floor, reference)))
    table.headlines.append((
        f"the {loss} program alone at batch 32, {short}: / {theirs_cls.__name__} epoch",
        ratio_spread(runs, alone, reference)))
    return table


if __name__ == "__main__":
    print_tables(run())
