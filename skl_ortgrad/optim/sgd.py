r"""Plain stochastic gradient descent, :math:`w \leftarrow w - \eta_t g`, with
scikit-learn's schedules (:mod:`skl_ortgrad.optim.schedules`)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np
import onnx

from skl_ortgrad.graph.step_graph import StepGraph
from skl_ortgrad.optim import schedules
from skl_ortgrad.optim.checks import (
    check_lists,
    check_step_factors,
    finite,
    per_weight_factors,
    positive,
)
from skl_ortgrad.optim.rate import BaseLearningRate, segments
from skl_ortgrad.optim.update_graph import update_function

__all__ = ["LearningRateSGD"]


class LearningRateSGD(BaseLearningRate):
    r"""Plain stochastic gradient descent with scikit-learn's step size schedules.

    Update rule, for every weight :math:`w` with gradient :math:`g` of the mini-batch's
    mean loss, and the weight's step factor :math:`f` (1 unless ``step_factors`` says):

    .. math::

        w \leftarrow w - \eta_t\, f\, g

    Parameters
    ----------
    eta0 : float, default=0.01
        Initial learning rate (> 0), of every schedule: :math:`\eta_1 = \eta_0`.
    alpha : float, default=0.0001
        Used only by the ``'optimal'`` schedule (> 0). It is not a penalty here: the
        penalty is a separate object (:mod:`skl_ortgrad.optim.penalties`).
    power_t : float, default=0.25
        Exponent of the ``'invscaling'`` schedule.
    learning_rate : {'constant', 'invscaling', 'optimal'}, default='invscaling'
        Schedule:

        * ``'constant'``: :math:`\eta_t = \eta_0`;
        * ``'invscaling'``: :math:`\eta_t = \eta_0 / t^{power\_t}`;
        * ``'optimal'``: :math:`\eta_t = 1 / (\alpha (t_0 + t - 1))` with
          :math:`t_0 = 1 / (\alpha \eta_0)`, Bottou's schedule, which starts at
          :math:`\eta_0` and decays as :math:`1 / (\alpha t)`.

        scikit-learn's ``'optimal'`` starts from
        :math:`\eta_{init} = \tau / \max(1, \ell'(-\tau, 1))`,
        :math:`\tau = \sqrt{1/\sqrt{\alpha}}`; for every loss used in this package
        :math:`\ell'(-\tau, 1) \le 0` (the loss decreases as the score moves towards the
        label), hence :math:`\eta_{init} = \tau`: :meth:`scikit_learn_optimal` builds that
        schedule (what the estimators use for ``learning_rate='optimal'``).
    step_factors : tuple of float, optional
        One factor :math:`f_i > 0` per trained weight, in the trainer's order, multiplying
        that weight's step; None (default): 1 for every weight. The SGD estimators give
        ``(1.0, 0.01)`` (coefficients, intercept) on sparse data: scikit-learn's
        ``intercept_decay`` (``SPARSE_INTERCEPT_DECAY``), which damps the intercept's
        step on sparse data only.

    Notes
    -----
    Parameters are validated when the object is used (:meth:`eta`, :meth:`init_state`),
    not in ``__init__``, following scikit-learn's convention.

    References
    ----------
    scikit-learn, ``SGDRegressor`` / ``SGDClassifier``, parameter ``learning_rate``.
    L. Bottou, "Stochastic Gradient Descent Tricks", Neural Networks: Tricks of the Trade,
    2012 (the ``'optimal'`` heuristic).
    """

    def __init__(
        self,
        eta0: float = 0.01,
        alpha: float = 0.0001,
        power_t: float = 0.25,
        learning_rate: str = "invscaling",
        *,
        step_factors: tuple[float, ...] | None = None,
    ) -> None:
        self.eta0 = eta0
        self.alpha = alpha
        self.power_t = power_t
        self.learning_rate = learning_rate
        self.step_factors = step_factors

    #: What rates pickled before the parameter existed read (release 0.1.0's).
    step_factors: tuple[float, ...] | None = None

    # ------------------------------------------------------------------ checks
    def _validate(self) -> None:
        if self.learning_rate not in schedules.SCHEDULES:
            raise ValueError(
                f"learning_rate must be one of {list(schedules.SCHEDULES)}, got "
                f"{self.learning_rate!r}."
            )
        if not positive(self.eta0):
            raise ValueError(f"eta0 must be a finite number > 0, got {self.eta0!r}.")
        if self.learning_rate == "optimal" and not positive(self.alpha):
            raise ValueError(
                f"alpha must be a finite number > 0 with learning_rate='optimal', "
                f"got {self.alpha!r}."
            )
        if self.learning_rate == "invscaling" and not finite(self.power_t):
            raise ValueError(f"power_t must be a finite number, got {self.power_t!r}.")
        check_step_factors(self.step_factors)

    # ------------------------------------------------------------------ schedule
    def eta(self, t: int) -> float:
        """Return the learning rate at step ``t``.

        Parameters
        ----------
        t : int
            Samples seen before this update plus one, scikit-learn's ``t_``: the
            optimizer adds the batch's row count after every update, so the schedule
            decays at scikit-learn's pace per epoch whatever the batch size.

        Returns
        -------
        float
            :math:`\\eta_t` for the chosen schedule (see the class docstring).
        """
        return float(self.schedule(np.array([t], dtype=np.float64))[0])

    def schedule(self, ts: np.ndarray) -> np.ndarray:
        """Return :math:`\\eta_t` for every ``t`` of ``ts`` (float64), vectorized.

        Raises
        ------
        ValueError
            If a parameter is invalid or some ``t < 1``.
        """
        self._validate()
        ts = schedules.checked_times(ts)
        if self.learning_rate == "constant":
            return schedules.constant(ts, self.eta0)
        if self.learning_rate == "invscaling":
            return schedules.invscaling(ts, self.eta0, self.power_t)
        return schedules.optimal(ts, self.eta0, self.alpha)

    @classmethod
    def scikit_learn_optimal(cls, alpha: float = 0.0001,
                             step_factors: tuple[float, ...] | None = None) -> LearningRateSGD:
        r"""scikit-learn's ``learning_rate='optimal'``: the ``'optimal'`` schedule started
        at :math:`\eta_0 = \tau = \sqrt{1/\sqrt{\alpha}}` (see the class docstring)."""
        return cls(eta0=schedules.typical_eta0(alpha), alpha=alpha, learning_rate="optimal",
                   step_factors=step_factors)

    # ------------------------------------------------------------------ update
    def init_state(self, weights: list[np.ndarray]) -> list[np.ndarray]:
        """Plain SGD keeps no state: return ``[]`` (after validating the parameters)."""
        self._validate()
        return []

    def stepper(
        self,
        weights: list[np.ndarray],
        gradients: list[np.ndarray],
        state: list[np.ndarray],
    ) -> Callable[[float], None]:
        r"""Return ``step(eta)`` applying :math:`w \leftarrow w - \eta f g` in place.

        Validated here, once; ``step`` uses one preallocated temporary per weight (one
        for all when they are packed and share one factor, :func:`segments`). ``state``
        is unused (``[]``, see :meth:`init_state`).

        Raises
        ------
        ValueError
            If ``step_factors`` does not hold one factor per weight.
        """
        self._validate()
        check_lists(weights, gradients)
        factors = per_weight_factors(self.step_factors, len(weights))
        if len(set(factors)) == 1:
            pairs = [(w, g, factors[0]) for w, g in segments(weights, gradients)]
        else:
            pairs = list(zip(weights, gradients, factors, strict=True))
        triples = [(w, g, f, np.empty_like(g)) for w, g, f in pairs]

        def step(eta: float) -> None:
            for w, g, f, tmp in triples:
                np.multiply(g, eta, out=tmp)
                if f != 1.0:
                    # (eta g) f, scikit-learn's order (update * intercept_decay), the
                    # linear program's too: the same rounding.
                    np.multiply(tmp, f, out=tmp)
                np.subtract(w, tmp, out=w)

        return step

    def update_key(self) -> Hashable:
        """The rule, and its step factors where given (the linear program writes them)."""
        if self.step_factors is None:
            return super().update_key()
        return type(self).__qualname__, tuple(float(f) for f in self.step_factors)

    def emit_update(
        self, graph: StepGraph, weight: str, gradient: str, state: Sequence[str], rank: int,
    ) -> tuple[str, list[str]]:
        r""":math:`w - \eta g` (see :meth:`BaseLearningRate.emit_update`); a rate with
        ``step_factors`` runs per batch or in the linear program only."""
        move = graph.node("Mul", [gradient, graph.scalar("eta", rank)], f"{weight}_move")
        return graph.node("Sub", [weight, move], f"{weight}_stepped"), []

    def build_onnx_function(
        self, opset: int, device: str, n_tensors: int, dtype: type | np.dtype = np.float32
    ) -> onnx.ModelProto:
        r"""Return the update :math:`w_i \leftarrow w_i - \eta g_i` as an ONNX graph
        (:meth:`emit_update`'s nodes).

        Parameters
        ----------
        opset : int
            Version of the main ONNX domain (13 to 21).
        device : str
            Device the graph runs on; the graph only uses standard operators and is the
            same for every device.
        n_tensors : int
            Number of weights.
        dtype : numpy dtype, default=np.float32
            Element type of weights, gradients and ``eta``.

        Returns
        -------
        onnx.ModelProto
            Inputs ``w0..w{n-1}``, ``g0..g{n-1}``, ``eta`` (a scalar of ``dtype``);
            outputs ``new_w0..new_w{n-1}``.
        """
        self._validate()
        return update_function(self, opset, n_tensors, dtype, "sgd_update")
