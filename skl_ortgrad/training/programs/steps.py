"""What every training program's step shares: the per-step scalar table, the step
template, the penalty's proximal step, the norm outputs and a few ValueInfo helpers.

Graphs only (see :mod:`skl_ortgrad.training.programs`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from onnx import NodeProto, TensorProto, ValueInfoProto, helper

from skl_ortgrad.graph.step_graph import StepGraph

#: The oldest opset a program is written for.
MIN_OPSET = 13
#: The output of a program's per-step losses (or per-row values).
LOSSES_OUTPUT = "losses"


def scalar_table(
    scalars: Sequence[tuple[str, str, tuple[int, ...]]], dtype: np.dtype, etas: np.ndarray,
    scales: np.ndarray, l1: float = 0.0, l2: float = 0.0, rows: int = 1,
    extra: dict[str, np.ndarray] | None = None,
) -> dict[str, np.ndarray]:
    r"""The per-step scalar inputs of a run of batches, one row per batch.

    Computed in float64, then cast, as the numpy update does (Python floats):
    :math:`\eta_j` (kind ``eta``), :math:`\sigma_j` (``scale``),
    :math:`\max(0, 1 - \eta_j l_2 / r)^r` (``decay``), :math:`\pm\eta_j l_1`
    (``threshold``, ``neg_threshold``).

    Parameters
    ----------
    scalars : list of (str, str, tuple)
        The program's scalar inputs: name, kind and shape of one step's value.
    dtype : numpy dtype
        The program's.
    etas : numpy.ndarray, shape (n_batches,)
        Learning rate of every batch (the schedule at its ``t``).
    scales : numpy.ndarray, shape (n_batches,)
        :math:`\sigma_j`, the output gradient of every batch: 1 / the batch size, or
        1 / its summed sample weights (0 for a batch weighing nothing), the loader's.
    l1, l2 : float
        The penalty's weights (0 when absent).
    rows : int
        :math:`r`, the penalty's ``rows``: the decay compounds :math:`r` per-sample
        decays (``ElasticLearningPenalty``).
    extra : dict of str to numpy.ndarray, optional
        The other kinds' values of every batch: the update rule's
        (:meth:`~skl_ortgrad.optim.BaseLearningRate.step_scalars`) and the cumulative L1
        penalty's total :math:`u_j` after the step (``l1_total``, :func:`cumulative_l1`:
        :meth:`~skl_ortgrad.optim.BaseLearningPenalty.after_step_totals`).

    Returns
    -------
    dict of str to numpy.ndarray
        For every scalar input, an array of shape ``(n_batches, *shape)``.
    """
    eta = np.asarray(etas, dtype=np.float64)

    def column(kind: str) -> np.ndarray:
        # Only the kinds the program has: this runs at every epoch.
        if extra and kind in extra:
            return extra[kind]
        if kind == "eta":
            return eta
        if kind == "scale":
            return np.asarray(scales, dtype=np.float64)
        if kind == "decay":
            # The stepper's expression, element for element, so the values are equal.
            return np.maximum(0.0, 1.0 - eta * float(l2) / int(rows)) ** int(rows)
        threshold = eta * float(l1)
        return threshold if kind == "threshold" else -threshold

    return {name: column(kind).astype(dtype).reshape((-1, *shape))
            for name, kind, shape in scalars}


class PerStep:
    """What both programs share: their per-step scalar inputs (``scalars``, ``dtype``)
    and norm outputs (``norms``)."""

    scalars: list[tuple[str, str, tuple[int, ...]]]
    dtype: np.dtype
    norms: tuple[str, ...]

    def penalties(self, norms: dict[str, np.ndarray], l1: float, l2: float,
                  count: int) -> np.ndarray:
        r"""The elastic penalty :math:`l_1 \lVert W \rVert_1 + \frac{l_2}{2}
        \lVert W \rVert_2^2` at the weights each of ``count`` steps started from, in
        float64, from those steps' :attr:`norms` outputs (by name; the scaled sparse
        form's squared norms are :math:`V`'s, times its scale :math:`a` squared)."""
        penalty = np.zeros(count)
        if NORMS[0] in norms:
            squares = norms[NORMS[0]].astype(np.float64)
            if SCALES in norms:
                squares *= np.square(norms[SCALES].astype(np.float64))
            penalty += 0.5 * l2 * squares
        if NORMS[1] in norms:
            penalty += l1 * norms[NORMS[1]]
        return penalty

    def scalar_table(self, etas: np.ndarray, scales: np.ndarray, l1: float = 0.0,
                     l2: float = 0.0, rows: int = 1,
                     extra: dict[str, np.ndarray] | None = None) -> dict[str, np.ndarray]:
        """:func:`scalar_table` of this program's scalars."""
        return scalar_table(self.scalars, self.dtype, etas, scales, l1, l2, rows, extra)


@dataclass
class StepTemplate:
    """One step as a graph: data, scalars and weights in; new weights and the loss out.

    ``data`` are per-step inputs with a batch dimension, ``scalars`` the per-step
    scalars as ``(name, kind, shape)`` (kinds of :func:`scalar_table`).
    """

    nodes: list[NodeProto]
    initializers: list[TensorProto]
    data: list[ValueInfoProto]
    scalars: list[tuple[str, str, tuple[int, ...]]]
    weights: list[ValueInfoProto]
    new_weights: list[str]
    loss: str
    loss_shape: tuple[int, ...]
    elem: int
    opsets: list[tuple[str, int]]
    ir_version: int
    #: Per-step outputs beside the loss: (output name, body result, shape of one step).
    extra: list[tuple[str, str, tuple[int, ...]]] = field(default_factory=list)


