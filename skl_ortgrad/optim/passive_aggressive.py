r"""The passive-aggressive step of a linear model (scikit-learn's ``learning_rate='pa1'``
and ``'pa2'``), one row per step.

For the row :math:`x` of a batch of one, its scores :math:`p_k = x W_{:k} + b_k` and
their losses :math:`\ell_k = \ell(y_k, p_k)` at the weights the step starts from (the
hinge loss of a classifier, the epsilon-insensitive loss of a regressor), the step size
of every output :math:`k` is

.. math::

    \tau_k = \min\left(C, \frac{\ell_k}{\lVert x \rVert^2}\right) \quad \text{(PA-I)},
    \qquad
    \tau_k = \frac{\ell_k}{\lVert x \rVert^2 + \frac{1}{2C}} \quad \text{(PA-II)},

and every weight moves along its gradient :math:`g` (:math:`s\, \partial \ell / \partial
w`, the row's weight :math:`s` included), times its step factor :math:`f`:
:math:`w \leftarrow w - \tau f g`, that is :math:`W_{:k} \leftarrow W_{:k} + \tau_k s
(2y_k - 1) x^\top` for the hinge inside its margin. A PA-I row with :math:`\lVert x
\rVert = 0` is skipped: no step, no decay, :math:`t` unchanged. The schedule is
constant, :math:`\eta_t = C`: the penalty's decay and L1 threshold take it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import onnx

from skl_ortgrad.optim.checks import (
    check_lists,
    check_step_factors,
    per_weight_factors,
    positive,
)
from skl_ortgrad.optim.losses import BaseLearningLoss, HingeLearningLoss
from skl_ortgrad.optim.rate import BaseLearningRate

__all__ = ["PassiveAggressiveRate"]

VARIANTS = ("pa1", "pa2")


class PassiveAggressiveRate(BaseLearningRate):
    r"""Crammer et al.'s passive-aggressive step (see the module docstring), as
    scikit-learn's SGD estimators take it with ``learning_rate='pa1'`` or ``'pa2'`` and
    ``eta0`` as :math:`C`.

    It reads the row of every step (:attr:`reads_batch`): it trains one row a batch, on
    the CPU, in the linear program's passive-aggressive form where that computes the
    same steps (:class:`~skl_ortgrad.training.programs.linear.PassiveAggressiveForm`: the
    intercept trained, or fixed in the model), per batch otherwise.

    Parameters
    ----------
    C : float, default=1.0
        :math:`C > 0`: PA-I's largest step, PA-II's regularization (the smaller, the
        shorter the steps), and the constant rate of the schedule.
    variant : {'pa1', 'pa2'}, default='pa1'
        PA-I or PA-II.
    loss : BaseLearningLoss, optional
        The loss :math:`\ell` (its :meth:`~BaseLearningLoss.elementwise`); None: the
        hinge loss.
    intercept : array-like, optional
        The intercept :math:`b` where it is not trained (the model's fixed one); None:
        it is the second trained weight.
    step_factors : tuple of float, optional
        One factor :math:`f > 0` per trained weight (scikit-learn's ``intercept_decay``
        on sparse data); None: 1 for every weight.
    """

    #: Every step reads its row (:meth:`stepper`'s ``take``).
    reads_batch = True

    def __init__(self, C: float = 1.0, variant: str = "pa1",
                 loss: BaseLearningLoss | None = None, intercept: Any = None,
                 step_factors: tuple[float, ...] | None = None) -> None:
        self.C = C
        self.variant = variant
        self.loss = loss
        self.intercept = intercept
        self.step_factors = step_factors

    def _validate(self) -> None:
        if not positive(self.C):
            raise ValueError(f"C must be a finite number > 0, got {self.C!r}.")
        if self.variant not in VARIANTS:
            raise ValueError(f"variant must be one of {list(VARIANTS)}, got {self.variant!r}.")
        if self.loss is not None and not isinstance(self.loss, BaseLearningLoss):
            raise ValueError(f"loss must be None or a BaseLearningLoss, got {self.loss!r}.")
        check_step_factors(self.step_factors)

    def eta(self, t: int) -> float:
        """:math:`C`, whatever ``t``."""
        self._validate()
        return float(self.C)

    def schedule(self, ts: np.ndarray) -> np.ndarray:
        """:math:`C` for every ``t`` of ``ts``."""
        self._validate()
        return np.full(np.shape(ts), float(self.C))

    def init_state(self, weights: list[np.ndarray]) -> list[np.ndarray]:
        """No state: ``[]``."""
        self._validate()
        return []

    def stepper(
        self,
        weights: list[np.ndarray],
        gradients: list[np.ndarray],
        state: list[np.ndarray],
    ) -> Callable[[float], None]:
        r"""Return ``step(eta)``, :math:`w \leftarrow w - \tau f g`, with
        ``step.take(features, labels)``, called before it (before the penalty's decay)
        with the batch's row: it sets :math:`\tau` from the weights as they are and
        returns False for a row to skip (PA-I, :math:`\lVert x \rVert = 0`).

        ``weights`` are a linear model's :math:`W` (``[d, K]``), then :math:`b` (``[K]``)
        unless :attr:`intercept` is given.

        Raises
        ------
        ValueError
            If ``step_factors`` does not hold one factor per weight; ``take``, for a
            batch of more than one row.
        """
        self._validate()
        check_lists(weights, gradients)
        factors = per_weight_factors(self.step_factors, len(weights))
        fixed = None if self.intercept is None else np.asarray(self.intercept, np.float64)
        return _PassiveAggressiveStep(
            weights, gradients, factors, HingeLearningLoss() if self.loss is None else self.loss,
            float(self.C), self.variant == "pa2", fixed)

    def update_key(self) -> tuple[str, str, float]:
        """The variant and :math:`C`, which the linear program's passive-aggressive step
        holds as constants."""
        return type(self).__qualname__, self.variant, float(self.C)

    def build_onnx_function(self, opset: int, device: str, *args: Any) -> onnx.ModelProto:
        """No update graph: the step reads its row's loss, which such a graph does not
        see.

        Raises
        ------
        NotImplementedError
            Always.
        """
        raise NotImplementedError(
            "The passive-aggressive step trains on the CPU only: it reads every row's "
            "loss, which an update graph does not see.")


class _PassiveAggressiveStep:
    """``step(eta)`` of :class:`PassiveAggressiveRate` over these buffers, after
    :meth:`take` read the batch's row."""

    def __init__(self, weights: list[np.ndarray], gradients: list[np.ndarray],
                 factors: tuple[float, ...], loss: BaseLearningLoss, C: float, second: bool,
                 intercept: np.ndarray | None) -> None:
        self._weights, self._loss, self._C, self._second = weights, loss, C, second
        self._intercept = intercept
        self._moves = [(w, g, float(f), np.empty_like(g))
                       for w, g, f in zip(weights, gradients, factors, strict=True)]
        self._sizes = np.zeros(weights[0].shape[1], dtype=weights[0].dtype)

    def take(self, features: np.ndarray, labels: np.ndarray) -> bool:
        r"""Set every output's :math:`\tau` from the row ``features`` (``[1, d]``) and its
        ``labels`` at the current weights; False: PA-I skips the row."""
        if features.shape[0] != 1:
            raise ValueError("The passive-aggressive step reads one row a batch, got "
                             f"{features.shape[0]}.")
        row = features[0]
        squared = float(np.dot(row, row))
        if squared == 0.0 and not self._second:
            return False
        weights = self._weights
        scores = row @ weights[0] + (weights[1] if self._intercept is None
                                     else self._intercept)
        each = self._loss.elementwise(labels.reshape(scores.shape), scores)[0]
        if self._second:
            np.divide(each, squared + 0.5 / self._C, out=self._sizes)
        else:
            np.minimum(each / squared, self._C, out=self._sizes)
        return True

    def __call__(self, eta: float) -> None:
        for w, g, f, tmp in self._moves:
            np.multiply(g, self._sizes, out=tmp)
            if f != 1.0:
                # (tau g) f, scikit-learn's order (update * intercept_decay).
                np.multiply(tmp, f, out=tmp)
            np.subtract(w, tmp, out=w)
