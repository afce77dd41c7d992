r"""k consecutive mini-batch SGD steps in one ONNX graph: the training programs.

One onnxruntime ``run`` costs a fixed 5-9 µs on this machine kind, and every node
0.3-0.9 µs more, whatever its work; a linear model's step at batch 32 does about a
microsecond of arithmetic, so one call per mini-batch cannot beat scikit-learn's
per-sample loop (0.2-0.5 µs per row of 100 features). A *program* is one ``Scan`` node
running :math:`k` steps per call, the weights flowing from one step to the next inside
the graph; in the optimizer's order (``Trainer._epoch``), the
penalty's proximal step on the weights the gradient was computed at, then the gradient
step:

.. math::

    g_j &= \sigma_j \sum_{i \in B_j} s_i\,
        \frac{\partial \ell(y_i, f(x_i; W_{j-1}))}{\partial W},
        \qquad \sigma_j = 1 / \text{(batch size or summed weights of } B_j) \\
    D_j &= \operatorname{soft}_{\eta_j l_1}\!\bigl(W_{j-1}
        \max(0, 1 - \eta_j l_2 / r)^r\bigr)
        \quad\text{(penalized weights; } D_j = W_{j-1} \text{ otherwise)} \\
    W_j &= D_j - \eta_j\, g_j

with :math:`\operatorname{soft}_\tau(v) = v - \operatorname{clip}(v, -\tau, \tau)`, sample
weights :math:`s_i` (1 without) and :math:`r` the penalty's ``rows``
(``ElasticLearningPenalty``). The schedule stays in numpy: per step, the scalars
(:math:`\sigma_j`, :math:`\eta_j`, the decay, the threshold) are inputs computed by
:func:`scalar_table`, so the graph depends on neither ``eta0``, ``alpha`` nor
``l1_ratio`` (changing them needs no new session; only whether :math:`l_1`, :math:`l_2` are
zero does). Each per-step scalar is fed with the rank of the tensor it meets (DESIGN.md: a
rank-0 operand against an ``[n, 1]`` tensor takes onnxruntime's slow broadcasting path).

Two programs:

* :func:`generic_program` (:class:`StepProgram`) takes any backend's one-call gradient
  graph (:attr:`~skl_ortgrad.gradient.GradientGraph.fused`, preferably its ``static``
  form) of a model whose loss output is the batch's loss sum, and appends the update
  rule's nodes (its ``emit_update``: plain SGD as above, momentum, Nesterov, Adam, whose
  velocities or moments flow from step to step in the graph, packed over all the
  weights): any model, any loss, sample weights included; in float32 its results are bit
  for bit those of the per-batch path. Its inputs are the batches' rows, stacked (views of
  the loader's permuted buffers), its outputs the new weights and states and the
  :math:`k` batch losses;
* :func:`linear_program` (:class:`LinearProgram`) writes the step of a linear model
  :math:`s = W x + b` by hand, in 6 to 8 nodes (plus up to 3 for the penalty, and one
  per :data:`NORMS` output with ``norms=True``), for the
  squared error, the binary log loss and the hinge loss (the classifiers' default; the
  perceptron is its threshold 0), the last two also one-vs-rest over :math:`K` classes
  (``[b, K]`` scores, the same nodes). It works on
  rows: :math:`W` is ``[1, d]``, the scores of a batch ``[1, b]``, and every per-row
  factor of the update is folded into one per-row input computed in numpy for the whole
  epoch, the *step weight* :math:`c_i = \eta_j \sigma_j s_i` (times :math:`-(2y_i - 1)`
  for the hinge loss), so that the update is one ``Gemm`` per weight. It reads its rows
  from the whole dataset by index (``Gather``): a shuffled epoch copies no features in
  numpy (the copy was a quarter of an epoch). Rather than its loss, each step outputs one
  value per row, from which numpy computes the batch losses (:meth:`LinearProgram.losses`);
  a batch shorter than the others (the end of an epoch) is padded with rows of step weight
  0. Its sparse form (:class:`SparseLinearProgram`) reads each batch's stored values
  instead of rows: per step, their columns and values laid out ``[width, b]`` (each row's
  values down its column, padded with zeros), :math:`W` flat, the scores a ``Gather`` of
  :math:`W` at the columns, a product and a sum, the update a ``ScatterND`` that adds
  each value's step at its column: its work follows the stored values, not the columns.

Graphs only: nothing here creates an onnxruntime session or an OrtValue; the runtime
binds the feeds (:mod:`skl_ortgrad.runtime.program_run`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from onnx import (
    AttributeProto,
    GraphProto,
    ModelProto,
    NodeProto,
    TensorProto,
    ValueInfoProto,
    helper,
    numpy_helper,
)

from skl_ortgrad.graph.dtypes import numpy_dtype, onnx_dtype
from skl_ortgrad.graph.model import IR_VERSION, OPSET, graph_names, unique_name
from skl_ortgrad.graph.opset import main_opset, other_domains
from skl_ortgrad.training.sgd_learning_rate import BaseLearningRate, LearningRateSGD
from skl_ortgrad.training.step_graph import StepGraph

#: Loss kinds of :func:`linear_program`.
LINEAR_LOSSES = ("squared_error", "log", "hinge")
_MIN_OPSET = 13
_LOSSES = "losses"


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
        The other kinds' values of every batch (the update rule's
        :meth:`~skl_ortgrad.training.sgd_learning_rate.BaseLearningRate.step_scalars`).

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


class _PerStep:
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
            if _SCALES in norms:
                squares *= np.square(norms[_SCALES].astype(np.float64))
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
class _Template:
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


@dataclass
class StepProgram(_PerStep):
    """The generic program (:func:`generic_program`) and how to feed it.

    Attributes
    ----------
    model : ModelProto
        The program: one ``Scan`` node; a chunk of any number of batches runs.
    steps : int
        :math:`k`, the batches of a full chunk.
    batch_rows : int
        Rows of every batch.
    data : list of str
        The per-row inputs (``X``, the label...), keys of :meth:`feeds`' ``data``.
    weights : list of str
        Weight inputs, then the update rule's packed state (its ``states_per_weight``
        1-D tensors over all the weights, see :func:`_packed_update`); the outputs are
        :attr:`new_weights`, in the same order.
    weight_shapes : list of tuple
    new_weights : list of str
    scalars : list of (str, str, tuple)
        Per-step scalar inputs: name, kind (of :func:`scalar_table`) and shape
        (rank-matched to the tensors they meet).
    loss_shape : tuple of int
        Shape of one step's loss.
    dtype : numpy.dtype
    norms : tuple of str
        The per-step :data:`NORMS` outputs (``norms=True``), one value per step.
    """

    model: ModelProto
    steps: int
    batch_rows: int
    data: list[str]
    weights: list[str]
    weight_shapes: list[tuple[int, ...]]
    new_weights: list[str]
    scalars: list[tuple[str, str, tuple[int, ...]]]
    loss_shape: tuple[int, ...]
    dtype: np.dtype
    norms: tuple[str, ...] = ()

    def feeds(
        self, data: dict[str, np.ndarray], table: dict[str, np.ndarray],
        weights: Sequence[np.ndarray], first: int, count: int,
    ) -> dict[str, np.ndarray]:
        """The inputs of the call running batches ``first .. first + count - 1``, as
        views: nothing is copied.

        Parameters
        ----------
        data : dict of str to numpy.ndarray
            Per-row arrays in batch order, C-contiguous; batch ``j`` is rows
            ``j * batch_rows`` to ``(j + 1) * batch_rows``.
        table : dict of str to numpy.ndarray
            :func:`scalar_table` of the epoch.
        weights : list of numpy.ndarray
            The weights, in :attr:`weights` order, C-contiguous.
        first, count : int
            The batches of the call.
        """
        b = self.batch_rows
        result = dict(zip(self.weights, _views(weights, self.weight_shapes), strict=True))
        result.update({
            name: data[name][first * b:(first + count) * b].reshape(
                (count, b, *data[name].shape[1:]))
            for name in self.data
        })
        result.update({name: table[name][first:first + count] for name, _, _ in self.scalars})
        return result

    def fetches(
        self, losses: np.ndarray, weights: Sequence[np.ndarray], count: int,
        norms: dict[str, np.ndarray] | None = None,
    ) -> dict[str, np.ndarray]:
        """The outputs of a call of ``count`` batches as views of ``losses`` (shape
        ``(count,)`` or more), of the buffers of the new ``weights`` and of ``norms``
        (each ``(count,)`` or more, by name: :attr:`norms`)."""
        result = dict(zip(self.new_weights, _views(weights, self.weight_shapes), strict=True))
        result[_LOSSES] = losses[:count].reshape((count, *self.loss_shape))
        result.update({name: norms[name][:count] for name in self.norms})
        return result


@dataclass
class LinearProgram(_PerStep):
    r"""The linear program (:func:`linear_program`) and how to feed it.

    Per epoch, the caller computes the per-row inputs (arrays of ``n_batches *
    batch_rows`` values, batch after batch, a short last batch padded): the row indices
    ``rows``, the ``target`` (:meth:`targets`) and the step weights (:meth:`step_weights`);
    per call, it feeds them with the whole dataset (:meth:`feeds`) and reads the new
    weights and one value per row (:meth:`fetches`), whose batch losses are
    :meth:`losses`.

    Attributes
    ----------
    model : ModelProto
    loss : str
        One of :data:`LINEAR_LOSSES`.
    threshold : float
        The hinge loss's margin :math:`t` (0 for the perceptron).
    steps, batch_rows, n_features : int
    scalars : list of (str, str, tuple)
        Per-step scalar inputs (decay, thresholds), as :attr:`StepProgram.scalars`.
    dtype : numpy.dtype
    n_outputs : int
        :math:`K`, the scores (one-vs-rest classes); the per-row target, step weights and
        values are ``(n, K)`` arrays when above 1, ``(n,)`` otherwise.
    norms : tuple of str
        The per-step :data:`NORMS` outputs (``norms=True``; the scaled sparse form also
        writes the scale :math:`a`, ``"scales"``), one value per step.
    """

    model: ModelProto
    loss: str
    threshold: float
    steps: int
    batch_rows: int
    n_features: int
    scalars: list[tuple[str, str, tuple[int, ...]]]
    dtype: np.dtype
    n_outputs: int = 1
    norms: tuple[str, ...] = ()

    #: Input and output names (fixed: the program is written by hand).
    weights = ("coef", "intercept")
    new_weights = ("new_coef", "new_intercept")
    per_row = ("rows", "target", "step_weight")
    features, values = "X", "values"

    @property
    def weight_shapes(self) -> list[tuple[int, ...]]:
        """``[1, d]`` and ``[1, 1]``: views of the caller's ``[d, 1]`` and ``[1]``;
        ``[d, K]`` and ``[1, K]`` for :math:`K` outputs."""
        if self.n_outputs > 1:
            return [(self.n_features, self.n_outputs), (1, self.n_outputs)]
        return [(1, self.n_features), (1, 1)]

    def _step_shape(self, count: int) -> tuple[int, ...]:
        """Shape of ``count`` steps of a per-row input or of the values: ``[1, b]`` a
        step, ``[b, K]`` for :math:`K` outputs."""
        b = self.batch_rows
        return (count, b, self.n_outputs) if self.n_outputs > 1 else (count, 1, b)

    def targets(self, labels: np.ndarray, out: np.ndarray) -> None:
        """Write the ``target`` of ``labels`` (the label, or :math:`2y - 1` for the hinge
        loss) into ``out``."""
        if self.loss == "hinge":
            np.multiply(labels, 2, out=out)
            np.subtract(out, 1, out=out)
        else:
            np.copyto(out, labels)

    def step_weights(self, rates: np.ndarray, targets: np.ndarray,
                     out: np.ndarray) -> None:
        r"""Write the step weights into ``out``: ``rates`` (per row,
        :math:`\eta_j \sigma_j s_i`; the same for the :math:`K` outputs of a row), negated
        and times the target :math:`2y - 1` for the hinge loss, whose residual is
        :math:`-(2y - 1)` inside the margin."""
        if out.ndim > rates.ndim:
            rates = rates[..., None]
        if self.loss == "hinge":
            np.multiply(rates, targets, out=out)
            np.negative(out, out=out)
        else:
            np.copyto(out, rates)

    def losses(self, values: np.ndarray, targets: np.ndarray,
               loss_weights: np.ndarray) -> np.ndarray:
        r"""The loss sum of every batch from the program's per-row ``values`` (shape
        ``(count * batch_rows,)``), the rows' ``targets`` and ``loss_weights`` (sample
        weight, 0 for padding), in the program's dtype, so that a loss overflowing it is
        not finite, as in the gradient graph:

        * squared error, values :math:`r = s - y`: :math:`\frac12 r^2`;
        * log loss, values :math:`s`: :math:`\log(1 + e^s) - y s`;
        * hinge, values :math:`z = (2y - 1) s`: :math:`\max(0, t - z)`.
        """
        v, dtype = values, self.dtype.type
        with np.errstate(over="ignore", invalid="ignore"):
            if self.loss == "squared_error":
                each = dtype(0.5) * v * v
            elif self.loss == "log":
                each = np.logaddexp(dtype(0), v) - targets * v
            else:
                each = np.maximum(dtype(0), dtype(self.threshold) - v)
            if self.n_outputs > 1:
                # Every output of a row weighs the row's weight.
                return (each * loss_weights[:, None]).reshape(
                    -1, self.batch_rows * self.n_outputs).sum(axis=1)
            return (each * loss_weights).reshape(-1, self.batch_rows).sum(axis=1)

    def feeds(
        self, features: np.ndarray, per_row: dict[str, np.ndarray],
        table: dict[str, np.ndarray], weights: Sequence[np.ndarray], first: int, count: int,
    ) -> dict[str, np.ndarray]:
        """The inputs of the call running batches ``first .. first + count - 1``, as
        views: ``features`` (the whole dataset, C-contiguous), ``per_row`` (the epoch's
        :attr:`per_row` arrays), ``table`` (:func:`scalar_table`), the ``weights``."""
        return {self.features: features,
                **self._step_feeds(per_row, table, weights, first, count)}

    def _step_feeds(self, per_row: dict[str, np.ndarray], table: dict[str, np.ndarray],
                    weights: Sequence[np.ndarray], first: int, count: int,
                    ) -> dict[str, np.ndarray]:
        """The weights, and the per-row and per-step inputs of the call, as views."""
        b = self.batch_rows
        result = dict(zip(self.weights, _views(weights, self.weight_shapes), strict=True))
        for name in self.per_row:
            shape = (count, b) if name == "rows" else self._step_shape(count)
            result[name] = per_row[name][first * b:(first + count) * b].reshape(shape)
        result.update({name: table[name][first:first + count] for name, _, _ in self.scalars})
        return result

    def fetches(self, values: np.ndarray, weights: Sequence[np.ndarray], first: int,
                count: int, norms: dict[str, np.ndarray] | None = None,
                ) -> dict[str, np.ndarray]:
        """The outputs of that call as views of ``values`` (the epoch's, one per row), of
        the buffers of the new ``weights`` and of ``norms`` (the epoch's, one per step,
        by name: :attr:`norms`)."""
        b = self.batch_rows
        result = dict(zip(self.new_weights, _views(weights, self.weight_shapes), strict=True))
        result[self.values] = values[first * b:(first + count) * b].reshape(
            self._step_shape(count))
        result.update({name: norms[name][first:first + count] for name in self.norms})
        return result


@dataclass
class SparseLinearProgram(LinearProgram):
    r"""The linear program on sparse rows (:func:`linear_program` with ``sparse=True``).

    Per call, the caller lays out the stored values of the call's batches (columns and
    values ``[count, width, b]``, :meth:`feeds`); the per-row inputs are the target and
    the step weights, as :class:`LinearProgram`'s, without ``rows``.
    """

    per_row = ("target", "step_weight")
    #: Per step ``[width, b]``: the columns (also as ``[width, b, 1]``, ``ScatterND``'s
    #: indices), the values and their negatives (the update adds).
    stored = ("columns", "column_indices", "stored", "negated_stored")
    #: No features input: the stored values are fed per call.
    features = ""

    @property
    def weight_shapes(self) -> list[tuple[int, ...]]:
        """``[d]`` and ``[1, 1]``: views of the caller's ``[d, 1]`` and ``[1]``; ``[d, K]``
        and ``[1, K]`` for :math:`K` outputs."""
        if self.n_outputs > 1:
            return super().weight_shapes
        return [(self.n_features,), (1, 1)]

    def feeds(  # type: ignore[override]
        self, columns: np.ndarray, values: np.ndarray, per_row: dict[str, np.ndarray],
        table: dict[str, np.ndarray], weights: Sequence[np.ndarray], first: int,
        count: int,
    ) -> dict[str, np.ndarray]:
        """The inputs of the call running batches ``first .. first + count - 1``:
        ``columns`` (int64) and ``values`` of shape ``[count, width, b]`` (the stored
        values of row ``i`` of step ``j`` down ``[j, :, i]``, padded with column 0 and
        value 0), the epoch's ``per_row`` arrays and ``table``, the ``weights``."""
        if self.n_outputs > 1:
            values = values[..., None]  # against the [b, K] scores of each step
        return {**dict(zip(self.stored, (columns, columns[..., None], values, -values),
                           strict=True)),
                **self._step_feeds(per_row, table, weights, first, count)}


