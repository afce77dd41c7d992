"""Ctrl-C at every line the package runs during a training call.

A tracer stops at one line of the package and does there what a Ctrl-C does
(``tests/_interrupts.py``; the trainer's and the estimators' :class:`DeferredInterrupt`
hold it until a safe point). Every distinct line reached by the calls below is hit once: the call
must then end in KeyboardInterrupt (or complete, when the interrupt was held to its very
end and delivered there), never in another exception, and leave the estimator either as
it was before the call, bit for bit, or a consistent model whose attributes are what
predicts, which trains on.
"""

from __future__ import annotations

import copy
import os
import warnings
from functools import partial

import numpy as np
import pytest
from _interrupts import PACKAGE, at_line, ctrl_c_when, package_lines
from sklearn.exceptions import NotFittedError

from skl_ortgrad import OnnxMLPClassifier, OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.runtime import program_run
from skl_ortgrad.training import program_choice

pytestmark = pytest.mark.usefixtures("default_sigint")

RNG = np.random.RandomState(0)
X = RNG.randn(40, 4)
Y = X @ np.array([1.0, 2.0, -3.0, 0.5]) + 0.5
LABELS = (Y > 0.5).astype(int)


def _sgd_refit():
    estimator = OnnxSGDRegressor(max_iter=2, tol=None, batch_size=16, random_state=0)
    return estimator.fit(X, Y), lambda e: e.fit(X, Y)


def _mlp_first_fit():
    estimator = OnnxMLPClassifier(hidden_layer_sizes=(3,), max_iter=2, batch_size=16,
                                  solver="sgd", random_state=0)
    return estimator, lambda e: e.fit(X, LABELS)


def _sgd_partial_fit():
    estimator = OnnxSGDClassifier(batch_size=16, random_state=0)
    return estimator.partial_fit(X, LABELS, classes=[0, 1]), lambda e: e.partial_fit(X, LABELS)


def _sgd_staged_partial_fit():
    """An epoch of two linear program calls (100 batches of 2 rows) on staged rows."""
    rows = np.tile(X, (5, 1))
    estimator = OnnxSGDRegressor(batch_size=2, random_state=0)
    return estimator.partial_fit(rows, np.tile(Y, 5)), lambda e: e.partial_fit(
        rows, np.tile(Y, 5))


def _fitted_state(estimator) -> dict:
    """The estimator's attributes, its optimizer's by identity with its weights and t."""
    state = {name: copy.deepcopy(value) for name, value in vars(estimator).items()
             if name != "optimizer_"}
    optimizer = vars(estimator).get("optimizer_")
    if optimizer is not None:
        state["optimizer_"] = (id(optimizer), optimizer.t_,
                               [np.array(w) for w in optimizer.weights_])
    return state


def _same(a, b) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
                and a.dtype == b.dtype and a.shape == b.shape
                and np.array_equal(a, b, equal_nan=True))
    if isinstance(a, (list, tuple)):
        return (type(a) is type(b) and len(a) == len(b)
                and all(_same(x, y) for x, y in zip(a, b, strict=True)))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if hasattr(a, "__dict__") and not isinstance(a, type):
        return type(a) is type(b)
    if isinstance(a, int):
        return a == b
    return a == b or (a != a and b != b)


def _unchanged(estimator, before: dict) -> bool:
    after = _fitted_state(estimator)
    return after.keys() == before.keys() and all(
        _same(after[name], before[name]) for name in before)


