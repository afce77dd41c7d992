"""Case 3: MLP classifier 100 -> 128 (relu) -> 10 classes, 50k x 100 float32, batch 200.

Seconds per epoch of OnnxMLPClassifier (its default Adam, and plain SGD at a constant
rate) against scikit-learn's MLPClassifier (solver 'adam', and solver 'sgd' with
momentum=0 at the same constant rate) and a PyTorch CPU loop (nn.Sequential
Linear-ReLU-Linear, CrossEntropyLoss, torch.optim.Adam / torch.optim.SGD). Every contender
runs one thread: ours one intra-op thread, torch ``set_num_threads(1)``, scikit-learn's
BLAS limited to one thread (see the note in the table on its default of 2 threads).

Every contender does the same work per epoch: one shuffle, then per batch of 200 rows the
forward, the cross-entropy gradient, an update with an L2 term of alpha / batch
(scikit-learn's MLP penalty, alpha = 1e-4).
"""

from __future__ import annotations

import itertools
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
    rounds,
    torch_or_none,
    verdict,
)
from sklearn.datasets import make_classification
from sklearn.neural_network import MLPClassifier
from threadpoolctl import threadpool_limits

from skl_ortgrad import LearningRateSGD, OnnxMLPClassifier

N_ROWS, N_FEATURES, N_CLASSES, HIDDEN, BATCH = 50_000, 100, 10, 128, 200
ALPHA = 1e-4
ETA_SGD, ETA_ADAM = 0.01, 0.001


