"""Case 6: the estimators at their defaults, with both gradient backends, on both runtimes.

Seconds per epoch (estimator ``partial_fit``, defaults, float32) with
``backend="onnxruntime-training"`` and ``backend="onnx"`` and scikit-learn's counterpart
at its defaults, interleaved in one process, on the four problems of the speed issue's
criteria (regression, binary and 10-class classification, an MLP), on the regression
with float64 input (numpy's default: scikit-learn trains on it as is, ours casts to
float32 the rows each training call reads), and on sparse problems, binary and 10 classes (CSR,
1% of the values stored: both work on the stored values, scikit-learn's per sample, ours
per batch of 32); then the time to build
the training
program (gradient graph + sessions, a 1-row ``fit``). The training backend exists only on
Python <= 3.12 (onnxruntime-training-cpu 1.19.2): when the Python 3.13 environment of
``make test`` (``.venv313``, plain onnxruntime) is there, the same measurements run in it
too, in a subprocess, and its table follows (its ratios are measured in that process).

Usage: ``python bench/bench_backends.py`` (``--json`` prints the raw numbers, which is how
the 3.11 run reads the 3.13 one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import onnxruntime
import scipy.sparse as sp
from _common import (
    QUICK,
    Table,
    interleaved,
    interleaved_runs,
    print_tables,
    quiet_warnings,
    ratio,
    ratio_spread,
    rounds,
)
from sklearn.linear_model import SGDClassifier, SGDRegressor
from sklearn.neural_network import MLPClassifier
from threadpoolctl import threadpool_limits

from skl_ortgrad import OnnxMLPClassifier, OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.gradient import training_available

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY313 = os.path.join(ROOT, ".venv313", "bin", "python")


def _data(n: int, d: int, kind: str, layout: str = "float32",
          seed: int = 0) -> tuple[Any, np.ndarray]:
    """``X`` (``layout``: dense float32 or float64, or ``"sparse"``: float64 CSR with 1% of
    its values stored) and labels of ``kind`` from a random linear score."""
    rng = np.random.default_rng(seed)
    if layout == "sparse":
        X = sp.random(n, d, density=0.01, format="csr", random_state=seed, dtype=np.float64)
    else:
        X = rng.standard_normal((n, d)).astype(layout)
    score = X @ rng.standard_normal(d).astype(X.dtype)
    if kind == "regression":
        return X, score
    if kind == "binary":
        return X, (score > 0).astype(np.int64)
    return X, np.digitize(score, np.quantile(score, np.linspace(0, 1, 11)[1:-1]))


# name -> (rows, features, kind, layout of X (_data), ours(backend), scikit-learn's
# counterpart): the speed issue's criteria, both sides at their defaults (batch 32 for
# ours, hinge loss and 'optimal' rate for the classifiers, squared error and 'invscaling'
# for the regressors), then the regression on float64 input and sparse problems.
PROBLEMS: dict[str, tuple[int, int, str, str, Callable[[str], Any], Callable[[], Any]]] = {
    "SGDRegressor defaults, 100k x 100": (
        100_000, 100, "regression", "float32",
        lambda b: OnnxSGDRegressor(backend=b, random_state=0),
        lambda: SGDRegressor(random_state=0)),
    "SGDClassifier defaults (hinge), binary, 100k x 100": (
        100_000, 100, "binary", "float32",
        lambda b: OnnxSGDClassifier(backend=b, random_state=0),
        lambda: SGDClassifier(random_state=0)),
    "SGDClassifier defaults (hinge), 10 classes, 50k x 100": (
        50_000, 100, "classes", "float32",
        lambda b: OnnxSGDClassifier(backend=b, random_state=0),
        lambda: SGDClassifier(random_state=0)),
    "MLPClassifier 100-128-10 defaults, 20k rows": (
        20_000, 100, "classes", "float32",
        lambda b: OnnxMLPClassifier(hidden_layer_sizes=(128,), backend=b, random_state=0),
        lambda: MLPClassifier(hidden_layer_sizes=(128,), random_state=0)),
    "SGDRegressor defaults, 100k x 100, float64 input": (
        100_000, 100, "regression", "float64",
        lambda b: OnnxSGDRegressor(backend=b, random_state=0),
        lambda: SGDRegressor(random_state=0)),
    "SGDClassifier defaults (hinge), binary, sparse 20k x 1,000 (1% stored)": (
        20_000, 1_000, "binary", "sparse",
        lambda b: OnnxSGDClassifier(backend=b, random_state=0),
        lambda: SGDClassifier(random_state=0)),
    "SGDClassifier defaults (hinge), 10 classes, sparse 20k x 1,000 (1% stored)": (
        20_000, 1_000, "classes", "sparse",
        lambda b: OnnxSGDClassifier(backend=b, random_state=0),
        lambda: SGDClassifier(random_state=0)),
}


def _epoch_times(problem: str, backends: list[str], n_rounds: int) -> dict[str, list[float]]:
    """Seconds per ``partial_fit`` epoch, every round, of ours with each backend and of
    scikit-learn."""
    n, d, kind, layout, ours, theirs = PROBLEMS[problem]
    X, y = _data(n // 5 if QUICK else n, d, kind, layout)
    first = {"classes": np.unique(y)} if kind != "regression" else {}
    models = {backend: ours(backend) for backend in backends}
    models["scikit-learn"] = theirs()
    for model in models.values():
        model.partial_fit(X, y, **first)
    candidates = {name: (lambda model=model: model.partial_fit(X, y))
                  for name, model in models.items()}
    with threadpool_limits(1):
        return interleaved_runs(candidates, n_rounds=n_rounds, warmup=1)


def measure(n_rounds: int) -> dict[str, Any]:
    """Seconds per epoch and build times of every available backend, and scikit-learn's."""
    quiet_warnings()
    backends = ["onnx"] + (["onnxruntime-training"] if training_available() else [])
    epochs = {problem: _epoch_times(problem, backends, n_rounds) for problem in PROBLEMS}
    X, y = _data(64, 20, "classes")

    def build(backend: str) -> None:
        OnnxMLPClassifier(hidden_layer_sizes=(16,), backend=backend, max_iter=1,
                          batch_size=64).fit(X, y)

    builds = interleaved({backend: (lambda backend=backend: build(backend))
                          for backend in backends}, n_rounds=n_rounds, warmup=1)
    return {
        "python": sys.version.split()[0],
        "onnxruntime": onnxruntime.__version__,
        "epochs": epochs,
        "builds": builds,
    }


