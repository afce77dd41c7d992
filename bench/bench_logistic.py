"""Case 2: binary and 10-class logistic classification, 50k x 100 float32.

Seconds per epoch of OnnxSGDClassifier (logistic loss, one-vs-rest for 10 classes) against
scikit-learn's SGDClassifier(loss='log_loss') (per-sample, one-vs-rest for 10 classes)
and a PyTorch CPU loop (nn.Linear + BCE-with-logits / cross-entropy, torch.optim.SGD),
at batch 1000 and at batch 32 (the per-step floor; the defaults' per-epoch cost, whose
'auto' batch grows with the rows, is case 6's).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from _common import (
    TORCH_MISSING,
    Table,
    interleaved_runs,
    print_tables,
    quiet_warnings,
    ratio,
    ratio_spread,
    ratio_table,
    rounds,
    torch_or_none,
    verdict,
)
from bench_linear import TorchLoop
from sklearn.linear_model import SGDClassifier

from skl_ortgrad import LearningRateSGD, OnnxSGDClassifier

N_ROWS, N_FEATURES = 50_000, 100
ETA = 0.01


def make_data(n_classes: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """X ~ N(0, 1) float32; labels from a noisy linear model (argmax of scores + Gumbel)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N_ROWS, N_FEATURES), dtype=np.float32)
    n_scores = 1 if n_classes == 2 else n_classes
    W = rng.standard_normal((N_FEATURES, n_scores)).astype(np.float32) * 0.3
    scores = X @ W
    if n_classes == 2:
        y = (scores[:, 0] + rng.logistic(size=N_ROWS) > 0).astype(np.int64)
    else:
        y = np.argmax(scores + rng.gumbel(size=scores.shape), axis=1).astype(np.int64)
    return X, y


def epoch_table(n_classes: int, batch: int, n_rounds: int) -> Table:
    X, y = make_data(n_classes)
    torch = torch_or_none()

    def ours() -> OnnxSGDClassifier:
        return OnnxSGDClassifier(
            loss="log_loss", max_iter=1, tol=None, batch_size=batch, random_state=0,
            learning_rate=LearningRateSGD(eta0=ETA, learning_rate="constant"),
        )

    def sklearn() -> SGDClassifier:
        return SGDClassifier(loss="log_loss", max_iter=1, tol=None, random_state=0)

    ours_warm = ours().fit(X, y)
    skl_warm = sklearn().fit(X, y)
    candidates: dict[str, Callable[[], Any]] = {
        "ours: fit(max_iter=1) (convert + build + 1 epoch)": lambda: ours().fit(X, y),
        "ours: partial_fit (1 epoch, built)": lambda: ours_warm.partial_fit(X, y),
        "sklearn SGDClassifier(log_loss, max_iter=1).fit": lambda: sklearn().fit(X, y),
        "sklearn SGDClassifier.partial_fit (1 epoch)": lambda: skl_warm.partial_fit(X, y),
    }
    if torch is not None:
        loss = "bce" if n_classes == 2 else "ce"
        n_out = 1 if n_classes == 2 else n_classes
        yt = y.astype(np.float32) if n_classes == 2 else y
        t1 = TorchLoop(N_FEATURES, n_out, batch, ETA, threads=1, loss=loss)
        candidates["torch CPU loop (1 thread)"] = lambda: t1.epoch(X, yt)
        if batch >= 1000:  # 2 threads only slow small batches down (measured: 3-5x)
            t2 = TorchLoop(N_FEATURES, n_out, batch, ETA, threads=2, loss=loss)
            candidates["torch CPU loop (2 threads)"] = lambda: t2.epoch(X, yt)
    runs = interleaved_runs(candidates, n_rounds=n_rounds, warmup=1)
    times = {name: float(np.median(values)) for name, values in runs.items()}
    ours_t = times["ours: partial_fit (1 epoch, built)"]
    skl = times["sklearn SGDClassifier(log_loss, max_iter=1).fit"]
    tch = times.get("torch CPU loop (1 thread)")
    kind = "binary" if n_classes == 2 else f"{n_classes}-class"
    table = ratio_table(
        f"Logistic classification, {kind}, {N_ROWS // 1000}k x {N_FEATURES} float32, "
        f"batch {batch}: seconds per epoch",
        times, ours_t,
    )
    table.notes += [
        f"median of {n_rounds} interleaved rounds after 1 warm-up; 'ours' in the ratios is "
        f"`partial_fit` on a built estimator; constant rate {ETA} (ours, torch).",
        f"target ours <= 0.5 x sklearn: {ratio(ours_t, skl)} -> {verdict(ours_t / skl, 0.5)}; "
        f"target ours <= 1.0 x torch (1 thread): {ratio(ours_t, tch)} -> "
        f"{verdict(None if tch is None else ours_t / tch, 1.0)}.",
    ]
    if n_classes > 2:
        table.notes.append(
            "sklearn trains 10 one-vs-rest binary models (10 passes over the data per "
            "epoch, n_jobs=None); ours and torch train one softmax model."
        )
    if torch is None:
        table.notes.append(TORCH_MISSING)
    table.headlines.append((
        f"logistic, {kind}, {N_ROWS // 1000}k x {N_FEATURES}, batch {batch}: ours / "
        "SGDClassifier(max_iter=1).fit",
        ratio_spread(runs, "ours: partial_fit (1 epoch, built)",
                     "sklearn SGDClassifier(log_loss, max_iter=1).fit"),
    ))
    return table


def run() -> list[Table]:
    quiet_warnings()
    return [
        epoch_table(2, 1000, rounds(5)),
        epoch_table(2, 32, rounds(3)),
        epoch_table(10, 1000, rounds(5)),
        epoch_table(10, 32, rounds(3)),
    ]


if __name__ == "__main__":
    print_tables(run())
