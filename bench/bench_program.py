"""The training program (skl_ortgrad.training.programs) in the estimators, at their
defaults, against scikit-learn and against the per-batch path.

Per task (100k x 100 float32: regression, binary and 10-class classification, with the
estimators' default losses, and the binary log loss), seconds of one epoch by
``fit(max_iter=1, tol=None)`` and by ``partial_fit`` on a fitted model: scikit-learn's
``SGDRegressor``/``SGDClassifier``, ours with the program (the default: the linear
program for the squared error, the binary log and hinge losses, the generic one for 10
classes), ours per batch (``_PROGRAM_STEPS = 1``, one onnxruntime call per batch), and
ours with the generic program where the linear one runs. Then momentum and Adam on a
linear model and on two MLPs (20k rows, batch 32), their state in the program against
the per-batch path (what sets ``PROGRAM_MAX_STATE``), and the linear program's batches
per call (what sets ``LINEAR_STEPS``). Every timing is interleaved in
one process (5 rounds after a warm-up round); ratios are taken per round, then their
median and range are shown.

    python bench/bench_program.py
"""

from __future__ import annotations

import sys
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
from sklearn.linear_model import SGDClassifier, SGDRegressor

from skl_ortgrad import (
    LearningRateAdam,
    LearningRateSGDNesterov,
    OnnxMLPRegressor,
    OnnxSGDClassifier,
    OnnxSGDRegressor,
)
from skl_ortgrad.training import program_choice

N_ROWS, N_FEATURES = 100_000, 100

#: The estimators' tasks: (label, scikit-learn's estimator, ours), defaults.
TASKS: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
    "regression (squared error)": (
        lambda: SGDRegressor(max_iter=1, tol=None, random_state=0),
        lambda: OnnxSGDRegressor(max_iter=1, tol=None, random_state=0)),
    "binary (hinge)": (
        lambda: SGDClassifier(max_iter=1, tol=None, random_state=0),
        lambda: OnnxSGDClassifier(max_iter=1, tol=None, random_state=0)),
    "binary (log loss)": (
        lambda: SGDClassifier(loss="log_loss", max_iter=1, tol=None, random_state=0),
        lambda: OnnxSGDClassifier(loss="log_loss", max_iter=1, tol=None, random_state=0)),
    "10 classes (hinge, one-vs-rest)": (
        lambda: SGDClassifier(max_iter=1, tol=None, random_state=0),
        lambda: OnnxSGDClassifier(max_iter=1, tol=None, random_state=0)),
}