def tables(result: dict[str, Any]) -> list[Table]:
    """The per-epoch and build tables of one :func:`measure` result."""
    where = f"Python {result['python']}, onnxruntime {result['onnxruntime']}"
    both = all("onnxruntime-training" in times for times in result["epochs"].values())
    columns = ["problem", "onnx s/epoch"]
    if both:
        columns += ["onnxruntime-training s/epoch", "onnx / training"]
    columns += ["scikit-learn s/epoch", "onnx / scikit-learn"]
    if both:
        columns.append("training / scikit-learn")
    n_rounds = len(next(iter(result["epochs"].values()))["onnx"])
    epoch_table = Table(
        f"Gradient backends, seconds per epoch ({where})", columns,
        ["estimator partial_fit (one epoch) with its defaults, dense float32 input unless "
         "the problem says otherwise, one onnxruntime and BLAS thread everywhere (ours "
         "stages the linear program's rows on a helper thread where a core is free: "
         "runtime/staging.py); median of the epochs of "
         f"{n_rounds} interleaved rounds (one epoch of each contender per round) in one "
         "process; goal of the speed issue: at most 0.5x scikit-learn (the dense float32 "
         "problems)"],
    )
    for name, runs in result["epochs"].items():
        times = {key: float(np.median(values)) for key, values in runs.items()}
        row: list[Any] = [name, times["onnx"]]
        if both:
            row += [times["onnxruntime-training"], ratio(times["onnx"],
                                                         times["onnxruntime-training"])]
        row += [times["scikit-learn"], ratio(times["onnx"], times["scikit-learn"])]
        if both:
            row.append(ratio(times["onnxruntime-training"], times["scikit-learn"]))
        for backend in ("onnx", "onnxruntime-training")[:2 if both else 1]:
            epoch_table.headlines.append((
                f"{name}, per epoch, Python {result['python']}, onnxruntime "
                f"{result['onnxruntime']}: {backend} backend / scikit-learn partial_fit",
                ratio_spread(runs, backend, "scikit-learn")))
        epoch_table.add(*row)
    build_table = Table(
        f"Building the training program ({where})", ["backend", "ms per fit of 1 epoch"],
        ["OnnxMLPClassifier(16 hidden) fit on 64 rows, 1 epoch: skl2onnx conversion, "
         "gradient graph, sessions; the epoch itself is a few µs"],
    )
    for backend, seconds in result["builds"].items():
        build_table.add(backend, seconds * 1e3)
    return [epoch_table, build_table]


def _other_python() -> dict[str, Any] | None:
    """:func:`measure` in the Python 3.13 environment, when it exists and is not this one."""
    if not os.path.exists(PY313) or os.path.realpath(sys.executable) == os.path.realpath(PY313):
        return None
    output = subprocess.run(
        [PY313, os.path.abspath(__file__), "--json"], check=True, capture_output=True,
        text=True, env={**os.environ, "BENCH_QUICK": "1" if QUICK else "0"},
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def run() -> list[Table]:
    n_rounds = rounds(5)
    result = tables(measure(n_rounds))
    other = _other_python()
    if other is not None:
        result += tables(other)
    return result


if __name__ == "__main__":
    if "--json" in sys.argv:
        print(json.dumps(measure(rounds(5))))
    else:
        print_tables(run())
