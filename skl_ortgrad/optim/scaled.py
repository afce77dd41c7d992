r"""A learning rate rescaled for mini-batches, capped, and optionally adaptive.

scikit-learn's SGD estimators take one step per sample; the trainer takes one step per
mini-batch of :math:`b` rows along the gradient of the batch's *mean* loss. A step
:math:`b` times larger moves the weights about as far as :math:`b` per-sample steps
(linear scaling), so that an epoch learns as much whatever the batch size:

.. math::

    \eta'_t = \frac{\min(s\, \eta_t,\ \eta_{max}\, g_t)}{d}

with :math:`\eta_t` the wrapped schedule, :math:`s` the ``scale`` (the batch size),
:math:`\eta_{max}` a cap that keeps the mean-gradient step stable where the loss has
curvature, :math:`g_t` 1, or with ``decaying_cap`` the schedule's decay over the batches
taken, :math:`g_t = \eta_{k_t} / \eta_1`, :math:`k_t = 1 + (t - 1) / s` (a batch's
step is one step: per-sample SGD decays its rate over its steps, the samples), and
:math:`d` the divisor of the ``'adaptive'`` schedule: 1 at first, multiplied
by 5 every time training stops improving (:meth:`ScaledLearningRate.reduce_on_plateau`),
as scikit-learn does, until :math:`\eta'_t \le 10^{-6}`. The divisor is part of the
training state (the last array of ``lr_state_``), so checkpoints, pickles and saved models
resume with it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any

import numpy as np
import onnx

from skl_ortgrad.graph.step_graph import StepGraph
from skl_ortgrad.optim.checks import positive
from skl_ortgrad.optim.rate import BaseLearningRate

# scikit-learn's 'adaptive' schedules stop dividing the rate below this value.
_SMALLEST_ADAPTIVE_ETA = 1e-6
_ADAPTIVE_FACTOR = 5.0


class ScaledLearningRate(BaseLearningRate):
    r"""``learning_rate``'s schedule times ``scale``, at most ``max_eta``, divided by the
    adaptive divisor (see the module docstring); the update rule is ``learning_rate``'s.

    Parameters
    ----------
    learning_rate : BaseLearningRate
        The wrapped rate: its schedule :math:`\eta_t` and its update rule.
    scale : float, default=1.0
        :math:`s > 0`.
    max_eta : float or None, default=None
        :math:`\eta_{max} > 0`; None: no cap.
    adaptive : bool, default=False
        Divide the rate by 5 each time training stops improving instead of stopping.
    decaying_cap : bool, default=False
        The cap decays as the wrapped schedule does over the batches taken (see the
        module docstring; a constant schedule keeps it). A cap that does not held
        scikit-learn's ``'optimal'`` rate at the cap for tens of epochs, where the
        objective of a one-vs-rest classifier stops improving by ``tol`` within 6 to 10
        epochs, short of its accuracy (see
        :mod:`skl_ortgrad.estimators.sgd_parameters`).
    per_epoch : bool, default=False
        Every batch of an epoch takes the rate of the epoch's first batch, as
        scikit-learn's MLPs, whose ``'invscaling'`` rate
        :math:`\eta_0 / (t + 1)^{p}` changes at the end of each epoch, ``t`` the samples
        seen (the trainer's ``t``, one more, at the epoch's start).
    """

    #: Where a pickle of release 0.1.0, which has no such attribute, reads it.
    decaying_cap = False

    def __init__(
        self,
        learning_rate: BaseLearningRate | None = None,
        scale: float = 1.0,
        max_eta: float | None = None,
        adaptive: bool = False,
        per_epoch: bool = False,
        decaying_cap: bool = False,
    ) -> None:
        self.learning_rate = learning_rate
        self.scale = scale
        self.max_eta = max_eta
        self.adaptive = adaptive
        self.per_epoch = per_epoch
        self.decaying_cap = decaying_cap

    def _validate(self) -> None:
        if not isinstance(self.learning_rate, BaseLearningRate):
            raise ValueError(
                f"learning_rate must be a BaseLearningRate, got {self.learning_rate!r}."
            )
        if not positive(self.scale):
            raise ValueError(f"scale must be a finite number > 0, got {self.scale!r}.")
        if self.max_eta is not None and not positive(self.max_eta):
            raise ValueError(
                f"max_eta must be None or a finite number > 0, got {self.max_eta!r}."
            )

    def _inner_state(self, state: list[np.ndarray]) -> list[np.ndarray]:
        return state[:-1] if self.adaptive else state

    def schedule(self, ts: np.ndarray) -> np.ndarray:
        """:math:`\\min(s \\eta_t, \\eta_{max} g_t)` for every ``t`` of ``ts`` (before the
        adaptive divisor, which :meth:`eta_factor` gives)."""
        self._validate()
        scale = float(self.scale)
        if self.max_eta is None or not self.decaying_cap:
            etas = self.learning_rate.schedule(ts) * scale
            return etas if self.max_eta is None else np.minimum(etas, float(self.max_eta))
        ts = np.asarray(ts, dtype=np.float64)
        n = ts.size
        # One call of the wrapped schedule for the rates, the batches' rates and the
        # first rate: each call validates and checks its times (three calls took 0.6 of
        # the 9 ms of a small fit, line-profiled).
        every = self.learning_rate.schedule(
            np.concatenate([ts.ravel(), 1.0 + (ts.ravel() - 1.0) / scale, [1.0]]))
        etas = every[:n].reshape(ts.shape) * scale
        caps = float(self.max_eta) / float(every[-1]) * every[n:-1].reshape(ts.shape)
        return np.minimum(etas, caps)

    def eta(self, t: int) -> float:
        """The rate at ``t`` before the adaptive divisor."""
        return float(self.schedule(np.array([t], dtype=np.float64))[0])

    def init_state(self, weights: list[np.ndarray]) -> list[np.ndarray]:
        """The wrapped rate's state, plus the divisor :math:`d = 1` when ``adaptive``."""
        self._validate()
        state = self.learning_rate.init_state(weights)
        return [*state, np.ones(1)] if self.adaptive else state

    def eta_factor(self, state: list[np.ndarray]) -> float:
        """:math:`1 / d`."""
        return 1.0 / float(state[-1][0]) if self.adaptive else 1.0

    def reduce_on_plateau(self, state: list[np.ndarray], eta: float) -> bool:
        """Multiply :math:`d` by 5 (in ``state``) when ``adaptive`` and the current rate
        ``eta`` is above :math:`10^{-6}`; return whether training goes on."""
        if not self.adaptive or eta <= _SMALLEST_ADAPTIVE_ETA:
            return False
        state[-1] *= _ADAPTIVE_FACTOR
        return True

    def stepper(
        self,
        weights: list[np.ndarray],
        gradients: list[np.ndarray],
        state: list[np.ndarray],
    ) -> Callable[[float], None]:
        """The wrapped rate's update (the trainer passes the final rate)."""
        self._validate()
        return self.learning_rate.stepper(weights, gradients, self._inner_state(state))

    @property
    def states_per_weight(self) -> int:  # type: ignore[override]
        return self.learning_rate.states_per_weight

    def emit_update(
        self, graph: StepGraph, weight: str, gradient: str, state: Sequence[str], rank: int,
    ) -> tuple[str, list[str]]:
        """The wrapped rate's update (the program feeds the final rate as ``eta``)."""
        return self.learning_rate.emit_update(graph, weight, gradient, state, rank)

    def update_key(self) -> Hashable:
        return self.learning_rate.update_key()

    def packed_states(self, state: list[np.ndarray], n_weights: int) -> list[np.ndarray] | None:
        return self.learning_rate.packed_states(self._inner_state(state), n_weights)

    def step_scalars(self, etas: np.ndarray, state: list[np.ndarray]) -> dict[str, np.ndarray]:
        return self.learning_rate.step_scalars(etas, self._inner_state(state))

    def advance_state(self, state: list[np.ndarray], steps: int) -> None:
        self.learning_rate.advance_state(self._inner_state(state), steps)

    def build_onnx_function(self, opset: int, device: str, *args: Any) -> onnx.ModelProto:
        """The wrapped rate's update graph (the rate is one of its inputs)."""
        return self.learning_rate.build_onnx_function(opset, device, *args)
