r"""k consecutive mini-batch SGD steps in one ONNX graph: the training program.

One onnxruntime ``run`` costs a fixed 5-9 µs on this machine kind plus 0.4-0.9 µs per
node, whatever the work; a linear model's step at batch 32 does about a microsecond of
arithmetic, so one call per mini-batch cannot beat scikit-learn's per-sample loop (15-20
µs per 32 rows of 100 features). A *program* runs :math:`k` steps per call: the forward
pass, the loss, the gradient, the update and the penalty's proximal step of mini-batches
:math:`B_1, \dots, B_k`, in order, the weights flowing from one step to the next inside
the graph:

.. math::

    L_j &= \sum_{i \in B_j} s_i\, \ell(y_i, f(x_i; W_{j-1}))
        \qquad\text{(the batch's loss sum, an output)} \\
    g_j &= \sigma_j\, \frac{\partial L_j}{\partial W}(W_{j-1}),
        \qquad \sigma_j = 1 / \textstyle\sum_{i \in B_j} s_i \\
    D_j &= \operatorname{soft}_{\eta_j l_1}\!\bigl(W_{j-1}
        \max(0, 1 - \eta_j l_2 / r)^r\bigr)
        \quad\text{(penalized weights; } D_j = W_{j-1} \text{ otherwise)} \\
    W_j &= D_j - \eta_j\, g_j

with :math:`\operatorname{soft}_\tau(v) = v - \operatorname{clip}(v, -\tau, \tau)`,
sample weights :math:`s_i` (1 without) and :math:`r` the penalty's ``rows`` (the per-sample
steps one step stands for): the update of ``OrtGradientForwardBackwardOptimizer._epoch``,
in scikit-learn's order, the penalty's proximal step (``ElasticLearningPenalty``) on the
weights the gradient was computed at, then the gradient step (``LearningRateSGD``).
Inputs: the data of the :math:`k` batches, :math:`W_0`, and per step the scalars
:math:`\sigma_j`, :math:`\eta_j`, :math:`\max(0, 1 - \eta_j l_2 / r)^r`,
:math:`\eta_j l_1`, computed in numpy by :meth:`StepProgram.scalar_table`: the schedule
stays in Python and the graph does not depend on ``eta0``, ``alpha`` or ``l1_ratio``
(changing them needs no new session; only whether :math:`l_1`, :math:`l_2` are zero
does). Outputs: :math:`W_k` and :math:`L_1, \dots, L_k`. Each per-step scalar is fed
with the rank of the tensor it meets (DESIGN.md: a rank-0 operand against an
``[n, 1]`` tensor takes onnxruntime's slow broadcasting path).

Two ways to get the step graph (the *template*):

* :func:`generic_program` takes any backend's one-call gradient graph
  (:attr:`~skl_ortgrad.gradient.GradientGraph.fused`, preferably its ``static`` form) of
  a model whose loss output is the batch's loss sum, and appends the update nodes. Any
  model, any loss, sample weights included (``sample_weight`` is one more per-row
  input); in float32 its results are bit for bit those of the per-batch path;
* :func:`lean_program` writes the step of a linear model :math:`s = XW + b` with the
  squared or the binary log loss by hand, in the fewest nodes: the gradient is
  :math:`X^\top r` with the residual :math:`r = \partial\ell/\partial s`
  (:math:`s - y`, or :math:`\sigma(s) - y`), and one ``Gemm`` computes each update
  :math:`W - X^\top (\eta\sigma r)`. Sample weights cost two or three nodes (the
  residual times the rows' weights, and the weighted loss sum).

Three ways to repeat it (``layout``):

* ``"scan"``: one ``Scan`` node whose body is the template; the inputs of the steps are
  stacked ``[count, ...]`` (views of the data and of the scalar table), ``count`` is
  free (a chunk of any length runs in the same session);
* ``"unrolled"``: :math:`k` renamed copies of the template; every batch is an input of
  its own (a view: no copy, no slicing node), every loss an output of its own (a view of
  one loss buffer). A chunk of fewer than :math:`k` batches (the end of an epoch) is
  padded with steps of learning rate 0 and scale 0, which leave the weights exactly as
  they are as long as their gradient is finite (:math:`V = W`, decay 1, threshold 0);
* ``"loop"``: one ``Loop`` node, the body picking step :math:`j`'s inputs with ``Gather``.

With ``gather=True`` the per-row arrays are inputs given whole and each step reads its
rows by index (``Gather``), so that a shuffled epoch copies no data in numpy (and a
device would hold the dataset once).

Momentum or Adam would carry their state (velocity, moments) like the weights: one more
input, output and step-to-step chain per state tensor; Adam's bias-corrected rate is per
step, computed in numpy like :math:`\eta_j`.

Measured with ``bench/bench_program.py`` (100k x 100 float32, batch 32, L2, a shuffled
epoch, 2 cores, ratios per round of 5 interleaved rounds, onnxruntime 1.19.2 and 1.32):
the lean Scan at :math:`k` = 32-128 takes 0.42-0.48x scikit-learn's epoch (median),
squared and log loss alike, and builds in 1-2 ms whatever :math:`k`; unrolled is 15-23%
slower than Scan at :math:`k = 64` (hundreds of inputs to bind, buffers not reused) and
builds in 10-30 ms (generic: 40-350 ms), Loop 20-27% slower than Scan; the generic Scan
is 1.25-1.8x the lean one. The shuffle's row gather is a third of the epoch.

Graphs only: nothing here creates an onnxruntime session; :meth:`StepProgram.feeds` and
:meth:`StepProgram.fetches` return numpy views for the caller to bind once. The optimizer
(``OrtGradientForwardBackwardOptimizer._program``) runs a Scan program wherever it
computes what its per-batch loop computes: the lean one where the model is the linear
score (:func:`linear_features`) and the loss the squared or the binary log loss with
``eps=0``, sample weights or not (float32: equal to rounding, measured after 4 epochs
at most 3.2e-7 relative on the weights, 1.9e-6 with sample weights, and 8.6e-7 on the
epoch losses; float64: to 1e-10), the generic one of its engine's static gradient
graph otherwise (float32: the same weights and losses, bit for bit). The estimators'
``partial_fit`` epoch at batch 32 on 100k x 100 against scikit-learn's (medians of 5
interleaved rounds, onnxruntime 1.19.2 / 1.32): squared error 0.53x / 0.53x with the
lean program, 0.61x / 0.64x with the generic one; binary log loss 0.60x / 0.60x and
0.88x / 0.94x; 10 classes (one-vs-rest, generic) 0.14x / 0.15x.
"""

