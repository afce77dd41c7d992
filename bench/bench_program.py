"""k mini-batch SGD steps per onnxruntime call (skl_ortgrad.training.program) against
scikit-learn's per-sample SGD, 100k x 100 float32, batch 32, L2 alpha=1e-4.

By default: the real estimators (``OnnxSGDRegressor``, ``OnnxSGDClassifier`` binary and
10-class one-vs-rest, at their defaults) against ``SGDRegressor``/``SGDClassifier(
loss='log_loss')``, one epoch by ``fit(max_iter=1, tol=None)`` and by ``partial_fit``
on a fitted model, ours with the training program (the default), without it (one
call per batch, ``_PROGRAM_STEPS = 1``) and, for ``partial_fit``, with the generic
program where the default runs the lean one. With ``--programs``, the prototype's tables
(every timing interleaved in one process, 5 rounds after a warm-up round; ratios are
taken per round, then their median and range are shown):

1. per loss (squared error as ``SGDRegressor``, log loss as
   ``SGDClassifier(loss='log_loss')``): seconds per shuffled epoch of the lean program
   for k in {1, 8, 32, 64, 128}, unrolled and as a ``Scan``, and of a Scan over the
   whole epoch, next to scikit-learn (``fit`` with ``max_iter=1, tol=None``, and
   ``partial_fit`` on a fitted model) and today's per-batch path (the Onnx estimator's
   ``partial_fit``);
2. the designs at k=64: generic (the 'auto' backend's gradient graph + update nodes)
   against lean (hand-written linear step), each unrolled, as a ``Scan``, as a ``Loop``;
3. feeding: the shuffle's row gather alone (once per epoch into a dataset-sized buffer,
   or chunk by chunk into a buffer of k batches), and epochs fed four ways;
4. the time to write each program and to create its session, per k;
5. a sanity check that what is timed trains as well as scikit-learn.

Every epoch of ours does what the optimizer's epoch does: a permutation, the gather, the
schedule of the epoch (numpy), then one call per chunk of k batches, a finiteness check of
the chunk's losses and the copy of the new weights into the weight buffers; the last
chunk of an epoch is padded (unrolled) or shorter (Scan, Loop).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import (
    Table,
    interleaved_runs,
    machine_info,
    print_tables,
    quiet_warnings,
    ratio_spread,
    rounds,
)
from onnx import helper, numpy_helper
from onnxruntime import InferenceSession, RunOptions
from onnxruntime.capi._pybind_state import OrtDevice, OrtValue, OrtValueVector
from sklearn.linear_model import SGDClassifier, SGDRegressor

from skl_ortgrad import OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.gradient.backend import build_gradient, resolve_backend
from skl_ortgrad.objective.merge import merge_loss_graph
from skl_ortgrad.runtime.options import session_options, unoptimized_session_options
from skl_ortgrad.training import optimizers_partial
from skl_ortgrad.training.program import StepProgram, generic_program, lean_program
from skl_ortgrad.training.sgd_learning_loss import NegLogLearningLoss, SquareLearningLoss
from skl_ortgrad.training.sgd_learning_rate import LearningRateSGD

N_ROWS, N_FEATURES, BATCH, N_TEST = 100_000, 100, 32, 20_000
STEPS = (1, 8, 32, 64, 128)
ALPHA = 1e-4  # L2, scikit-learn's default penalty, in every contender
RATE = LearningRateSGD(eta0=0.01, learning_rate="invscaling", power_t=0.25)
CPU = OrtDevice(OrtDevice.cpu(), OrtDevice.default_memory(), 0)
LOSSES = {"squared_error": SquareLearningLoss(), "log": NegLogLearningLoss(eps=0.0)}


def make_data(loss: str, seed: int = 0) -> tuple[np.ndarray, ...]:
    """X ~ N(0, 1) float32; y = X w + noise (regression) or its sign as {0, 1}; then
    N_TEST held-out rows of the same distribution."""
    rng = np.random.default_rng(seed)
    n = N_ROWS + N_TEST
    X = rng.standard_normal((n, N_FEATURES), dtype=np.float32)
    score = X @ rng.standard_normal(N_FEATURES).astype(np.float32) + 0.5
    noise = 3.3 * rng.standard_normal(n).astype(np.float32)
    y = score + noise if loss == "squared_error" else (score + noise > 0).astype(np.float32)
    y = y.astype(np.float32)
    return X[:N_ROWS].copy(), y[:N_ROWS].copy(), X[N_ROWS:].copy(), y[N_ROWS:].copy()


def linear_model() -> Any:
    """``score = X @ coef + intercept`` in float32, zero weights."""
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "coef"], ["product"]),
         helper.make_node("Add", ["product", "intercept"], ["score"])],
        "linear",
        [helper.make_tensor_value_info("X", 1, [None, N_FEATURES])],
        [helper.make_tensor_value_info("score", 1, [None, 1])],
        [numpy_helper.from_array(np.zeros((N_FEATURES, 1), np.float32), "coef"),
         numpy_helper.from_array(np.zeros(1, np.float32), "intercept")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                             ir_version=10)


def generic(loss: str, steps: int, layout: str = "unrolled", gather: bool = False
            ) -> tuple[StepProgram, bool]:
    """The generic program on the 'auto' backend's static gradient graph, and whether its
    session must run unoptimized."""
    graph = LOSSES[loss].build_onnx_function(21, "cpu", weighted=False, dtype=np.float32)
    model = merge_loss_graph(linear_model(), graph, label_name="label", loss_name="loss")
    gradient = build_gradient(model, ["coef", "intercept"], backend="auto")
    fused = gradient.static(["X", "label"], BATCH)
    return generic_program(fused, ["coef", "intercept"], steps, BATCH, penalized=["coef"],
                           l2=True, layout=layout, gather=gather), gradient.unoptimized


def lean(loss: str, steps: int, layout: str = "unrolled", gather: bool = False
         ) -> tuple[StepProgram, bool]:
    return lean_program(loss, N_FEATURES, steps, BATCH, l2=True, layout=layout,
                        gather=gather), False


class ProgramEpochs:
    """Epochs of mini-batch SGD over (X, y), ``program.steps`` batches per call.

    ``gather`` says who copies the permuted rows: numpy once per epoch into a buffer of
    the dataset's size (``"epoch"``), numpy chunk by chunk into a buffer of k batches
    (``"chunk"``), the program itself, a ``Gather`` per step reading the rows by index
    from the whole dataset (``"graph"``, a program built with ``gather=True``), or
    nobody: no shuffling, the batches are views of X (``"none"``).

    Everything onnxruntime reads is bound once: the feed vector of every chunk points at
    the data (buffers, or the dataset and the permutation, shuffled in place), at the
    rows of the schedule table, refilled in place at every epoch, and at the weights;
    the fetch vector at the loss buffer and at buffers for the new weights, copied into
    the weights after a call whose losses are finite (so a diverging chunk never touches
    them).
    """

    def __init__(self, program: StepProgram, unoptimized: bool, X: np.ndarray,
                 y: np.ndarray, gather: str = "chunk", seed: int = 0) -> None:
        if (gather == "graph") != bool(program.dataset):
            raise ValueError("gather='graph' goes with a program built with gather=True.")
        options = session_options(1)
        if unoptimized:
            options = unoptimized_session_options(options)
        begin = time.perf_counter()
        self.session = InferenceSession(program.model.SerializeToString(), options,
                                         providers=["CPUExecutionProvider"])
        self.build_seconds = time.perf_counter() - begin
        self.program, self.X, self.y, self.gather = program, X, y.reshape(-1, 1), gather
        self.rng = np.random.default_rng(seed)
        self.t = 1
        k, b = program.steps, program.batch_rows
        self.n_batches = X.shape[0] // b  # whole batches only: 100k is 3125 x 32
        self.chunks = [(first, min(k, self.n_batches - first))
                       for first in range(0, self.n_batches, k)]
        self.order = np.arange(X.shape[0], dtype=np.int64)
        if gather == "graph":
            self.buffers = {"X": X, "label": self.y, "rows": self.order}
        elif gather == "none":
            self.buffers = {"X": X, "label": self.y}
        else:
            rows = self.n_batches * b if gather == "epoch" else k * b
            self.buffers = {"X": np.empty((rows, X.shape[1]), X.dtype),
                            "label": np.empty((rows, 1), X.dtype)}
        self.scales = np.full(self.n_batches, 1.0 / b)
        self.table = program.scalar_table(np.zeros(self.n_batches), self.scales, 0.0, ALPHA)
        self.weights = [np.zeros((X.shape[1], 1), X.dtype), np.zeros(1, X.dtype)]
        self.new_weights = [np.empty_like(w) for w in self.weights]
        self.losses = np.empty(self.n_batches + k, X.dtype)
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]
        self.run_options = RunOptions()
        self._keep: list[Any] = []  # OrtValue borrows numpy memory without a reference
        self.feeds = [self._vector(first, count) for first, count in self.chunks]
        self.fetches = [self._fetch(first, count) for first, count in self.chunks]

    def _vector(self, first: int, count: int) -> OrtValueVector:
        feeds = self.program.feeds(self.buffers, self.table, self.weights, first, count,
                                   data_first=0 if self.gather == "chunk" else first)
        vector = OrtValueVector()
        for name in self.input_names:
            self._keep.append(feeds[name])
            vector.push_back(OrtValue.ortvalue_from_numpy(feeds[name], CPU))
        return vector

    def _fetch(self, first: int, count: int) -> OrtValueVector:
        views = self.program.fetches(self.losses[first:first + self.program.steps],
                                     self.new_weights, count)
        vector = OrtValueVector()
        for name in self.output_names:
            self._keep.append(views[name])
            vector.push_back(OrtValue.ortvalue_from_numpy(views[name], CPU))
        return vector

    def epoch(self) -> float:
        """One shuffled epoch; returns its mean loss."""
        b = self.program.batch_rows
        if self.gather != "none":
            self.rng.shuffle(self.order)  # in place: the feeds of gather="graph" see it
        etas = RATE.schedule(self.t + b * np.arange(self.n_batches))
        for name, column in self.program.scalar_table(etas, self.scales, 0.0, ALPHA).items():
            np.copyto(self.table[name], column)
        if self.gather == "epoch":
            order = self.order[: self.n_batches * b]
            np.take(self.X, order, axis=0, out=self.buffers["X"], mode="clip")
            np.take(self.y, order, axis=0, out=self.buffers["label"], mode="clip")
        devices = [CPU] * len(self.output_names)
        for (first, count), feeds, fetches in zip(self.chunks, self.feeds, self.fetches,
                                                  strict=True):
            if self.gather == "chunk":
                rows = self.order[first * b:(first + count) * b]
                np.take(self.X, rows, axis=0, out=self.buffers["X"][:count * b], mode="clip")
                np.take(self.y, rows, axis=0, out=self.buffers["label"][:count * b],
                        mode="clip")
            self.session._sess.run_with_ortvaluevector(
                self.run_options, self.input_names, feeds, self.output_names, fetches,
                devices)
            if not np.isfinite(self.losses[first:first + count]).all():
                raise FloatingPointError(f"non-finite loss in batches {first}-{first + count}")
            for weight, new in zip(self.weights, self.new_weights, strict=True):
                np.copyto(weight, new)
            self.t += count * b
        return float(self.losses[: self.n_batches].sum(dtype=np.float64)) / (self.n_batches * b)


def _sklearn(loss: str) -> Callable[[], Any]:
    if loss == "squared_error":
        return lambda: SGDRegressor(max_iter=1, tol=None, alpha=ALPHA, random_state=0)
    return lambda: SGDClassifier(loss="log_loss", max_iter=1, tol=None, alpha=ALPHA,
                                 random_state=0)


def _today(loss: str) -> Any:
    """Today's estimator: one onnxruntime call per batch of 32, numpy updates."""
    if loss == "squared_error":
        return OnnxSGDRegressor(max_iter=1, tol=None, batch_size=BATCH,
                                learning_rate="constant", eta0=0.01, random_state=0)
    return OnnxSGDClassifier(loss="log_loss", max_iter=1, tol=None, batch_size=BATCH,
                             learning_rate="constant", eta0=0.01, random_state=0)


