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

The training programs (:mod:`skl_ortgrad.training.programs`) run the same update inside
their graph, :math:`k` batches per onnxruntime call: each rule writes it with
:meth:`BaseLearningRate.emit_update` (the nodes behind :meth:`build_onnx_function` too),
its state (velocities, moments) flows from step to step in the graph, packed over all
the weights (:meth:`~BaseLearningRate.packed_states`), and what the schedule and the
counters give per step is fed as per-step scalars (:meth:`~BaseLearningRate.step_scalars`).

The schedules are in :mod:`skl_ortgrad.optim.schedules`, the rules in
:mod:`~skl_ortgrad.optim.sgd` (plain SGD), :mod:`~skl_ortgrad.optim.momentum` (momentum,
Nesterov) and :mod:`~skl_ortgrad.optim.adam`.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Hashable, Iterator, Sequence

import numpy as np

from skl_ortgrad.graph.step_graph import StepGraph
from skl_ortgrad.optim.base import BaseLearningObject
from skl_ortgrad.runtime.buffers import contiguous_span

__all__ = ["BaseLearningRate", "segments", "spans"]


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
    float ``x``                         ``LearningRateSGD(eta0=x)`` (invscaling, as onnxcustom)
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

    #: Whether every step reads its batch: then :meth:`stepper`'s ``step`` has
    #: ``take(features, labels)``, called with the batch before the penalty's decay,
    #: which returns False for a batch to skip (no decay, no step, ``t`` unchanged).
    reads_batch = False

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


def segments(*lists: list[np.ndarray]) -> list[tuple[np.ndarray, ...]]:
    """The per-weight tuples ``zip(*lists)`` a stepper updates, or one tuple of 1-D views
    when every list is packed in one buffer (:func:`~skl_ortgrad.runtime.buffers.
    contiguous_span`: the weights, the gradients and the states of an optimizer are):
    elementwise updates give the same values either way, once per call instead of once
    per weight."""
    packed = spans(*lists)
    return [tuple(packed)] if packed is not None else list(zip(*lists, strict=True))


def spans(*lists: list[np.ndarray]) -> list[np.ndarray] | None:
    """The 1-D view spanning each list of arrays, or None if one is not packed."""
    views = [contiguous_span(arrays) for arrays in lists]
    return None if any(view is None for view in views) else views