from __future__ import annotations

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

LAYOUTS = ("scan", "unrolled", "loop")
#: Value of every per-step scalar in a padding step (a step that must change nothing).
_PADDING = {"scale": 0.0, "eta": 0.0, "rate": 0.0, "decay": 1.0, "threshold": 0.0,
            "neg_threshold": 0.0}
#: Loss kinds of :func:`lean_program`.
LEAN_LOSSES = ("squared_error", "log")
_MIN_OPSET = 13


@dataclass
class _Template:
    """One step as a graph: data, scalars and weights in; new weights and the loss out.

    ``data`` are per-step inputs with a batch dimension, ``scalars`` the per-step
    scalars as ``(name, kind, shape)``, kind one of :data:`_PADDING`'s keys, ``dataset``
    inputs read by every step (whole arrays that the steps gather their rows from).
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
    dataset: list[ValueInfoProto] = field(default_factory=list)


@dataclass
class StepProgram:
    """A graph running ``steps`` training steps, and how to feed it.

    Attributes
    ----------
    model : ModelProto
        The program.
    layout : str
        ``"unrolled"``, ``"scan"`` or ``"loop"``.
    steps : int
        :math:`k`, the batches of one call (for ``"scan"``/``"loop"``, the batches of a
        full chunk; any count runs).
    batch_rows : int
        Rows of every batch.
    data : list of str
        The per-step arrays, sliced batch by batch (``X``, the label...; with
        ``gather=True``, ``rows``: the indices of the batch's rows), keys of
        :meth:`feeds`' ``data``.
    dataset : list of str
        With ``gather=True``, the per-row arrays given whole to every call (``X``, the
        label...), also keys of :meth:`feeds`' ``data``.
    weights : list of str
        Weight inputs; the outputs are :attr:`new_weights`, in the same order.
    weight_shapes : list of tuple
        Their shapes in the program (a caller's ``[1]`` intercept is ``[1, 1]`` in a lean
        program).
    new_weights : list of str
    scalars : list of (str, str, tuple)
        Per-step scalar inputs: name, kind (``scale``, ``eta``, ``rate``, ``decay``,
        ``threshold``, ``neg_threshold``) and shape (rank-matched to the tensors they
        meet).
    loss_shape : tuple of int
        Shape of one step's loss (``()`` or ``(1, 1)``).
    dtype : numpy.dtype
    """

    model: ModelProto
    layout: str
    steps: int
    batch_rows: int
    data: list[str]
    weights: list[str]
    weight_shapes: list[tuple[int, ...]]
    new_weights: list[str]
    scalars: list[tuple[str, str, tuple[int, ...]]]
    loss_shape: tuple[int, ...]
    dtype: np.dtype
    dataset: list[str] = field(default_factory=list)

    def scalar_table(
        self, etas: np.ndarray, scales: np.ndarray, l1: float = 0.0, l2: float = 0.0,
        rows: int = 1,
    ) -> dict[str, np.ndarray]:
        r"""The per-step scalars of a run of batches, one row per batch plus a padding row.

        Computed in float64, then cast, as the numpy update does (Python floats):
        :math:`\eta_j`, :math:`\sigma_j`, :math:`\eta_j\sigma_j` (``rate``),
        :math:`\max(0, 1 - \eta_j l_2 / r)^r` (``decay``), :math:`\pm\eta_j l_1`
        (``threshold``, ``neg_threshold``). The last row holds the values of a step that
        changes nothing (:data:`_PADDING`), used by :meth:`feeds` for padding.

        Parameters
        ----------
        etas : numpy.ndarray, shape (n_batches,)
            Learning rate of every batch (the schedule at its ``t``).
        scales : numpy.ndarray, shape (n_batches,)
            :math:`\sigma_j`, the output gradient of every batch: 1 / its rows, or 1 / its
            summed sample weights (0 for a batch weighing nothing), the loader's.
        l1, l2 : float
            The penalty's weights (0 when absent).
        rows : int
            :math:`r`, the penalty's ``rows``: the decay compounds :math:`r` per-sample
            decays (``ElasticLearningPenalty``).

        Returns
        -------
        dict of str to numpy.ndarray
            For every scalar input, an array of shape ``(n_batches + 1, *shape)``.
        """
        eta = np.asarray(etas, dtype=np.float64)
        scale = np.asarray(scales, dtype=np.float64)
        values = {
            "eta": eta,
            "scale": scale,
            "rate": eta * scale,
            # The stepper's expression, element for element, so the values are equal.
            "decay": np.maximum(0.0, 1.0 - eta * float(l2) / int(rows)) ** int(rows),
            "threshold": eta * float(l1),
            "neg_threshold": -(eta * float(l1)),
        }
        table = {}
        for name, kind, shape in self.scalars:
            column = np.append(values[kind], _PADDING[kind]).astype(self.dtype)
            table[name] = column.reshape((-1, *shape))
        return table

    def feeds(
        self, data: dict[str, np.ndarray], table: dict[str, np.ndarray],
        weights: Sequence[np.ndarray], first: int, count: int, data_first: int | None = None,
    ) -> dict[str, np.ndarray]:
        """The inputs of the call running batches ``first .. first + count - 1``, as
        views: nothing is copied.

        Parameters
        ----------
        data : dict of str to numpy.ndarray
            Per-row arrays, C-contiguous; batch ``j`` of the call is rows
            ``(data_first + j) * batch_rows`` to ``(data_first + j + 1) * batch_rows``
            of those in :attr:`data`; those in :attr:`dataset` are fed whole.
        table : dict of str to numpy.ndarray
            :meth:`scalar_table` of the epoch; the call reads rows ``first`` to
            ``first + count - 1``.
        weights : list of numpy.ndarray
            The weights, in :attr:`weights` order, C-contiguous (reshaped to
            :attr:`weight_shapes`: views).
        first, count : int
            The batches of the call; ``count <= steps`` for ``"unrolled"`` (the missing
            steps are padding: the data of the call's first batch and the scalars of
            the padding row).
        data_first : int, optional
            Where the call's rows start in ``data``, in batches: ``first`` (the default)
            when ``data`` holds the whole epoch, 0 when it holds the rows of this call
            only (a chunk gathered into a buffer of its own).
        """
        b = self.batch_rows
        start = first if data_first is None else data_first
        result = {name: data[name] for name in self.dataset}
        result.update(zip(self.weights, self._views(weights), strict=True))
        if self.layout == "unrolled":
            if not 1 <= count <= self.steps:
                raise ValueError(f"count must be in [1, {self.steps}], got {count}.")
            padding = len(next(iter(table.values()))) - 1
            for step in range(self.steps):
                batch = start + step if step < count else start
                row = first + step if step < count else padding
                for name in self.data:
                    result[_step_name(name, step)] = data[name][batch * b:(batch + 1) * b]
                for name, _, shape in self.scalars:
                    # A slice, not an element: a view that sees the table's updates.
                    result[_step_name(name, step)] = table[name][row:row + 1].reshape(shape)
            return result
        result.update({
            name: data[name][start * b:(start + count) * b].reshape(
                (count, b, *data[name].shape[1:]))
            for name in self.data
        })
        result.update({name: table[name][first:first + count] for name, _, _ in self.scalars})
        if self.layout == "loop":
            result[_TRIP_COUNT] = np.array(count, dtype=np.int64)
        return result

    def _views(self, weights: Sequence[np.ndarray]) -> list[np.ndarray]:
        # onnxruntime copies a non-contiguous array: its later updates would not be seen.
        if not all(w.flags.c_contiguous for w in weights):
            raise ValueError("The weights must be C-contiguous (fed and fetched as views).")
        return [w.reshape(shape) for w, shape in zip(weights, self.weight_shapes, strict=True)]

    def fetches(
        self, losses: np.ndarray, weights: Sequence[np.ndarray], count: int | None = None
    ) -> dict[str, np.ndarray]:
        """The outputs of a call as views of ``losses`` (shape ``(steps,)`` or more) and of
        the buffers of the new ``weights``; ``count`` batches (default ``steps``)."""
        count = self.steps if count is None else count
        result = dict(zip(self.new_weights, self._views(weights), strict=True))
        if self.layout == "unrolled":
            for step in range(self.steps):
                result[_step_name(_LOSS, step)] = losses[step:step + 1].reshape(self.loss_shape)
        else:
            result[_LOSSES] = losses[:count].reshape((count, *self.loss_shape))
        return result


_LOSS = "loss"
_LOSSES = "losses"
_TRIP_COUNT = "trip_count"


def _step_name(name: str, step: int) -> str:
    return f"{name}__s{step}"


def _info(name: str, elem: int, shape: Sequence[int | None]) -> ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, list(shape))


def _dims(info: ValueInfoProto) -> list[int | None]:
    return [d.dim_value if d.HasField("dim_value") else None
            for d in info.type.tensor_type.shape.dim]


class _Emitter:
    """Append nodes with fresh names (``taken`` holds every name in use)."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken
        self.nodes: list[NodeProto] = []

    def __call__(self, op: str, inputs: Sequence[str], hint: str, **attrs: object) -> str:
        out = unique_name(hint, self.taken)
        self.nodes.append(helper.make_node(op, list(inputs), [out],
                                           name=unique_name(f"n_{out}", self.taken), **attrs))
        return out

    def scalar(self, hint: str, rank: int) -> str:
        """A per-step scalar input of rank ``rank`` (a fresh name, recorded by the caller)."""
        return unique_name(f"{hint}_r{rank}" if rank else hint, self.taken)


class _Scalars:
    """The per-step scalar inputs of a template, one per kind and rank, created on use."""

    def __init__(self, emit: _Emitter) -> None:
        self.emit = emit
        self.names: dict[tuple[str, int], str] = {}

    def __call__(self, kind: str, rank: int) -> str:
        if (kind, rank) not in self.names:
            self.names[kind, rank] = self.emit.scalar(kind, rank)
        return self.names[kind, rank]

    def inputs(self) -> list[tuple[str, str, tuple[int, ...]]]:
        return [(name, kind, (1,) * rank) for (kind, rank), name in self.names.items()]


def _proximal(
    emit: _Emitter, scalars: _Scalars, weight: str, rank: int, l1: bool, l2: bool,
) -> str:
    r"""The penalty's proximal step of a penalized weight :math:`W`, taken before the
    gradient step (scikit-learn's order): :math:`W \max(0, 1 - \eta l_2 / r)^r` (the
    ``decay`` scalar) then the soft threshold at :math:`\eta l_1`; ``weight`` itself
    without a penalty."""
    result = weight
    if l2:
        result = emit("Mul", [result, scalars("decay", rank)], f"{weight}_decayed")
    if l1:
        # Clip's bounds must be rank 0; v - clip(v, -t, t) is sign(v) max(|v| - t, 0),
        # exactly, in two nodes.
        clipped = emit("Clip", [result, scalars("neg_threshold", 0),
                                scalars("threshold", 0)], f"{weight}_clipped")
        result = emit("Sub", [result, clipped], f"{weight}_thresholded")
    return result


def _generic_template(
    fused: ModelProto, weights: Sequence[str], penalized: Sequence[str], batch_rows: int,
    l1: bool, l2: bool, loss: str,
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
    elem = loss_info.type.tensor_type.elem_type
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
    emit = _Emitter(graph_names(graph))
    scalars = _Scalars(emit)
    weight_infos = [inputs[w] for w in weights]
    new_weights = []
    for w in weights:
        rank = len(inputs[w].type.tensor_type.shape.dim)
        # eta at the weight's rank: onnxruntime broadcasts a rank-0 or [1] operand against
        # an [n, 1] tensor element by element, much slower (DESIGN.md facts).
        move = emit("Mul", [f"{w}_grad", scalars("eta", rank)], f"{w}_move")
        start = _proximal(emit, scalars, w, rank, l1, l2) if w in penalized else w
        new_weights.append(emit("Sub", [start, move], f"{w}_stepped"))
    grad_shape = tuple(_dims(inputs[grad_input]))
    if any(d is None for d in grad_shape):
        raise ValueError(f"{grad_input!r} must have a static shape, got {grad_shape}.")
    return _Template(
        nodes=[*graph.node, *emit.nodes],
        initializers=list(graph.initializer),
        data=data,
        scalars=[(grad_input, "scale", grad_shape), *scalars.inputs()],
        weights=weight_infos,
        new_weights=new_weights,
        loss=loss,
        loss_shape=tuple(d or 1 for d in _dims(loss_info)),
        elem=elem,
        opsets=[("", main_opset(fused)), *other_domains(fused)],
        ir_version=fused.ir_version,
    )


def generic_program(
    fused: ModelProto,
    weights: Sequence[str],
    steps: int,
    batch_rows: int,
    penalized: Sequence[str] = (),
    l1: bool = False,
    l2: bool = False,
    layout: str = "scan",
    loss: str = "loss",
    gather: bool = False,
) -> StepProgram:
    r"""The program of ``steps`` steps built on a backend's one-call gradient graph.

    Per step: the gradient graph, whose output gradient input ``<loss>_grad`` is the
    step's :math:`\sigma_j` (kind ``scale``), then for every weight
    :math:`D - \eta_j g` with :math:`\eta_j` fed at the weight's rank, where :math:`D`
    is :math:`W` or, for the ``penalized`` weights, :math:`W` decayed by
    :math:`\max(0, 1 - \eta_j l_2 / r)^r` (when ``l2``) then soft-thresholded at
    :math:`\eta_j l_1` (when ``l1``): the penalty first, at the weights the gradient
    was computed at.

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
        :math:`k`.
    batch_rows : int
        Rows per batch.
    penalized : list of str
        Weights the penalty's proximal step applies to (coefficients, not intercepts).
    l1, l2 : bool
        Emit the L1 soft threshold / the L2 decay (their values are fed per step).
    layout : str
        ``"scan"`` (the fastest, measured), ``"unrolled"`` or ``"loop"`` (see the module
        docstring).
    loss : str
        Name of the loss output.
    gather : bool
        False: every step's rows are inputs (views of a buffer the caller fills, e.g.
        with the permuted rows). True: the per-row arrays are inputs given whole, and
        every step gathers its rows by index (an int64 input ``rows`` of shape
        ``[batch_rows]``, a view of the epoch's permutation): a shuffled epoch copies
        nothing in numpy, each batch's rows are read right before they are used.

    Returns
    -------
    StepProgram
    """
    template = _generic_template(fused, weights, penalized, batch_rows, l1, l2, loss)
    return _assemble(template, steps, batch_rows, layout, gather)


def lean_program(
    loss: str,
    n_features: int,
    steps: int,
    batch_rows: int,
    dtype: np.dtype | type = np.float32,
    l1: bool = False,
    l2: bool = False,
    layout: str = "scan",
    weights: tuple[str, str] = ("coef", "intercept"),
    label: str = "label",
    features: str = "X",
    gather: bool = False,
    sample_weight: str | None = None,
) -> StepProgram:
    r"""The program of ``steps`` steps of a linear model, written by hand.

    With :math:`s = XW + b` (``Gemm``), :math:`W` of shape ``[n_features, 1]``, the
    residual :math:`r = \partial \ell / \partial s` and the loss sum :math:`L`:

    * ``"squared_error"``: :math:`r = s - y`, :math:`L = \frac12 r^\top r` (one
      ``Gemm``);
    * ``"log"``: the binary log loss on raw scores (labels in {0, 1}, the package's
      ``NegLogLearningLoss(eps=0)``), :math:`r = \sigma(s) - y`,
      :math:`L = \sum_i \operatorname{softplus}(s_i) - y^\top s`.

    With sample weights :math:`w` (``sample_weight``, one per row), the residual is
    :math:`r \odot w` and the loss sum :math:`\frac12 r^\top (r \odot w)` or
    :math:`w^\top \operatorname{softplus}(s) - (w \odot y)^\top s`: the weighted sum
    :math:`\sum_i w_i \ell_i` and its gradient.

    Then, with the per-step ``rate`` :math:`\rho_j = \eta_j \sigma_j` and
    :math:`u = \rho_j r`: :math:`W \leftarrow D_W - X^\top u` with :math:`D_W` the
    penalty's proximal step of :math:`W` as in :func:`generic_program`, and
    :math:`b \leftarrow b - 1^\top u` (one ``Gemm`` each). Inside the program the
    intercept has shape ``[1, 1]`` (so that a ``Gemm`` updates it;
    :meth:`StepProgram.feeds` reshapes the caller's ``[1]`` buffers, no copy). Nodes
    per step: 6 for the squared loss, 9 for the log loss in float32 (10 in float64),
    plus 1 for L2, 2 for L1, 2 for sample weights (3 with the log loss).

    Parameters
    ----------
    loss : str
        ``"squared_error"`` or ``"log"``.
    n_features : int
    steps, batch_rows, l1, l2, layout, gather :
        As in :func:`generic_program`; only the coefficients are penalized.
    dtype : numpy dtype
    weights : (str, str)
        Names of the coefficients and the intercept.
    label, features : str
        Names of the per-row inputs.
    sample_weight : str, optional
        Name of the per-row weights input, shape ``[batch_rows]`` (None: unweighted).
    """
    if loss not in LEAN_LOSSES:
        raise ValueError(f"lean_program's loss must be one of {LEAN_LOSSES}, got {loss!r}.")
    elem = onnx_dtype(dtype)
    coef, intercept = weights
    taken = {features, label, coef, intercept, sample_weight} - {None}
    emit = _Emitter(taken)
    axis1, ones, zeros = (unique_name(name, taken) for name in ("axis1", "ones", "zeros"))
    constants = {ones: np.ones((batch_rows, 1), dtype=dtype)}
    s = emit("Gemm", [features, coef, intercept], "score")
    if sample_weight is not None:
        constants[axis1] = np.array([1], dtype=np.int64)
        # [b] -> [b, 1]: a [b] operand against the [b, 1] residual would broadcast to [b, b].
        w = emit("Unsqueeze", [sample_weight, axis1], "row_weight")
    if loss == "squared_error":
        r = emit("Sub", [s, label], "residual")
        rw = r if sample_weight is None else emit("Mul", [r, w], "weighted_residual")
        total = emit("Gemm", [r, rw], _LOSS, alpha=0.5, transA=1)
    else:
        r = emit("Sub", [emit("Sigmoid", [s], "probability"), label], "residual")
        rw = r if sample_weight is None else emit("Mul", [r, w], "weighted_residual")
        if np.dtype(dtype) == np.float32:
            softplus = emit("Softplus", [s], "softplus")
        else:
            # Softplus has no float64 kernel: softplus(s) = log(e^0 + e^s), a log-sum-exp
            # over [0, s] that onnxruntime computes stably (it subtracts the maximum).
            # One node more, and slower (about 0.9 µs per step in float32).
            constants[axis1] = np.array([1], dtype=np.int64)
            constants[zeros] = np.zeros((batch_rows, 1), dtype=dtype)
            pairs = emit("Concat", [s, zeros], "score_and_zero", axis=1)
            softplus = emit("ReduceLogSumExp", [pairs, axis1], "softplus", keepdims=1)
        if sample_weight is None:
            positive, target = emit("ReduceSum", [softplus], "softplus_sum", keepdims=1), label
        else:
            positive = emit("Gemm", [w, softplus], "softplus_sum", transA=1)
            target = emit("Mul", [w, label], "weighted_label")
        total = emit("Gemm", [target, s, positive], _LOSS, alpha=-1.0, beta=1.0, transA=1)
    scalars = _Scalars(emit)
    u = emit("Mul", [rw, scalars("rate", 2)], "scaled_residual")
    # Each Gemm is a whole update, C - A^T B (alpha=-1): X^T u for W (C: its proximal
    # step), 1^T u for b.
    new_coef = emit("Gemm", [features, u, _proximal(emit, scalars, coef, 2, l1, l2)],
                    f"{coef}_stepped", alpha=-1.0, transA=1)
    new_intercept = emit("Gemm", [u, ones, intercept], f"{intercept}_stepped", alpha=-1.0,
                         transA=1)
    template = _Template(
        nodes=emit.nodes,
        initializers=[numpy_helper.from_array(value, name) for name, value in constants.items()],
        data=[_info(features, elem, [batch_rows, n_features]),
              _info(label, elem, [batch_rows, 1]),
              *([] if sample_weight is None else [_info(sample_weight, elem, [batch_rows])])],
        scalars=scalars.inputs(),
        weights=[_info(coef, elem, [n_features, 1]), _info(intercept, elem, [1, 1])],
        new_weights=[new_coef, new_intercept],
        loss=total,
        loss_shape=(1, 1),
        elem=elem,
        opsets=[("", OPSET)],
        ir_version=IR_VERSION,
    )
    return _assemble(template, steps, batch_rows, layout, gather)


def linear_features(model: ModelProto, weights: Sequence[str]) -> str | None:
    r"""The features input of ``model`` if it is the one-output linear model that
    :func:`lean_program` writes, :math:`s = XW + b` with ``weights`` = ``(W, b)``;
    None otherwise.

    The graph must be exactly ``MatMul(X, W)`` then ``Add`` of ``b``, optionally followed
    by a ``Reshape`` to ``[-1, 1]`` (skl2onnx's regressor with ``black_op``; a no-op on
    an ``[n, 1]`` score), one input, one output, :math:`W` of shape ``[n_features, 1]``
    and :math:`b` of one element, both initializers. Recognised by structure, not by the
    estimator that converted it: any other graph needs :func:`generic_program`.
    """
    graph = model.graph
    inits = {init.name: init for init in graph.initializer}
    if len(weights) != 2 or len(graph.input) != 1 or len(graph.output) != 1:
        return None
    coef, intercept = weights
    nodes = list(graph.node)
    if any(node.domain not in ("", "ai.onnx") or node.attribute for node in nodes):
        return None
    if nodes and nodes[-1].op_type == "Reshape":
        target = inits.get(nodes[-1].input[1])
        if target is None or numpy_helper.to_array(target).tolist() != [-1, 1]:
            return None
        reshape, nodes = nodes[-1], nodes[:-1]
    else:
        reshape = None
    if [node.op_type for node in nodes] != ["MatMul", "Add"]:
        return None
    matmul, add = nodes
    features = graph.input[0].name
    score = add.output[0] if reshape is None else reshape.output[0]
    if (
        list(matmul.input) != [features, coef]
        or sorted(add.input) != sorted([matmul.output[0], intercept])
        or (reshape is not None and reshape.input[0] != add.output[0])
        or score != graph.output[0].name
        or coef not in inits or intercept not in inits
    ):
        return None
    coef_dims, intercept_dims = list(inits[coef].dims), list(inits[intercept].dims)
    if len(coef_dims) != 2 or coef_dims[1] != 1 or int(np.prod(intercept_dims)) != 1:
        return None
    return features


def _renamed(node: NodeProto, mapping: dict[str, str]) -> NodeProto:
    copy = NodeProto()
    copy.CopyFrom(node)
    copy.input[:] = [mapping.get(name, name) for name in node.input]
    copy.output[:] = [mapping.get(name, name) for name in node.output]
    copy.name = mapping.get(node.name, node.name)
    return copy


def _suffixed(t: _Template, suffix: str, keep: dict[str, str]) -> dict[str, str]:
    """Every name of the template (results, inputs, node names) but its initializers
    mapped to ``name + suffix``, except ``keep``'s keys, mapped to their values."""
    shared = {init.name for init in t.initializers} | {i.name for i in t.dataset}
    mapping = {}
    for node in t.nodes:
        for name in [*node.input, *node.output, node.name]:
            if name and name not in shared:
                mapping[name] = name + suffix
    for name in [*(i.name for i in t.data), *(s[0] for s in t.scalars)]:
        mapping[name] = name + suffix
    mapping.update(keep)
    return mapping


def _gathering(t: _Template) -> _Template:
    """The template reading its rows from whole datasets: per step, one int64 input
    ``rows`` of shape ``[b]`` and one ``Gather`` per per-row array."""
    taken = {name for node in t.nodes for name in [*node.input, *node.output, node.name]}
    taken |= {i.name for i in [*t.data, *t.weights]} | {s[0] for s in t.scalars}
    rows = unique_name("rows", taken)
    batch = t.data[0].type.tensor_type.shape.dim[0].dim_value
    renames, gathers = {}, []
    for info in t.data:
        renames[info.name] = unique_name(f"{info.name}_batch", taken)
        gathers.append(helper.make_node("Gather", [info.name, rows], [renames[info.name]],
                                        name=unique_name(f"n_{renames[info.name]}", taken),
                                        axis=0))
    return _Template(
        nodes=[*gathers, *(_renamed(node, renames) for node in t.nodes)],
        initializers=t.initializers,
        data=[_info(rows, TensorProto.INT64, [batch])],
        scalars=t.scalars, weights=t.weights, new_weights=t.new_weights, loss=t.loss,
        loss_shape=t.loss_shape, elem=t.elem, opsets=t.opsets, ir_version=t.ir_version,
        dataset=[_info(i.name, i.type.tensor_type.elem_type, [None, *_dims(i)[1:]])
                 for i in t.data],
    )


def _assemble(t: _Template, steps: int, batch_rows: int, layout: str,
              gather: bool) -> StepProgram:
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}.")
    if int(steps) < 1:
        raise ValueError(f"steps must be >= 1, got {steps}.")
    if t.opsets[0][1] < _MIN_OPSET:
        raise ValueError(f"A program needs opset >= {_MIN_OPSET}, got {t.opsets[0][1]}.")
    steps = int(steps)
    if gather:
        t = _gathering(t)
    names = [w.name for w in t.weights]
    outputs = [f"new_{w}" for w in names]
    if layout == "unrolled":
        graph = _unrolled(t, steps, outputs)
    else:
        graph = _folded(t, steps, outputs, layout)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid(d, v) for d, v in t.opsets],
        ir_version=t.ir_version)
    return StepProgram(
        model=model, layout=layout, steps=steps, batch_rows=batch_rows,
        data=[i.name for i in t.data], weights=names,
        weight_shapes=[tuple(_dims(w)) for w in t.weights], new_weights=outputs,
        scalars=t.scalars, loss_shape=t.loss_shape, dtype=numpy_dtype(t.elem),
        dataset=[i.name for i in t.dataset],
    )


