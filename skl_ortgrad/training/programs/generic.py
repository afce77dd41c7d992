r"""The generic program: any backend's one-call gradient graph plus the update rule's
nodes, :math:`k` steps per call (see :mod:`skl_ortgrad.training.programs`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from onnx import AttributeProto, ModelProto, NodeProto, TensorProto, ValueInfoProto, helper

from skl_ortgrad.graph.dtypes import numpy_dtype
from skl_ortgrad.graph.model import graph_names, unique_name
from skl_ortgrad.graph.opset import main_opset, other_domains
from skl_ortgrad.graph.step_graph import StepGraph
from skl_ortgrad.optim import BaseLearningRate, LearningRateSGD
from skl_ortgrad.training.programs.scan import renamed, scan
from skl_ortgrad.training.programs.steps import (
    LOSSES_OUTPUT,
    MIN_OPSET,
    UNWEIGHTED,
    PerStep,
    StepTemplate,
    check_steps,
    cumulative_l1,
    dims_of,
    proximal,
    rank_of,
    step_norms,
    value_info,
    views,
)


@dataclass
class StepProgram(PerStep):
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
        1-D tensors over all the weights, see :func:`_packed_update`), then the cumulative
        L1 penalty's :math:`q` of every penalized weight (``cumulative``); the outputs are
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
        The per-step outputs beside the losses, one value per step: the ``NORMS``
        (``norms=True``), then :data:`~skl_ortgrad.training.programs.steps.UNWEIGHTED`
        (``unweighted``).
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
    #: The name of the per-step unweighted loss sums among :attr:`norms`.
    unweighted_output: ClassVar[str] = UNWEIGHTED

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
        result = dict(zip(self.weights, views(weights, self.weight_shapes), strict=True))
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
        result = dict(zip(self.new_weights, views(weights, self.weight_shapes), strict=True))
        result[LOSSES_OUTPUT] = losses[:count].reshape((count, *self.loss_shape))
        result.update({name: norms[name][:count] for name in self.norms})
        return result


def _generic_template(
    fused: ModelProto, weights: Sequence[str], penalized: Sequence[str], batch_rows: int,
    l1: bool, l2: bool, loss: str, update: BaseLearningRate, norms: bool = False,
    cumulative: bool = False, unweighted: ModelProto | None = None,
) -> StepTemplate:
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
        dims = dims_of(info)
        if not dims or (dims[0] is not None and dims[0] != batch_rows):
            raise ValueError(f"Input {info.name!r} has shape {dims}, not a batch of "
                             f"{batch_rows} rows.")
        if any(d is None for d in dims[1:]):
            raise ValueError(f"Input {info.name!r} has shape {dims}: only the batch "
                             "dimension may be symbolic.")
        data.append(value_info(info.name, info.type.tensor_type.elem_type, [batch_rows, *dims[1:]]))
    elem = loss_info.type.tensor_type.elem_type
    step = StepGraph(graph_names(graph), numpy_dtype(elem))
    extra = (step_norms(step, [w for w in weights if w in penalized], l1 or cumulative, l2)
             if norms else [])
    appended_nodes: list[NodeProto] = []
    appended_initializers: list[TensorProto] = []
    if unweighted is not None:
        appended_nodes, appended_initializers, total = _appended_sum(step, unweighted, inputs)
        extra.append((UNWEIGHTED, total, ()))
    starts = [proximal(step, w, rank_of(inputs[w]), l1, l2) if w in penalized else w
              for w in weights]
    shapes = [dims_of(inputs[w]) for w in weights]
    if update.states_per_weight and any(None in shape for shape in shapes):
        raise ValueError("A packed update state needs weights of static shapes.")
    states = [value_info(unique_name("state", step.taken), elem,
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
                                                  rank_of(inputs[w]))[0])
    applied = []
    if cumulative:
        # The cumulative L1 penalty after the update, each penalized weight with its q.
        for w in penalized:
            index = list(weights).index(w)
            applied.append(value_info(unique_name(f"{w}_applied", step.taken), elem,
                                      dims_of(inputs[w])))
            new_weights[index], new_applied = cumulative_l1(
                step, new_weights[index], applied[-1].name, rank_of(inputs[w]))
            new_states.append(new_applied)
    grad_shape = tuple(dims_of(inputs[grad_input]))
    if any(d is None for d in grad_shape):
        raise ValueError(f"{grad_input!r} must have a static shape, got {grad_shape}.")
    return StepTemplate(
        nodes=[*graph.node, *appended_nodes, *step.nodes],
        initializers=[*graph.initializer, *appended_initializers, *step.initializers],
        data=data,
        scalars=[(grad_input, "scale", grad_shape), *step.scalar_inputs()],
        weights=[*(inputs[w] for w in weights), *states, *applied],
        new_weights=[*new_weights, *new_states],
        loss=loss,
        loss_shape=tuple(d or 1 for d in dims_of(loss_info)),
        elem=elem,
        opsets=[("", main_opset(fused)), *other_domains(fused)],
        ir_version=fused.ir_version,
        extra=extra,
    )


def _appended_sum(step: StepGraph, model: ModelProto, inputs: dict[str, ValueInfoProto],
                  ) -> tuple[list[NodeProto], list[TensorProto], str]:
    """The nodes and initializers of ``model`` (one output, the loss of every row),
    renamed apart from the step's names but for its inputs, which it reads from the
    gradient graph's (``inputs``, by name), and the sum of its output (a node of the
    step)."""
    graph = model.graph
    unknown = sorted(i.name for i in graph.input if i.name not in inputs)
    if unknown:
        raise ValueError(f"Inputs {unknown} of the unweighted loss graph are not inputs of "
                         "the gradient graph.")
    mapping = {name: unique_name(f"unweighted_{name}", step.taken)
               for name in [*(i.name for i in graph.initializer),
                            *(name for node in graph.node for name in [*node.output, node.name]
                              if name)]}
    initializers = []
    for init in graph.initializer:
        copy = TensorProto()
        copy.CopyFrom(init)
        copy.name = mapping[init.name]
        initializers.append(copy)
    total = step.node("ReduceSum", [mapping[graph.output[0].name]], "unweighted_loss",
                      keepdims=0)
    return [renamed(node, mapping) for node in graph.node], initializers, total


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
    cumulative: bool = False,
    unweighted: ModelProto | None = None,
) -> StepProgram:
    r"""The program of ``steps`` steps built on a backend's one-call gradient graph.

    Per step: the gradient graph, whose output gradient input ``<loss>_grad`` is the
    step's :math:`\sigma_j` (kind ``scale``), then for every weight the update rule's
    step from :math:`D` (:meth:`~skl_ortgrad.optim.BaseLearningRate.
    emit_update`; plain SGD: :math:`D - \eta_j g` with :math:`\eta_j` fed at the
    weight's rank), where :math:`D` is :math:`W` or, for the ``penalized`` weights,
    :math:`W` decayed by :math:`\max(0, 1 - \eta_j l_2 / r)^r` (when ``l2``) then
    soft-thresholded at :math:`\eta_j l_1` (when ``l1``), then, with ``cumulative``,
    the cumulative L1 penalty's step of the penalized weights
    (:func:`~skl_ortgrad.training.programs.steps.cumulative_l1`). The rule's state
    (momentum velocities, Adam's moments) and the penalty's (:math:`q` of every penalized
    weight, in ``penalized`` order) flow from step to step beside the weights.

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
        The update rule (its :meth:`~skl_ortgrad.optim.
        BaseLearningRate.emit_update`); plain SGD by default.
    norms : bool
        Also output, per step, the ``NORMS`` of the penalized weights the step
        starts from (the penalty's value, scikit-learn's SGD objective).
    cumulative : bool
        Emit the cumulative L1 penalty after the update (its total :math:`u_j` fed per
        step, ``l1_total``).
    unweighted : ModelProto, optional
        The model of the rows' *unweighted* losses (one output, a loss per row), whose
        inputs are inputs of ``fused`` (the features, the label, the weights): the
        program also outputs, per step, their sum at the weights the step starts from
        (:data:`~skl_ortgrad.training.programs.steps.UNWEIGHTED`; the loss output is
        the gradient graph's, weighted).

    Returns
    -------
    StepProgram
    """
    check_steps(steps)
    t = _generic_template(fused, weights, penalized, batch_rows, l1, l2, loss,
                          LearningRateSGD() if update is None else update, norms,
                          cumulative, unweighted)
    if t.opsets[0][1] < MIN_OPSET:
        raise ValueError(f"A program needs opset >= {MIN_OPSET}, got {t.opsets[0][1]}.")
    outputs = [f"new_{w.name}" for w in t.weights]
    model = helper.make_model(
        scan(t, outputs), opset_imports=[helper.make_opsetid(d, v) for d, v in t.opsets],
        ir_version=t.ir_version)
    return StepProgram(
        model=model, steps=int(steps), batch_rows=batch_rows,
        data=[i.name for i in t.data], weights=[w.name for w in t.weights],
        weight_shapes=[tuple(dims_of(w)) for w in t.weights], new_weights=outputs,
        scalars=t.scalars, loss_shape=t.loss_shape, dtype=numpy_dtype(t.elem),
        norms=tuple(name for name, _, _ in t.extra),
    )
