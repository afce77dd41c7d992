r"""The gradient of a loss graph with respect to the prediction, by a gradient backend.

The loss objects (``skl_ortgrad.optim.losses``) emit their graph and compute the loss and
its derivative in numpy; :func:`graph_loss_gradient` differentiates the graph itself, the
one training uses (:func:`~skl_ortgrad.gradient.derivative.onnx_derivative`, with either
backend), so that the two can be compared: the gradient of

.. math::

    L = \sum_i w_i \sum_k \ell(y_{ik}, p_{ik})

with respect to :math:`p`, :math:`w_i\, \partial \ell / \partial p_{ik}`.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import ModelProto

from skl_ortgrad._cache import BoundedCache, digest
from skl_ortgrad.gradient.backend import resolve_backend
from skl_ortgrad.gradient.derivative import DerivativeOptions, onnx_derivative
from skl_ortgrad.runtime.options import session_options
from skl_ortgrad.runtime.sessions import cached_session

__all__ = ["graph_loss_gradient"]

#: The gradient sessions of loss graphs, by graph and backend.
_SESSIONS: BoundedCache[Any] = BoundedCache(32)


def graph_loss_gradient(
    loss_graph: ModelProto,
    label: np.ndarray,
    prediction: np.ndarray,
    weight: np.ndarray | None = None,
    backend: str = "auto",
) -> tuple[float, np.ndarray]:
    r"""Return the loss of a loss graph and its gradient with respect to ``prediction``,
    computed by onnxruntime on the gradient graph ``backend`` builds.

    Parameters
    ----------
    loss_graph : onnx.ModelProto
        A loss graph (``build_onnx_function`` of a loss object, or
        :func:`~skl_ortgrad.objective.loss_graphs.build_loss_graph`): inputs ``label``,
        ``prediction`` (``[N, K]``) and, when weighted, ``weight`` (``[N]``); output the
        scalar ``loss``.
    label, prediction, weight : numpy.ndarray
        Of the graph's dtype and shapes (1-D label and prediction are one column), as
        :func:`~skl_ortgrad.objective.loss_graphs.loss_arrays` checks them; ``weight``
        exactly when the graph is weighted.
    backend : str, default="auto"
        See :func:`~skl_ortgrad.gradient.backend.resolve_backend`.

    Returns
    -------
    loss : float
        :math:`\sum_i w_i \sum_k \ell(y_{ik}, p_{ik})`.
    gradient : array with the shape and dtype of ``prediction``
    """
    backend = resolve_backend(backend)

    def build() -> Any:
        # weights=[]: a loss graph trains nothing, only the gradient with respect to the
        # input 'prediction' is wanted; KeepOutputs returns the loss too.
        gradient = onnx_derivative(
            loss_graph, weights=[], inputs=["prediction"],
            options=DerivativeOptions.Loss | DerivativeOptions.KeepOutputs, backend=backend,
        )
        # A loss's batches are small: one thread avoids the thread pool's overhead.
        return cached_session(gradient, session_options(1), ["CPUExecutionProvider"])

    session = _SESSIONS.get((digest(loss_graph.SerializeToString()), backend), build)
    rows = len(prediction)
    # onnxruntime copies non-contiguous arrays anyway; a 1-D input is one column.
    feeds = {"label": np.ascontiguousarray(label.reshape(rows, -1)),
             "prediction": np.ascontiguousarray(prediction.reshape(rows, -1))}
    if weight is not None:
        feeds["weight"] = np.ascontiguousarray(weight)
    value, gradient = session.run(["loss", "prediction_grad"], feeds)
    return float(value), gradient.reshape(prediction.shape)
