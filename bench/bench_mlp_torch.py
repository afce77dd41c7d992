"""Case 10: OnnxMLPClassifier against a plain PyTorch CPU loop, at both libraries' default
threads and with one thread each.

Two networks, ReLU between the layers: 100-128-10 and 784-256-128-10, batch 200, Adam
(lr 0.001, betas (0.9, 0.999)), L2 alpha = 1e-4 as scikit-learn's MLP (gradient
alpha W / batch: torch's ``weight_decay`` = alpha / 200). The data is generated
(:func:`make_data`): 60,000 training and 10,000 held-out rows, ``X ~ N(0, 1)`` in
float32, the class the argmax of a random teacher network's scores,
:math:`\\arg\\max_k (\\max(X A, 0) B + 0.5\\,\\varepsilon)_k` with 64 hidden units and
Gaussian ``A``, ``B``, ``ε``.

Ours is ``partial_fit`` (one epoch) of a built ``OnnxMLPClassifier`` at its defaults
(``n_threads='auto'``: one onnxruntime intra-op thread for a small step, every core for a
large one; the table says which), with one thread, and with ``n_threads`` set to torch's
default. The PyTorch loop (``bench_mlp.TorchMLP``) is what a PyTorch user writes for
data held in memory: no DataLoader, one ``randperm`` per epoch, tensor slices as batches,
``model.train()``, ``zero_grad(set_to_none=True)``, ``backward``, ``step`` (anomaly
detection off, torch's default). It runs at torch's default thread count (as first
imported) and with ``torch.set_num_threads(1)``. All contenders of a network run in the
same process, in interleaved rounds. Without torch the case prints a note and no table.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import numpy as np
from _common import (
    QUICK,
    TORCH_MISSING,
    Table,
    interleaved_runs,
    print_tables,
    quiet_warnings,
    ratio_spread,
    rounds,
    torch_default_threads,
    torch_or_none,
)
from bench_mlp import ALPHA, BATCH, TorchMLP

from skl_ortgrad import OnnxMLPClassifier

N_TRAIN, N_TEST = (6_000, 2_000) if QUICK else (60_000, 10_000)
N_CLASSES, TEACHER_HIDDEN = 10, 64
# network -> timed rounds: a round of the larger one takes 3-4 s on an idle 2-core machine
# (torch's 2-thread epochs took 10x more under a load of 4-7 on 2 cores), 3 rounds keep the
# case under a minute there.
NETWORKS = {(100, 128, 10): 5, (784, 256, 128, 10): 3}


@functools.cache
def make_data(n_features: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """Train and held-out ``X`` (float32) and labels of a random teacher network."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N_TRAIN + N_TEST, n_features), dtype=np.float32)
    A = rng.standard_normal((n_features, TEACHER_HIDDEN), dtype=np.float32)
    B = rng.standard_normal((TEACHER_HIDDEN, N_CLASSES), dtype=np.float32)
    scores = np.maximum(X @ A, 0) @ B
    scores /= scores.std()
    scores += 0.5 * rng.standard_normal(scores.shape, dtype=np.float32)
    y = scores.argmax(axis=1).astype(np.int64)
    return X[:N_TRAIN], y[:N_TRAIN], X[N_TRAIN:], y[N_TRAIN:]


def _ours(layers: tuple[int, ...], n_threads: int | str) -> OnnxMLPClassifier:
    return OnnxMLPClassifier(hidden_layer_sizes=layers[1:-1], alpha=ALPHA, max_iter=1,
                             n_threads=n_threads, random_state=0)


def _torch_name(threads: int) -> str:
    return f"torch, {threads} thread{'s' if threads > 1 else ''}"


def network_table(layers: tuple[int, ...], n_rounds: int) -> Table:
    """Seconds per epoch of ours and of the torch loop at each thread setting."""
    X, y, X_test, y_test = make_data(layers[0])
    default = torch_default_threads()
    # (ours' n_threads, torch's threads) of every setting: each library's default, then
    # one thread each, then both at torch's default when that is not 1.
    auto = _ours(layers, "auto").fit(X, y)
    resolved = auto.optimizer_.n_threads
    settings = {f"defaults (ours n_threads='auto' = {resolved}, torch {default} threads)":
                ("auto", default), "one thread each": (1, 1)}
    if default != 1:
        settings[f"{default} threads each"] = (default, default)
    ours = {n: _ours(layers, n).fit(X, y) for n in {o for o, _ in settings.values()}
            if n != "auto"}
    ours["auto"] = auto
    torch_loops = {n: TorchMLP("adam", threads=n, layers=layers)
                   for n in sorted({t for _, t in settings.values()})}
    candidates: dict[str, Any] = {}
    for n, model in ours.items():
        candidates[f"ours, n_threads={n}"] = functools.partial(model.partial_fit, X, y)
    for n, loop in torch_loops.items():
        candidates[_torch_name(n)] = functools.partial(loop.epoch, X, y)
    load = os.getloadavg()[0]
    runs = interleaved_runs(candidates, n_rounds=n_rounds, warmup=1)
    load = max(load, os.getloadavg()[0])
    times = {name: float(np.median(values)) for name, values in runs.items()}
    name = "-".join(map(str, layers))
    table = Table(
        f"MLP {name} against a PyTorch CPU loop: {N_TRAIN:,} x {layers[0]} float32, batch "
        f"{BATCH}, Adam, seconds per epoch",
        ["setting", "ours s/epoch", "torch s/epoch", "ours / torch"],
    )
    for setting, (n_ours, n_torch) in settings.items():
        a = f"ours, n_threads={n_ours}"
        b = _torch_name(n_torch)
        spread = ratio_spread(runs, a, b)
        table.add(setting, times[a], times[b], spread)
        if setting != f"{default} threads each":
            table.headlines.append(
                (f"MLP {name}, batch {BATCH}, Adam, {setting}: ours / PyTorch CPU loop",
                 spread))
    accuracy = {f"ours, n_threads={n}": model.score(X_test, y_test) for n, model in ours.items()}
    accuracy |= {_torch_name(n): loop.accuracy(X_test, y_test)
                 for n, loop in torch_loops.items()}
    table.notes += [
        f"median of {n_rounds} interleaved rounds after 1 warm-up; each round runs every "
        "contender once (ours at each n_threads, torch at each thread count), the rows "
        "pair them.",
        f"load average (1 min) up to {load:.2f} on {os.cpu_count()} cores during the "
        "rounds: a setting of several threads needs them all scheduled at once, at every "
        "step, and suffers the most from other work on the machine.",
        "held-out accuracy after the timed epochs (a check that every loop trains): "
        + ", ".join(f"{key} {value:.3f}" for key, value in accuracy.items()) + ".",
    ]
    return table


def run() -> list[Table]:
    quiet_warnings()
    if torch_or_none() is None:
        print(f"bench_mlp_torch: no table. {TORCH_MISSING}\n")
        return []
    return [network_table(layers, rounds(n)) for layers, n in NETWORKS.items()]


if __name__ == "__main__":
    print_tables(run())