def _consistent(estimator) -> str | None:
    """What is wrong with a fitted ``estimator`` (None: nothing): its attributes must be
    what predicts and what the optimizer holds, and it must train on."""
    optimizer = estimator.optimizer_
    weights = dict(zip(optimizer.weights_to_train_, optimizer.served_weights(), strict=True))
    if isinstance(estimator, OnnxMLPClassifier):
        if estimator.t_ != optimizer.t_ - 1:
            return f"t_={estimator.t_}, optimizer's {optimizer.t_}"
        values = list(weights.values())
        if not all(np.array_equal(c, w) for c, w in zip(estimator.coefs_, values[0::2],
                                                          strict=True)):
            return "coefs_ are not the optimizer's weights"
        hidden = np.maximum(X @ estimator.coefs_[0] + estimator.intercepts_[0], 0)
        score = (hidden @ estimator.coefs_[1] + estimator.intercepts_[1]).ravel()
        expected = 1 / (1 + np.exp(-score))
        if not np.allclose(estimator.predict_proba(X)[:, 1], expected, atol=1e-6):
            return "predict_proba is not the model of coefs_/intercepts_"
    else:
        if estimator.t_ != optimizer.t_:
            return f"t_={estimator.t_}, optimizer's {optimizer.t_}"
        if not np.array_equal(np.ravel(estimator.coef_), np.ravel(weights["coef"])):
            return "coef_ is not the optimizer's weights"
        score = X @ np.atleast_2d(estimator.coef_).T + estimator.intercept_
        function = (estimator.decision_function if hasattr(estimator, "decision_function")
                    else estimator.predict)
        # To float32's rounding of the sum.
        scale = np.abs(X) @ np.abs(np.atleast_2d(estimator.coef_)).T + np.abs(
            estimator.intercept_)
        if np.any(np.abs(np.ravel(function(X)) - np.ravel(score)) > 1e-5 * (
                np.ravel(scale) + 1)):
            return "predictions are not X @ coef_.T + intercept_"
    if len(estimator.loss_curve_) != len(optimizer.train_losses_):
        return "loss_curve_ is not the optimizer's"
    return None


#: Calls tried for each line before it counts as never reached.
REACH_TRIES = 5

CALLS = {"SGD refit": _sgd_refit, "first MLP fit": _mlp_first_fit,
         "SGD partial_fit": _sgd_partial_fit, "SGD staged partial_fit": _sgd_staged_partial_fit}


def test_ctrl_c_at_every_line_leaves_the_estimator_as_before_or_consistent(monkeypatch):
    # The helper thread shares the staged rows (the lines a call runs must not depend on
    # the machine's load).
    monkeypatch.setattr(program_choice, "helper_core_free", lambda threads: True)
    monkeypatch.setattr(program_run, "helper_core_free", lambda threads: True)
    covered: set[tuple[str, int]] = set()
    problems = []
    counts = dict.fromkeys(CALLS, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, make in CALLS.items():
            estimator, call = make()
            call(copy.deepcopy(estimator))  # caches warm: the lines of any later call
            traced = copy.deepcopy(estimator)
            lines = [line for line in package_lines(partial(call, traced))
                     if line not in covered]
            for index, line in enumerate(lines):
                # The calling thread gathers the staged parts the helper has not begun:
                # which thread runs a part's lines depends on timing (seen once in CI,
                # three suites side by side), so an unreached line is tried again.
                for _ in range(REACH_TRIES):
                    target = copy.deepcopy(estimator)
                    before = _fitted_state(target)
                    raised, reached = ctrl_c_when(partial(call, target), at_line(line))
                    if reached:
                        break
                assert reached, (name, line)
                counts[name] += 1
                where = f"{name}, Ctrl-C at {os.path.relpath(line[0], PACKAGE)}:{line[1]}"
                if raised is not None and not isinstance(raised, KeyboardInterrupt):
                    problems.append(f"{where}: {type(raised).__name__}: {raised}")
                    continue
                if _unchanged(target, before):
                    if "optimizer_" not in before:
                        with pytest.raises(NotFittedError):
                            target.predict(X)
                    continue
                wrong = _consistent(target)
                if wrong is not None:
                    problems.append(f"{where}: {wrong}")
                    continue
                if index % 10 == 0:
                    # It trains on: a new call works on what Ctrl-C left.
                    call(target)
                    assert _consistent(target) is None, where
                covered.add(line)
            covered.update(lines)
    assert problems == []
    # Every line of every call was hit: hundreds for each.
    assert min(counts.values()) > 50, counts
