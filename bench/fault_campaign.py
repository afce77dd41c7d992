"""Bad inputs and faults against every estimator: a failing call must change nothing,
no call may leave silent non-finite predictions, and a damaged file must not load.

For each configuration (the six estimators, several losses and solvers), a model is fitted
on good data; then every fault below runs on a copy of it (``fit``, ``partial_fit``, a
warm-started ``fit``, ``predict``), and a Ctrl-C lands at a random line of the package
during a training call. Each failing call is followed by a bit-for-bit comparison of the
fitted state (every attribute, the optimizer's weights, rule state, ``t_`` and losses, the
predictions); each call that completes by a check that the predictions are finite. Then
saved files of each configuration are loaded with one byte changed at many positions, and
with their class name edited.

Prints the counts: calls, clear errors (``ValueError`` and its subclasses, scikit-learn's
``NotFittedError``, KeyboardInterrupt for Ctrl-C), other errors, state changes by failing
calls, silent non-finite predictions, damaged files that loaded.

Usage::

    python bench/fault_campaign.py [--seeds 2] [--positions 200]

``--seeds``: Ctrl-C placements (random lines) per configuration and training call;
``--positions``: byte positions changed per saved file (drawn at random, the file's
last bytes, the digest, always included).
"""

from __future__ import annotations

import argparse
import copy
import os
import signal
import sys
import tempfile
import time
import warnings
from collections import Counter
from typing import Any

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression, LogisticRegression, SGDRegressor

from skl_ortgrad import (
    LearningRateSGD,
    OnnxGradientClassifier,
    OnnxGradientRegressor,
    OnnxMLPClassifier,
    OnnxMLPRegressor,
    OnnxSGDClassifier,
    OnnxSGDRegressor,
    load,
    save,
)

# The tests' Ctrl-C tracer and state snapshot: one copy for the suite and the campaign.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tests"))
from _interrupts import at_count, ctrl_c_when
from _snapshots import snapshot

RNG = np.random.RandomState(0)
X = RNG.randn(60, 4)
Y = X @ np.array([1.0, -2.0, 0.5, 3.0]) + 0.3 + 0.05 * RNG.randn(60)
LABELS = (Y > 0.3).astype(int)

SMALL = {"max_iter": 3, "random_state": 0}
CONFIGURATIONS = {
    **{f"SGDRegressor loss={loss}": (lambda loss=loss: OnnxSGDRegressor(
        loss=loss, tol=None, **SMALL), False)
       for loss in ("squared_error", "huber", "epsilon_insensitive")},
    **{f"SGDClassifier loss={loss}": (lambda loss=loss: OnnxSGDClassifier(
        loss=loss, tol=None, **SMALL), True)
       for loss in ("hinge", "log_loss", "modified_huber")},
    **{f"MLPRegressor solver={solver}": (lambda solver=solver: OnnxMLPRegressor(
        hidden_layer_sizes=(5,), solver=solver, **SMALL), False)
       for solver in ("sgd", "adam", "lbfgs")},
    **{f"MLPClassifier solver={solver}": (lambda solver=solver: OnnxMLPClassifier(
        hidden_layer_sizes=(5,), solver=solver, **SMALL), True)
       for solver in ("sgd", "adam", "lbfgs")},
    "GradientRegressor(LinearRegression)": (lambda: OnnxGradientRegressor(
        LinearRegression().fit(X, Y), max_iter=3), False),
    "GradientRegressor(SGDRegressor)": (lambda: OnnxGradientRegressor(
        SGDRegressor(random_state=0).fit(X, Y), max_iter=3), False),
    "GradientClassifier(LogisticRegression)": (lambda: OnnxGradientClassifier(
        LogisticRegression().fit(X, LABELS), max_iter=3), True),
}


def _with(value, row=3, column=1, data=None):
    data = X.copy() if data is None else data.copy()
    data[row, column] = value
    return data


#: Bad data: (name, X, y transform (None: as is), sample_weight).
DATA_FAULTS = [
    ("X with NaN", _with(np.nan), None, None),
    ("X with inf", _with(np.inf), None, None),
    ("X x 1e10", X * 1e10, None, None),
    ("X x 1e18", X * 1e18, None, None),
    ("X x 1e30", X * 1e30, None, None),
    ("X x 1e40 (beyond float32)", X * 1e40, None, None),
    ("X near float32's max", _with(3e38), None, None),
    ("X of float32 3e38", _with(3e38).astype(np.float32), None, None),
    ("int64 extremes", _with(np.iinfo(np.int64).max, data=X.astype(np.int64)), None, None),
    ("uint64 extremes", _with(np.iinfo(np.uint64).max, data=np.abs(X).astype(np.uint64)),
     None, None),
    ("no rows", X[:0], "empty", None),
    ("another width", X[:, :3], None, None),
    ("y one row short", X, "short", None),
    ("y with NaN", X, "nan", None),
    ("negative sample_weight", X, None, -np.ones(len(X))),
    ("sample_weight 1e-300", X, None, np.full(len(X), 1e-300)),
    ("sample_weight NaN", X, None, np.full(len(X), np.nan)),
    ("sample_weight 1e300", X, None, np.full(len(X), 1e300)),
]

