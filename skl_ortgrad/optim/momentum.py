r"""Stochastic gradient descent with momentum, Nesterov's or classical (scikit-learn's MLP
``SGDOptimizer``)."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np
import onnx

from skl_ortgrad.graph.step_graph import StepGraph
from skl_ortgrad.optim.checks import check_lists, finite
from skl_ortgrad.optim.rate import segments, spans
from skl_ortgrad.optim.sgd import LearningRateSGD
from skl_ortgrad.optim.update_graph import update_function
from skl_ortgrad.runtime.buffers import packed_zeros_like

__all__ = ["LearningRateSGDNesterov"]


class LearningRateSGDNesterov(LearningRateSGD):
    r"""Stochastic gradient descent with momentum, Nesterov's by default.

    The update is the one of scikit-learn's MLP ``SGDOptimizer``, for every weight
    :math:`w` with velocity :math:`v` (zero at start) and momentum :math:`\mu`:

    .. math::

        v &\leftarrow \mu v - \eta_t g \\
        w &\leftarrow w + \mu v - \eta_t g \quad \text{(nesterov=True)} \\
        w &\leftarrow w + v \quad \text{(nesterov=False, classical momentum)}

    where the Nesterov form evaluates the look-ahead step with the already updated
    velocity (Sutskever et al., 2013, reformulated so that the gradient is taken at the
    current weights).

    Parameters
    ----------
    eta0, alpha, power_t, learning_rate
        The step size schedule, see :class:`LearningRateSGD`.
    momentum : float, default=0.9
        :math:`\mu`, in :math:`[0, 1)`.
    nesterov : bool, default=True
        Nesterov's momentum when True, classical momentum otherwise.

    References
    ----------
    I. Sutskever, J. Martens, G. Dahl, G. Hinton, "On the importance of initialization
    and momentum in deep learning", ICML 2013.
    scikit-learn, ``sklearn.neural_network._stochastic_optimizers.SGDOptimizer``.
    """

    def __init__(
        self,
        eta0: float = 0.01,
        alpha: float = 0.0001,
        power_t: float = 0.25,
        learning_rate: str = "invscaling",
        momentum: float = 0.9,
        nesterov: bool = True,
    ) -> None:
        super().__init__(eta0=eta0, alpha=alpha, power_t=power_t, learning_rate=learning_rate)
        self.momentum = momentum
        self.nesterov = nesterov

    def _validate(self) -> None:
        super()._validate()
        if not finite(self.momentum) or not 0 <= self.momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum!r}.")
        if not isinstance(self.nesterov, bool | np.bool_):
            raise ValueError(f"nesterov must be a bool, got {self.nesterov!r}.")

    def init_state(self, weights: list[np.ndarray]) -> list[np.ndarray]:
        """Return one zero velocity per weight, with the weight's shape and dtype (packed
        in one buffer, see :func:`segments`)."""
        self._validate()
        return packed_zeros_like(weights)

    def stepper(
        self,
        weights: list[np.ndarray],
        gradients: list[np.ndarray],
        state: list[np.ndarray],
    ) -> Callable[[float], None]:
        """Return ``step(eta)`` applying the momentum update in place.

        ``state`` holds the velocities from :meth:`init_state`, updated in place with
        the weights. Validated here, once; ``step`` uses two preallocated temporaries
        per weight.
        """
        self._validate()
        check_lists(weights, gradients)
        if len(state) != len(weights):
            raise ValueError(
                f"{len(weights)} weights but {len(state)} velocities; build the state "
                "with init_state(weights)."
            )
        mu = float(self.momentum)
        nesterov = bool(self.nesterov)
        buffers = [
            (w, g, v, np.empty_like(g), np.empty_like(g))
            for w, g, v in segments(weights, gradients, state)
        ]

        def step(eta: float) -> None:
            for w, g, v, scaled, look in buffers:
                np.multiply(g, eta, out=scaled)
                # Same operation order as scikit-learn (mu * v - eta * g) so results
                # agree to the last bit in float64.
                np.multiply(v, mu, out=v)
                np.subtract(v, scaled, out=v)
                if nesterov:
                    np.multiply(v, mu, out=look)
                    np.subtract(look, scaled, out=look)
                    np.add(w, look, out=w)
                else:
                    np.add(w, v, out=w)

        return step

    states_per_weight = 1

    def update_key(self) -> Hashable:
        return type(self).__qualname__, float(self.momentum), bool(self.nesterov)

    def packed_states(self, state: list[np.ndarray], n_weights: int) -> list[np.ndarray] | None:
        """The velocities."""
        return spans(state)

    def emit_update(
        self, graph: StepGraph, weight: str, gradient: str, state: Sequence[str], rank: int,
    ) -> tuple[str, list[str]]:
        r""":math:`v' = \mu v - \eta g`, then :math:`w + \mu v' - \eta g` (Nesterov) or
        :math:`w + v'` (see :meth:`BaseLearningRate.emit_update`)."""
        mu = graph.constant(float(self.momentum), rank, "momentum")
        scaled = graph.node("Mul", [gradient, graph.scalar("eta", rank)], f"{weight}_move")
        kept = graph.node("Mul", [state[0], mu], f"{weight}_velocity_kept")
        velocity = graph.node("Sub", [kept, scaled], f"{weight}_velocity")
        step = velocity
        if self.nesterov:
            ahead = graph.node("Mul", [velocity, mu], f"{weight}_look_ahead")
            step = graph.node("Sub", [ahead, scaled], f"{weight}_nesterov_step")
        return graph.node("Add", [weight, step], f"{weight}_stepped"), [velocity]

    def build_onnx_function(
        self, opset: int, device: str, n_tensors: int, dtype: type | np.dtype = np.float32
    ) -> onnx.ModelProto:
        r"""Return the momentum update as an ONNX graph (:meth:`emit_update`'s nodes).

        Parameters
        ----------
        opset : int
            Version of the main ONNX domain (13 to 21).
        device : str
            Device the graph runs on; the graph is the same for every device.
        n_tensors : int
            Number of weights.
        dtype : numpy dtype, default=np.float32
            Element type of weights, gradients, velocities and ``eta``.

        Returns
        -------
        onnx.ModelProto
            Inputs ``w0..w{n-1}``, ``g0..g{n-1}``, ``v0..v{n-1}``, ``eta``; outputs
            ``new_w0..new_w{n-1}``, ``new_v0..new_v{n-1}`` with
            :math:`v' = \mu v - \eta g` and :math:`w' = w + \mu v' - \eta g` (Nesterov) or
            :math:`w' = w + v'`. :math:`\mu` is stored in the graph as an initializer.
        """
        self._validate()
        name = "nesterov_update" if self.nesterov else "momentum_update"
        return update_function(self, opset, n_tensors, dtype, name, states=("v",))
