r"""A penalty that is a term of every batch's loss: scikit-learn's MLP L2 term.

.. math::

    L_B = \sum_{i \in B} s_i \ell_i + \frac{\alpha}{2} \sum_W \lVert W \rVert_2^2

Its gradient :math:`\alpha W` joins the batch's loss gradient before the update rule
sees it. Scaled by the batch's output gradient :math:`\sigma_B = 1 / \sum_{i \in B} s_i`
like the rest of it, the step's gradient is scikit-learn's MLP gradient

.. math::

    g_B = \sigma_B \Bigl(\sum_{i \in B} s_i \nabla \ell_i + \alpha W\Bigr),

so momentum, Nesterov and Adam carry the penalty in their velocities and moments as
scikit-learn's do, and the epoch's loss includes it, as scikit-learn's ``loss_``.
:class:`~skl_ortgrad.optim.penalties.ElasticLearningPenalty` instead
decays the weights before the update rule's step: for plain SGD the same step, for a rule
with a state a different one (Adam's normalization would make the decay all but vanish).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable

import numpy as np
import onnx

from skl_ortgrad.optim.penalties import BaseLearningPenalty, NoLearningPenalty

__all__ = ["L2LossPenalty"]


class L2LossPenalty(BaseLearningPenalty):
    r"""The L2 term :math:`P(W) = \frac{\alpha}{2} \sum_W \lVert W \rVert_2^2` of every
    batch's loss (see :mod:`skl_ortgrad.optim.loss_penalty`).

    Its gradient is :math:`\partial P / \partial W = \alpha W`; it takes no proximal step
    (:meth:`stepper` leaves the weights as they are): :meth:`loss_term` adds its value to
    the batch's loss and its gradient to the batch's gradient.

    Parameters
    ----------
    alpha : float, default=0.0001
        :math:`\alpha \ge 0`, scikit-learn's MLP ``alpha``.
    """

    def __init__(self, alpha: float = 0.0001) -> None:
        self.alpha = alpha

    def _validate(self) -> None:
        alpha = self.alpha
        if (not isinstance(alpha, numbers.Real) or isinstance(alpha, bool)
                or not math.isfinite(float(alpha)) or alpha < 0):
            raise ValueError(f"alpha must be a finite number >= 0, got {alpha!r}.")

    def penalty_loss(self, weights: list[np.ndarray]) -> float:
        r"""Return :math:`\frac{\alpha}{2} \sum_W \lVert W \rVert_2^2`, in float64."""
        self._validate()
        return 0.5 * float(self.alpha) * sum(
            float(np.square(np.asarray(w, dtype=np.float64)).sum()) for w in weights)

    def gradient(self, weights: list[np.ndarray]) -> list[np.ndarray]:
        r"""Return :math:`\alpha W` for every weight."""
        self._validate()
        return [float(self.alpha) * w for w in weights]

    def stepper(self, weights: list[np.ndarray]) -> Callable[[float], None]:
        """Return a step that leaves the weights as they are: the penalty is in the
        gradient (:meth:`loss_term`)."""
        self._validate()
        return NoLearningPenalty().stepper(weights)

    def loss_term(
        self, weights: list[np.ndarray], gradients: list[np.ndarray],
    ) -> Callable[[float], float]:
        r"""Return ``term(scale)``: add :math:`\sigma \alpha W` (``scale`` :math:`=
        \sigma`, the batch's output gradient) to each weight's gradient, in place, and
        return :math:`\frac{\alpha}{2} \sum_W \lVert W \rVert_2^2`, both at the weights
        the gradients were computed at (before the update).

        ``gradients[i]`` is the gradient of ``weights[i]``; one scratch array per weight,
        allocated here.
        """
        self._validate()
        if len(weights) != len(gradients):
            raise ValueError(
                f"{len(weights)} weights but {len(gradients)} gradients.")
        alpha = float(self.alpha)
        pairs = [(w, g, np.empty_like(g)) for w, g in zip(weights, gradients, strict=True)]

        def term(scale: float) -> float:
            # A Python float keeps float32 arithmetic float32.
            factor = float(scale) * alpha
            for w, g, scratch in pairs:
                np.multiply(w, factor, out=scratch)
                np.add(g, scratch, out=g)
            return 0.5 * alpha * sum(float(np.vdot(w, w)) for w in weights)

        return term

    def build_onnx_function(
        self, opset: int, device: str, n_tensors: int, dtype: type | np.dtype = np.float32
    ) -> onnx.ModelProto:
        """Return the proximal update of the penalty, the identity
        (:meth:`NoLearningPenalty.build_onnx_function`): its term is in the loss."""
        self._validate()
        return NoLearningPenalty().build_onnx_function(opset, device, n_tensors, dtype)