def _unrolled(t: _Template, steps: int, outputs: list[str]) -> GraphProto:
    """``steps`` copies of the template, weights chained, per-step inputs and losses."""
    nodes, inputs, losses = [], [], []
    current = [w.name for w in t.weights]
    for step in range(steps):
        suffix = f"__s{step}"
        keep = dict(zip((w.name for w in t.weights), current, strict=True))
        keep[t.loss] = _step_name(_LOSS, step)
        last = step == steps - 1
        if last:
            keep.update(zip(t.new_weights, outputs, strict=True))
        mapping = _suffixed(t, suffix, keep)
        nodes.extend(_renamed(node, mapping) for node in t.nodes)
        inputs.extend(_info(mapping[i.name], i.type.tensor_type.elem_type, _dims(i))
                      for i in t.data)
        inputs.extend(_info(mapping[name], t.elem, shape) for name, _, shape in t.scalars)
        losses.append(_info(mapping[t.loss], t.elem, t.loss_shape))
        current = [mapping[name] for name in t.new_weights]
    weight_inputs = [_info(w.name, t.elem, _dims(w)) for w in t.weights]
    weight_outputs = [_info(name, t.elem, _dims(w))
                      for name, w in zip(outputs, t.weights, strict=True)]
    return helper.make_graph(nodes, "training_program",
                             [*weight_inputs, *t.dataset, *inputs],
                             [*weight_outputs, *losses], t.initializers)


