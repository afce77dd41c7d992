r"""Learning rates: the step size schedule and the rule that moves the weights.

The optimizer calls, for every mini-batch, once the gradients :math:`g` of the batch's
*mean* loss with respect to every weight :math:`w` are known::

    eta = learning_rate.eta(t)                 # t = 1, 2, ... counts the updates
    learning_rate.update_weights(weights, gradients, state, eta)

where ``state = learning_rate.init_state(weights)`` was built once before training.
Updates happen **in place**: onnxruntime borrows the numpy buffers of the weights, a new
array would not be seen by the training session.

The training loop uses the same two operations in their per-epoch form, which validates
once instead of once per mini-batch (measured: a third of the Python time of a small
step)::

    etas = learning_rate.schedule(ts)          # eta(t) for every batch of the epoch
    step = learning_rate.stepper(weights, gradients, state)
    step(etas[i])                              # for every batch i

where ``gradients`` are buffers the engine overwrites at every batch.

The training programs (:mod:`skl_ortgrad.training.program`) run the same update inside
their graph, :math:`k` batches per onnxruntime call: each rule writes it with
:meth:`BaseLearningRate.emit_update` (the nodes behind :meth:`build_onnx_function` too),
its state (velocities, moments) flows from step to step in the graph, packed over all
the weights (:meth:`~BaseLearningRate.packed_states`), and what the schedule and the
counters give per step is fed as per-step scalars (:meth:`~BaseLearningRate.step_scalars`).

Schedules (``learning_rate`` parameter), the same as scikit-learn's
:class:`~sklearn.linear_model.SGDRegressor` with ``t`` counting updates (with
``batch_size=1`` it is scikit-learn's per-sample ``t``):

* ``'constant'``: :math:`\eta_t = \eta_0`;
* ``'invscaling'``: :math:`\eta_t = \eta_0 / t^{p}` with :math:`p` = ``power_t``;
* ``'optimal'``: :math:`\eta_t = 1 / (\alpha (t_0 + t - 1))` with
  :math:`t_0 = 1 / (\alpha\, \eta_{init})`, :math:`\eta_{init} = \tau / \max(1,
  \ell'(-\tau, 1))` and :math:`\tau = \sqrt{1 / \sqrt{\alpha}}`, the heuristic of
  scikit-learn (Léon Bottou's "typical weight"). Every loss of this package decreases
  when the score moves towards the label, so :math:`\ell'(-\tau, 1) \le 0` and
  :math:`\eta_{init} = \tau`: :math:`t_0 = 1 / (\alpha \tau)`.
"""

from __future__ import annotations

import math
import numbers
from abc import abstractmethod
from collections.abc import Callable, Hashable, Iterator, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper

from skl_ortgrad.graph.dtypes import onnx_dtype
from skl_ortgrad.graph.model import OPSET, make_model
from skl_ortgrad.runtime.buffers import contiguous_span, packed_zeros_like
from skl_ortgrad.training.base_learning import BaseLearningObject
from skl_ortgrad.training.step_graph import StepGraph

__all__ = [
    "BaseLearningRate",
    "LearningRateAdam",
    "LearningRateSGD",
    "LearningRateSGDNesterov",
]

_SCHEDULES = ("constant", "invscaling", "optimal")
# Oldest opset whose Add/Sub/Mul broadcast numpy-style and whose kernels exist in
# onnxruntime for float16/float/double: older graphs are not worth supporting.
_MIN_OPSET = 13


def _check_opset(opset: int) -> None:
    if not isinstance(opset, numbers.Integral) or not _MIN_OPSET <= opset <= OPSET:
        raise ValueError(f"opset must be an integer in [{_MIN_OPSET}, {OPSET}], got {opset!r}.")


def _check_n_tensors(n_tensors: int) -> None:
    if not isinstance(n_tensors, numbers.Integral) or n_tensors < 1:
        raise ValueError(f"n_tensors must be a positive integer, got {n_tensors!r}.")


def _check_lists(weights: list[np.ndarray], gradients: list[np.ndarray]) -> None:
    if len(weights) != len(gradients):
        raise ValueError(f"{len(weights)} weights but {len(gradients)} gradients.")
    for i, (w, g) in enumerate(zip(weights, gradients, strict=True)):
        if w.shape != g.shape:
            raise ValueError(f"Weight {i} has shape {w.shape} but its gradient {g.shape}.")


