r"""Penalties: the regularisation term and its proximal update.

An elastic net penalty on the weights :math:`w` (the optimizer decides which weights are
penalized, usually not the intercepts):

.. math::

    P(w) = l_1 \lVert w \rVert_1 + \frac{l_2}{2} \lVert w \rVert_2^2

At every update the optimizer applies a proximal step scaled by the learning rate
:math:`\eta` to the weights the batch's gradient was computed at, then the gradient step,
scikit-learn's order (``step = penalty.stepper(weights)`` once per epoch, ``step(eta)``
per batch; ``penalty.update_weights(weights, eta)`` is one such step):

.. math::

    w &\leftarrow w \max(0, 1 - \eta l_2) \\
    w &\leftarrow \operatorname{sign}(w) \max(|w| - \eta l_1, 0)

The first line is the exact gradient step of the L2 term (scikit-learn's SGD applies the
same weight decay, ``w *= max(0, 1 - (1 - l1_ratio) eta alpha)``, clipped at zero so that a
large :math:`\eta l_2` sets weights to zero instead of flipping their sign). The second line
is the proximal operator of :math:`\eta l_1 \lVert w \rVert_1` (soft thresholding): a
weight moves by at most :math:`\eta l_1` towards zero and stops at zero, so it never
changes sign, and at a small :math:`\eta` only weights smaller than :math:`\eta l_1` are
set to zero.

With ``cumulative=True`` (the SGD estimators' penalty), the L1 part is scikit-learn's
instead: the cumulative penalty of Tsuruoka, Tsujii and Ananiadou (2009), applied after the
gradient step (:meth:`BaseLearningPenalty.after_step`). A training call keeps the total
:math:`u` of the L1 steps so far and, per weight, the L1 penalty :math:`q` actually
applied to it; after step :math:`j`:

.. math::

    u &\leftarrow u + \eta_j l_1 \\
    w' &= \max(0, w - (u + q)) \text{ if } w > 0, \quad
          \min(0, w + (u - q)) \text{ if } w < 0, \quad 0 \text{ if } w = 0 \\
    q &\leftarrow q + (w' - w), \quad w \leftarrow w'

so a weight that the gradient keeps pushing away from zero by less than the penalty ends
exactly at zero. On sparse data the step touches only the features the batch stores (the
union of its rows' stored columns, in the weight the features index: the linear models'
coefficients), as scikit-learn's loop over a sample's stored indices: :math:`u` grows at
every step, so a feature absent for a while catches up on the penalty it missed
(:math:`u - q`) when it next appears; a stored zero counts as present, and dense data
has every feature present. :math:`u` and :math:`q` start at zero at every call (``fit``,
``partial_fit``), as in scikit-learn's ``_plain_sgd``. A mini-batch is one step. The
training programs (:mod:`skl_ortgrad.training.programs`) run the same step in their
graph: :math:`q` flows from step to step as a state, and the totals :math:`u_j` after
each step, computed in numpy (:meth:`BaseLearningPenalty.after_step_totals`), are fed
per step.
"""

from __future__ import annotations

import math
import numbers
from abc import abstractmethod
from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from skl_ortgrad.graph.dtypes import onnx_dtype
from skl_ortgrad.graph.model import make_model
from skl_ortgrad.optim.base import BaseLearningObject
from skl_ortgrad.optim.checks import check_n_tensors, check_opset

__all__ = ["BaseLearningPenalty", "ElasticLearningPenalty", "NoLearningPenalty"]