def _folded(t: _Template, steps: int, outputs: list[str], layout: str) -> GraphProto:
    """One ``Scan`` or ``Loop`` node whose body is the template.

    The body's names get a suffix: ONNX forbids a subgraph to redeclare a name of the
    outer graph, and the outer graph uses the template's names for the stacked inputs.
    """
    mapping = _suffixed(t, "__body", {})
    for w in t.weights:
        mapping[w.name] = f"{w.name}__body"
    body_nodes = [_renamed(node, mapping) for node in t.nodes]
    step_inputs = [(i.name, i.type.tensor_type.elem_type, _dims(i)) for i in t.data]
    step_inputs += [(name, t.elem, list(shape)) for name, _, shape in t.scalars]
    # The stacked inputs have a symbolic first dimension: a chunk of any length runs.
    outer_inputs = [_info(w.name, t.elem, _dims(w)) for w in t.weights] + t.dataset
    for i in t.data:
        outer_inputs.append(_info(i.name, i.type.tensor_type.elem_type, ["steps", *_dims(i)]))
    for name, _, shape in t.scalars:
        outer_inputs.append(_info(name, t.elem, ["steps", *shape]))
    state_out = [_info(mapping[name], t.elem, _dims(w))
                 for name, w in zip(t.new_weights, t.weights, strict=True)]
    loss_out = _info(mapping[t.loss], t.elem, t.loss_shape)
    state_in = [_info(mapping[w.name], t.elem, _dims(w)) for w in t.weights]
    weight_outputs = [_info(name, t.elem, _dims(w))
                      for name, w in zip(outputs, t.weights, strict=True)]
    losses = _info(_LOSSES, t.elem, ["steps", *t.loss_shape])
    if layout == "scan":
        body_inputs = state_in + [_info(mapping[name], elem, shape)
                                  for name, elem, shape in step_inputs]
        body = helper.make_graph(body_nodes, "step", body_inputs, [*state_out, loss_out],
                                 t.initializers)
        node = helper.make_node(
            "Scan", [w.name for w in t.weights] + [name for name, _, _ in step_inputs],
            [*outputs, _LOSSES], name="steps", body=body, num_scan_inputs=len(step_inputs))
        return helper.make_graph([node], "training_program", outer_inputs,
                                 [*weight_outputs, losses])
    # Loop: the body picks step j of every stacked input with Gather (one node each).
    iteration, condition = "iteration__body", "condition__body"
    gathers = [helper.make_node("Gather", [name, iteration], [mapping[name]],
                                name=f"gather_{name}__body", axis=0)
               for name, _, _ in step_inputs]
    keep_going = helper.make_node("Identity", [condition], ["condition_out__body"],
                                  name="condition_identity__body")
    body = helper.make_graph(
        [*gathers, *body_nodes, keep_going], "step",
        [_info(iteration, TensorProto.INT64, []), _info(condition, TensorProto.BOOL, []),
         *state_in],
        [_info("condition_out__body", TensorProto.BOOL, []), *state_out, loss_out],
        t.initializers)
    node = helper.make_node("Loop", [_TRIP_COUNT, "", *(w.name for w in t.weights)],
                            [*outputs, _LOSSES], name="steps", body=body)
    return helper.make_graph(
        [node], "training_program", [_info(_TRIP_COUNT, TensorProto.INT64, []), *outer_inputs],
        [*weight_outputs, losses])