def task_data(task: str, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """X ~ N(0, 1) float32; y linear + noise, its sign, or the argmax of 10 noisy
    linear scores."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N_ROWS, N_FEATURES), dtype=np.float32)
    if task.startswith("10"):
        scores = X @ rng.standard_normal((N_FEATURES, 10)).astype(np.float32)
        return X, np.argmax(scores + 3.0 * rng.standard_normal(scores.shape), axis=1)
    score = X @ rng.standard_normal(N_FEATURES).astype(np.float32) + 0.5
    y = score + 3.3 * rng.standard_normal(N_ROWS).astype(np.float32)
    return X, (y if task.startswith("regr") else (y > 0).astype(np.int64))


def patched(call: Callable[[], Any], name: str, value: Any) -> Callable[[], Any]:
    """``call`` with the program choice's setting ``name`` set to ``value`` while it
    runs."""
    def run() -> Any:
        saved = getattr(program_choice, name)
        setattr(program_choice, name, value)
        try:
            return call()
        finally:
            setattr(program_choice, name, saved)

    return run


def per_batch(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` with the training program off: one onnxruntime call per batch (what
    the estimators did before it)."""
    return patched(call, "PROGRAM_STEPS", 1)


def forced_program(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` with the program for update rules with a state whatever the model's
    size."""
    return patched(call, "PROGRAM_MAX_STATE", 10**9)


def generic_only(call: Callable[[], Any]) -> Callable[[], Any]:
    """``call`` with the generic program wherever the linear one would run (the
    gradient graph plus updates)."""
    def run() -> Any:
        lean = program_choice.lean_loss
        program_choice.lean_loss = lambda *args: None
        # Programs are shared by configuration: none built under the patch outlives it.
        program_choice.PROGRAMS.clear()
        try:
            return call()
        finally:
            program_choice.lean_loss = lean
            program_choice.PROGRAMS.clear()

    return run


def estimator_table(task: str, n_rounds: int) -> Table:
    """Seconds of one epoch of the estimators at their defaults (batch size 32),
    ``fit(max_iter=1, tol=None)`` and ``partial_fit`` on a fitted model, against
    scikit-learn's; ours with the training program (the default), per batch, and with
    the generic program where the linear one runs."""
    X, y = task_data(task)
    make_sklearn, make_ours = TASKS[task]
    classes = {"classes": np.unique(y)} if "class" in task or "binary" in task else {}
    skl_warm, ours_warm = make_sklearn().fit(X, y), make_ours().fit(X, y)
    # Programs are built once per estimator: this one's is the generic program.
    ours_generic = generic_only(lambda: make_ours().fit(X, y))()
    candidates: dict[str, Callable[[], Any]] = {
        "sklearn fit": lambda: make_sklearn().fit(X, y),
        "ours fit": lambda: make_ours().fit(X, y),
        "ours fit, per batch": per_batch(lambda: make_ours().fit(X, y)),
        "sklearn partial_fit": lambda: skl_warm.partial_fit(X, y, **classes),
        "ours partial_fit": lambda: ours_warm.partial_fit(X, y, **classes),
        "ours partial_fit, per batch": per_batch(
            lambda: ours_warm.partial_fit(X, y, **classes)),
        "ours partial_fit, generic program": generic_only(
            lambda: ours_generic.partial_fit(X, y, **classes)),
    }
    runs = interleaved_runs(candidates, n_rounds=n_rounds, warmup=1)
    table = Table(
        f"{task}: seconds per epoch, {N_ROWS // 1000}k x {N_FEATURES} float32, "
        "defaults (batch 32, L2 alpha=1e-4, 'invscaling' / 'optimal')",
        ["contender", "s (median)", "/ sklearn, same call: median (range)",
         "/ ours per batch, same call: median (range)"])
    for name, values in runs.items():
        call = "partial_fit" if "partial" in name else "fit"
        mine = name.startswith("ours") and not name.endswith("per batch")
        table.add(name, float(np.median(values)), ratio_spread(runs, name, f"sklearn {call}"),
                  ratio_spread(runs, name, f"ours {call}, per batch") if mine else "")
    table.notes.append(f"{n_rounds} interleaved rounds after 1 warm-up round.")
    return table


#: Update rules with a state, in the program or per batch: (label, estimator factory).
RULES: dict[str, Callable[[], Any]] = {
    "linear, Nesterov (101 values)": lambda: OnnxSGDRegressor(
        learning_rate=LearningRateSGDNesterov(eta0=1e-4, learning_rate="constant"),
        random_state=0),
    "linear, Adam (101 values)": lambda: OnnxSGDRegressor(
        learning_rate=LearningRateAdam(eta0=1e-3), random_state=0),
    "MLP 100-16-1, Adam (1,633 values)": lambda: OnnxMLPRegressor(
        hidden_layer_sizes=(16,), batch_size=32, random_state=0),
    "MLP 100-128-1, Adam (12,929 values)": lambda: OnnxMLPRegressor(
        hidden_layer_sizes=(128,), batch_size=32, random_state=0),
}


def rules_table(n_rounds: int, n_rows: int = 20_000) -> Table:
    """Seconds of one ``partial_fit`` epoch (batch 32) with momentum or Adam, their
    state in the program (forced) against the per-batch path: what sets
    ``PROGRAM_MAX_STATE``."""
    X, y = task_data("regression")
    X, y = X[:n_rows], y[:n_rows]
    candidates: dict[str, Callable[[], Any]] = {}
    for label, make in RULES.items():
        in_program = forced_program(lambda make=make: make().partial_fit(X, y))()
        per_call = make().partial_fit(X, y)
        candidates[f"{label}: program"] = forced_program(
            lambda model=in_program: model.partial_fit(X, y))
        candidates[f"{label}: per batch"] = per_batch(
            lambda model=per_call: model.partial_fit(X, y))
    runs = interleaved_runs(candidates, n_rounds=n_rounds, warmup=1)
    table = Table(
        f"Update rules with a state: seconds per partial_fit epoch, {n_rows // 1000}k x "
        f"{N_FEATURES} float32, batch 32, in the program (forced) or per batch",
        ["rule", "program (s)", "per batch (s)", "program / per batch: median (range)"],
        notes=[f"{n_rounds} interleaved rounds after 1 warm-up round; the estimators run "
               f"these rules in the program up to {program_choice.PROGRAM_MAX_STATE} trained "
               "values."])
    for label in RULES:
        program, batch = f"{label}: program", f"{label}: per batch"
        table.add(label, float(np.median(runs[program])), float(np.median(runs[batch])),
                  ratio_spread(runs, program, batch))
    return table


#: Batches per call of the linear program compared by :func:`chunk_table`.
CHUNK_STEPS = (32, 64, 128)


def _chunk_runs(task: str, n_rounds: int) -> dict[str, list[float]]:
    """Interleaved ``partial_fit`` epochs of ``task``: scikit-learn's, and ours with each
    of :data:`CHUNK_STEPS` batches per call (one model per setting: a model rebinds its
    program when the setting changes)."""
    X, y = task_data(task)
    make_sklearn, make_ours = TASKS[task]
    classes = {"classes": np.unique(y)} if "binary" in task else {}
    theirs = make_sklearn().fit(X, y)
    candidates: dict[str, Callable[[], Any]] = {
        "sklearn": lambda: theirs.partial_fit(X, y, **classes)}
    for steps in CHUNK_STEPS:
        # At 100 features the chunk's feature-value bound allows up to 128.
        ours = patched(lambda: make_ours().fit(X, y), "LINEAR_STEPS", steps)()
        candidates[str(steps)] = patched(
            lambda model=ours: model.partial_fit(X, y, **classes), "LINEAR_STEPS", steps)
    return interleaved_runs(candidates, n_rounds=n_rounds, warmup=1)


def chunk_table(n_rounds: int) -> Table:
    """Seconds of one ``partial_fit`` epoch at the defaults (batch 32) with the linear
    program running 32, 64 or 128 batches per call, against scikit-learn's: what sets
    ``LINEAR_STEPS``."""
    table = Table(
        f"Linear program, batches per call: one partial_fit epoch, {N_ROWS // 1000}k x "
        f"{N_FEATURES} float32, defaults (batch 32), against scikit-learn's",
        ["task", *(f"{steps} per call / sklearn" for steps in CHUNK_STEPS)],
        notes=[f"{n_rounds} interleaved rounds after 1 warm-up round; the estimators run "
               f"up to {program_choice.LINEAR_STEPS} (`LINEAR_STEPS`)."])
    for task in ("regression (squared error)", "binary (hinge)"):
        runs = _chunk_runs(task, n_rounds)
        table.add(task, *(ratio_spread(runs, str(steps), "sklearn") for steps in CHUNK_STEPS))
    return table


def run() -> list[Table]:
    quiet_warnings()
    return [*(estimator_table(task, rounds(5)) for task in TASKS), rules_table(rounds(5)),
            chunk_table(rounds(9))]


if __name__ == "__main__":
    info = machine_info()
    print(f"Python {sys.version.split()[0]}, onnxruntime {info['onnxruntime (module)']}, "
          f"scikit-learn {info['scikit-learn']}, CPU {info['CPU']} "
          f"({info['cores (os.cpu_count)']} cores)\n")
    print_tables(run())