def make_data(seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """make_classification: 100 features (30 informative), 10 classes; X float32."""
    X, y = make_classification(
        n_samples=N_ROWS, n_features=N_FEATURES, n_informative=30, n_redundant=10,
        n_classes=N_CLASSES, random_state=seed,
    )
    return X.astype(np.float32), y.astype(np.int64)


class TorchMLP:
    """PyTorch CPU loop: Linear layers with ReLU between them, cross-entropy, SGD or
    Adam, same batches.

    ``layers``: the widths, input first, classes last. ``threads``: set by
    ``torch.set_num_threads`` before every epoch. The L2 term is scikit-learn's (gradient
    alpha W / batch on every weight, biases too here: torch's ``weight_decay`` applies to
    every parameter of the group).
    """

    def __init__(self, solver: str, threads: int = 1, seed: int = 0,
                 layers: tuple[int, ...] = (N_FEATURES, HIDDEN, N_CLASSES)) -> None:
        torch = torch_or_none()
        self.torch, self.threads = torch, threads
        torch.manual_seed(seed)
        modules: list[Any] = []
        for n_in, n_out in itertools.pairwise(layers):
            modules += [torch.nn.Linear(n_in, n_out), torch.nn.ReLU()]
        self.model = torch.nn.Sequential(*modules[:-1])
        decay = ALPHA / BATCH
        if solver == "sgd":
            self.opt = torch.optim.SGD(self.model.parameters(), lr=ETA_SGD, weight_decay=decay)
        else:
            self.opt = torch.optim.Adam(self.model.parameters(), lr=ETA_ADAM, weight_decay=decay)
        self.loss = torch.nn.CrossEntropyLoss()
        self.generator = torch.Generator().manual_seed(seed)
        self._data: tuple[Any, Any] | None = None

    def epoch(self, X: np.ndarray, y: np.ndarray) -> None:
        torch = self.torch
        torch.set_num_threads(self.threads)
        if self._data is None:
            # from_numpy shares memory: converting once per dataset costs nothing.
            self._data = (torch.from_numpy(X), torch.from_numpy(y))
        Xt, yt = self._data
        perm = torch.randperm(Xt.shape[0], generator=self.generator)
        Xp, yp = Xt[perm], yt[perm]
        model, opt, loss = self.model, self.opt, self.loss
        model.train()
        for start in range(0, Xt.shape[0], BATCH):
            opt.zero_grad(set_to_none=True)
            loss(model(Xp[start:start + BATCH]), yp[start:start + BATCH]).backward()
            opt.step()

    def accuracy(self, X: np.ndarray, y: np.ndarray) -> float:
        with self.torch.no_grad():
            pred = self.model(self.torch.from_numpy(X)).argmax(dim=1).numpy()
        return float(np.mean(pred == y))


def _ours(sgd: bool) -> OnnxMLPClassifier:
    solver = LearningRateSGD(eta0=ETA_SGD, learning_rate="constant") if sgd else "adam"
    return OnnxMLPClassifier(
        hidden_layer_sizes=(HIDDEN,), batch_size=BATCH, solver=solver, alpha=ALPHA,
        max_iter=1, tol=None, random_state=0,
    )


def _sklearn(solver: str) -> MLPClassifier:
    extra = {"momentum": 0.0, "learning_rate_init": ETA_SGD} if solver == "sgd" else {}
    return MLPClassifier(
        hidden_layer_sizes=(HIDDEN,), solver=solver, batch_size=BATCH, alpha=ALPHA,
        random_state=0, **extra,
    )


def _one_blas_thread(func: Callable[[], Any]) -> Callable[[], Any]:
    def run() -> Any:
        with threadpool_limits(1):
            return func()

    return run


def epoch_table(n_rounds: int) -> Table:
    X, y = make_data()
    classes = np.unique(y)
    torch = torch_or_none()
    ours_adam, ours_sgd = _ours(False).fit(X, y), _ours(True).fit(X, y)
    skl_adam, skl_sgd = _sklearn("adam"), _sklearn("sgd")
    with threadpool_limits(1):
        skl_adam.partial_fit(X, y, classes=classes)
        skl_sgd.partial_fit(X, y, classes=classes)
    names = {
        "fit": "ours Adam: fit(max_iter=1) (convert + build + 1 epoch)",
        "ours adam": "ours Adam: partial_fit (1 epoch, built)",
        "ours sgd": "ours SGD (constant 0.01): partial_fit (1 epoch, built)",
        "skl adam": "sklearn MLPClassifier(solver='adam').partial_fit",
        "skl sgd": "sklearn MLPClassifier(solver='sgd', momentum=0).partial_fit",
        "torch adam": "torch CPU loop, Adam (1 thread)",
        "torch sgd": "torch CPU loop, SGD (1 thread)",
    }
    candidates: dict[str, Callable[[], Any]] = {
        names["fit"]: lambda: _ours(False).fit(X, y),
        names["ours adam"]: lambda: ours_adam.partial_fit(X, y),
        names["ours sgd"]: lambda: ours_sgd.partial_fit(X, y),
        names["skl adam"]: _one_blas_thread(lambda: skl_adam.partial_fit(X, y)),
        names["skl sgd"]: _one_blas_thread(lambda: skl_sgd.partial_fit(X, y)),
    }
    loops: dict[str, TorchMLP] = {}
    if torch is not None:
        loops = {"adam": TorchMLP("adam"), "sgd": TorchMLP("sgd")}
        candidates[names["torch adam"]] = lambda: loops["adam"].epoch(X, y)
        candidates[names["torch sgd"]] = lambda: loops["sgd"].epoch(X, y)
    runs = interleaved_runs(candidates, n_rounds=n_rounds, warmup=1)
    times = {name: float(np.median(values)) for name, values in runs.items()}

    with threadpool_limits(1):
        accuracy = {
            names["ours adam"]: ours_adam.score(X, y),
            names["ours sgd"]: ours_sgd.score(X, y),
            names["skl adam"]: skl_adam.score(X, y),
            names["skl sgd"]: skl_sgd.score(X, y),
        }
    for solver, loop in loops.items():
        accuracy[names[f"torch {solver}"]] = loop.accuracy(X, y)

    def same_optimizer(name: str) -> str:
        return names["ours sgd"] if "SGD" in name or "sgd" in name else names["ours adam"]

    table = Table(
        f"MLP classifier {N_FEATURES} -> {HIDDEN} (relu) -> {N_CLASSES} classes, "
        f"{N_ROWS // 1000}k x {N_FEATURES} float32, batch {BATCH}: seconds per epoch",
        ["contender", "s/epoch", "ours (same optimizer) / it", "it / ours",
         "train accuracy after the timed epochs"],
    )
    for name, value in times.items():
        ours_t = times[same_optimizer(name)]
        table.add(name, value, ratio(ours_t, value), ratio(value, ours_t),
                  accuracy.get(name))
    notes = [
        f"median of {n_rounds} interleaved rounds after 1 warm-up; 'ours' in the ratios is "
        "`partial_fit` on a built estimator with the same optimizer as the row (Adam rows "
        "against ours Adam, SGD rows against ours SGD).",
        f"Adam: lr {ETA_ADAM}, betas (0.9, 0.999) everywhere; SGD: constant rate {ETA_SGD}, "
        f"no momentum; L2 alpha={ALPHA} as scikit-learn's MLP (gradient alpha W / batch).",
        "sklearn runs with its BLAS limited to 1 thread (threadpoolctl), as ours and torch. "
        "With its default 2 OpenBLAS threads, a separate measurement on this shared 2-core "
        "machine (load average ~3) took 2.6-9 s per epoch instead of 0.5-0.8 s.",
        "accuracy: on the training set, after the warm-up and timed epochs of each "
        "contender (a sanity check that every loop trains, not a quality comparison).",
    ]
    for solver, label in (("adam", "Adam"), ("sgd", "SGD")):
        ours_t, skl_t = times[names[f"ours {solver}"]], times[names[f"skl {solver}"]]
        tch = times.get(names[f"torch {solver}"])
        notes.append(
            f"{label}: target ours <= 0.5 x sklearn: {ratio(ours_t, skl_t)} -> "
            f"{verdict(ours_t / skl_t, 0.5)}; target ours <= 1.0 x torch (1 thread): "
            f"{ratio(ours_t, tch)} -> {verdict(None if tch is None else ours_t / tch, 1.0)}."
        )
    if torch is None:
        notes.append(TORCH_MISSING)
    table.notes += notes
    for solver, label in (("adam", "Adam"), ("sgd", "SGD")):
        table.headlines.append((
            f"MLP {N_FEATURES}-{HIDDEN}-{N_CLASSES}, batch {BATCH}, {label}: ours / "
            "MLPClassifier.partial_fit",
            ratio_spread(runs, names[f"ours {solver}"], names[f"skl {solver}"]),
        ))
    return table


def run() -> list[Table]:
    quiet_warnings()
    return [epoch_table(rounds(5))]


if __name__ == "__main__":
    print_tables(run())
