r"""Full-batch training with L-BFGS (scikit-learn's ``solver='lbfgs'``).

The objective is the weighted mean loss over all the rows plus the penalty,

.. math::

    F(W) = \frac{\sum_i s_i\, \ell(y_i, f(x_i; W))}{\sum_i s_i} + P(W),

whose value and gradient come from one onnxruntime call of the optimizer's training step
on the whole data (:math:`\nabla P` from the penalty object,
:meth:`~skl_ortgrad.optim.penalties.BaseLearningPenalty.gradient`).
``scipy.optimize.minimize(method='L-BFGS-B')`` drives it in float64 with scikit-learn's
options: ``maxiter``, ``maxfun`` and ``gtol``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from scipy.optimize import minimize
from sklearn.utils.optimize import _check_optimize_result

from skl_ortgrad.runtime.devices import ort_device
from skl_ortgrad.training.trainer import Trainer


def fit_lbfgs(
    optimizer: Trainer,
    data: tuple[list[Any], bool],
    max_iter: int,
    max_fun: int,
    tol: float,
) -> int:
    """Minimize :math:`F` from the optimizer's current weights (in place).

    Parameters
    ----------
    optimizer : Trainer
        Its loss, penalty, weights and engine; ``train_losses_`` receives the objective
        after every iteration, ``weights_`` the solution.
    data : tuple
        Checked arrays and whether they hold sample weights (``optimizer.cast``).
    max_iter, max_fun, tol : int, int, float
        L-BFGS iterations, objective evaluations and gradient tolerance.

    Returns
    -------
    int
        Iterations run (scikit-learn's ``n_iter_``); a ``ConvergenceWarning`` says when
        L-BFGS stopped before converging.
    """
    optimizer.begin(fit=True)
    arrays, weighted = data
    engine = optimizer.engine(weighted)
    device = ort_device(engine.cls_type_.device)
    n_rows = arrays[0].shape[0]
    loader = optimizer.loader(arrays, weighted, device, batch_size=n_rows, shuffle=False)
    step = engine.step_function(None)
    loss_buffer, *gradients = step.outputs
    feed = loader.epoch()(0)
    weights = optimizer.weights_
    penalized_ids = {id(w) for w in optimizer.penalized()}
    penalty = optimizer.learning_penalty_
    sizes = np.cumsum([w.size for w in weights])[:-1]

    def objective(theta: np.ndarray) -> tuple[float, np.ndarray]:
        for w, part in zip(weights, np.split(theta, sizes), strict=True):
            w[...] = part.reshape(w.shape)
        step.run(feed)
        penalized = [w for w in weights if id(w) in penalized_ids]
        value = float(loss_buffer) / float(loader.totals[0]) + penalty.penalty_loss(penalized)
        extra = iter(penalty.gradient(penalized))
        grads = [
            g.astype(np.float64) + (next(extra) if id(w) in penalized_ids else 0.0)
            for w, g in zip(weights, gradients, strict=True)
        ]
        return value, np.concatenate([g.ravel() for g in grads])

    def record(intermediate_result: Any) -> None:
        optimizer.train_losses_.append(float(intermediate_result.fun))

    start = np.concatenate([w.ravel() for w in weights]).astype(np.float64)
    result = minimize(
        objective, start, method="L-BFGS-B", jac=True, callback=record,
        options={"maxfun": max_fun, "maxiter": max_iter, "iprint": -1, "gtol": tol},
    )
    objective(result.x)
    optimizer.t_ += n_rows * result.nit
    optimizer.n_iter_ = optimizer.epochs_completed_ = _check_optimize_result(
        "lbfgs", result, max_iter)
    return optimizer.n_iter_