#: Bad or extreme parameters, by family (the prefix of the configuration's name).
PARAMETER_FAULTS = {
    "SGD": [{"learning_rate": LearningRateSGD(eta0=1e38, learning_rate="constant")},
            {"alpha": 1e10}, {"eta0": 1e10, "learning_rate": "constant"},
            {"early_stopping": True, "validation_fraction": 0.0}, {"max_iter": 0},
            {"batch_size": 0}, {"penalty": "l3"}],
    "SGDClassifier": [{"class_weight": {0: np.nan}}, {"class_weight": {0: np.inf}}],
    "MLP": [{"learning_rate_init": 1e10}, {"alpha": 1e10},
            {"early_stopping": True, "validation_fraction": 0.0},
            {"hidden_layer_sizes": (0,)}, {"max_iter": 0}],
    "Gradient": [{"learning_rate": 1e10}, {"max_iter": 0}],
}


def _targets(classifier: bool, transform: Any, rows: int) -> np.ndarray:
    target = (LABELS if classifier else Y)[:rows]
    if transform == "short":
        return target[:-1]
    if transform == "nan":
        target = target.astype(float)
        target[2] = np.nan
    return target


def _outputs(model: Any) -> np.ndarray | None:
    if "optimizer_" not in vars(model):
        return None
    width = model.n_features_in_
    data = X[:, :width] if width <= X.shape[1] else np.hstack([X] * 2)[:, :width]
    # The numbers behind the labels: probabilities, else scores, else predictions.
    for method in ("predict_proba", "decision_function", "predict"):
        if hasattr(model, method):
            return np.asarray(getattr(model, method)(data))
    raise AssertionError(type(model).__name__)


def _state(model: Any) -> Any:
    outputs = _outputs(model)
    return snapshot(dict(vars(model))), None if outputs is None else outputs.tobytes()


class Campaign:
    def __init__(self) -> None:
        self.counts: Counter = Counter()
        self.examples: dict[str, list[str]] = {}

    def note(self, kind: str, what: str) -> None:
        self.counts[kind] += 1
        self.examples.setdefault(kind, [])
        if len(self.examples[kind]) < 5:
            self.examples[kind].append(what)

    def call(self, name: str, model: Any, call: Any, interrupt_at: int | None = None) -> None:
        """Run ``call()`` on ``model`` (a Ctrl-C at the ``interrupt_at``-th package line)
        and count what happened."""
        self.counts["calls"] += 1
        before = _state(model)
        error = _run(call, interrupt_at)
        if error is None:
            self._finite(name, model)
            return
        if isinstance(error, KeyboardInterrupt):
            self.counts["Ctrl-C delivered"] += 1
            # Ctrl-C keeps the completed batches: unchanged, or consistent and finite.
            if _state(model) != before:
                self._finite(name, model)
            return
        if isinstance(error, (ValueError, NotFittedError)):
            self.counts["clear errors"] += 1
        else:
            self.note("other errors", f"{name}: {type(error).__name__}: {error}")
        if _state(model) != before:
            self.note("state changes by failing calls", f"{name}: {error!r}"[:300])

    def _finite(self, name: str, model: Any) -> None:
        try:
            outputs = _outputs(model)
        except ValueError:
            return  # refused with a clear error: not silent
        if outputs is not None and outputs.dtype.kind == "f" and not np.isfinite(
                outputs).all():
            self.note("silent non-finite predictions", name)


def _run(call: Any, interrupt_at: int | None) -> BaseException | None:
    """What ``call()`` raised (None: nothing), with a Ctrl-C at the ``interrupt_at``-th
    package line when given."""
    if interrupt_at is None:
        try:
            call()
        except BaseException as error:
            return error
        return None
    return ctrl_c_when(call, at_count(interrupt_at))[0]