def epoch_table(loss: str, n_rounds: int) -> Table:
    """Per-epoch seconds of the lean program for every k (unrolled and Scan, numpy
    gathering chunk by chunk), and of a Scan over the whole epoch, against
    scikit-learn and today's estimator."""
    X, y, _, _ = make_data(loss)
    make_sklearn = _sklearn(loss)
    skl_warm = make_sklearn().fit(X, y)
    today = _today(loss).fit(X, y)
    candidates: dict[str, Callable[[], Any]] = {
        "sklearn fit(max_iter=1)": lambda: make_sklearn().fit(X, y),
        "sklearn partial_fit": lambda: skl_warm.partial_fit(X, y),
        "today: Onnx estimator partial_fit": lambda: today.partial_fit(X, y),
    }
    for layout in ("unrolled", "scan"):
        for k in STEPS:
            epochs = ProgramEpochs(*lean(loss, k, layout), X, y)
            epochs.epoch()
            candidates[f"lean {layout} k={k}"] = epochs.epoch
    whole = ProgramEpochs(*lean(loss, N_ROWS // BATCH, "scan"), X, y, gather="epoch")
    whole.epoch()
    candidates["lean scan, whole epoch in 1 call"] = whole.epoch
    runs = interleaved_runs(candidates, n_rounds=n_rounds, warmup=1)
    table = Table(
        f"{loss}: seconds per epoch, {N_ROWS // 1000}k x {N_FEATURES} float32, "
        f"batch {BATCH}, L2 alpha={ALPHA}",
        ["contender", "s/epoch (median)", "/ sklearn fit: median (range)",
         "/ sklearn partial_fit: median (range)"])
    for name, values in runs.items():
        table.add(name, float(np.median(values)),
                  ratio_spread(runs, name, "sklearn fit(max_iter=1)"),
                  ratio_spread(runs, name, "sklearn partial_fit"))
    table.notes += [
        f"{n_rounds} interleaved rounds after 1 warm-up round; target: ours <= 0.5 x "
        "sklearn.",
        "ours: shuffled epoch, rows gathered by numpy chunk by chunk (whole epoch: once).",
    ]
    return table


def build_table(loss: str) -> Table:
    """Seconds to write each program and to create its session, per k."""
    table = Table(f"{loss}: building a program (graph) and its session",
                  ["design", "k", "nodes", "graph (s)", "session (s)"])
    X, y, _, _ = make_data(loss)
    for make in (lean, generic):
        for layout in ("unrolled", "scan"):
            for k in STEPS:
                begin = time.perf_counter()
                program, unoptimized = make(loss, k, layout)
                graph_seconds = time.perf_counter() - begin
                epochs = ProgramEpochs(program, unoptimized, X, y)
                table.add(f"{make.__name__} {layout}", k, _count_nodes(program.model.graph),
                          graph_seconds, epochs.build_seconds)
    table.notes.append("generic: includes differentiating the model (build_gradient + "
                       f"static), '{resolve_backend('auto')}' backend.")
    return table


def design_table(loss: str, steps: int, n_rounds: int) -> Table:
    """Generic vs lean, unrolled vs Scan vs Loop, same feeding (gather per chunk)."""
    X, y, _, _ = make_data(loss)
    candidates: dict[str, Callable[[], Any]] = {}
    nodes: dict[str, int] = {}
    for make in (lean, generic):
        for layout in ("unrolled", "scan", "loop"):
            name = f"{make.__name__} {layout}"
            program, unoptimized = make(loss, steps, layout)
            epochs = ProgramEpochs(program, unoptimized, X, y)
            nodes[name] = _count_nodes(program.model.graph)
            epochs.epoch()
            candidates[name] = epochs.epoch
    runs = interleaved_runs(candidates, n_rounds=n_rounds, warmup=1)
    table = Table(
        f"{loss}: designs at k={steps} (generic on the '{resolve_backend('auto')}' "
        "backend), one shuffled epoch",
        ["design", "nodes", "s/epoch", "us/batch", "/ lean scan: median (range)"])
    n_batches = N_ROWS // BATCH
    for name, values in runs.items():
        median = float(np.median(values))
        table.add(name, nodes[name], median, 1e6 * median / n_batches,
                  ratio_spread(runs, name, "lean scan"))
    return table


def _count_nodes(graph: Any) -> int:
    """Nodes of a graph and of its subgraphs (a Scan's body counts once)."""
    return sum(1 + sum(_count_nodes(att.g) for att in node.attribute if att.g.node)
               for node in graph.node)


def feeding_table(steps: int, n_rounds: int) -> Table:
    """The row gather of a shuffled epoch: alone, and in epochs of the lean Scan program
    fed four ways."""
    X, y, _, _ = make_data("squared_error")
    order = np.random.default_rng(0).permutation(N_ROWS)
    whole = np.empty_like(X)
    chunk = np.empty((steps * BATCH, N_FEATURES), X.dtype)
    span = steps * BATCH

    def gather_epoch() -> None:
        np.take(X, order, axis=0, out=whole, mode="clip")

    def gather_chunks() -> None:
        for start in range(0, N_ROWS, span):
            rows = order[start:start + span]
            np.take(X, rows, axis=0, out=chunk[:len(rows)], mode="clip")

    candidates: dict[str, Callable[[], Any]] = {
        "gather X[perm] once per epoch (alone)": gather_epoch,
        f"gather X[perm] per chunk of {steps} batches (alone)": gather_chunks,
    }
    for gather, what in (("epoch", "numpy gathers once per epoch"),
                         ("chunk", "numpy gathers per chunk"),
                         ("graph", "the graph gathers (Gather per step)"),
                         ("none", "no shuffling, no gather")):
        program, _ = lean("squared_error", steps, "scan", gather=gather == "graph")
        epochs = ProgramEpochs(program, False, X, y, gather=gather)
        epochs.epoch()
        candidates[f"epoch, {what}"] = epochs.epoch
    runs = interleaved_runs(candidates, n_rounds=n_rounds, warmup=1)
    reference = "epoch, numpy gathers once per epoch"
    table = Table(f"Feeding a shuffled epoch (squared_error, lean scan, k={steps})",
                  ["what", "s (median)", "/ gather once per epoch: median (range)"])
    for name, values in runs.items():
        table.add(name, float(np.median(values)), ratio_spread(runs, name, reference))
    return table


def quality_table(n_epochs: int = 5) -> Table:
    """Sanity: what the timed programs train is a model as good as scikit-learn's."""
    table = Table("Sanity: training quality after a few epochs (lean scan, k=64)",
                  ["loss", "epochs", "ours mean loss (first -> last)", "ours score",
                   "sklearn score"])
    for loss in LOSSES:
        X, y, X_test, y_test = make_data(loss)
        program, _ = lean(loss, 64, "scan")
        epochs = ProgramEpochs(program, False, X, y)
        curve = [epochs.epoch() for _ in range(n_epochs)]
        score = (X_test @ epochs.weights[0] + epochs.weights[1]).ravel()
        model = _sklearn(loss)().set_params(max_iter=n_epochs).fit(X, y)
        if loss == "squared_error":
            ours = 1 - np.mean((y_test - score) ** 2) / np.var(y_test)
        else:
            ours = np.mean((score > 0) == (y_test > 0.5))
        table.add(loss, n_epochs, f"{curve[0]:.4g} -> {curve[-1]:.4g}", float(ours),
                  float(model.score(X_test, y_test)))
    table.notes.append("score: R² (regression), accuracy (classification), on held-out "
                       "data; sklearn with its defaults but alpha, max_iter.")
    return table


#: The estimators' tasks: (label, scikit-learn's estimator, ours), default batch size.
TASKS: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
    "regression (squared error)": (
        lambda: SGDRegressor(max_iter=1, tol=None, random_state=0),
        lambda: OnnxSGDRegressor(max_iter=1, tol=None, random_state=0)),
    "binary (log loss)": (
        lambda: SGDClassifier(loss="log_loss", max_iter=1, tol=None, random_state=0),
        lambda: OnnxSGDClassifier(loss="log_loss", max_iter=1, tol=None, random_state=0)),
    "10 classes (log loss, one-vs-rest)": (
        lambda: SGDClassifier(loss="log_loss", max_iter=1, tol=None, random_state=0),
        lambda: OnnxSGDClassifier(loss="log_loss", max_iter=1, tol=None, random_state=0)),
}


def task_data(task: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """100k x 100 float32; y linear + noise, its sign, or the argmax of 10 noisy
    linear scores."""
    if not task.startswith("10"):
        X, y, _, _ = make_data("squared_error" if task.startswith("regr") else "log", seed)
        return X, y
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N_ROWS, N_FEATURES), dtype=np.float32)
    scores = X @ rng.standard_normal((N_FEATURES, 10)).astype(np.float32)
    y = np.argmax(scores + 3.0 * rng.standard_normal(scores.shape), axis=1)
    return X, y


