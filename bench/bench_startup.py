"""Start-up costs: the import, the first ``partial_fit``, a grid search on a cold pool of
worker processes; ours against scikit-learn's SGDClassifier.

- *import*: ``import skl_ortgrad`` against ``from sklearn.linear_model import
  SGDClassifier``, each in a fresh interpreter (seconds and resident memory at the end
  of the import); goal of the speed issue: at most scikit-learn's plus 0.3 s.
- *first partial_fit*, 100k x 50 float64, binary: of a new estimator in a process that
  has trained before (the goal: at most 50 ms), and the first one of a fresh
  interpreter, after the import (ours then loads onnxruntime and skl2onnx, converts its
  template and builds its sessions).
- *cold grid search*: ``GridSearchCV(n_jobs=2)`` over 12 points (4 values of ``alpha`` x
  3 penalties, 5 folds) on breast cancer (569 x 30, standardized), each timed on a new
  pool of worker processes (joblib's pool shut down before, untimed): the workers start,
  import and fit; the goal: at most 1.2x scikit-learn's. ``n_jobs=1`` for reference.

The package is byte-compiled first (:func:`byte_compiled`), as ``pip install`` leaves an
installed package: an editable install under ``PYTHONDONTWRITEBYTECODE`` would otherwise
compile every module from source in each new interpreter and worker (about 35 ms of a
worker's first fit, measured), a cost no installed copy pays.

Fresh interpreters and new pools alternate between ours and scikit-learn's in every
round (:func:`_common.interleaved_runs`'s rule); medians and ranges over the rounds.

    python bench/bench_startup.py [--rounds N]
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import subprocess
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
from joblib.externals.loky import get_reusable_executor
from sklearn.datasets import load_breast_cancer
from sklearn.linear_model import SGDClassifier
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import OnnxSGDClassifier

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
IMPORTS = {"ours": "import skl_ortgrad",
           "sklearn": "from sklearn.linear_model import SGDClassifier"}
ESTIMATORS = {"ours": "from skl_ortgrad import OnnxSGDClassifier as Model",
              "sklearn": "from sklearn.linear_model import SGDClassifier as Model"}
N_ROWS, N_FEATURES = 100_000, 50
GRID = {"alpha": [1e-5, 1e-4, 1e-3, 1e-2], "penalty": ["l2", "l1", "elasticnet"]}

# What a fresh interpreter runs: the import (timed), then, with data, the first
# partial_fit (timed) and that of a second estimator; one JSON line.
_CHILD = """
import json, time
begin = time.perf_counter()
{imports}
imported = time.perf_counter() - begin
# The peak resident memory of this interpreter (ru_maxrss would keep the parent's peak
# across exec).
with open("/proc/self/status") as status:
    memory = next(int(line.split()[1]) for line in status if line.startswith("VmHWM")) / 1024
result = {{"import": imported, "rss_mb": memory}}
if {fit}:
    import numpy as np
    rng = np.random.default_rng(0)
    X = rng.standard_normal(({rows}, {features}))
    y = (X[:, 0] + 0.5 * rng.standard_normal({rows}) > 0).astype(np.int64)
    for key in ("first partial_fit", "second estimator"):
        begin = time.perf_counter()
        Model().partial_fit(X, y, classes=[0, 1])
        result[key] = time.perf_counter() - begin
print(json.dumps(result))
"""


def fresh_interpreter(imports: str, fit: bool = False) -> dict[str, float]:
    """Run ``imports`` (and the partial_fit calls with ``fit``) in a new interpreter that
    sees this checkout; its timings."""
    code = _CHILD.format(imports=imports, fit=fit, rows=N_ROWS, features=N_FEATURES)
    environment = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get(
        "PYTHONPATH", ""), "PYTHONWARNINGS": "ignore"}
    output = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True, env=environment).stdout
    return json.loads(output.splitlines()[-1])


def _collect(results: dict[str, list[dict[str, float]]],
             calls: dict[str, Callable[[], dict[str, float]]]) -> dict[str, Callable[[], None]]:
    """Candidates for :func:`_common.interleaved_runs` that keep each call's result."""
    def keep(name: str) -> Callable[[], None]:
        return lambda: results[name].append(calls[name]())
    return {name: keep(name) for name in calls}


def _spread(values: list[float]) -> str:
    return f"{np.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def import_table(n_rounds: int) -> Table:
    """Import time and memory, fresh interpreters, ours against scikit-learn's."""
    results: dict[str, list[dict[str, float]]] = {name: [] for name in IMPORTS}
    interleaved_runs(_collect(results, {
        name: (lambda code=code: fresh_interpreter(code)) for name, code in IMPORTS.items()
    }), n_rounds=n_rounds, warmup=1)
    seconds = {name: [r["import"] for r in rows] for name, rows in results.items()}
    memory = {name: [r["rss_mb"] for r in rows] for name, rows in results.items()}
    extra = np.array(seconds["ours"]) - np.array(seconds["sklearn"])
    table = Table(
        "Import: `import skl_ortgrad` against `from sklearn.linear_model import "
        "SGDClassifier`, fresh interpreters",
        ["", "ours", "scikit-learn", "ours - scikit-learn", "ours / scikit-learn"],
        notes=[f"{n_rounds} rounds after a warm-up, each a fresh interpreter per "
               "candidate; medians (ranges). Goal of the speed issue: at most "
               "scikit-learn's import plus 0.3 s."],
    )
    table.add("seconds", _spread(seconds["ours"]), _spread(seconds["sklearn"]),
              _spread(list(extra)), ratio_spread(seconds, "ours", "sklearn"))
    table.add("resident MB", _spread(memory["ours"]), _spread(memory["sklearn"]),
              _spread(list(np.array(memory["ours"]) - np.array(memory["sklearn"]))), "")
    table.headlines.append(("import skl_ortgrad: seconds beyond scikit-learn's import",
                            f"{np.median(extra):+.2f} s ({extra.min():+.2f} to "
                            f"{extra.max():+.2f} s)"))
    return table


