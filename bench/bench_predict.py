"""Prediction: ``predict`` of OnnxSGDClassifier / OnnxSGDRegressor against scikit-learn's
SGDClassifier / SGDRegressor on the same data, float64 and float32.

Both models are fitted on the first rows of the data (a few epochs: the weights do not
change the cost of a prediction); each round then predicts the whole array with every
candidate in turn (:func:`_common.interleaved_runs`). A large input (200k x 50, where the
goal of the speed issue is at most 0.5x scikit-learn's time: one pass over ``X`` for the
cast and the checks, onnxruntime's threads by the size of the input) and a small one
(100 rows, where the fixed cost per call shows).

    python bench/bench_predict.py [--rounds N] [--rows N]
"""

from __future__ import annotations

import argparse

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
from sklearn.linear_model import SGDClassifier, SGDRegressor

from skl_ortgrad import OnnxSGDClassifier, OnnxSGDRegressor

N_ROWS, N_FEATURES, N_FIT = 200_000, 50, 5_000
SMALL_ROWS = 100
#: Calls timed together for the small input (one call takes tens of microseconds).
SMALL_REPEAT = 200


def make_data(n_rows: int = N_ROWS, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """X ~ N(0, 1) float64 and targets of a noisy linear model."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n_rows, N_FEATURES))
    y = X @ rng.standard_normal(N_FEATURES) + 0.1 * rng.standard_normal(n_rows)
    return X, y


def _models(X: np.ndarray, y: np.ndarray) -> dict[str, tuple[object, object]]:
    """kind -> (ours, scikit-learn's), fitted on the first rows."""
    labels = (y > 0).astype(np.int64)
    fit = slice(0, N_FIT)
    return {
        "classifier": (
            OnnxSGDClassifier(max_iter=5, tol=None, random_state=0).fit(X[fit], labels[fit]),
            SGDClassifier(max_iter=5, tol=None, random_state=0).fit(X[fit], labels[fit])),
        "regressor": (
            OnnxSGDRegressor(max_iter=5, tol=None, random_state=0).fit(X[fit], y[fit]),
            SGDRegressor(max_iter=5, tol=None, random_state=0).fit(X[fit], y[fit])),
    }


def _repeated(call: object, times: int) -> object:
    def run() -> None:
        for _ in range(times):
            call()
    return run


def run(n_rounds: int | None = None, n_rows: int = N_ROWS) -> list[Table]:
    """One table: every (model, input dtype, size) case, ours against scikit-learn's."""
    quiet_warnings()
    n_rounds = rounds(15, 2) if n_rounds is None else n_rounds
    X, y = make_data(n_rows)
    models = _models(X, y)
    table = Table(
        f"predict: OnnxSGD* against scikit-learn's SGD*, {N_FEATURES} features",
        ["model", "X", "rows", "ours (ms)", "scikit-learn (ms)", "ours / scikit-learn"],
        notes=[f"{n_rounds} interleaved rounds after a warm-up; the small input times "
               f"{SMALL_REPEAT} calls per round (ms: per call). Models fitted on the first "
               f"{N_FIT} rows (5 epochs); the goal of the speed issue: at most 0.5x on the "
               "large input, float64 and float32."],
    )
    for kind, (ours, theirs) in models.items():
        for dtype in (np.float64, np.float32):
            data = X.astype(dtype)
            small = data[:SMALL_ROWS].copy()
            runs = interleaved_runs({
                "ours": lambda m=ours, d=data: m.predict(d),
                "sklearn": lambda m=theirs, d=data: m.predict(d),
                "ours small": _repeated(lambda m=ours, d=small: m.predict(d), SMALL_REPEAT),
                "sklearn small": _repeated(lambda m=theirs, d=small: m.predict(d),
                                           SMALL_REPEAT),
            }, n_rounds=n_rounds, warmup=2)
            name = np.dtype(dtype).name
            for rows, suffix, per in ((n_rows, "", 1), (SMALL_ROWS, " small", SMALL_REPEAT)):
                spread = ratio_spread(runs, "ours" + suffix, "sklearn" + suffix)
                table.add(kind, name, rows, np.median(runs["ours" + suffix]) * 1e3 / per,
                          np.median(runs["sklearn" + suffix]) * 1e3 / per, spread)
                table.headlines.append(
                    (f"predict, {kind}, {rows} x {N_FEATURES} {name}: ours / scikit-learn",
                     spread))
    return [table]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=rounds(15, 2))
    parser.add_argument("--rows", type=int, default=N_ROWS)
    arguments = parser.parse_args()
    for key, value in machine_info().items():
        print(f"{key}: {value}")
    print_tables(run(arguments.rounds, arguments.rows))
