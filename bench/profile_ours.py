"""Profile ours with pyinstrument (optional: `pip install pyinstrument`).

Not part of `make bench`: its output is read by a person, who writes the conclusions in
docs/benchmarks.md. Cases: linear regression 100k x 100 at batch 32 and batch 1000
(3 partial_fit epochs each), the tiny-step case (batch 1, 10 features, 2000 rows,
5 epochs), and the MLP of case 3 (100 -> 128 -> 10, 50k rows, batch 200, Adam, 3 epochs).

    python bench/profile_ours.py [case ...]      # cases: b32 b1000 step mlp
"""

from __future__ import annotations

import sys
from typing import Any

import numpy as np
from _common import quiet_warnings
from bench_linear import make_data

from skl_ortgrad import LearningRateSGD, OnnxSGDRegressor


def profile(
    name: str, X: np.ndarray, y: np.ndarray, batch: int, epochs: int, est: Any = None
) -> None:
    from pyinstrument import Profiler

    if est is None:
        est = OnnxSGDRegressor(max_iter=1, tol=None, batch_size=batch,
                               learning_rate=LearningRateSGD(learning_rate="constant", eta0=0.01),
                               random_state=0)
    est.fit(X, y)
    profiler = Profiler(interval=0.0002)
    profiler.start()
    for _ in range(epochs):
        est.partial_fit(X, y)
    profiler.stop()
    print(f"===== {name}: {epochs} x partial_fit, batch {batch}, X {X.shape} =====")
    print(profiler.output_text(unicode=False, color=False, show_all=False))


def main(cases: list[str]) -> None:
    quiet_warnings()
    X, y, _, _ = make_data()
    if "b32" in cases:
        profile("case 1, batch 32", X, y, 32, 3)
    if "b1000" in cases:
        profile("case 1, batch 1000", X, y, 1000, 10)
    if "step" in cases:
        rng = np.random.default_rng(0)
        Xs = rng.standard_normal((2000, 10), dtype=np.float32)
        ys = Xs.sum(axis=1)
        profile("case 4, batch 1", Xs, ys, 1, 5)
    if "mlp" in cases:
        import bench_mlp

        Xm, ym = bench_mlp.make_data()
        profile("case 3, MLP Adam", Xm, ym, bench_mlp.BATCH, 3, bench_mlp._ours(sgd=False))


if __name__ == "__main__":
    main(sys.argv[1:] or ["b32", "b1000", "step", "mlp"])
