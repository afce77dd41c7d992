r"""Adam (Kingma & Ba, 2015), as scikit-learn's MLP ``AdamOptimizer`` computes it."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Sequence

import numpy as np
import onnx

from skl_ortgrad.graph.dtypes import onnx_dtype
from skl_ortgrad.graph.step_graph import StepGraph
from skl_ortgrad.optim import schedules
from skl_ortgrad.optim.checks import check_lists, finite, positive
from skl_ortgrad.optim.rate import BaseLearningRate, segments, spans
from skl_ortgrad.optim.update_graph import rounded_sqrt, update_function
from skl_ortgrad.runtime.buffers import packed_zeros_like

__all__ = ["LearningRateAdam"]


class LearningRateAdam(BaseLearningRate):
    r"""Adam: adaptive moment estimation (Kingma & Ba, 2015).

    The step size is constant, :math:`\eta_t = \eta_0`; Adam adapts it per weight
    coordinate from running estimates of the first and second moments of the gradient.
    For every weight :math:`w` with gradient :math:`g` of the mini-batch's mean loss,
    first moment :math:`m` and second moment :math:`v` (both zero at start), the
    :math:`k`-th update (:math:`k = 1, 2, \dots` counts updates, not samples) is

    .. math::

        m &\leftarrow \beta_1 m + (1 - \beta_1)\, g \\
        v &\leftarrow \beta_2 v + (1 - \beta_2)\, g^2 \\
        \eta'_k &= \eta\, \frac{\sqrt{1 - \beta_2^k}}{1 - \beta_1^k} \\
        w &\leftarrow w - \eta'_k\, \frac{m}{\sqrt{v} + \epsilon}

    which is the efficient form of the bias-corrected update of the paper (Section 2,
    last paragraph before 2.1) and exactly what scikit-learn's MLP ``AdamOptimizer``
    computes, operation for operation: both agree to the last bit in float64.

    Parameters
    ----------
    eta0 : float, default=0.001
        :math:`\eta`, the step size (> 0), returned by :meth:`eta` at every step.
    beta1 : float, default=0.9
        :math:`\beta_1`, decay rate of the first moment estimate, in :math:`[0, 1)`.
    beta2 : float, default=0.999
        :math:`\beta_2`, decay rate of the second moment estimate, in :math:`[0, 1)`.
    epsilon : float, default=1e-8
        :math:`\epsilon`, added to :math:`\sqrt{v}` for numerical stability (> 0).

    Notes
    -----
    The state built by :meth:`init_state` for :math:`n` weights is the list
    ``[m_0, ..., m_{n-1}, v_0, ..., v_{n-1}, k]``: the moments have the shape and dtype
    of their weight, ``k`` is a 0-d ``int64`` array holding the number of updates done so
    far (one counter for all weights, they are updated together). Every entry is a numpy
    array updated in place, so the optimizer's ``get_state``/``set_state`` copy and
    restore it like any other state.

    Parameters are validated when the object is used (:meth:`eta`, :meth:`init_state`,
    :meth:`build_onnx_function`), not in ``__init__``, following scikit-learn's
    convention.

    References
    ----------
    D. P. Kingma, J. Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015,
    arXiv:1412.6980.
    scikit-learn, ``sklearn.neural_network._stochastic_optimizers.AdamOptimizer``.
    """

    def __init__(
        self,
        eta0: float = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
    ) -> None:
        self.eta0 = eta0
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon

    # ------------------------------------------------------------------ checks
    def _validate(self) -> None:
        if not positive(self.eta0):
            raise ValueError(f"eta0 must be a finite number > 0, got {self.eta0!r}.")
        for name in ("beta1", "beta2"):
            value = getattr(self, name)
            if not finite(value) or not 0 <= value < 1:
                raise ValueError(f"{name} must be a number in [0, 1), got {value!r}.")
        if not positive(self.epsilon):
            raise ValueError(f"epsilon must be a finite number > 0, got {self.epsilon!r}.")

    # ------------------------------------------------------------------ schedule
    def eta(self, t: int) -> float:
        """Return ``eta0`` whatever ``t``: Adam adapts the step per weight itself.

        Parameters
        ----------
        t : int
            Samples seen before this update plus one (``t >= 1``); checked, unused.

        Returns
        -------
        float
            :math:`\\eta_0`.
        """
        return float(self.schedule(np.array([t], dtype=np.float64))[0])

    def schedule(self, ts: np.ndarray) -> np.ndarray:
        """Return ``eta0`` for every ``t`` of ``ts`` (checked, ``t >= 1``)."""
        self._validate()
        return schedules.constant(schedules.checked_times(ts), self.eta0)

    # ------------------------------------------------------------------ update
    def init_state(self, weights: list[np.ndarray]) -> list[np.ndarray]:
        """Return ``[m_0..m_{n-1}, v_0..v_{n-1}, k]``: zero moments, a 0-d int64 counter.

        Parameters
        ----------
        weights : list of numpy arrays
            The weights to train; each moment has its weight's shape and dtype.

        Returns
        -------
        list of numpy arrays
            ``2 n + 1`` arrays, see the class notes.
        """
        self._validate()
        moments = [*packed_zeros_like(weights), *packed_zeros_like(weights)]
        return [*moments, np.zeros((), dtype=np.int64)]

    def _check_state(self, weights: list[np.ndarray], state: list[np.ndarray]) -> None:
        n = len(weights)
        if len(state) != 2 * n + 1:
            raise ValueError(
                f"Adam needs 2 * {n} + 1 = {2 * n + 1} state arrays for {n} weights, got "
                f"{len(state)}; build the state with init_state(weights)."
            )
        for i, w in enumerate(weights):
            for kind, moment in (("first", state[i]), ("second", state[n + i])):
                if moment.shape != w.shape:
                    raise ValueError(
                        f"Weight {i} has shape {w.shape} but its {kind} moment "
                        f"{moment.shape}; build the state with init_state(weights)."
                    )
        counter = state[-1]
        if not isinstance(counter, np.ndarray) or counter.shape != ():
            raise ValueError("The last state entry must be the 0-d array counting updates.")

    def stepper(
        self,
        weights: list[np.ndarray],
        gradients: list[np.ndarray],
        state: list[np.ndarray],
    ) -> Callable[[float], None]:
        r"""Return ``step(eta)`` applying one Adam update in place.

        ``state`` is ``[m_0..m_{n-1}, v_0..v_{n-1}, k]`` from :meth:`init_state`; every
        step does :math:`k \leftarrow k + 1`, then the moments, then the weights, all in
        place. Validated here, once; ``step`` uses two preallocated scratch arrays per
        weight.
        """
        self._validate()
        check_lists(weights, gradients)
        self._check_state(weights, state)
        n = len(weights)
        counter = state[-1]
        beta1, beta2 = float(self.beta1), float(self.beta2)
        eps = float(self.epsilon)
        buffers = [
            (w, g, m, v, np.empty_like(g), np.empty_like(g))
            for w, g, m, v in segments(weights, gradients, state[:n], state[n : 2 * n])
        ]

        def step(eta: float) -> None:
            np.add(counter, 1, out=counter)
            k = int(counter)
            # Same expression, hence the same rounding, as scikit-learn's AdamOptimizer.
            lr = float(eta) * math.sqrt(1.0 - beta2**k) / (1.0 - beta1**k)
            for w, g, m, v, scratch, denominator in buffers:
                np.multiply(g, 1.0 - beta1, out=scratch)
                np.multiply(m, beta1, out=m)
                np.add(m, scratch, out=m)
                np.square(g, out=scratch)
                np.multiply(scratch, 1.0 - beta2, out=scratch)
                np.multiply(v, beta2, out=v)
                np.add(v, scratch, out=v)
                np.sqrt(v, out=denominator)
                np.add(denominator, eps, out=denominator)
                np.multiply(m, -lr, out=scratch)
                np.divide(scratch, denominator, out=scratch)
                np.add(w, scratch, out=w)

        return step

    states_per_weight = 2

    def update_key(self) -> Hashable:
        return (type(self).__qualname__, float(self.beta1), float(self.beta2),
                float(self.epsilon))

    def packed_states(self, state: list[np.ndarray], n_weights: int) -> list[np.ndarray] | None:
        """The first moments, then the second ones (the counter stays out: see
        :meth:`step_scalars`)."""
        return spans(state[:n_weights], state[n_weights:2 * n_weights])

    def step_scalars(self, etas: np.ndarray, state: list[np.ndarray]) -> dict[str, np.ndarray]:
        r"""``neg_adam_rate``: :math:`-\eta'_k` of every step, :math:`k` counting on from
        the state's counter, computed as :meth:`stepper` computes it (Python floats)."""
        beta1, beta2 = float(self.beta1), float(self.beta2)
        first = int(state[-1]) + 1
        return {"neg_adam_rate": np.array([
            -(eta * math.sqrt(1.0 - beta2**k) / (1.0 - beta1**k))
            for k, eta in enumerate(np.asarray(etas, dtype=np.float64).tolist(), start=first)
        ], dtype=np.float64)}

    def advance_state(self, state: list[np.ndarray], steps: int) -> None:
        """Count ``steps`` more updates."""
        np.add(state[-1], steps, out=state[-1])

    def emit_update(
        self, graph: StepGraph, weight: str, gradient: str, state: Sequence[str], rank: int,
    ) -> tuple[str, list[str]]:
        r""":math:`m' = \beta_1 m + (1 - \beta_1) g`, :math:`v' = \beta_2 v + (1 - \beta_2)
        g^2`, :math:`w + (-\eta'_k) m' / (\sqrt{v'} + \epsilon)` with the per-step scalar
        ``neg_adam_rate`` (see :meth:`BaseLearningRate.emit_update`)."""
        beta1, beta2 = float(self.beta1), float(self.beta2)
        moment, square = state

        def constant(value: float, hint: str) -> str:
            return graph.constant(value, rank, hint)

        def mix(old: str, decay: float, new: str, hint: str) -> str:
            kept = graph.node("Mul", [old, constant(decay, "adam_decay")], f"{hint}_kept")
            added = graph.node("Mul", [new, constant(1.0 - decay, "adam_share")],
                               f"{hint}_added")
            return graph.node("Add", [kept, added], hint)

        new_moment = mix(moment, beta1, gradient, f"{weight}_moment")
        squared = graph.node("Mul", [gradient, gradient], f"{weight}_squared_gradient")
        new_square = mix(square, beta2, squared, f"{weight}_square")
        root = rounded_sqrt(graph, new_square, f"{weight}_root")
        denominator = graph.node("Add", [root, constant(float(self.epsilon), "adam_epsilon")],
                                 f"{weight}_denominator")
        scaled = graph.node("Mul", [new_moment, graph.scalar("neg_adam_rate", rank)],
                            f"{weight}_scaled_moment")
        step = graph.node("Div", [scaled, denominator], f"{weight}_adam_step")
        return graph.node("Add", [weight, step], f"{weight}_stepped"), [new_moment, new_square]

    def build_onnx_function(
        self, opset: int, device: str, n_tensors: int, dtype: type | np.dtype = np.float32
    ) -> onnx.ModelProto:
        r"""Return the Adam update as an ONNX graph (:meth:`emit_update`'s nodes).

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
            Element type of weights, gradients, moments and ``eta``.

        Returns
        -------
        onnx.ModelProto
            Inputs ``w0..w{n-1}``, ``g0..g{n-1}``, ``m0..m{n-1}``, ``v0..v{n-1}``, ``k``
            and ``eta``; outputs ``new_w0..new_w{n-1}``, ``new_m0..new_m{n-1}``,
            ``new_v0..new_v{n-1}``:

            .. math::

                m' = \beta_1 m + (1 - \beta_1) g, \quad
                v' = \beta_2 v + (1 - \beta_2) g^2, \quad
                w' = w - \eta \frac{\sqrt{1 - \beta_2^k}}{1 - \beta_1^k}
                \frac{m'}{\sqrt{v'} + \epsilon}.

            ``k`` is a 0-d ``int64`` tensor, the 1-based index of this update (the state
            counter *after* its increment: ``int(state[-1]) + 1`` before the numpy
            :meth:`update_weights` would run); the caller increments it.
            ``eta`` is a 0-d tensor of ``dtype``. The bias correction
            :math:`\sqrt{1 - \beta_2^k} / (1 - \beta_1^k)` is computed in double
            precision then cast to ``dtype``, as numpy does with Python floats; the
            constants :math:`\beta_1, \beta_2, 1 - \beta_1, 1 - \beta_2, \epsilon` are
            initializers.
        """
        self._validate()
        beta1, beta2 = float(self.beta1), float(self.beta2)
        elem = onnx_dtype(dtype)

        def rate_from_counter(graph: StepGraph) -> None:
            # -eta sqrt(1 - beta2^k) / (1 - beta1^k), in double, then cast.
            double = onnx.TensorProto.DOUBLE
            beta1_d, beta2_d, one_d = (graph.tensor(np.array(value, dtype=np.float64), name)
                                       for name, value in (("beta1_d", beta1),
                                                           ("beta2_d", beta2), ("one_d", 1.0)))
            k = graph.node("Cast", ["k"], "k_d", to=double)
            eta = graph.node("Cast", ["eta"], "eta_d", to=double)
            bias1 = graph.node("Sub", [one_d, graph.node("Pow", [beta1_d, k], "beta1_k")],
                               "bias1")
            bias2 = graph.node("Sub", [one_d, graph.node("Pow", [beta2_d, k], "beta2_k")],
                               "bias2")
            numerator = graph.node("Mul", [eta, graph.node("Sqrt", [bias2], "sqrt_bias2")],
                                   "lr_num")
            rate = graph.node("Neg", [graph.node("Div", [numerator, bias1], "lr_d")],
                              "neg_lr_d")
            graph.define_scalar("neg_adam_rate", 0, graph.node("Cast", [rate], "neg_lr",
                                                               to=elem))

        return update_function(self, opset, n_tensors, dtype, "adam_update",
                                states=("m", "v"), counter=rate_from_counter)