def partial_fit_table(n_rounds: int) -> Table:
    """The first partial_fit: warm process (new estimator) and fresh interpreter."""
    quiet_warnings()
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N_ROWS, N_FEATURES))
    y = (X[:, 0] + 0.5 * rng.standard_normal(N_ROWS) > 0).astype(np.int64)
    warm = interleaved_runs({
        "ours": lambda: OnnxSGDClassifier().partial_fit(X, y, classes=[0, 1]),
        "sklearn": lambda: SGDClassifier().partial_fit(X, y, classes=[0, 1]),
    }, n_rounds=n_rounds * 3, warmup=1)
    results: dict[str, list[dict[str, float]]] = {name: [] for name in ESTIMATORS}
    interleaved_runs(_collect(results, {
        name: (lambda code=code: fresh_interpreter(code, fit=True))
        for name, code in ESTIMATORS.items()
    }), n_rounds=n_rounds, warmup=0)
    cold = {name: [r["first partial_fit"] for r in rows] for name, rows in results.items()}
    table = Table(
        f"First partial_fit, {N_ROWS // 1000}k x {N_FEATURES} float64, binary, defaults",
        ["case", "ours (s)", "scikit-learn (s)", "ours / scikit-learn"],
        notes=[f"new estimator, warm process: {n_rounds * 3} interleaved rounds after a "
               "warm-up (the process has trained before: caches of conversions and "
               "sessions warm); goal of the speed issue: at most 50 ms.",
               f"fresh interpreter: {n_rounds} rounds, the first partial_fit after the "
               "import (ours loads onnxruntime and skl2onnx there)."],
    )
    for case, runs in (("new estimator, warm process", warm),
                       ("first of a fresh interpreter", cold)):
        spread = ratio_spread(runs, "ours", "sklearn")
        table.add(case, _spread(runs["ours"]), _spread(runs["sklearn"]), spread)
        table.headlines.append((f"first partial_fit 100k x 50, {case}: ours / scikit-learn",
                                f"{spread}; ours {np.median(runs['ours']) * 1e3:.0f} ms"))
    return table


def _cold_search(estimator: Any, X: np.ndarray, y: np.ndarray, n_jobs: int) -> Callable[[], float]:
    def search() -> float:
        get_reusable_executor().shutdown(wait=True, kill_workers=True)
        begin = time.perf_counter()
        GridSearchCV(estimator, GRID, cv=5, n_jobs=n_jobs).fit(X, y)
        return time.perf_counter() - begin
    return search


def grid_search_table(n_rounds: int) -> Table:
    """GridSearchCV on a cold pool (n_jobs=2) and in process (n_jobs=1)."""
    quiet_warnings()
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    table = Table(
        "GridSearchCV, 12 points x 5 folds, breast cancer: OnnxSGDClassifier() against "
        "SGDClassifier()",
        ["n_jobs", "ours (s)", "scikit-learn (s)", "ours / scikit-learn"],
        notes=[f"{n_rounds} interleaved rounds; n_jobs=2 on a new pool of workers every "
               "time (joblib's reusable pool shut down before, untimed); goal of the speed "
               "issue: at most 1.2x scikit-learn's cold one. n_jobs=1 after a warm-up."],
    )
    for n_jobs in (2, 1):
        results: dict[str, list[float]] = {"ours": [], "sklearn": []}
        interleaved_runs(_collect(results, {
            "ours": _cold_search(OnnxSGDClassifier(), X, y, n_jobs),
            "sklearn": _cold_search(SGDClassifier(), X, y, n_jobs),
        }), n_rounds=n_rounds, warmup=0 if n_jobs == 2 else 1)
        spread = ratio_spread(results, "ours", "sklearn")
        table.add(n_jobs, _spread(results["ours"]), _spread(results["sklearn"]), spread)
        table.headlines.append((f"GridSearchCV 12 points, n_jobs={n_jobs}"
                                f"{', cold pool' if n_jobs == 2 else ''}: ours / scikit-learn",
                                spread))
    get_reusable_executor().shutdown(wait=True, kill_workers=True)
    return table


def byte_compiled() -> None:
    """Write the package's bytecode (``__pycache__``, ignored by git), as ``pip install``
    does for an installed copy; ``py_compile`` writes it whatever
    ``PYTHONDONTWRITEBYTECODE`` says."""
    compileall.compile_dir(os.path.join(ROOT, "skl_ortgrad"), quiet=1)


def run(n_rounds: int | None = None) -> list[Table]:
    """The three tables (``make bench`` runs it through ``run_all.py``)."""
    byte_compiled()
    n_rounds = rounds(5, 1) if n_rounds is None else n_rounds
    return [import_table(n_rounds * 2), partial_fit_table(n_rounds),
            grid_search_table(n_rounds)]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=rounds(5, 1))
    parser.add_argument("--only", choices=["import", "partial_fit", "grid"])
    arguments = parser.parse_args()
    for key, value in machine_info().items():
        print(f"{key}: {value}")
    tables = {"import": import_table, "partial_fit": partial_fit_table,
              "grid": grid_search_table}
    if arguments.only:
        byte_compiled()
        print_tables([tables[arguments.only](arguments.rounds)])
    else:
        print_tables(run(arguments.rounds))