class BaseLearningPenalty(BaseLearningObject, family="learning penalty"):
    """Base class of penalties.

    :meth:`select` maps an estimator parameter to an object:

    =========================  ========================================================
    value                      object
    =========================  ========================================================
    ``None``, ``'none'``       ``NoLearningPenalty()``
    float ``x``                ``ElasticLearningPenalty(l1=0, l2=x)``
    ``'l2'``                   ``ElasticLearningPenalty(l1=0, l2=0.0001)``
    ``'l1'``                   ``ElasticLearningPenalty(l1=0.0001, l2=0)``
    ``'elasticnet'``           ``ElasticLearningPenalty(l1=1.5e-05, l2=8.5e-05)``:
                               scikit-learn's ``alpha=0.0001, l1_ratio=0.15`` with
                               ``l1 = alpha * l1_ratio``, ``l2 = alpha * (1 - l1_ratio)``
    a ``BaseLearningPenalty``  itself
    =========================  ========================================================
    """

    @abstractmethod
    def penalty_loss(self, weights: list[np.ndarray]) -> float:
        """Return the value of the penalty for ``weights``."""

    @abstractmethod
    def gradient(self, weights: list[np.ndarray]) -> list[np.ndarray]:
        r"""Return :math:`\partial P / \partial w` for every weight (full-batch solvers
        such as L-BFGS add it to the loss gradient instead of taking proximal steps)."""

    def update_weights(self, weights: list[np.ndarray], eta: float) -> None:
        """Apply the proximal step of the penalty to ``weights``, in place.

        One step: ``self.stepper(weights)(float(eta))`` (a Python float keeps the
        arithmetic in the weights' dtype).
        """
        self.stepper(weights)(float(eta))

    @abstractmethod
    def stepper(self, weights: list[np.ndarray]) -> Callable[[float], None]:
        """Return ``step(eta)``, the proximal step of ``weights`` (in place).

        Validated once; the optimizer builds one per epoch and calls it after every
        update.
        """

    def applies_after_step(self) -> bool:
        """Whether part of the penalty comes after the gradient step, with a state
        (:meth:`after_step`); False here."""
        return False

    def after_step_state(self, weights: list[np.ndarray]) -> list[np.ndarray]:
        """The state :meth:`after_step` updates, at the start of a training call: []
        here."""
        return []

    def after_step(self, weights: list[np.ndarray],
                   state: list[np.ndarray]) -> Callable[[float], None] | None:
        """Return ``step(eta)``, the part of the penalty applied to ``weights`` (in place)
        after each gradient step, updating ``state`` (:meth:`after_step_state`), or None
        (here) for a penalty applied before the step only."""
        return None

    def after_step_totals(self, state: list[np.ndarray],
                          etas: np.ndarray) -> np.ndarray | None:
        """The running totals :meth:`after_step` reaches after each of the steps of rates
        ``etas``, from ``state`` (:meth:`after_step_state`): what a training program
        feeds per step instead of updating them; None (here) without a state."""
        return None

    def loss_term(
        self, weights: list[np.ndarray], gradients: list[np.ndarray],
    ) -> Callable[[float], float] | None:
        """Return ``term(scale)`` for a penalty that is also a term of every batch's loss
        (:class:`~skl_ortgrad.L2LossPenalty`): it adds the term's
        gradient times ``scale`` (the batch's output gradient) to ``gradients`` and
        returns the term's value. None (here): the proximal step is all of the penalty.
        """
        return None


def _cumulative(w: np.ndarray, q: np.ndarray, u: float) -> np.ndarray:
    """The cumulative L1 rule's new weights :math:`w'` from :math:`w`, :math:`q` and
    :math:`u` (:meth:`ElasticLearningPenalty.after_step`)."""
    # max(0, w - (u + q)) where w > 0, min(0, w + (u - q)) where w < 0.
    return np.where(w > 0, np.maximum(w - (u + q), 0),
                    np.where(w < 0, np.minimum(w + (u - q), 0), w))


def _unchanged(eta: float) -> None:
    """The step of no penalty."""