def _views(weights: Sequence[np.ndarray], shapes: Sequence[tuple[int, ...]]) -> list[np.ndarray]:
    # onnxruntime copies a non-contiguous array: its later updates would not be seen.
    if not all(w.flags.c_contiguous for w in weights):
        raise ValueError("The weights must be C-contiguous (fed and fetched as views).")
    return [w.reshape(shape) for w, shape in zip(weights, shapes, strict=True)]


def _info(name: str, elem: int, shape: Sequence[int | None]) -> ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, list(shape))


def _dims(info: ValueInfoProto) -> list[int | None]:
    return [d.dim_value if d.HasField("dim_value") else None
            for d in info.type.tensor_type.shape.dim]


def _proximal(graph: StepGraph, weight: str, rank: int, l1: bool, l2: bool) -> str:
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


#: The programs' per-step norms of the penalized weights (``norms=True``), each of the
#: weights a step starts from: :math:`\sum \lVert W \rVert_2^2` (with the L2 penalty)
#: and :math:`\sum \lVert W \rVert_1` (with the L1 penalty); the scaled sparse program
#: (:math:`W = aV`) writes :math:`\lVert V \rVert_2^2` and :math:`a`.
NORMS = ("squared_norms", "l1_norms")
_SCALES = "scales"


def _norms(graph: StepGraph, weights: Sequence[str], l1: bool,
           l2: bool) -> list[tuple[str, str, tuple[int, ...]]]:
    """The ``extra`` outputs (see :class:`_Template`) of the :data:`NORMS` of
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


def _generic_template(
    fused: ModelProto, weights: Sequence[str], penalized: Sequence[str], batch_rows: int,
    l1: bool, l2: bool, loss: str, update: BaseLearningRate, norms: bool = False,
) -> _Template:
    graph = fused.graph
    if any(att.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS)
           for node in graph.node for att in node.attribute):
        raise ValueError("Gradient graphs with control flow (If, Loop, Scan) are not "
                         "supported: their subgraphs would need renaming too.")
    inputs = {i.name: i for i in graph.input}
    outputs = [o.name for o in graph.output]
    grad_input = f"{loss}_grad"
    missing = [name for name in [*weights, grad_input] if name not in inputs]
    missing += [name for name in [loss, *(f"{w}_grad" for w in weights)]
                if name not in outputs]
    if missing:
        raise ValueError(f"{missing} are not inputs or outputs of the gradient graph: give "
                         "the fused graph of a model whose loss output is named "
                         f"{loss!r} and the names of its weights.")
    unknown = sorted(set(penalized) - set(weights))
    if unknown:
        raise ValueError(f"Penalized weights {unknown} are not trained weights.")
    loss_info = next(o for o in graph.output if o.name == loss)
    data = []
    for info in graph.input:
        if info.name in weights or info.name == grad_input:
            continue
        dims = _dims(info)
        if not dims or (dims[0] is not None and dims[0] != batch_rows):
            raise ValueError(f"Input {info.name!r} has shape {dims}, not a batch of "
                             f"{batch_rows} rows.")
        if any(d is None for d in dims[1:]):
            raise ValueError(f"Input {info.name!r} has shape {dims}: only the batch "
                             "dimension may be symbolic.")
        data.append(_info(info.name, info.type.tensor_type.elem_type, [batch_rows, *dims[1:]]))
    elem = loss_info.type.tensor_type.elem_type
    step = StepGraph(graph_names(graph), numpy_dtype(elem))
    extra = _norms(step, [w for w in weights if w in penalized], l1, l2) if norms else []
    starts = [_proximal(step, w, _rank(inputs[w]), l1, l2) if w in penalized else w
              for w in weights]
    shapes = [_dims(inputs[w]) for w in weights]
    if update.states_per_weight and any(None in shape for shape in shapes):
        raise ValueError("A packed update state needs weights of static shapes.")
    states = [_info(unique_name("state", step.taken), elem,
                    [sum(int(np.prod(shape)) for shape in shapes)])
              for _ in range(update.states_per_weight)]
    if states:
        new_weights, new_states = _packed_update(
            step, update, starts, [f"{w}_grad" for w in weights], [s.name for s in states],
            shapes)
    else:
        new_weights, new_states = [], []
        for w, start in zip(weights, starts, strict=True):
            new_weights.append(update.emit_update(step, start, f"{w}_grad", [],
                                                  _rank(inputs[w]))[0])
    grad_shape = tuple(_dims(inputs[grad_input]))
    if any(d is None for d in grad_shape):
        raise ValueError(f"{grad_input!r} must have a static shape, got {grad_shape}.")
    return _Template(
        nodes=[*graph.node, *step.nodes],
        initializers=[*graph.initializer, *step.initializers],
        data=data,
        scalars=[(grad_input, "scale", grad_shape), *step.scalar_inputs()],
        weights=[*(inputs[w] for w in weights), *states],
        new_weights=[*new_weights, *new_states],
        loss=loss,
        loss_shape=tuple(d or 1 for d in _dims(loss_info)),
        elem=elem,
        opsets=[("", main_opset(fused)), *other_domains(fused)],
        ir_version=fused.ir_version,
        extra=extra,
    )


def _rank(info: ValueInfoProto) -> int:
    return len(info.type.tensor_type.shape.dim)


def _packed_update(
    step: StepGraph, update: BaseLearningRate, weights: Sequence[str],
    gradients: Sequence[str], states: Sequence[str], shapes: Sequence[list[int]],
) -> tuple[list[str], list[str]]:
    """The update of every weight at once, as the numpy steppers do on their packed
    buffers: the weights and the gradients flattened one after the other, the rule's
    update of that vector and of its packed ``states`` (one node per operation instead of
    one per operation and weight: Adam on the 4 weights of an MLP was 60 nodes, slower
    than numpy), then the new vector cut back into the weights."""
    flat = step.tensor(np.array([-1], dtype=np.int64), "flat_shape")

    def packed(names: Sequence[str], hint: str) -> str:
        parts = [step.node("Reshape", [name, flat], f"{name}_flat") for name in names]
        return step.node("Concat", parts, hint, axis=0) if len(parts) > 1 else parts[0]

    new_vector, new_states = update.emit_update(
        step, packed(weights, "packed_weights"), packed(gradients, "packed_gradients"),
        list(states), 1)
    sizes = [int(np.prod(shape)) for shape in shapes]
    pieces = [new_vector] if len(sizes) == 1 else list(step.nodes_out(
        "Split", [new_vector, step.tensor(np.array(sizes, dtype=np.int64), "sizes")],
        [f"{w}_new_flat" for w in weights], axis=0))
    new_weights = [
        step.node("Reshape", [piece, step.tensor(np.array(shape, dtype=np.int64),
                                                 f"{w}_shape")], f"{w}_stepped")
        for w, piece, shape in zip(weights, pieces, shapes, strict=True)]
    return new_weights, new_states


def generic_program(
    fused: ModelProto,
    weights: Sequence[str],
    steps: int,
    batch_rows: int,
    penalized: Sequence[str] = (),
    l1: bool = False,
    l2: bool = False,
    loss: str = "loss",
    update: BaseLearningRate | None = None,
    norms: bool = False,
) -> StepProgram:
    r"""The program of ``steps`` steps built on a backend's one-call gradient graph.

    Per step: the gradient graph, whose output gradient input ``<loss>_grad`` is the
    step's :math:`\sigma_j` (kind ``scale``), then for every weight the update rule's
    step from :math:`D` (:meth:`~skl_ortgrad.training.sgd_learning_rate.BaseLearningRate.
    emit_update`; plain SGD: :math:`D - \eta_j g` with :math:`\eta_j` fed at the
    weight's rank), where :math:`D` is :math:`W` or, for the ``penalized`` weights,
    :math:`W` decayed by :math:`\max(0, 1 - \eta_j l_2 / r)^r` (when ``l2``) then
    soft-thresholded at :math:`\eta_j l_1` (when ``l1``). The rule's state (momentum
    velocities, Adam's moments) flows from step to step beside the weights.

    Parameters
    ----------
    fused : ModelProto
        :attr:`GradientGraph.fused <skl_ortgrad.gradient.GradientGraph.fused>` or
        ``GradientGraph.static(batch_inputs, batch_rows)`` (faster: its shape arithmetic
        is resolved) of a model with one differentiable output ``loss``, the batch's
        loss sum; inputs: the per-row arrays, the weights, ``<loss>_grad``.
    weights : list of str
        The trained weights (inputs of ``fused``, with outputs ``<weight>_grad``).
    steps : int
        :math:`k`, the batches of a full chunk.
    batch_rows : int
        Rows per batch.
    penalized : list of str
        Weights the penalty's proximal step applies to (coefficients, not intercepts).
    l1, l2 : bool
        Emit the L1 soft threshold / the L2 decay (their values are fed per step).
    loss : str
        Name of the loss output.
    update : BaseLearningRate, optional
        The update rule (its :meth:`~skl_ortgrad.training.sgd_learning_rate.
        BaseLearningRate.emit_update`); plain SGD by default.
    norms : bool
        Also output, per step, the :data:`NORMS` of the penalized weights the step
        starts from (the penalty's value, scikit-learn's SGD objective).

    Returns
    -------
    StepProgram
    """
    _check_steps(steps)
    t = _generic_template(fused, weights, penalized, batch_rows, l1, l2, loss,
                          LearningRateSGD() if update is None else update, norms)
    if t.opsets[0][1] < _MIN_OPSET:
        raise ValueError(f"A program needs opset >= {_MIN_OPSET}, got {t.opsets[0][1]}.")
    outputs = [f"new_{w.name}" for w in t.weights]
    model = helper.make_model(
        _scan(t, outputs), opset_imports=[helper.make_opsetid(d, v) for d, v in t.opsets],
        ir_version=t.ir_version)
    return StepProgram(
        model=model, steps=int(steps), batch_rows=batch_rows,
        data=[i.name for i in t.data], weights=[w.name for w in t.weights],
        weight_shapes=[tuple(_dims(w)) for w in t.weights], new_weights=outputs,
        scalars=t.scalars, loss_shape=t.loss_shape, dtype=numpy_dtype(t.elem),
        norms=tuple(name for name, _, _ in t.extra),
    )


@functools.lru_cache(maxsize=64)
def linear_program(
    loss: str,
    n_features: int,
    steps: int,
    batch_rows: int,
    dtype: np.dtype | type = np.float32,
    l1: bool = False,
    l2: bool = False,
    threshold: float = 1.0,
    sparse: bool = False,
    n_outputs: int = 1,
    norms: bool = False,
) -> LinearProgram:
    r"""The program of ``steps`` steps of a linear model, written by hand, on rows.

    Per step, with the batch's rows :math:`X_B` = ``Gather(X, rows)`` (``[b, d]``),
    :math:`W` of shape ``[1, d]``, the scores :math:`s = W X_B^\top + b` (one ``Gemm``,
    ``[1, b]``), the ``target`` :math:`y` (``[1, b]``) and the step weights :math:`c`:

    * ``"squared_error"``: :math:`u = (s - y) \odot c`, values :math:`s - y`;
    * ``"log"`` (labels in {0, 1}, the package's ``NegLogLearningLoss(eps=0)``):
      :math:`u = (\sigma(s) - y) \odot c`, values :math:`s`;
    * ``"hinge"`` (target :math:`a = 2y - 1`, step weights :math:`-a \eta\sigma s_i`):
      :math:`u = c \odot [z \le t]` with the margins :math:`z = a \odot s` and the
      ``threshold`` :math:`t` (the kink included, as scikit-learn); values :math:`z`; the
      mask :math:`[z \le t]` one ``HardSigmoid`` in float32 for :math:`t > 0`
      (:func:`_exact_step_function`), a comparison and a ``Cast`` otherwise;

    then :math:`W \leftarrow D_W - u X_B` (:math:`D_W` the penalty's proximal step of
    :math:`W`, as in :func:`generic_program`) and :math:`b \leftarrow b - u 1` (one
    ``Gemm`` each). Nodes per step: 6 (squared error), 7 (log loss) or 7 (hinge; 8 for
    the perceptron's threshold 0 and in float64), plus 1 for L2, 2 for L1. Sample
    weights cost nothing: they are in :math:`c`.

    ``sparse=True`` (:class:`SparseLinearProgram`): the batch is its stored values, columns
    :math:`J` and values :math:`V` of shape ``[width, b]`` (zeros where a row has fewer),
    :math:`W` flat; :math:`s = 1^\top (W_J \odot V) + b` (``Gather``, ``Mul``,
    ``ReduceSum``, ``Add``) and :math:`W \leftarrow D_W + \mathrm{scatter\_add}_J(-V
    \odot u)` (``Mul``, ``ScatterND``): three nodes more, and work in the stored values.
    With the L2 decay alone, :math:`W = aV`: the decay multiplies the scalar :math:`a`
    and the update of :math:`V` is divided by it, so no step multiplies all of
    :math:`W` (at 500k columns, 291 -> 154 µs per step, measured); :math:`aV` is
    formed once after the call's steps.

    ``n_outputs`` :math:`K > 1` (one-vs-rest classes, each output its own binary loss):
    :math:`W` is ``[d, K]`` as the caller holds it, the scores :math:`S = X_B W + b` are
    ``[b, K]`` (one ``Gemm``), the per-row inputs and values ``[b, K]``, and :math:`W
    \leftarrow D_W - X_B^\top U`, :math:`b \leftarrow b - 1^\top U` (one ``Gemm``
    each): the same nodes. The sparse form gathers ``[width, b, K]`` rows of :math:`W`,
    its values fed ``[width, b, 1]``, and scatters ``[width, b, K]`` steps.

    Parameters
    ----------
    loss : str
        One of :data:`LINEAR_LOSSES`.
    n_features : int
    steps : int
        :math:`k`, the batches of a full chunk.
    batch_rows : int
    dtype : numpy dtype
    l1, l2 : bool
        Emit the L1 soft threshold / the L2 decay of :math:`W`.
    threshold : float
        The hinge loss's :math:`t`.
    sparse : bool
        The form reading the batches' stored values.
    n_outputs : int
        :math:`K`.
    norms : bool
        Also output, per step, the :data:`NORMS` of :math:`W` the step starts from (one
        reduction each).

    Returns
    -------
    LinearProgram
        Memoized (64 programs): the same arguments give the same object, which callers
        only read (a grid search of small fits writes each program once).
    """
    if loss not in LINEAR_LOSSES:
        raise ValueError(f"linear_program's loss must be one of {LINEAR_LOSSES}, got "
                         f"{loss!r}.")
    _check_steps(steps)
    outputs = int(n_outputs)
    if outputs < 1:
        raise ValueError(f"linear_program's n_outputs must be >= 1, got {n_outputs}.")
    p = SparseLinearProgram if sparse else LinearProgram
    elem, b = onnx_dtype(dtype), int(batch_rows)
    # One step's per-row tensors: [1, b], or [b, K] with K outputs.
    row_shape = [b, outputs] if outputs > 1 else [1, b]
    # The names of both forms' inputs and outputs, so no node output takes one.
    taken = {LinearProgram.features, *p.weights, *p.new_weights, *LinearProgram.per_row,
             *SparseLinearProgram.stored, p.values, "ones", "margin_threshold", "first_axis",
             _SCALE, "scaled_coef", "final_scale"}
    step = StepGraph(taken, dtype)
    emit = step.node
    coef, intercept = p.weights
    target, step_weight = p.per_row[-2:]
    constants: dict[str, np.ndarray] = {
        "ones": np.ones((1, b) if outputs > 1 else (b, 1), dtype=dtype)}
    # Sparse with the L2 decay alone: W = a V, the decay multiplies the scalar a, so no
    # step writes all of W twice (the decay, then the update).
    scaled = sparse and l2 and not l1
    if sparse:
        columns, column_indices, stored, negated = SparseLinearProgram.stored
        constants["first_axis"] = np.zeros(1, dtype=np.int64)
        # With K outputs, W [d, K] gathers [width, b, K] and the values come as
        # [width, b, 1]: the sum over the stored values is the [b, K] scores.
        products = emit("Mul", [emit("Gather", [coef, columns], "coef_at_columns"), stored],
                        "products")
        dots = emit("ReduceSum", [products, "first_axis"], "dots",
                    keepdims=0 if outputs > 1 else 1)
        if scaled:
            dots = emit("Mul", [dots, _SCALE], "scaled_dots")
        s = emit("Add", [dots, intercept], "score")
        values_shape = ["width", b, 1] if outputs > 1 else ["width", b]
        data = [_info(columns, TensorProto.INT64, ["width", b]),
                _info(column_indices, TensorProto.INT64, ["width", b, 1]),
                _info(stored, elem, values_shape), _info(negated, elem, values_shape)]
    else:
        rows = p.per_row[0]
        batch = emit("Gather", [p.features, rows], "batch", axis=0)
        s = (emit("Gemm", [batch, coef, intercept], "score") if outputs > 1
             else emit("Gemm", [coef, batch, intercept], "score", transB=1))
        data = [_info(rows, TensorProto.INT64, [b])]
    extra = _norms(step, [coef], l1, l2) if norms else []
    if norms and scaled:
        # W = a V: the norms are V's; a is the state the step starts from (as a scalar,
        # as the norms).
        extra.append((_SCALES, emit("ReduceSum", [_SCALE], "scale_at_start", keepdims=0),
                      ()))
    if loss == "squared_error":
        values = emit("Sub", [s, target], "residual")
        u = emit("Mul", [values, step_weight], "scaled_residual")
    elif loss == "log":
        values = s
        residual = emit("Sub", [emit("Sigmoid", [s], "probability"), target], "residual")
        u = emit("Mul", [residual, step_weight], "scaled_residual")
    else:
        values = emit("Mul", [s, target], "margin")
        exact = _exact_step_function(threshold, dtype)
        if exact is not None:
            mask = emit("HardSigmoid", [values], "inside_mask", alpha=exact[0],
                        beta=exact[1])
        else:
            # The margins' shape (rank and shape matched: no broadcasting); a Cast and a
            # Mul of the mask are faster than a Where (measured 0.3 µs per step).
            constants["margin_threshold"] = np.full(row_shape, threshold, dtype=dtype)
            inside = emit("LessOrEqual", [values, "margin_threshold"], "inside")
            mask = emit("Cast", [inside], "inside_mask", to=elem)
        u = emit("Mul", [mask, step_weight], "scaled_residual")
    if scaled:
        # a' = a d, then V' = V - u X_B / a': a' V' is the decayed W minus the step.
        new_scale = emit("Mul", [_SCALE, step.scalar("decay", 1)], "scale_decayed")
        u_of_v = emit("Div", [u, new_scale], "residual_of_v")
    else:
        u_of_v = u
    start = coef if scaled else _proximal(step, coef, 1 if sparse and outputs == 1 else 2,
                                          l1, l2)
    if sparse:
        # Each stored value's step -v u_i, added at its column.
        steps_at = emit("Mul", [negated, u_of_v], "coef_steps")
        new_coef = emit("ScatterND", [start, column_indices, steps_at], "coef_stepped",
                        reduction="add")
    elif outputs > 1:
        # C - A^T B (alpha=-1): X_B^T U for W, then 1^T U for b.
        new_coef = emit("Gemm", [batch, u, start], "coef_stepped", alpha=-1.0, transA=1)
    else:
        # C - A B (alpha=-1): u X_B for W.
        new_coef = emit("Gemm", [u, batch, start], "coef_stepped", alpha=-1.0)
    new_intercept = (
        emit("Gemm", ["ones", u, intercept], "intercept_stepped", alpha=-1.0) if outputs > 1
        else emit("Gemm", [u, "ones", intercept], "intercept_stepped", alpha=-1.0))
    template = _Template(
        nodes=step.nodes,
        initializers=[numpy_helper.from_array(v, name) for name, v in constants.items()],
        data=[*data, _info(target, elem, row_shape), _info(step_weight, elem, row_shape)],
        scalars=step.scalar_inputs(),
        weights=[_info(coef, elem, [n_features, outputs] if outputs > 1 else
                       [n_features] if sparse else [1, n_features]),
                 _info(intercept, elem, [1, outputs]),
                 *([_info(_SCALE, elem, [1])] if scaled else [])],
        new_weights=[new_coef, new_intercept, *([new_scale] if scaled else [])],
        loss=values, loss_shape=tuple(row_shape), elem=elem, opsets=[("", OPSET)],
        ir_version=IR_VERSION, extra=extra,
    )
    dataset = [] if sparse else [_info(p.features, elem, [None, n_features])]
    if scaled:
        graph = _scan(template, ["scaled_coef", p.new_weights[1], "final_scale"],
                      losses=p.values, dataset=dataset)
        _unscaled(graph, elem, dtype)
    else:
        graph = _scan(template, list(p.new_weights), losses=p.values, dataset=dataset)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              ir_version=IR_VERSION)
    return p(
        model=model, loss=loss, threshold=float(threshold), steps=int(steps), batch_rows=b,
        n_features=int(n_features), scalars=template.scalars, dtype=np.dtype(dtype),
        n_outputs=outputs, norms=tuple(name for name, _, _ in extra),
    )


def _exact_step_function(threshold: float,
                         dtype: np.dtype | type) -> tuple[float, float] | None:
    r"""``(alpha, beta)`` of a ``HardSigmoid`` equal to :math:`[z \le t]` for every float32
    :math:`z` (the hinge loss's margin mask in one node instead of a comparison and a
    ``Cast``, which cost 2 µs of a 10 µs step, measured), or None where no such pair
    exists (float64: the attributes are float32; :math:`t \le 0`; :math:`t < 2^{-104}`).

    With :math:`t = m 2^e` (:math:`\tfrac12 \le m < 1`) and :math:`K = 2^{24 - e}`, the
    inverse of the spacing of float32 values at :math:`t`, ``HardSigmoid`` computes
    :math:`\operatorname{clip}(-K z + (K t + 1), 0, 1)`: :math:`K z` is exact (a power of
    two; an overflow is an infinity on the correct side), :math:`K t + 1 = m 2^{24} + 1`
    is an integer float32 holds, and near :math:`t` the sum is exact (Sterbenz): it is 1
    at :math:`z = t`, at least 1.5 below (the float32 values there are multiples of half
    the spacing) and at most 0 above.
    """
    t = np.float32(threshold)
    if np.dtype(dtype) != np.float32 or not 0 < t < np.inf:
        return None
    exponent = int(np.frexp(t)[1])
    if exponent < -103:  # K beyond float32
        return None
    scale = 2.0 ** (24 - exponent)
    return -scale, scale * float(t) + 1.0


#: The sparse program's scale :math:`a` of :math:`W = a V` (a state of its ``Scan``).
_SCALE = "scale"


def _unscaled(graph: GraphProto, elem: int, dtype: np.dtype | type) -> None:
    """The scaled sparse program's outer graph, in place: the scale starts at 1 (an
    initializer, not an input), and the new weights are :math:`a V` of the last step."""
    coef = SparseLinearProgram.new_weights[0]
    del graph.input[[i.name for i in graph.input].index(_SCALE)]
    graph.initializer.append(numpy_helper.from_array(np.ones(1, dtype=dtype), _SCALE))
    shapes = {o.name: o for o in graph.output}
    outputs = [_info(coef, elem, _dims(shapes["scaled_coef"])),
               *(o for o in graph.output if o.name not in ("scaled_coef", "final_scale"))]
    del graph.output[:]
    graph.output.extend(outputs)
    graph.node.append(helper.make_node("Mul", ["scaled_coef", "final_scale"], [coef],
                                       name="unscaled"))


def _check_steps(steps: int) -> None:
    if int(steps) < 1:
        raise ValueError(f"steps must be >= 1, got {steps}.")


def _scan(t: _Template, outputs: list[str], losses: str = _LOSSES,
          dataset: Sequence[ValueInfoProto] = ()) -> GraphProto:
    """The graph of one ``Scan`` node whose body is the template.

    The outer graph names the weights and the stacked per-step inputs as the template
    does; the body's names get a suffix (ONNX forbids a subgraph to redeclare a name of
    the outer graph), except its initializers and the ``dataset``, outer inputs the body
    reads as they are.
    """
    shared = {i.name for i in t.initializers} | {i.name for i in dataset}
    mapping = {name: f"{name}__body" for node in t.nodes
               for name in [*node.input, *node.output, node.name]
               if name and name not in shared}
    mapping.update({name: f"{name}__body" for name in
                    [*(w.name for w in t.weights), *(i.name for i in t.data),
                     *(name for name, _, _ in t.scalars)]})
    step_inputs = [(i.name, i.type.tensor_type.elem_type, _dims(i)) for i in t.data]
    step_inputs += [(name, t.elem, list(shape)) for name, _, shape in t.scalars]
    # The stacked inputs have a symbolic first dimension: a chunk of any length runs.
    outer_inputs = [_info(w.name, t.elem, _dims(w)) for w in t.weights] + list(dataset)
    outer_inputs += [_info(name, elem, ["steps", *shape]) for name, elem, shape in step_inputs]
    body = helper.make_graph(
        [_renamed(node, mapping) for node in t.nodes], "step",
        [_info(mapping[w.name], t.elem, _dims(w)) for w in t.weights]
        + [_info(mapping[name], elem, shape) for name, elem, shape in step_inputs],
        [_info(mapping[name], t.elem, _dims(w))
         for name, w in zip(t.new_weights, t.weights, strict=True)]
        + [_info(mapping[t.loss], t.elem, t.loss_shape)]
        + [_info(mapping[result], t.elem, shape) for _, result, shape in t.extra],
        t.initializers)
    node = helper.make_node(
        "Scan", [w.name for w in t.weights] + [name for name, _, _ in step_inputs],
        [*outputs, losses, *(name for name, _, _ in t.extra)], name="steps", body=body,
        num_scan_inputs=len(step_inputs))
    weight_outputs = [_info(name, t.elem, _dims(w))
                      for name, w in zip(outputs, t.weights, strict=True)]
    return helper.make_graph(
        [node], "training_program", outer_inputs,
        [*weight_outputs, _info(losses, t.elem, ["steps", *t.loss_shape]),
         *(_info(name, t.elem, ["steps", *shape]) for name, _, shape in t.extra)])


def _renamed(node: NodeProto, mapping: dict[str, str]) -> NodeProto:
    copy = NodeProto()
    copy.CopyFrom(node)
    copy.input[:] = [mapping.get(name, name) for name in node.input]
    copy.output[:] = [mapping.get(name, name) for name in node.output]
    copy.name = mapping.get(node.name, node.name)
    return copy