def per_batch(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` with the training program off: one onnxruntime call per batch (what
    the estimators did before it)."""
    def run() -> Any:
        steps = optimizers_partial._PROGRAM_STEPS
        optimizers_partial._PROGRAM_STEPS = 1
        try:
            return call()
        finally:
            optimizers_partial._PROGRAM_STEPS = steps

    return run


def generic_only(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` with the generic program wherever the lean one would run (the gradient
    graph plus updates: what the estimators ran before the lean program)."""
    def run() -> Any:
        optimizer = optimizers_partial.OrtGradientForwardBackwardOptimizer
        lean = optimizer.__dict__["_lean_loss"]
        optimizer._lean_loss = lambda self, *args: None
        try:
            return call()
        finally:
            optimizer._lean_loss = lean

    return run


def estimator_table(task: str, n_rounds: int) -> Table:
    """Seconds of one epoch of the real estimators at their default batch size (32),
    ``fit(max_iter=1, tol=None)`` and ``partial_fit`` on a fitted model, against
    scikit-learn's; ours with the training program (the default), per batch, and with
    the generic program where the lean one runs."""
    X, y = task_data(task)
    make_sklearn, make_ours = TASKS[task]
    classes = {"classes": np.unique(y)} if "class" in task or "binary" in task else {}
    skl_warm, ours_warm = make_sklearn().fit(X, y), make_ours().fit(X, y)
    # Programs are built once per estimator: this one's is the generic program.
    ours_generic = generic_only(lambda: make_ours().fit(X, y))()
    candidates: dict[str, Callable[[], Any]] = {
        "sklearn fit": lambda: make_sklearn().fit(X, y),
        "ours fit": lambda: make_ours().fit(X, y),
        "ours fit, per batch": per_batch(lambda: make_ours().fit(X, y)),
        "sklearn partial_fit": lambda: skl_warm.partial_fit(X, y, **classes),
        "ours partial_fit": lambda: ours_warm.partial_fit(X, y, **classes),
        "ours partial_fit, per batch": per_batch(
            lambda: ours_warm.partial_fit(X, y, **classes)),
        "ours partial_fit, generic program": generic_only(
            lambda: ours_generic.partial_fit(X, y, **classes)),
    }
    runs = interleaved_runs(candidates, n_rounds=n_rounds, warmup=1)
    table = Table(
        f"{task}: seconds per epoch, {N_ROWS // 1000}k x {N_FEATURES} float32, "
        "default batch size, defaults (L2 alpha=1e-4, 'invscaling'/'optimal')",
        ["contender", "s (median)", "/ sklearn, same call: median (range)",
         "/ ours per batch, same call: median (range)"])
    for name, values in runs.items():
        call = "partial_fit" if "partial" in name else "fit"
        mine = name.startswith("ours") and not name.endswith("per batch")
        table.add(name, float(np.median(values)), ratio_spread(runs, name, f"sklearn {call}"),
                  ratio_spread(runs, name, f"ours {call}, per batch") if mine else "")
    table.notes.append(f"{n_rounds} interleaved rounds after 1 warm-up round.")
    return table


def run() -> list[Table]:
    quiet_warnings()
    n_rounds = rounds(5)
    if "--programs" not in sys.argv:
        return [estimator_table(task, n_rounds) for task in TASKS]
    tables = [epoch_table(loss, n_rounds) for loss in LOSSES]
    tables += [design_table(loss, 64, n_rounds) for loss in LOSSES]
    tables.append(feeding_table(64, n_rounds))
    tables += [build_table(loss) for loss in LOSSES]
    tables.append(quality_table())
    return tables


if __name__ == "__main__":
    info = machine_info()
    print(f"Python {sys.version.split()[0]}, onnxruntime {info['onnxruntime (module)']}, "
          f"scikit-learn {info['scikit-learn']}, CPU {info['CPU']} "
          f"({info['cores (os.cpu_count)']} cores)\n")
    print_tables(run())