def views(weights: Sequence[np.ndarray], shapes: Sequence[tuple[int, ...]]) -> list[np.ndarray]:
    # onnxruntime copies a non-contiguous array: its later updates would not be seen.
    if not all(w.flags.c_contiguous for w in weights):
        raise ValueError("The weights must be C-contiguous (fed and fetched as views).")
    return [w.reshape(shape) for w, shape in zip(weights, shapes, strict=True)]


def value_info(name: str, elem: int, shape: Sequence[int | None]) -> ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, list(shape))


def dims_of(info: ValueInfoProto) -> list[int | None]:
    return [d.dim_value if d.HasField("dim_value") else None
            for d in info.type.tensor_type.shape.dim]


def rank_of(info: ValueInfoProto) -> int:
    return len(info.type.tensor_type.shape.dim)


def proximal(graph: StepGraph, weight: str, rank: int, l1: bool, l2: bool) -> str:
    r"""The penalty's proximal step of a penalized weight :math:`W`, taken before the
    gradient step (scikit-learn's order): :math:`W \max(0, 1 - \eta l_2 / r)^r` (the
    ``decay`` scalar) then the soft threshold at :math:`\eta l_1`; ``weight`` itself
    without a penalty."""
    result = weight
    if l2:
        result = graph.node("Mul", [result, graph.scalar("decay", rank)], f"{weight}_decayed")
    if l1:
        # Clip's bounds must be rank 0; v - clip(v, -t, t) is sign(v) max(|v| - t, 0),
        # exactly, in two nodes.
        clipped = graph.node("Clip", [result, graph.scalar("neg_threshold", 0),
                                      graph.scalar("threshold", 0)], f"{weight}_clipped")
        result = graph.node("Sub", [result, clipped], f"{weight}_thresholded")
    return result


def cumulative_l1(graph: StepGraph, weight: str, applied: str, rank: int) -> tuple[str, str]:
    r"""The cumulative L1 penalty's step after the gradient step
    (:meth:`~skl_ortgrad.optim.ElasticLearningPenalty.after_step`) of a penalized weight
    :math:`w` with :math:`q`, the penalty applied to it so far (``applied``, a state
    flowing from step to step), at the step's total :math:`u_j` (the ``l1_total``
    scalar); return the new :math:`w'` and :math:`q'`.

    With :math:`\epsilon = \operatorname{sign}(w)`:

    .. math::

        w' = \epsilon \maxigl(0, |w| - (u_j + \epsilon q)igr), \qquad
        q' = q + (w' - w)

    the numpy step's :math:`\max(0, w - (u + q))` where :math:`w > 0`,
    :math:`\min(0, w + (u - q))` where :math:`w < 0` and :math:`w` where :math:`w = 0`,
    rounding included: :math:`\epsilon q` and the products by :math:`\epsilon` are
    exact, and :math:`-(|w| - c)` rounds as :math:`w + c` does for :math:`w < 0`. Nine
    nodes, no ``Where``.
    """
    sign = graph.node("Sign", [weight], f"{weight}_sign")
    magnitude = graph.node("Abs", [weight], f"{weight}_magnitude")
    signed = graph.node("Mul", [sign, applied], f"{applied}_signed")
    reach = graph.node("Add", [graph.scalar("l1_total", rank), signed], f"{weight}_reach")
    shrunk = graph.node("Relu", [graph.node("Sub", [magnitude, reach], f"{weight}_left")],
                        f"{weight}_shrunk")
    new = graph.node("Mul", [sign, shrunk], f"{weight}_l1")
    change = graph.node("Sub", [new, weight], f"{weight}_l1_change")
    return new, graph.node("Add", [applied, change], f"{applied}_next")


#: The programs' per-step norms of the penalized weights (``norms=True``), each of the
#: weights a step starts from: :math:`\sum \lVert W \rVert_2^2` (with the L2 penalty)
#: and :math:`\sum \lVert W \rVert_1` (with the L1 penalty); the scaled sparse program
#: (:math:`W = aV`) writes :math:`\lVert V \rVert_2^2` and :math:`a`.
NORMS = ("squared_norms", "l1_norms")
SCALES = "scales"
#: The generic program's per-step sum of the rows' unweighted losses (``unweighted``).
UNWEIGHTED = "unweighted_losses"


def step_norms(graph: StepGraph, weights: Sequence[str], l1: bool,
           l2: bool) -> list[tuple[str, str, tuple[int, ...]]]:
    """The ``extra`` outputs (see :class:`StepTemplate`) of the :data:`NORMS` of
    ``weights``: one reduction per weight and norm, summed over the weights."""
    extra = []
    for name, op, wanted in zip(NORMS, ("ReduceSumSquare", "ReduceL1"), (l2, l1),
                                strict=True):
        if not wanted:
            continue
        parts = [graph.node(op, [w], f"{w}_{name}", keepdims=0) for w in weights]
        total = parts[0]
        for part in parts[1:]:
            total = graph.node("Add", [total, part], name)
        extra.append((name, total, ()))
    return extra


def check_steps(steps: int) -> None:
    if int(steps) < 1:
        raise ValueError(f"steps must be >= 1, got {steps}.")