class NoLearningPenalty(BaseLearningPenalty):
    r"""No penalty: :math:`P(w) = 0`, and the update leaves the weights unchanged."""

    def __init__(self) -> None:
        pass

    def penalty_loss(self, weights: list[np.ndarray]) -> float:
        """Return 0."""
        return 0.0

    def gradient(self, weights: list[np.ndarray]) -> list[np.ndarray]:
        """Return zeros."""
        return [np.zeros_like(w) for w in weights]

    def stepper(self, weights: list[np.ndarray]) -> Callable[[float], None]:
        """Return a step that leaves the weights as they are."""
        return _unchanged

    def build_onnx_function(
        self, opset: int, device: str, n_tensors: int, dtype: type | np.dtype = np.float32
    ) -> onnx.ModelProto:
        """Return a graph copying ``w0..w{n-1}`` to ``new_w0..new_w{n-1}`` (``eta`` unused).

        The graph keeps the same inputs as :meth:`ElasticLearningPenalty.build_onnx_function`
        so that the optimizer calls both the same way.
        """
        check_opset(opset)
        check_n_tensors(n_tensors)
        elem = onnx_dtype(dtype)
        inputs = [helper.make_tensor_value_info(f"w{i}", elem, None) for i in range(n_tensors)]
        inputs.append(helper.make_tensor_value_info("eta", elem, []))
        nodes = [helper.make_node("Identity", [f"w{i}"], [f"new_w{i}"]) for i in range(n_tensors)]
        outputs = [helper.make_tensor_value_info(f"new_w{i}", elem, None) for i in range(n_tensors)]
        graph = helper.make_graph(nodes, "no_penalty_update", inputs, outputs)
        return make_model(graph, opset=opset)