class BaseLearningRate(BaseLearningObject, family="learning rate"):
    """Base class of learning rates.

    A learning rate gives the step size at every update (:meth:`eta`), the per-weight
    state it needs (:meth:`init_state`), the in-place numpy update
    (:meth:`update_weights`) and the same update as an ONNX graph
    (:meth:`build_onnx_function`) for devices numpy cannot reach.

    :meth:`select` maps an estimator parameter to an object:

    ==================================  =====================================================
    value                               object
    ==================================  =====================================================
    ``None``                            ``LearningRateSGD()`` (invscaling, eta0=0.01)
    float ``x``                         ``LearningRateSGD(eta0=x, learning_rate='constant')``
    ``'SGD'``, ``'sgd'``                ``LearningRateSGD()``
    ``'constant'``                      ``LearningRateSGD(learning_rate='constant')``
    ``'invscaling'``                    ``LearningRateSGD(learning_rate='invscaling')``
    ``'optimal'``                       ``LearningRateSGD(learning_rate='optimal')``
    ``'SGDNesterov'``, ``'Nesterov'``,  ``LearningRateSGDNesterov()``
    ``'nesterov'``
    ``'momentum'``                      ``LearningRateSGDNesterov(nesterov=False)``
    a ``BaseLearningRate``              itself
    ==================================  =====================================================
    """

    def loop(self, n: int = 1000) -> Iterator[float]:
        r"""Yield the successive learning rates :math:`\eta_1, \dots, \eta_n`
        (:meth:`eta` at ``t = 1 .. n``, one per sample), e.g. to plot a schedule."""
        yield from self.schedule(np.arange(1, n + 1, dtype=np.float64)).tolist()

    @abstractmethod
    def eta(self, t: int) -> float:
        """Return the learning rate at step ``t`` (samples seen plus one, ``t >= 1``)."""

    def eta_factor(self, state: list[np.ndarray]) -> float:
        """The factor the training state applies to the schedule (1: none)."""
        return 1.0

    def reduce_on_plateau(self, state: list[np.ndarray], eta: float) -> bool:
        """Called when training stops improving, with the current rate ``eta``: lower the
        rate in ``state`` and return True to go on training, or return False to stop
        (the default)."""
        return False

    @abstractmethod
    def init_state(self, weights: list[np.ndarray]) -> list[np.ndarray]:
        """Return the state :meth:`update_weights` needs, one array per weight or none."""

    def update_weights(
        self,
        weights: list[np.ndarray],
        gradients: list[np.ndarray],
        state: list[np.ndarray],
        eta: float,
    ) -> None:
        """Move ``weights`` (and ``state``) in place given the gradients of the mean loss.

        One update: ``self.stepper(weights, gradients, state)(float(eta))``. A Python
        float keeps the arithmetic in the weights' dtype (a numpy float64 would promote
        float32 updates to float64, then round back).

        Parameters
        ----------
        weights : list of numpy arrays
            Modified in place (onnxruntime may hold their buffers).
        gradients : list of numpy arrays
            Gradients of the mini-batch's mean loss, same shapes as ``weights``.
        state : list of numpy arrays
            From :meth:`init_state`, modified in place.
        eta : float
            Learning rate of this update, usually ``self.eta(t)``.
        """
        self.stepper(weights, gradients, state)(float(eta))

    def schedule(self, ts: np.ndarray) -> np.ndarray:
        """Return ``[eta(t) for t in ts]`` as a float64 array.

        The optimizer calls it once per epoch with the ``t`` of every mini-batch.
        Subclasses with a closed form override it with one vectorized expression.
        """
        return np.array([self.eta(int(t)) for t in ts], dtype=np.float64)

    #: Whether every batch of an epoch takes the schedule's rate at the epoch's first
    #: ``t`` (scikit-learn's MLPs update their rate at the end of each epoch) rather than
    #: at its own.
    per_epoch = False

    #: State tensors :meth:`emit_update` reads and writes for one weight (velocities...).
    states_per_weight = 0

    def emit_update(
        self, graph: StepGraph, weight: str, gradient: str, state: Sequence[str], rank: int,
    ) -> tuple[str, list[str]]:
        """Write the update of one weight into ``graph``: the same arithmetic as
        :meth:`stepper`, operation for operation (float32 results bit for bit).

        Parameters
        ----------
        graph : StepGraph
            Where the nodes go; the step's learning rate is ``graph.scalar("eta", rank)``.
        weight, gradient : str
            The weight (after the penalty's proximal step) and its mean-loss gradient.
        state : list of str
            The weight's :attr:`states_per_weight` state tensors.
        rank : int
            The weight's rank (scalars and constants are fed at that rank).

        Returns
        -------
        (str, list of str)
            The new weight and its new state tensors.

        Raises
        ------
        NotImplementedError
            For a rule without one (it trains one batch per call).
        """
        raise NotImplementedError(f"{type(self).__name__} has no ONNX update.")

    def update_key(self) -> Hashable:
        """What :meth:`emit_update` writes into the graph (the rule and its constants): two
        rates of equal keys share a training program."""
        return type(self).__qualname__

    def packed_states(self, state: list[np.ndarray], n_weights: int) -> list[np.ndarray] | None:
        """The :attr:`states_per_weight` state tensors of all the weights packed one after
        the other, as 1-D views of ``state`` (from :meth:`init_state`), in
        :meth:`emit_update`'s order: what a program carries from step to step, updating
        every weight at once as :meth:`stepper` does. None when ``state`` is not packed
        (an unpickled state: it trains per batch)."""
        return []

    def step_scalars(self, etas: np.ndarray, state: list[np.ndarray]) -> dict[str, np.ndarray]:
        """Per-step scalars :meth:`emit_update` reads besides ``eta``, one float64 value
        per step of ``etas`` (the steps to run from ``state``)."""
        return {}

    def advance_state(self, state: list[np.ndarray], steps: int) -> None:
        """Update what ``state`` keeps outside :meth:`packed_states` (counters) after a
        program ran ``steps`` updates."""

    @abstractmethod
    def stepper(
        self,
        weights: list[np.ndarray],
        gradients: list[np.ndarray],
        state: list[np.ndarray],
    ) -> Callable[[float], None]:
        """Return ``step(eta)``, the update of these buffers, validated once.

        ``gradients`` are buffers overwritten before every call of ``step``; ``step``
        moves ``weights`` and ``state`` in place. The optimizer builds one per epoch.
        """