def _training_calls(model: Any, classifier: bool, data: np.ndarray, target: np.ndarray,
                    weight: Any) -> dict[str, Any]:
    calls = {"fit": lambda: model.fit(data, target, sample_weight=weight)}
    if getattr(model, "solver", None) != "lbfgs":
        extra = {"classes": [0, 1]} if classifier else {}
        calls["partial_fit"] = lambda: model.partial_fit(data, target, sample_weight=weight,
                                                         **extra)

    def warm():
        model.set_params(warm_start=True)
        try:
            model.fit(data, target, sample_weight=weight)
        finally:
            model.set_params(warm_start=False)

    if "warm_start" in model.get_params():
        calls["warm fit"] = warm
    return calls


def run_configuration(campaign: Campaign, name: str, make: Any, classifier: bool,
                      seeds: int) -> Any:
    base = make().fit(X, LABELS if classifier else Y)
    for fault, data, transform, weight in DATA_FAULTS:
        target = _targets(classifier, transform, len(data))
        for method in _training_calls(base, classifier, data, target, weight):
            model = copy.deepcopy(base)
            calls = _training_calls(model, classifier, data, target, weight)
            campaign.call(f"{name}, {method}, {fault}", model, calls[method])
        model = copy.deepcopy(base)
        if transform is None and weight is None:
            campaign.call(f"{name}, predict, {fault}", model, lambda m=model, d=data: (
                m.predict(d), m.predict_proba(d) if hasattr(m, "predict_proba") else None))
    families = [family for family in PARAMETER_FAULTS if name.startswith(family)]
    for family in families:
        for params in PARAMETER_FAULTS[family]:
            for method in _training_calls(base, classifier, X, LABELS, None):
                model = copy.deepcopy(base)
                try:
                    model.set_params(**params)
                except ValueError:
                    campaign.counts["clear errors"] += 1
                    continue
                calls = _training_calls(model, classifier, X, LABELS if classifier else Y,
                                        None)
                campaign.call(f"{name}, {method}, {params}", model, calls[method])
    draws = np.random.RandomState(len(name))
    for method in _training_calls(base, classifier, X, LABELS, None):
        for _ in range(seeds):
            model = copy.deepcopy(base)
            calls = _training_calls(model, classifier, X, LABELS if classifier else Y, None)
            line = int(draws.randint(1, 6000))
            campaign.call(f"{name}, {method}, Ctrl-C at package line {line}", model,
                          calls[method], interrupt_at=line)
    return base


def damaged_files(campaign: Campaign, name: str, model: Any, positions: int,
                  folder: str) -> None:
    path = os.path.join(folder, "model.onnx")
    save(model, path)
    data = open(path, "rb").read()
    draws = np.random.RandomState(len(data))
    chosen = set(draws.choice(len(data), size=min(positions, len(data)), replace=False))
    chosen |= set(range(max(0, len(data) - 40), len(data)))
    damaged = os.path.join(folder, "damaged.onnx")
    for position in sorted(chosen):
        edited = bytearray(data)
        edited[position] ^= int(draws.randint(1, 256))
        _load_damaged(campaign, name, damaged, bytes(edited), f"byte {position}")
    cls = type(model).__name__.encode()
    other = (b"OnnxSGDClassifier" if cls != b"OnnxSGDClassifier" else b"OnnxSGDRegressor")
    if cls in data:
        edited = data.replace(cls, other[:len(cls)].ljust(len(cls), b"r"), 1)
        _load_damaged(campaign, name, damaged, edited, "class name edited")


def _load_damaged(campaign: Campaign, name: str, path: str, data: bytes, what: str) -> None:
    with open(path, "wb") as stream:
        stream.write(data)
    campaign.counts["damaged loads"] += 1
    try:
        load(path)
    except ValueError:
        return
    except Exception as error:
        campaign.note("damaged loads with another error", f"{name}, {what}: {error!r}")
        return
    campaign.note("damaged files that loaded", f"{name}, {what}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--positions", type=int, default=200)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    signal.signal(signal.SIGINT, signal.default_int_handler)
    campaign = Campaign()
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        for name, (make, classifier) in CONFIGURATIONS.items():
            base = run_configuration(campaign, name, make, classifier, args.seeds)
            damaged_files(campaign, name, base, args.positions, folder)
    print(f"fault campaign: {len(CONFIGURATIONS)} configurations, --seeds {args.seeds} "
          f"--positions {args.positions}, {time.perf_counter() - start:.0f} s")
    for kind in ("calls", "clear errors", "Ctrl-C delivered", "other errors",
                 "state changes by failing calls", "silent non-finite predictions",
                 "damaged loads", "damaged files that loaded",
                 "damaged loads with another error"):
        print(f"  {kind}: {campaign.counts[kind]}")
    for kind, examples in campaign.examples.items():
        print(f"examples of {kind}:")
        for example in examples:
            print(f"    {example}")


if __name__ == "__main__":
    main()
