"""Case 4: fixed cost of one mini-batch step, in µs, ours against PyTorch and numpy;
then the anatomy of our step (what each piece of the optimizer's per-batch loop costs,
with the two-call TrainingAgent path it replaced for comparison) and the per-epoch costs.

The step cost is measured on a tiny problem (batch 1, 10 features): all of it is fixed
overhead. The anatomy times each piece of ``PerBatchEpoch._batches``
in isolation on the optimizer's own engine, weights and training objects (its public
``engine`` and ``penalized``).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import (
    Table,
    interleaved,
    print_tables,
    quiet_warnings,
    ratio,
    rounds,
    torch_or_none,
    verdict,
)
from bench_linear import NumpyLinear, TorchLoop
from onnxruntime.capi._pybind_state import OrtDevice, OrtValue, OrtValueVector

from skl_ortgrad import LearningRateSGD, OnnxSGDRegressor

N_STEP_ROWS, N_STEP_FEATURES = 2000, 10


def _data(n: int, d: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d), dtype=np.float32)
    y = (X @ rng.standard_normal(d).astype(np.float32)).astype(np.float32)
    return X, y


def _estimator(X: np.ndarray, y: np.ndarray, batch_size: int) -> OnnxSGDRegressor:
    return OnnxSGDRegressor(
        max_iter=1, tol=None, batch_size=batch_size,
        learning_rate=LearningRateSGD(learning_rate="constant", eta0=0.01),
        random_state=0
    ).fit(X, y)


def step_table(n_rounds: int) -> Table:
    """µs per step at batch 1 on 10 features (2000 steps per epoch)."""
    X, y = _data(N_STEP_ROWS, N_STEP_FEATURES)
    n = X.shape[0]
    est = _estimator(X, y, 1)
    opt = est.optimizer_
    opt.configure(warm_start=True, tol=None)
    torch = torch_or_none()

    def opt_fit(epochs: int) -> Callable[[], Any]:
        def run() -> None:
            opt.configure(max_iter=epochs)
            opt.fit(X, y.reshape((-1, 1)))
        return run

    numpy_loop = NumpyLinear(1, 0.01)
    candidates: dict[str, Callable[[], Any]] = {
        "opt.fit, 1 epoch": opt_fit(1),
        "opt.fit, 4 epochs": opt_fit(4),
        "opt.partial_fit": lambda: opt.partial_fit(X, y.reshape((-1, 1))),
        "est.partial_fit": lambda: est.partial_fit(X, y),
        "numpy": lambda: numpy_loop.epoch(X, y),
    }
    engine_loop = _engine_loop(opt, X[:1], y[:1])
    if engine_loop is not None:
        candidates["engine"] = per_steps(engine_loop, n)
    if torch is not None:
        loop = TorchLoop(N_STEP_FEATURES, 1, 1, 0.01, threads=1)
        candidates["torch"] = lambda: loop.epoch(X, y)
    times = interleaved(candidates, n_rounds=n_rounds, warmup=1)
    us = {name: value / n * 1e6 for name, value in times.items()}
    loop_us = (times["opt.fit, 4 epochs"] - times["opt.fit, 1 epoch"]) / (3 * n) * 1e6
    table = Table(
        f"Fixed cost per step: batch 1, {N_STEP_FEATURES} features, {n} steps per epoch "
        "(µs per step)",
        ["contender", "µs/step", "vs torch (1 thread)"],
    )
    rows = [
        ("ours: onnxruntime step only (fused forward+backward, prebuilt feeds, no update)",
         us.get("engine")),
        ("ours: optimizer epoch loop (opt.fit 4 epochs - 1 epoch, / 3 epochs)", loop_us),
        ("ours: optimizer.partial_fit (1 epoch incl. per-call set-up)", us["opt.partial_fit"]),
        ("ours: estimator.partial_fit (1 epoch incl. validation)", us["est.partial_fit"]),
        ("numpy hand-written loop (1 thread)", us["numpy"]),
        ("torch CPU loop (1 thread)", us.get("torch")),
    ]
    for name, value in rows:
        table.add(name, value, ratio(value, us.get("torch")))
    table.notes += [
        f"median of {n_rounds} interleaved rounds after 1 warm-up; the loop row is the "
        "difference of two medians (set-up cancels out).",
        f"target per-step fixed cost <= 15 µs: optimizer loop {loop_us:.1f} µs -> "
        f"{verdict(loop_us, 15)}; estimator {us['est.partial_fit']:.1f} µs -> "
        f"{verdict(us['est.partial_fit'], 15)}.",
    ]
    return table


def per_steps(func: Callable[[], Any], number: int) -> Callable[[], Any]:
    def run() -> None:
        for _ in range(number):
            func()
    return run


_CPU = OrtDevice(OrtDevice.cpu(), OrtDevice.default_memory(), 0)


def _feeds(arrays: list[np.ndarray]) -> OrtValueVector:
    vect = OrtValueVector()
    for array in arrays:
        vect.push_back(OrtValue.ortvalue_from_numpy(array, _CPU))
    return vect


def _engine_loop(opt: Any, xb: np.ndarray, yb: np.ndarray) -> Callable[[], Any] | None:
    """The optimizer's one-call training step on one fixed batch, or None."""
    try:
        step = opt.engine(False).step_function(xb.shape[0])
    except (AttributeError, TypeError, KeyError):
        return None
    keep = [np.ascontiguousarray(xb), np.ascontiguousarray(yb.reshape((-1, 1))),
            *opt.weights_, np.array(1.0 / xb.shape[0], dtype=np.float32)]
    feeds = _feeds(keep)

    def run() -> None:
        step.run(feeds)

    run.keep = keep  # type: ignore[attr-defined]
    return run


