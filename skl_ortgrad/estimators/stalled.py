"""A training call whose every step rounded away: refused, never a silent no-op.

A float32 model of data near 1e30 trains under a learning rate scaled to the data (about
1e-60, :func:`~skl_ortgrad.estimators.curvature.stable_step`), which float32 rounds to
zero: every batch runs, the loss stays finite, and the weights never move. scikit-learn
raises on such data; the estimators say what happened instead of returning the initial
weights as a fitted model.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import numpy_helper

from skl_ortgrad.exceptions import ConvergenceError


def check_weights_moved(optimizer: Any, start: int, before: list[np.ndarray] | None,
                        X: Any) -> None:
    """Refuse a call of ``optimizer`` whose batches all left the weights as they were
    while the loss is not zero, under a learning rate that rounds to zero in the
    training dtype.

    Parameters
    ----------
    optimizer : Trainer
        After the call.
    start : int
        Its ``t_`` before the call (no batch ran when it is unchanged: nothing to check).
    before : list of numpy.ndarray or None
        Its weights before the call; None for a new optimizer (its model's initializers).
    X : array-like or sparse matrix
        The data trained on (its largest value goes in the message).

    Raises
    ------
    ConvergenceError
        Saying that every step rounded away, with the rate, the data's largest value
        and what to do; a loss of zero (a margin loss satisfied everywhere) has no step
        to take, and a model at its optimum steps below its rounding: neither is
        refused.
    """
    losses = optimizer.train_losses_
    dtype = optimizer.model_dtype()
    eta = optimizer.learning_rate_.eta(optimizer.t_)
    # A step below the weights' rounding is also what a model at its optimum takes (a
    # fitted LinearRegression fine-tuned): only a rate that is itself zero in the dtype
    # says that no data could have moved them.
    if (optimizer.t_ == start or not losses or not losses[-1] > 0
            or dtype.type(eta) != 0):
        return
    if before is None:
        initial = {init.name: init for init in optimizer.model_onnx.graph.initializer}
        before = [numpy_helper.to_array(initial[name]) for name in optimizer.weights_to_train_]
    if not all(np.array_equal(a, b) for a, b in zip(optimizer.weights_, before, strict=True)):
        return
    raise ConvergenceError(
        f"Training did not change the weights: every step rounded away in {dtype.name} "
        f"(learning rate eta={eta:.4g}, which is 0 in {dtype.name}, for values of X up "
        f"to {float(abs(X).max()):.4g}), the loss staying {losses[-1]:.6g}. The estimator "
        "is as it was before the call; scale X (StandardScaler), or train in float64 "
        "(dtype=numpy.float64).")
