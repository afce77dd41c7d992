"""Small fits at the defaults: ``OnnxSGDClassifier()`` against ``SGDClassifier()``, and
the time to reach scikit-learn's test score.

Breast cancer (569 x 30, standardized), default parameters. Two cases, each timed side by
side in interleaved rounds (see :func:`_common.interleaved_runs`): ``fit`` (each round
times ``REPEAT`` fits: one fit of a few ms timed alone moved the ratio between 1.6x and
2.7x from run to run), and a
``GridSearchCV`` over 4 values of ``alpha`` with 5 folds (20 fits plus the refit). The
speed issue (30) keeps both at most 2x scikit-learn's time. A cProfile of one of our
fits (cumulative time, top 15) shows where the time of a small fit goes.

Time to score: on diabetes (``SGDRegressor``, test R²) and breast cancer
(``SGDClassifier``, test accuracy), 25% test splits of seeds 0-4, standardized features,
scikit-learn's estimator at its defaults gives a test score and a time; ours, at its
defaults but ``max_iter=m, tol=None``, runs the fewest epochs ``m`` (up to 50) that reach
that score, timed side by side with scikit-learn's fit. The issue's goal: no slower. The
last column times onnxruntime's part alone: the linear training program of those epochs,
inputs ready.

Passive-aggressive fits: ``learning_rate='pa1'`` (one row a step) on breast cancer,
digits (10 classes) and diabetes (epsilon-insensitive), 20 epochs (``tol=None``), and on
10,000 text-like documents hashed to 2^18 columns (sparse, 5 epochs), time per row and
epoch against scikit-learn's.

    python bench/bench_small_fit.py [--rounds N] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
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
from bench_floor import program_epoch
from bench_sparse import text_like
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits
from sklearn.linear_model import SGDClassifier, SGDRegressor
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.gradient import training_available

ALPHAS = [1e-5, 1e-4, 1e-3, 1e-2]
#: Fits timed together in each round of the single-fit cases (a fit takes 1-4 ms).
REPEAT = 20
SEEDS = range(5)
MAX_EPOCHS = 50
#: dataset -> (loader, scikit-learn's estimator, ours, the loss ours trains at defaults)
SCORED = {
    "diabetes (R²)": (load_diabetes, SGDRegressor, OnnxSGDRegressor, "squared_error"),
    "breast cancer (accuracy)": (load_breast_cancer, SGDClassifier, OnnxSGDClassifier,
                                 "hinge"),
}


def _standardized(load: Callable[..., Any]) -> Callable[[], tuple[np.ndarray, np.ndarray]]:
    def data() -> tuple[np.ndarray, np.ndarray]:
        X, y = load(return_X_y=True)
        return StandardScaler().fit_transform(X), y
    return data


def _text_like() -> tuple[Any, np.ndarray]:
    return text_like(10_000)


#: dataset -> (data, scikit-learn's estimator, ours, loss, epochs) of the
#: passive-aggressive fits
PASSIVE_AGGRESSIVE = {
    "breast cancer": (_standardized(load_breast_cancer), SGDClassifier, OnnxSGDClassifier,
                      "hinge", 20),
    "digits, 10 classes": (_standardized(load_digits), SGDClassifier, OnnxSGDClassifier,
                           "hinge", 20),
    "diabetes": (_standardized(load_diabetes), SGDRegressor, OnnxSGDRegressor,
                 "epsilon_insensitive", 20),
    "text-like sparse, 2^18 columns": (_text_like, SGDClassifier, OnnxSGDClassifier,
                                       "hinge", 5),
}


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


def _split(load: Any, seed: int) -> tuple[np.ndarray, ...]:
    X, y = load(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.25,
                                                        random_state=seed)
    scaler = StandardScaler().fit(X_train)
    return scaler.transform(X_train), scaler.transform(X_test), y_train, y_test


def repeated(call: Callable[[], Any], times: int = REPEAT) -> Callable[[], None]:
    """``call`` ``times`` times in a row: one timing of several short calls."""
    def run() -> None:
        for _ in range(times):
            call()
    return run


def time_to_score(n_rounds: int) -> Table:
    """Per dataset and seed: scikit-learn's default fit (score, ms) against ours with
    the fewest epochs reaching that score."""
    table = Table(
        "Time to scikit-learn's test score (defaults; ours: the fewest epochs reaching it)",
        ["dataset", "seed", "scikit-learn score", "ms", "ours: epochs", "score", "ms",
         "ours / scikit-learn", "program alone / scikit-learn"],
        notes=[f"{n_rounds} interleaved rounds of {REPEAT} fits each after a warm-up "
               "(ms: per fit); ours runs "
               f"max_iter=m, tol=None, m the fewest epochs (up to {MAX_EPOCHS}) whose test "
               "score is at least scikit-learn's; goal of the speed issue: at most 1x.",
               "program alone: the linear training program's calls for those epochs, "
               "as many epochs per call as a fit runs together, inputs ready "
               "(bench_floor.program_epoch): onnxruntime's part of our time, which no "
               "Python work around it removes."],
    )
    for name, (load, theirs, ours, loss) in SCORED.items():
        ratios, floors = [], []
        for seed in SEEDS:
            X_train, X_test, y_train, y_test = _split(load, seed)
            goal = theirs(random_state=seed).fit(X_train, y_train).score(X_test, y_test)
            for epochs in range(1, MAX_EPOCHS + 1):
                model = ours(max_iter=epochs, tol=None, random_state=seed)
                score = model.fit(X_train, y_train).score(X_test, y_test)
                if score >= goal:
                    break
            else:
                table.add(name, seed, goal, "", f"> {MAX_EPOCHS}", score, "", "not reached",
                          "")
                continue
            program = program_epoch(loss, X_train, y_train, epochs=epochs)
            runs = interleaved_runs({
                "ours": repeated(lambda m=ours, e=epochs, s=seed, X=X_train, y=y_train: m(
                    max_iter=e, tol=None, random_state=s).fit(X, y)),
                "sklearn": repeated(lambda m=theirs, s=seed, X=X_train, y=y_train: m(
                    random_state=s).fit(X, y)),
                "program": repeated(program),
            }, n_rounds=n_rounds, warmup=1)
            ratios.append(np.array(runs["ours"]) / np.array(runs["sklearn"]))
            floors.append(np.array(runs["program"]) / np.array(runs["sklearn"]))
            table.add(name, seed, goal, np.median(runs["sklearn"]) * 1e3 / REPEAT, epochs,
                      score, np.median(runs["ours"]) * 1e3 / REPEAT,
                      ratio_spread(runs, "ours", "sklearn"),
                      ratio_spread(runs, "program", "sklearn"))
        for what, values in (("ours", ratios), ("the program alone", floors)):
            if values:
                every = np.concatenate(values)
                table.headlines.append((
                    f"time to scikit-learn's test score, {name}: {what} / scikit-learn",
                    f"{np.median(every):.2f}x ({every.min():.2f}-{every.max():.2f}x over "
                    f"{len(values)} seeds x {n_rounds} rounds)"))
    return table


def passive_aggressive(n_rounds: int) -> Table:
    """``learning_rate='pa1'`` fits (``tol=None``), ours against scikit-learn's, per
    dataset."""
    table = Table(
        "Passive-aggressive fits: learning_rate='pa1', tol=None (dense features standardized)",
        ["dataset", "rows x features", "epochs", "ours (µs a row)",
         "scikit-learn (µs a row)", "ours / scikit-learn"],
        notes=[f"{n_rounds} interleaved rounds of one fit each after a warm-up; µs per row "
               "and epoch. One row a step: ours runs the linear program's "
               "passive-aggressive form, up to 1,024 rows a call."],
    )
    for name, (data, theirs, ours, loss, epochs) in PASSIVE_AGGRESSIVE.items():
        X, y = data()
        if theirs is SGDRegressor:
            y = (y - y.mean()) / y.std()
        params = {"learning_rate": "pa1", "loss": loss, "max_iter": epochs, "tol": None,
                  "random_state": 0}
        runs = interleaved_runs({
            "ours": lambda m=ours, X=X, y=y, p=params: m(**p).fit(X, y),
            "sklearn": lambda m=theirs, X=X, y=y, p=params: m(**p).fit(X, y),
        }, n_rounds=n_rounds, warmup=1)
        steps = epochs * X.shape[0] / 1e6
        spread = ratio_spread(runs, "ours", "sklearn")
        table.add(name, f"{X.shape[0]} x {X.shape[1]}", epochs, np.median(runs["ours"]) / steps,
                  np.median(runs["sklearn"]) / steps, spread)
        table.headlines.append((f"passive-aggressive fit (pa1), {name}: ours / scikit-learn",
                                spread))
    return table


def run(n_rounds: int | None = None) -> list[Table]:
    """The two cases as a table, with each gradient backend, then the time to score
    (``make bench`` runs it through ``run_all.py``)."""
    quiet_warnings()
    n_rounds = rounds(5) if n_rounds is None else n_rounds
    X, y = make_data()
    grid = {"alpha": ALPHAS}
    backends = ["onnx"] + (["onnxruntime-training"] if training_available() else [])
    # case -> (fits per timing, candidates)
    cases = {
        "fit, defaults": (REPEAT, {
            **{backend: repeated(lambda backend=backend: OnnxSGDClassifier(
                backend=backend).fit(X, y)) for backend in backends},
            "sklearn": repeated(lambda: SGDClassifier().fit(X, y)),
        }),
        "GridSearchCV, 4 alphas x 5 folds": (1, {
            **{backend: (lambda backend=backend: GridSearchCV(
                OnnxSGDClassifier(backend=backend), grid, cv=5).fit(X, y))
               for backend in backends},
            "sklearn": lambda: GridSearchCV(SGDClassifier(), grid, cv=5).fit(X, y),
        }),
    }
    table = Table(
        "Small fits: breast cancer (569 x 30, standardized), OnnxSGDClassifier() vs "
        "SGDClassifier()",
        ["case", "backend", "ours (ms)", "scikit-learn (ms)", "ours / scikit-learn"],
        notes=[f"{n_rounds} interleaved rounds after a warm-up, each timing {REPEAT} fits "
               "(one grid search); ms per fit (per grid search); goal of the speed issue: "
               "at most 2x.",
               "Sessions, skl2onnx conversions and gradient graphs come from process-wide "
               "caches: a grid search converts and builds once per shape. At the defaults "
               "the linear program trains, which no gradient backend builds: the backends "
               "differ by noise only."],
    )
    for name, (repeat, funcs) in cases.items():
        runs = interleaved_runs(funcs, n_rounds=n_rounds, warmup=1)
        for backend in backends:
            spread = ratio_spread(runs, backend, "sklearn")
            table.add(name, backend, np.median(runs[backend]) * 1e3 / repeat,
                      np.median(runs["sklearn"]) * 1e3 / repeat, spread)
            table.headlines.append(
                (f"small fit, {name}, {backend} backend: ours / SGDClassifier", spread))
    return [table, time_to_score(n_rounds), passive_aggressive(n_rounds)]


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