def _timeit(func: Callable[[], Any], number: int, repeat: int) -> float:
    """Median µs per call over ``repeat`` runs of ``number`` calls."""
    func()
    values = []
    for _ in range(repeat):
        begin = time.perf_counter()
        for _ in range(number):
            func()
        values.append((time.perf_counter() - begin) / number * 1e6)
    return float(np.median(values))


def _anatomy_shape(bs: int, d: int, n_rows: int, repeat: int) -> tuple[dict, dict] | None:
    """Timings of the step pieces and per-epoch costs at one shape."""
    pieces: dict[str, float] = {}
    per_epoch: dict[str, float] = {}
    X, y = _data(max(bs, 64), d)
    est = _estimator(X, y, bs)
    opt = est.optimizer_
    try:
        engine = opt.engine(False)
        static, dynamic = engine.step_function(bs), engine.step_function(None)
        function = engine.new_instance()
        rate, penalty = opt.learning_rate_, opt.learning_penalty_
        weights, state, penalized = opt.weights_, opt.lr_state_, opt.penalized()
    except (AttributeError, TypeError, KeyError):
        return None
    number = 2000 if bs < 1000 else 300
    xb = np.ascontiguousarray(X[:bs])
    yb = np.ascontiguousarray(y[:bs].reshape((-1, 1)))
    scale = np.array(1.0 / bs, dtype=np.float32)
    feeds = _feeds([xb, yb, *weights, scale])
    agent_feeds, grad_out = _feeds([xb, yb, *weights]), _feeds([scale])
    out_cache, grad_cache = OrtValueVector(), OrtValueVector()
    loss_buffer, gradients = static.outputs[0], static.outputs[1:]
    update = rate.stepper(weights, gradients, state)
    decay = penalty.stepper(penalized)
    t = [1]

    def agent() -> None:
        function.forward(agent_feeds, training=True, forward_outputs_cache=out_cache)
        function.backward(grad_out, backward_outputs_cache=grad_cache)

    def read_loss() -> None:
        loss = float(loss_buffer)
        if not math.isfinite(loss):
            raise RuntimeError("diverged")

    def full_step() -> None:
        # the body of PerBatchEpoch._batches' loop
        static.run(feeds)
        read_loss()
        update(0.01)
        decay(0.01)
        t[0] += bs

    row = {
        "onnxruntime step, static batch dimension (used)": lambda: static.run(feeds),
        "onnxruntime step, dynamic batch dimension (last partial batch)": lambda: (
            dynamic.run(feeds)),
        "before: TrainingAgent run_forward + run_backward": agent,
        "loss: float(buffer) + math.isfinite": read_loss,
        "rate.stepper step(eta) (SGD, in place, out=)": lambda: update(0.01),
        "penalty.stepper step(eta) (L2 decay)": lambda: decay(0.01),
        "whole step as PerBatchEpoch runs it": full_step,
    }
    for name, func in row.items():
        pieces[name] = _timeit(func, number, repeat)
    # per-epoch costs, at the benchmark's dataset sizes
    Xe, _ = _data(n_rows, d)
    perm = np.random.default_rng(0).permutation(n_rows)
    buf = np.empty_like(Xe)
    n_batches = -(-n_rows // bs)
    e_rep = max(3, repeat // 2)
    starts = np.arange(1, n_rows + 1, bs)
    per_epoch["rate.schedule(t of every batch) (once per epoch)"] = (
        _timeit(lambda: rate.schedule(starts).tolist(), 1, e_rep))
    per_epoch["np.take(X, perm, out=buf, mode='clip') (permuted copy)"] = (
        _timeit(lambda: np.take(Xe, perm, axis=0, out=buf, mode="clip"), 1, e_rep))
    per_epoch["rng.permutation(n)"] = (
        _timeit(lambda: np.random.RandomState(0).permutation(n_rows), 1, e_rep))
    per_epoch["feed vectors of all batches (once per data layout)"] = (
        _timeit(lambda: [_feeds([xb, yb, *weights, scale]) for _ in range(n_batches)],
                1, e_rep))
    per_epoch["np.copyto(buf, X) (plain copy, for scale)"] = (
        _timeit(lambda: np.copyto(buf, Xe), 1, e_rep))
    return pieces, per_epoch


def anatomy_tables(repeat: int) -> list[Table]:
    """µs per call of every piece of the per-batch loop, and ms per epoch of the rest."""
    shapes = [(1, 10, 2000), (32, 100, 100_000), (1000, 100, 100_000)]
    pieces: dict[str, list[float | None]] = {}
    per_epoch: dict[str, list[float | None]] = {}
    for bs, d, n_rows in shapes:
        measured = _anatomy_shape(bs, d, n_rows, repeat)
        if measured is None:
            return [Table("Step anatomy: package internals changed, not measured", ["-"])]
        for target, values in zip((pieces, per_epoch), measured, strict=True):
            for name, value in values.items():
                target.setdefault(name, []).append(value)
    heads = [f"batch {bs} x {d}" for bs, d, _ in shapes]
    t1 = Table("Anatomy of one step of ours (µs per call, in isolation)", ["piece", *heads])
    for name, values in pieces.items():
        t1.add(name, *values)
    parts = ["onnxruntime step, static batch dimension (used)",
             "loss: float(buffer) + math.isfinite", "rate.stepper step(eta) (SGD, in place, out=)",
             "penalty.stepper step(eta) (L2 decay)"]
    t1.add("sum of the pieces of _epoch (step .. penalty)",
           *[sum(pieces[k][i] for k in parts) for i in range(len(shapes))])
    t1.notes += [
        "the feed vectors (rows, weights, output gradient) are built once on the CPU "
        "and reused at every epoch and by later partial_fit calls with data of the same "
        "layout (MiniBatchLoader.refill).",
        "the TrainingAgent row is the two-call path the loop used before; the engine "
        "keeps it for OrtGradientForwardBackwardFunction.forward/backward.",
        "Python's loop, the interrupt check and the t_ update make the rest of the whole "
        "step.",
    ]
    t2 = Table(
        "Per-epoch costs of ours (ms per epoch; rows 2000/100k/100k as in cases 4 and 1)",
        ["piece", *heads],
    )
    for name, values in per_epoch.items():
        t2.add(name, *[v / 1000 for v in values])
    return [t1, t2]


def run() -> list[Table]:
    quiet_warnings()
    return [step_table(rounds(5)), *anatomy_tables(rounds(7, 3))]


if __name__ == "__main__":
    print_tables(run())
