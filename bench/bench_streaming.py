"""Case 9: streaming float64 blocks through ``partial_fit``.

A stream of blocks of 100,000 rows x 50 features in float64 (numpy's default, what a
reader of files or a database hands over), each block new data from the same
distribution: ``X ~ N(0, 1)``, a regression target :math:`y = Xw + 0.5\\,\\varepsilon`
and a class label :math:`[Xw + 0.5\\,\\varepsilon > 0]`. One ``partial_fit`` per block,
at the defaults but the loss: ``OnnxSGDClassifier(loss="log_loss")`` against
``SGDClassifier(loss="log_loss")``, and ``OnnxSGDRegressor()`` against ``SGDRegressor()``
(squared error). scikit-learn trains on float64 as it is; ours computes in float32 and
reads the float64 rows as given (the linear program's calls cast the rows they read,
which a helper thread gathers and casts while the call before runs where a core is
free). The first block (with ``classes``) builds the estimators; then every contender
receives the same blocks in the same order, in interleaved rounds, one onnxruntime and
BLAS thread everywhere. Ours runs twice: as it runs (the helper on the second core), and
held to one core (the calling thread's CPU affinity set to one core for its calls: no
core is free to the call, whose program reads its rows by index). ``N_BLOCKS`` distinct
blocks are drawn and sent in turn, so that no call sees the array of the call before.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable
from typing import Any

import numpy as np
from _common import (
    QUICK,
    Table,
    interleaved_runs,
    print_tables,
    quiet_warnings,
    ratio_spread,
    rounds,
    verdict,
)
from sklearn.linear_model import SGDClassifier, SGDRegressor
from threadpoolctl import threadpool_limits

from skl_ortgrad import OnnxSGDClassifier, OnnxSGDRegressor

BLOCK_ROWS = 20_000 if QUICK else 100_000
N_FEATURES, N_BLOCKS, GOAL = 50, 3, 0.5

# problem -> (kind of target, ours, scikit-learn's counterpart)
PROBLEMS: dict[str, tuple[str, Callable[[], Any], Callable[[], Any]]] = {
    "classifier, log_loss": (
        "label", lambda: OnnxSGDClassifier(loss="log_loss", random_state=0),
        lambda: SGDClassifier(loss="log_loss", random_state=0)),
    "regressor, squared error": (
        "value", lambda: OnnxSGDRegressor(random_state=0),
        lambda: SGDRegressor(random_state=0)),
}


@functools.cache
def blocks(seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    """N_BLOCKS blocks ``(X, Xw + noise)`` in float64, one linear rule ``w`` for all."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(N_FEATURES)
    result = []
    for _ in range(N_BLOCKS):
        X = rng.standard_normal((BLOCK_ROWS, N_FEATURES))
        result.append((X, X @ w + 0.5 * rng.standard_normal(BLOCK_ROWS)))
    return result


def _stream(model: Any, data: list[tuple[np.ndarray, np.ndarray]]) -> Callable[[], Any]:
    """A call that feeds ``model`` the next block of ``data`` (in turn, forever)."""
    cycle = itertools.cycle(data)
    return lambda: model.partial_fit(*next(cycle))


def _one_core(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` run with the calling thread held to one of its cores (then given them
    back): the package then finds no free core (``runtime.threads.usable_cores``)."""
    cores = os.sched_getaffinity(0)

    def run() -> Any:
        os.sched_setaffinity(0, {min(cores)})
        try:
            return call()
        finally:
            os.sched_setaffinity(0, cores)

    return run


def block_table(n_rounds: int) -> Table:
    """Seconds per block of every problem, ours (as it runs, and on one core) against
    scikit-learn."""
    table = Table(
        f"Streaming float64 blocks of {BLOCK_ROWS:,} x {N_FEATURES}: seconds per "
        "partial_fit block",
        ["problem", "ours s/block", "scikit-learn s/block", "ours / scikit-learn",
         "ours on one core s/block", "ours on one core / scikit-learn"],
    )
    for problem, (target, ours, theirs) in PROBLEMS.items():
        data = [(X, (y > 0).astype(np.int64) if target == "label" else y)
                for X, y in blocks()]
        models = {"ours": ours(), "ours on one core": ours(), "scikit-learn": theirs()}
        first = {"classes": np.array([0, 1])} if target == "label" else {}
        calls = {name: _stream(model, data) for name, model in models.items()}
        calls["ours on one core"] = _one_core(calls["ours on one core"])
        with threadpool_limits(1):
            for model in models.values():
                model.partial_fit(*data[-1], **first)
            runs = interleaved_runs(calls, n_rounds=n_rounds, warmup=1)
        times = {name: float(np.median(values)) for name, values in runs.items()}
        spread = ratio_spread(runs, "ours", "scikit-learn")
        table.add(problem, times["ours"], times["scikit-learn"], spread,
                  times["ours on one core"],
                  ratio_spread(runs, "ours on one core", "scikit-learn"))
        table.headlines.append((
            f"streaming float64 blocks {BLOCK_ROWS // 1000}k x {N_FEATURES}, {problem}: "
            "ours / scikit-learn partial_fit per block", spread))
        table.notes.append(
            f"{problem}: goal of the issue at most {GOAL}x -> "
            f"{verdict(times['ours'] / times['scikit-learn'], GOAL)}.")
    table.notes.insert(0, (
        f"median of {n_rounds} interleaved rounds after 1 warm-up, one block per contender "
        f"and round ({N_BLOCKS} distinct blocks in turn), one onnxruntime and BLAS thread "
        "everywhere; ours stages the rows of its program's calls on a helper thread where "
        "a core is free (runtime/staging.py), and 'on one core' holds the calling thread "
        "to one core for its calls; defaults (ours: batch_size='auto', 256 rows at 100,000; "
        "scikit-learn: per row)."))
    return table


def run() -> list[Table]:
    quiet_warnings()
    return [block_table(rounds(11))]


if __name__ == "__main__":
    print_tables(run())
