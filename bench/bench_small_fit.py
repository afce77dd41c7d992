"""Small fits at the defaults: ``OnnxSGDClassifier()`` against ``SGDClassifier()``.

Breast cancer (569 x 30, standardized), default parameters. Two cases, each timed side by
side in interleaved rounds (see :func:`_common.interleaved_runs`): one ``fit``, and a
``GridSearchCV`` over 4 values of ``alpha`` with 5 folds (20 fits plus the refit). The
goal of the issue is at most 3x scikit-learn's time in both. A cProfile of one of our
fits (cumulative time, top 15) shows where the time of a small fit goes.

    python bench/bench_small_fit.py [--rounds N] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats

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
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import SGDClassifier
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import OnnxSGDClassifier

ALPHAS = [1e-5, 1e-4, 1e-3, 1e-2]


def make_data() -> tuple[np.ndarray, np.ndarray]:
    """Breast cancer, standardized (what a user puts before an SGD model)."""
    X, y = load_breast_cancer(return_X_y=True)
    return StandardScaler().fit_transform(X), y


def profile_fit(X: np.ndarray, y: np.ndarray, top: int = 15) -> str:
    """cProfile of one ``OnnxSGDClassifier().fit``, sorted by cumulative time."""
    profiler = cProfile.Profile()
    profiler.enable()
    OnnxSGDClassifier().fit(X, y)
    profiler.disable()
    out = io.StringIO()
    pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def run(n_rounds: int | None = None) -> list[Table]:
    """The two cases as a table (``make bench`` runs it through ``run_all.py``)."""
    quiet_warnings()
    n_rounds = rounds(5) if n_rounds is None else n_rounds
    X, y = make_data()
    grid = {"alpha": ALPHAS}
    cases = {
        "fit, defaults": {
            "ours": lambda: OnnxSGDClassifier().fit(X, y),
            "sklearn": lambda: SGDClassifier().fit(X, y),
        },
        "GridSearchCV, 4 alphas x 5 folds": {
            "ours": lambda: GridSearchCV(OnnxSGDClassifier(), grid, cv=5).fit(X, y),
            "sklearn": lambda: GridSearchCV(SGDClassifier(), grid, cv=5).fit(X, y),
        },
    }
    table = Table(
        "Small fits: breast cancer (569 x 30, standardized), OnnxSGDClassifier() vs "
        "SGDClassifier()",
        ["case", "ours (ms)", "scikit-learn (ms)", "ours / scikit-learn"],
        notes=[f"{n_rounds} interleaved rounds after a warm-up; goal of the speed issue: "
               "at most 3x.",
               "Sessions, skl2onnx conversions and gradient graphs come from process-wide "
               "caches: a grid search converts and builds once per shape."],
    )
    for name, funcs in cases.items():
        runs = interleaved_runs(funcs, n_rounds=n_rounds, warmup=1)
        spread = ratio_spread(runs, "ours", "sklearn")
        table.add(name, np.median(runs["ours"]) * 1e3, np.median(runs["sklearn"]) * 1e3,
                  spread)
        table.headlines.append((f"small fit, {name}: ours / SGDClassifier", spread))
    return [table]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=rounds(5))
    parser.add_argument("--profile", action="store_true", help="also profile one fit")
    arguments = parser.parse_args()
    for key, value in machine_info().items():
        print(f"{key}: {value}")
    print_tables(run(arguments.rounds))
    if arguments.profile:
        print(profile_fit(*make_data()))
