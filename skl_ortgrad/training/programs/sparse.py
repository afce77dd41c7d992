r"""The linear program on sparse rows: each batch's stored values gathered and its update
scattered, work that follows the stored values (see :mod:`skl_ortgrad.training.programs`
and the dense form, :mod:`~skl_ortgrad.training.programs.linear`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from onnx import GraphProto, TensorProto, helper, numpy_helper

from skl_ortgrad.graph.dtypes import onnx_dtype
from skl_ortgrad.graph.model import IR_VERSION, OPSET
from skl_ortgrad.graph.step_graph import StepGraph
from skl_ortgrad.training.programs.linear import (
    RESERVED,
    LinearProgram,
    check_linear,
    intercept_update,
    linear_model,
    residual_nodes,
)
from skl_ortgrad.training.programs.scan import scan
from skl_ortgrad.training.programs.steps import (
    SCALES,
    StepTemplate,
    dims_of,
    proximal,
    step_norms,
    value_info,
)


@dataclass
class SparseLinearProgram(LinearProgram):
    r"""The linear program on sparse rows (:func:`linear_program` with ``sparse=True``).

    Per call, the caller lays out the stored values of the call's batches (columns and
    values ``[count, width, b]``, :meth:`feeds`; with one output the columns the weights
    are gathered at go flat, ``[count, width * b]``); the per-row inputs are the target and
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
            flat = columns
        else:
            flat = columns.reshape(count, -1)  # what GatherElements reads, a view
        return {**dict(zip(self.stored, (flat, columns[..., None], values, -values),
                           strict=True)),
                **self._step_feeds(per_row, table, weights, first, count)}


#: The sparse program's scale :math:`a` of :math:`W = a V` (a state of its ``Scan``).
SCALE = "scale"


def _unscaled(graph: GraphProto, elem: int, dtype: np.dtype | type) -> None:
    """The scaled sparse program's outer graph, in place: the scale starts at 1 (an
    initializer, not an input), and the new weights are :math:`a V` of the last step."""
    coef = SparseLinearProgram.new_weights[0]
    del graph.input[[i.name for i in graph.input].index(SCALE)]
    graph.initializer.append(numpy_helper.from_array(np.ones(1, dtype=dtype), SCALE))
    shapes = {o.name: o for o in graph.output}
    outputs = [value_info(coef, elem, dims_of(shapes["scaled_coef"])),
               *(o for o in graph.output if o.name not in ("scaled_coef", "final_scale"))]
    del graph.output[:]
    graph.output.extend(outputs)
    graph.node.append(helper.make_node("Mul", ["scaled_coef", "final_scale"], [coef],
                                       name="unscaled"))