class ElasticLearningPenalty(BaseLearningPenalty):
    r"""Elastic net penalty.

    .. math::

        P(w) = l_1 \lVert w \rVert_1 + \frac{l_2}{2} \lVert w \rVert_2^2

    Its gradient (a subgradient at 0 for the L1 part) is
    :math:`\partial P / \partial w = l_1 \operatorname{sign}(w) + l_2 w`; the update does not
    use it directly but takes the proximal step described in
    :mod:`skl_ortgrad.optim.penalties`:

    .. math::

        w &\leftarrow w \max(0, 1 - \eta l_2) \\
        w &\leftarrow \operatorname{sign}(w) \max(|w| - \eta l_1, 0)

    With ``rows`` :math:`= r > 1`, one step stands for :math:`r` consecutive per-sample
    steps of :math:`\eta / r` (a mini-batch of :math:`r` rows trained with a rate
    scaled by :math:`r`), and the decay is compounded as they would be:
    :math:`w \leftarrow w \max(0, 1 - \eta l_2 / r)^r`. A strong penalty then shrinks
    the weights as :math:`r` per-sample steps do instead of zeroing them.

    Parameters
    ----------
    l1 : float, default=0.5
        Weight of the L1 norm (>= 0).
    l2 : float, default=0.5
        Weight of half the squared L2 norm (>= 0).
    rows : int, default=1
        Per-sample steps one step stands for (>= 1).
    cumulative : bool, default=False
        The L1 part as scikit-learn's SGD applies it: the cumulative penalty after the
        gradient step (see :mod:`skl_ortgrad.optim.penalties`), which ends weights at
        exactly zero; :meth:`stepper` is then the L2 decay only.

    Notes
    -----
    scikit-learn's ``alpha`` and ``l1_ratio`` translate to ``l1 = alpha * l1_ratio`` and
    ``l2 = alpha * (1 - l1_ratio)``.

    References
    ----------
    scikit-learn, ``SGDRegressor`` parameters ``penalty``, ``alpha``, ``l1_ratio``.
    Y. Tsuruoka, J. Tsujii, S. Ananiadou, "Stochastic gradient descent training for
    L1-regularized log-linear models with cumulative penalty", ACL 2009 (soft thresholding
    after each stochastic step).
    """

    #: Objects pickled before the parameter existed soft-threshold before the step.
    cumulative = False

    def __init__(self, l1: float = 0.5, l2: float = 0.5, rows: int = 1,
                 cumulative: bool = False) -> None:
        self.l1 = l1
        self.l2 = l2
        self.rows = rows
        self.cumulative = cumulative

    def _validate(self) -> None:
        for name in ("l1", "l2"):
            value = getattr(self, name)
            if (
                not isinstance(value, numbers.Real)
                or isinstance(value, bool)
                or not math.isfinite(float(value))
                or value < 0
            ):
                raise ValueError(f"{name} must be a finite number >= 0, got {value!r}.")
        if not isinstance(self.rows, numbers.Integral) or self.rows < 1:
            raise ValueError(f"rows must be an integer >= 1, got {self.rows!r}.")

    def penalty_loss(self, weights: list[np.ndarray]) -> float:
        r"""Return :math:`\sum_w l_1 \lVert w \rVert_1 + \frac{l_2}{2} \lVert w \rVert_2^2`.

        Computed in float64 whatever the weights' dtype: the value is reported, not trained.
        """
        self._validate()
        total = 0.0
        for w in weights:
            w64 = np.asarray(w, dtype=np.float64)
            total += float(self.l1) * float(np.abs(w64).sum())
            total += 0.5 * float(self.l2) * float(np.square(w64).sum())
        return total

    def gradient(self, weights: list[np.ndarray]) -> list[np.ndarray]:
        r"""Return :math:`l_1 \operatorname{sign}(w) + l_2 w` for every weight."""
        self._validate()
        return [float(self.l1) * np.sign(w) + float(self.l2) * w for w in weights]

    def stepper(self, weights: list[np.ndarray]) -> Callable[[float], None]:
        """Return ``step(eta)`` applying the proximal step (L2 decay, then L1 soft
        thresholding) to ``weights`` in place.

        Validated here, once; ``step`` uses one preallocated temporary per weight.
        """
        self._validate()
        l1, l2, rows = float(self.l1), float(self.l2), int(self.rows)
        if self.cumulative:
            # The L1 part comes after the gradient step (after_step).
            l1 = 0.0
        pairs = [(w, np.empty_like(w)) for w in weights] if l1 > 0 else [(w, w) for w in weights]

        def step(eta: float) -> None:
            decay = max(0.0, 1.0 - eta * l2 / rows) ** rows
            threshold = eta * l1
            for w, clipped in pairs:
                if decay != 1.0:
                    np.multiply(w, decay, out=w)
                if threshold > 0:
                    # w - clip(w, -thr, thr) is sign(w) * max(|w| - thr, 0) with one
                    # temporary instead of three, and it is exact: no sign flip can come
                    # from rounding.
                    np.clip(w, -threshold, threshold, out=clipped)
                    np.subtract(w, clipped, out=w)

        return step

    def applies_after_step(self) -> bool:
        """True for the cumulative L1 penalty (``cumulative`` and ``l1 > 0``)."""
        return bool(self.cumulative) and float(self.l1) > 0

    def after_step_state(self, weights: list[np.ndarray]) -> list[np.ndarray]:
        """``[u, q_1, ..., q_n]``: the total L1 step :math:`u` (float64, rank 0) and the
        L1 penalty applied to each weight so far (zeros shaped as ``weights``); [] when
        nothing comes after the step."""
        if not self.applies_after_step():
            return []
        return [np.zeros((), dtype=np.float64), *(np.zeros_like(w) for w in weights)]

    def after_step(self, weights: list[np.ndarray],
                   state: list[np.ndarray]) -> Callable[..., None] | None:
        """The cumulative L1 step (see :mod:`skl_ortgrad.optim.penalties`) of ``weights``
        with ``state`` (:meth:`after_step_state`), both in place; None without it.

        ``step(eta, present=None)``: ``present``, one entry per weight, the indices
        along its first axis the step touches (the features a sparse batch stores, for
        the weight they index; duplicates allowed), or None for all of it; None for all
        of every weight. :math:`u` grows at every step whatever is present.
        """
        if not self.applies_after_step():
            return None
        self._validate()
        l1, total, applied = float(self.l1), state[0], state[1:]
        pairs = list(zip(weights, applied, strict=True))

        def step(eta: float, present: list[np.ndarray | None] | None = None) -> None:
            total[...] += eta * l1
            u = float(total)
            for index, (w, q) in enumerate(pairs):
                rows = None if present is None else present[index]
                if rows is not None and len(rows) < len(w) // 2:
                    # Few present: fancy indexing reads copies and writes each index's
                    # (equal) value.
                    taken, applied_to = w[rows], q[rows]
                    new = _cumulative(taken, applied_to, u)
                    q[rows] = applied_to + (new - taken)
                    w[rows] = new
                    continue
                new = _cumulative(w, q, u)
                if rows is not None:
                    # Many: the rule on all, kept where present (3,200 indices of 1,000
                    # rows: 18 instead of 48 µs, measured; q + 0 is q).
                    mask = np.zeros(len(w), dtype=bool)
                    mask[rows] = True
                    new = np.where(mask.reshape(-1, *(1,) * (w.ndim - 1)), new, w)
                q += new - w
                np.copyto(w, new)

        return step

    def after_step_totals(self, state: list[np.ndarray],
                          etas: np.ndarray) -> np.ndarray | None:
        r""":math:`u_j = u_0 + \sum_{i \le j} \eta_i l_1`, the total :math:`u` of
        :meth:`after_step` after each step of rates ``etas`` (float64), from
        :math:`u_0` = ``state[0]``; None without the cumulative penalty.

        Summed one step after the other, as :meth:`after_step` adds them: the same
        float64 values (a training program casts them to its dtype, as :meth:`after_step`'s
        ``u + q`` casts :math:`u` to the weights').
        """
        if not self.applies_after_step():
            return None
        steps = np.empty(len(etas) + 1, dtype=np.float64)
        steps[0] = state[0]
        np.multiply(np.asarray(etas, dtype=np.float64), float(self.l1), out=steps[1:])
        return np.add.accumulate(steps)[1:]

    def build_onnx_function(
        self, opset: int, device: str, n_tensors: int, dtype: type | np.dtype = np.float32
    ) -> onnx.ModelProto:
        """Return the proximal step as an ONNX graph.

        Parameters
        ----------
        opset : int
            Version of the main ONNX domain (13 to 21).
        device : str
            Device the graph runs on; the graph is the same for every device.
        n_tensors : int
            Number of penalized weights.
        dtype : numpy dtype, default=np.float32
            Element type of the weights and of ``eta``.

        Returns
        -------
        onnx.ModelProto
            Inputs ``w0..w{n-1}`` and ``eta`` (scalar); outputs ``new_w0..new_w{n-1}``:
            ``decayed = w * Relu(1 - eta * l2 / rows) ^ rows`` then
            ``new_w = decayed - Clip(decayed, -eta * l1, eta * l1)`` (``l1`` taken as 0
            when ``cumulative``: what :meth:`stepper` does).
        """
        self._validate()
        check_opset(opset)
        check_n_tensors(n_tensors)
        elem = onnx_dtype(dtype)
        inits = [
            numpy_helper.from_array(np.array(1, dtype=dtype), name="one"),
            # Cumulative: the L1 part is not the proximal step's (after_step).
            numpy_helper.from_array(np.array(0.0 if self.cumulative else self.l1,
                                             dtype=dtype), name="l1"),
            numpy_helper.from_array(np.array(self.l2 / self.rows, dtype=dtype), name="l2"),
            numpy_helper.from_array(np.array(self.rows, dtype=dtype), name="rows"),
        ]
        nodes = [
            helper.make_node("Mul", ["eta", "l2"], ["eta_l2"]),
            helper.make_node("Sub", ["one", "eta_l2"], ["one_minus"]),
            # Relu = max(0, .): a large eta * l2 zeroes the weights, never flips them.
            helper.make_node("Relu", ["one_minus"], ["step_decay"]),
            helper.make_node("Pow", ["step_decay", "rows"], ["decay"]),
            helper.make_node("Mul", ["eta", "l1"], ["threshold"]),
            helper.make_node("Neg", ["threshold"], ["neg_threshold"]),
        ]
        inputs = [helper.make_tensor_value_info(f"w{i}", elem, None) for i in range(n_tensors)]
        inputs.append(helper.make_tensor_value_info("eta", elem, []))
        for i in range(n_tensors):
            nodes.append(helper.make_node("Mul", [f"w{i}", "decay"], [f"decayed{i}"]))
            nodes.append(
                helper.make_node(
                    "Clip", [f"decayed{i}", "neg_threshold", "threshold"], [f"clipped{i}"]
                )
            )
            nodes.append(helper.make_node("Sub", [f"decayed{i}", f"clipped{i}"], [f"new_w{i}"]))
        outputs = [helper.make_tensor_value_info(f"new_w{i}", elem, None) for i in range(n_tensors)]
        graph = helper.make_graph(nodes, "elastic_penalty_update", inputs, outputs, inits)
        return make_model(graph, opset=opset)