class LearningRateSGD(BaseLearningRate):
    r"""Plain stochastic gradient descent with scikit-learn's step size schedules.

    Update rule, for every weight :math:`w` with gradient :math:`g` of the mini-batch's
    mean loss:

    .. math::

        w \leftarrow w - \eta_t\, g

    Parameters
    ----------
    eta0 : float, default=0.01
        Initial learning rate (> 0), of every schedule: :math:`\eta_1 = \eta_0`.
    alpha : float, default=0.0001
        Used only by the ``'optimal'`` schedule (> 0). It is not a penalty here: the
        penalty is a separate object (:mod:`skl_ortgrad.training.sgd_learning_penalty`).
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
    ) -> None:
        self.eta0 = eta0
        self.alpha = alpha
        self.power_t = power_t
        self.learning_rate = learning_rate

    # ------------------------------------------------------------------ checks
    def _validate(self) -> None:
        if self.learning_rate not in _SCHEDULES:
            raise ValueError(
                f"learning_rate must be one of {list(_SCHEDULES)}, got {self.learning_rate!r}."
            )
        if not _positive(self.eta0):
            raise ValueError(f"eta0 must be a finite number > 0, got {self.eta0!r}.")
        if self.learning_rate == "optimal" and not _positive(self.alpha):
            raise ValueError(
                f"alpha must be a finite number > 0 with learning_rate='optimal', "
                f"got {self.alpha!r}."
            )
        if self.learning_rate == "invscaling" and not _finite(self.power_t):
            raise ValueError(f"power_t must be a finite number, got {self.power_t!r}.")

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
        ts = np.asarray(ts, dtype=np.float64)
        if ts.size and ts.min() < 1:
            raise ValueError(
                f"t counts samples seen plus one and starts at 1, got {ts.min():g}."
            )
        if self.learning_rate == "constant":
            return np.full(ts.shape, float(self.eta0))
        if self.learning_rate == "invscaling":
            return float(self.eta0) / ts ** float(self.power_t)
        alpha = float(self.alpha)
        t0 = 1.0 / (alpha * float(self.eta0))
        return 1.0 / (alpha * (t0 + ts - 1))

    @classmethod
    def scikit_learn_optimal(cls, alpha: float = 0.0001) -> LearningRateSGD:
        r"""scikit-learn's ``learning_rate='optimal'``: the ``'optimal'`` schedule started
        at :math:`\eta_0 = \tau = \sqrt{1/\sqrt{\alpha}}` (see the class docstring)."""
        return cls(eta0=math.sqrt(1.0 / math.sqrt(alpha)), alpha=alpha,
                   learning_rate="optimal")

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
        r"""Return ``step(eta)`` applying :math:`w \leftarrow w - \eta g` in place.

        Validated here, once; ``step`` uses one preallocated temporary per weight (one
        for all when they are packed, :func:`_segments`). ``state`` is unused (``[]``,
        see :meth:`init_state`).
        """
        self._validate()
        _check_lists(weights, gradients)
        triples = [(w, g, np.empty_like(g)) for w, g in _segments(weights, gradients)]

        def step(eta: float) -> None:
            for w, g, tmp in triples:
                np.multiply(g, eta, out=tmp)
                np.subtract(w, tmp, out=w)

        return step

    def emit_update(
        self, graph: StepGraph, weight: str, gradient: str, state: Sequence[str], rank: int,
    ) -> tuple[str, list[str]]:
        r""":math:`w - \eta g` (see :meth:`BaseLearningRate.emit_update`)."""
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
        return _update_function(self, opset, n_tensors, dtype, "sgd_update")


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
        if not _finite(self.momentum) or not 0 <= self.momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum!r}.")
        if not isinstance(self.nesterov, bool | np.bool_):
            raise ValueError(f"nesterov must be a bool, got {self.nesterov!r}.")

    def init_state(self, weights: list[np.ndarray]) -> list[np.ndarray]:
        """Return one zero velocity per weight, with the weight's shape and dtype (packed
        in one buffer, see :func:`_segments`)."""
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
        _check_lists(weights, gradients)
        if len(state) != len(weights):
            raise ValueError(
                f"{len(weights)} weights but {len(state)} velocities; build the state "
                "with init_state(weights)."
            )
        mu = float(self.momentum)
        nesterov = bool(self.nesterov)
        buffers = [
            (w, g, v, np.empty_like(g), np.empty_like(g))
            for w, g, v in _segments(weights, gradients, state)
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
        return _spans(state)

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
        return _update_function(self, opset, n_tensors, dtype, name, states=("v",))


def _sqrt(graph: StepGraph, value: str, hint: str) -> str:
    """``Sqrt`` rounded as numpy's: onnxruntime's float32 ``Sqrt`` is not correctly rounded
    (measured, onnxruntime 1.19 and 1.32: 419 of 1,000 values one unit off numpy's) while
    its float64 one is, and a float64 square root rounded to float32 is the correctly
    rounded float32 one; hence float32 goes through float64."""
    if graph.dtype.itemsize >= 8:
        return graph.node("Sqrt", [value], hint)
    wide = graph.node("Cast", [value], f"{hint}_wide", to=onnx.TensorProto.DOUBLE)
    root = graph.node("Sqrt", [wide], f"{hint}_wide_root")
    return graph.node("Cast", [root], hint, to=onnx_dtype(graph.dtype))


def _update_function(
    rule: BaseLearningRate, opset: int, n_tensors: int, dtype: type | np.dtype, name: str,
    states: Sequence[str] = (), counter: Callable[[StepGraph], None] | None = None,
) -> onnx.ModelProto:
    """``rule``'s :meth:`~BaseLearningRate.emit_update` for ``n_tensors`` weights as a graph
    of its own: inputs ``w<i>``, ``g<i>``, ``<state><i>`` (``states``: one prefix per state
    tensor), then ``k`` (a 0-d int64 update counter, when ``counter`` writes the nodes
    computing scalars from it) and ``eta`` (0-d); outputs ``new_w<i>`` then
    ``new_<state><i>``. Scalars and constants are rank 0: the shapes are free."""
    _check_opset(opset)
    _check_n_tensors(n_tensors)
    elem = onnx_dtype(dtype)
    inputs = [helper.make_tensor_value_info(f"{prefix}{i}", elem, None)
              for prefix in ("w", "g", *states) for i in range(n_tensors)]
    if counter is not None:
        inputs.append(helper.make_tensor_value_info("k", onnx.TensorProto.INT64, []))
    inputs.append(helper.make_tensor_value_info("eta", elem, []))
    outputs = [f"new_{prefix}{i}" for prefix in ("w", *states) for i in range(n_tensors)]
    graph = StepGraph({i.name for i in inputs} | set(outputs), dtype)
    graph.define_scalar("eta", 0, "eta")
    if counter is not None:
        counter(graph)
    final: dict[str, str] = {}
    for i in range(n_tensors):
        new_weight, new_states = rule.emit_update(
            graph, f"w{i}", f"g{i}", [f"{prefix}{i}" for prefix in states], 0)
        final[new_weight] = f"new_w{i}"
        final.update({result: f"new_{prefix}{i}"
                      for prefix, result in zip(states, new_states, strict=True)})
    for node in graph.nodes:
        node.input[:] = [final.get(n, n) for n in node.input]
        node.output[:] = [final.get(n, n) for n in node.output]
    body = helper.make_graph(
        graph.nodes, name, inputs,
        [helper.make_tensor_value_info(out, elem, None) for out in outputs],
        initializer=graph.initializers)
    return make_model(body, opset=opset)


def _segments(*lists: list[np.ndarray]) -> list[tuple[np.ndarray, ...]]:
    """The per-weight tuples ``zip(*lists)`` a stepper updates, or one tuple of 1-D views
    when every list is packed in one buffer (:func:`~skl_ortgrad.runtime.buffers.
    contiguous_span`: the weights, the gradients and the states of an optimizer are):
    elementwise updates give the same values either way, once per call instead of once
    per weight."""
    spans = _spans(*lists)
    return [tuple(spans)] if spans is not None else list(zip(*lists, strict=True))


def _spans(*lists: list[np.ndarray]) -> list[np.ndarray] | None:
    """The 1-D view spanning each list of arrays, or None if one is not packed."""
    spans = [contiguous_span(arrays) for arrays in lists]
    return None if any(span is None for span in spans) else spans


def _finite(value: Any) -> bool:
    if type(value) is float or type(value) is int:
        # Most values: no abstract-class check (validation runs at every epoch).
        return math.isfinite(value)
    return (
        isinstance(value, numbers.Real)
        and not isinstance(value, bool)
        and math.isfinite(float(value))
    )


def _positive(value: Any) -> bool:
    return _finite(value) and value > 0


BaseLearningRate.register_default(LearningRateSGD)
BaseLearningRate.register_float(LearningRateSGD, "eta0", learning_rate="constant")
BaseLearningRate.register_alias(("SGD", "sgd"), LearningRateSGD)
for _schedule in _SCHEDULES:
    BaseLearningRate.register_alias(_schedule, LearningRateSGD, learning_rate=_schedule)
del _schedule
BaseLearningRate.register_alias(("SGDNesterov", "Nesterov", "nesterov"), LearningRateSGDNesterov)
BaseLearningRate.register_alias("momentum", LearningRateSGDNesterov, nesterov=False)


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
        if not _positive(self.eta0):
            raise ValueError(f"eta0 must be a finite number > 0, got {self.eta0!r}.")
        for name in ("beta1", "beta2"):
            value = getattr(self, name)
            if not _finite(value) or not 0 <= value < 1:
                raise ValueError(f"{name} must be a number in [0, 1), got {value!r}.")
        if not _positive(self.epsilon):
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
        ts = np.asarray(ts, dtype=np.float64)
        if ts.size and ts.min() < 1:
            raise ValueError(
                f"t counts samples seen plus one and starts at 1, got {ts.min():g}."
            )
        return np.full(ts.shape, float(self.eta0))

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
        _check_lists(weights, gradients)
        self._check_state(weights, state)
        n = len(weights)
        counter = state[-1]
        beta1, beta2 = float(self.beta1), float(self.beta2)
        eps = float(self.epsilon)
        buffers = [
            (w, g, m, v, np.empty_like(g), np.empty_like(g))
            for w, g, m, v in _segments(weights, gradients, state[:n], state[n : 2 * n])
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
        return _spans(state[:n_weights], state[n_weights:2 * n_weights])

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
        root = _sqrt(graph, new_square, f"{weight}_root")
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

        return _update_function(self, opset, n_tensors, dtype, "adam_update",
                                states=("m", "v"), counter=rate_from_counter)


BaseLearningRate.register_alias(("adam", "Adam"), LearningRateAdam)