def sparse_linear_program(
    loss: str, n_features: int, steps: int, batch_rows: int,
    dtype: np.dtype | type = np.float32, l1: bool = False, l2: bool = False,
    threshold: float = 1.0, n_outputs: int = 1, norms: bool = False,
) -> SparseLinearProgram:
    r"""The sparse form of :func:`~skl_ortgrad.training.programs.linear.dense_linear_program`
    (same arguments, same per-loss residual :math:`u`).

    The batch is its stored values, columns
    :math:`J` and values :math:`V` of shape ``[width, b]`` (zeros where a row has fewer),
    :math:`W` flat; :math:`s = 1^\top (W_J \odot V) + b` (``Gather``, ``Mul``,
    ``ReduceSum``, ``Add``) and :math:`W \leftarrow D_W + \mathrm{scatter\_add}_J(-V
    \odot u)` (``Mul``, ``ScatterND``): three nodes more (four with one output, whose
    gather is a ``GatherElements`` of the columns fed flat and a ``Reshape``), and work in
    the stored values.
    With the L2 decay alone, :math:`W = aV`: the decay multiplies the scalar :math:`a`
    and the update of :math:`V` is divided by it, so no step multiplies all of
    :math:`W` (at 500k columns, 291 -> 154 µs per step, measured); :math:`aV` is
    formed once after the call's steps.


    With :math:`K` outputs, :math:`W` ``[d, K]`` gathers ``[width, b, K]`` rows, the values
    are fed ``[width, b, 1]`` and the steps scattered ``[width, b, K]``.
    """
    outputs = check_linear(loss, steps, n_outputs)
    p = SparseLinearProgram
    elem, b = onnx_dtype(dtype), int(batch_rows)
    row_shape = [b, outputs] if outputs > 1 else [1, b]
    step = StepGraph(set(RESERVED), dtype)
    emit = step.node
    coef, intercept = p.weights
    target, step_weight = p.per_row
    constants: dict[str, np.ndarray] = {
        "ones": np.ones((1, b) if outputs > 1 else (b, 1), dtype=dtype)}
    # With the L2 decay alone: W = a V, the decay multiplies the scalar a, so no step
    # writes all of W twice (the decay, then the update).
    scaled = l2 and not l1
    columns, column_indices, stored, negated = p.stored
    constants["first_axis"] = np.zeros(1, dtype=np.int64)
    # With K outputs, W [d, K] gathers [width, b, K] and the values come as [width, b, 1]:
    # the sum over the stored values is the [b, K] scores. With one, W [d] gathers the
    # columns fed flat, [width * b]: GatherElements, 2 us for 3,200 values where Gather
    # takes 8.5 (copies of one value each), then laid out [width, b].
    if outputs > 1:
        at_columns = emit("Gather", [coef, columns], "coef_at_columns")
    else:
        constants["stored_layout"] = np.array([-1, b], dtype=np.int64)
        at_columns = emit("Reshape", [emit("GatherElements", [coef, columns], "coef_at_flat"),
                                      "stored_layout"], "coef_at_columns")
    products = emit("Mul", [at_columns, stored], "products")
    dots = emit("ReduceSum", [products, "first_axis"], "dots",
                keepdims=0 if outputs > 1 else 1)
    if scaled:
        dots = emit("Mul", [dots, SCALE], "scaled_dots")
    s = emit("Add", [dots, intercept], "score")
    values_shape = ["width", b, 1] if outputs > 1 else ["width", b]
    extra = step_norms(step, [coef], l1, l2) if norms else []
    if norms and scaled:
        # W = a V: the norms are V's; a is the state the step starts from (as a scalar,
        # as the norms).
        extra.append((SCALES, emit("ReduceSum", [SCALE], "scale_at_start", keepdims=0),
                      ()))
    values, u = residual_nodes(step, loss, s, threshold, dtype, row_shape, constants)
    if scaled:
        # a' = a d, then V' = V - u X_B / a': a' V' is the decayed W minus the step.
        new_scale = emit("Mul", [SCALE, step.scalar("decay", 1)], "scale_decayed")
        u_of_v = emit("Div", [u, new_scale], "residual_of_v")
        start = coef
    else:
        u_of_v = u
        start = proximal(step, coef, 1 if outputs == 1 else 2, l1, l2)
    # Each stored value's step -v u_i, added at its column.
    steps_at = emit("Mul", [negated, u_of_v], "coef_steps")
    new_coef = emit("ScatterND", [start, column_indices, steps_at], "coef_stepped",
                    reduction="add")
    new_intercept = intercept_update(step, u, outputs)
    template = StepTemplate(
        nodes=step.nodes,
        initializers=[numpy_helper.from_array(v, name) for name, v in constants.items()],
        data=[value_info(columns, TensorProto.INT64, ["width", b] if outputs > 1 else
                         ["slots"]),
              value_info(column_indices, TensorProto.INT64, ["width", b, 1]),
              value_info(stored, elem, values_shape), value_info(negated, elem, values_shape),
              value_info(target, elem, row_shape), value_info(step_weight, elem, row_shape)],
        scalars=step.scalar_inputs(),
        weights=[value_info(coef, elem, [n_features, outputs] if outputs > 1
                            else [n_features]),
                 value_info(intercept, elem, [1, outputs]),
                 *([value_info(SCALE, elem, [1])] if scaled else [])],
        new_weights=[new_coef, new_intercept, *([new_scale] if scaled else [])],
        loss=values, loss_shape=tuple(row_shape), elem=elem, opsets=[("", OPSET)],
        ir_version=IR_VERSION, extra=extra,
    )
    if scaled:
        graph = scan(template, ["scaled_coef", p.new_weights[1], "final_scale"],
                     losses=p.values)
        _unscaled(graph, elem, dtype)
    else:
        graph = scan(template, list(p.new_weights), losses=p.values)
    return p(
        model=linear_model(graph), loss=loss, threshold=float(threshold), steps=int(steps),
        batch_rows=b, n_features=int(n_features), scalars=template.scalars,
        dtype=np.dtype(dtype), n_outputs=outputs, norms=tuple(name for name, _, _ in extra),
    )
