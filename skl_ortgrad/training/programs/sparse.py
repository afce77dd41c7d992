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
    cumulative_l1,
    dims_of,
    proximal,
    step_norms,
    value_info,
)


@dataclass
class SparseLinearProgram(LinearProgram):
    r"""The linear program on sparse rows (:func:`linear_program` with ``sparse=True``).

    It reads rows by index as the dense program, from the stored values laid out one row
    a row, ``[n, w]`` (:attr:`stored`: the columns, int32, and the values of row
    :math:`i` in row :math:`i`, padded with column 0 and value 0 to :math:`w` values,
    the most a row stores), fed whole (:meth:`feeds`): the per-row inputs are the
    dense program's. Its per-row tensors are ``[b, K]`` a step, :math:`K = 1` included
    (``[b, 1]``, the scores a sum along each row's values).
    """

    #: The per-row inputs: the dense program's, then, with the cumulative L1 penalty,
    #: the number of values each row stores (0 for padding rows; int64).
    per_row: tuple[str, ...] = LinearProgram.per_row

    #: The stored values, one row a row: columns (int32) and values.
    stored = ("stored_columns", "stored_values")
    #: No features input: the stored values are fed instead.
    features = ""

    @property
    def weight_shapes(self) -> list[tuple[int, ...]]:
        """``[d]`` and ``[1, 1]``: views of the caller's ``[d, 1]`` and ``[1]``; ``[d, K]``
        and ``[1, K]`` for :math:`K` outputs; :math:`q` as :math:`W`."""
        if self.n_outputs > 1:
            return super().weight_shapes
        shapes = [(self.n_features,), (1, 1)]
        return shapes + shapes[:1] * (len(self.weights) - 2)

    def _step_shape(self, count: int) -> tuple[int, ...]:
        return (count, self.batch_rows, self.n_outputs)

    def feeds(  # type: ignore[override]
        self, columns: np.ndarray, values: np.ndarray, per_row: dict[str, np.ndarray],
        table: dict[str, np.ndarray], weights: Sequence[np.ndarray], first: int,
        count: int,
    ) -> dict[str, np.ndarray]:
        """The inputs of the call running batches ``first .. first + count - 1``: the
        stored ``columns`` (int32) and ``values`` (the program's dtype), ``[n, w]``, row
        :math:`i` the values of the row ``rows`` index :math:`i` with, the epoch's
        ``per_row`` arrays and ``table``, the ``weights``."""
        return {**dict(zip(self.stored, (columns, values), strict=True)),
                **self._step_feeds(per_row, table, weights, first, count)}


#: The sparse program's scale :math:`a` of :math:`W = a V` (a state of its ``Scan``).
SCALE = "scale"

#: Steps per ``Scan`` iteration of the sparse program (:func:`~skl_ortgrad.training.
#: programs.scan.scan`'s ``unroll``) where it trains at least ``UNROLL_FROM_WEIGHTS``
#: values in batches of at most ``UNROLL_MAX_ROWS`` rows: there each step's copy of all
#: the weights, which the steps between an iteration's first and last then skip, costs
#: more than the step's stored values. A stream of ``partial_fit`` calls on blocks of
#: 10,000 text-like documents (``bench/bench_sparse.py``, three passes over 60,000; one
#: thread), time per block against scikit-learn's (ad hoc, December 2026, 2-core Intel
#: Xeon, each setting in a process of its own):
#:
#: =======  =====  ===========  ===========  ======  ===========
#: columns  batch  1 a step     8            16      32
#: =======  =====  ===========  ===========  ======  ===========
#: 2^18     32     5.3x-5.8x    4.1x-4.6x    3.9x    4.0x-4.2x
#: 2^20     32     11.9x        6.6x-7.5x    6.2x    6.3x
#: 2^18     64     3.9x         3.3x                 3.4x
#: 2^20     64     7.0x         5.3x                 5.1x
#: =======  =====  ===========  ===========  ======  ===========
#:
#: The session of 8 steps an iteration takes about 80 ms more to build (16: 140 ms).
#: Elsewhere it did not pay: one epoch of case 8 (``bench/bench_sparse.py``) at 1,000
#: columns, batch 32, 1.7x -> 2.0-2.3x scikit-learn's time (its weights fit in the
#: caches), at 100,000 no change, and the text-like fit at batch 128 no faster at 2^18
#: and 2^20 columns, up to 1.4x slower at 8 steps an iteration and 2x at 32 (there the
#: scatter of a step's 11,000 values, not the copy, takes most of the step, by
#: onnxruntime's profiler); nor with 5 classes at 2^18 columns, whose steps scatter
#: with ``ScatterND`` (the same stream: 8.4x-9.0x -> 8.5x-9.7x), so one output only. The
#: weights are the same, bit for bit.
UNROLL_STEPS, UNROLL_FROM_WEIGHTS, UNROLL_MAX_ROWS = 8, 2**17, 64


def unrolled_steps(n_weights: int, batch_rows: int) -> int:
    """Steps per ``Scan`` iteration of a sparse program of one output training
    ``n_weights`` values (:math:`W`'s) in batches of ``batch_rows`` rows (see
    ``UNROLL_STEPS``)."""
    return (UNROLL_STEPS if n_weights >= UNROLL_FROM_WEIGHTS and batch_rows <= UNROLL_MAX_ROWS
            else 1)


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


def _cumulative_at_columns(step: StepGraph, coef: str, applied: str, columns: str,
                           counts: str, outputs: int, dtype: np.dtype | type,
                           constants: dict[str, np.ndarray],
                           whole: bool) -> tuple[str, str]:
    r"""The cumulative L1 penalty's step of :math:`W` (after the gradient's scatter) at
    the features the batch stores only, as scikit-learn's on sparse rows: :math:`W`
    and :math:`q` gathered at the ``[b, w]`` ``columns``, the rule of
    :func:`~skl_ortgrad.training.programs.steps.cumulative_l1` applied there, the new
    values scattered back (``ScatterElements``, ``ScatterND`` for :math:`K > 1`, no
    reduction); return the new :math:`W` and :math:`q`. With ``whole``, the rule on all
    of :math:`W` and :math:`q` instead, each column's result kept where the batch stores
    the column (``Where``): the same values, cheaper where a batch stores more values
    than there are features (3,200 values of 1,000 features, float64, one thread: about
    98 -> 60 µs a step, measured, against 23 µs without the cumulative penalty).

    A slot is stored when its rank in its row is below the row's ``counts`` (padding
    slots and padding rows are not). A column's slots all read the same :math:`W`,
    :math:`q` and compute the same values, so a column several rows store is written
    once in effect; a padding slot (column 0) writes the rule's value where the batch
    stores its column and the value it read otherwise, so it never contradicts a stored
    one: ``present`` counts the stored slots of every column (a scatter of ``[d]``
    zeros). ``constants`` receives the initializers it needs beyond the caller's.
    """
    emit = step.node
    ranks = emit("Range", ["zero_rank", emit("Gather", [emit("Shape", [columns],
                                                             "slots_shape"), "one_axis"],
                                             "slots_per_row"), "one_rank"], "slot_ranks")
    stored = emit("Less", [ranks, emit("Reshape", [counts, "count_layout"], "counts_by_row")],
                  "stored_slots")
    flat_columns = emit("Reshape", [columns, "flat_layout"], "all_flat_columns")
    # [d] zeros of the weights' type (Shape's end: the features' axis only).
    zeros = emit("ConstantOfShape", [emit("Shape", [applied], "feature_count", end=1)],
                 "no_columns", value=numpy_helper.from_array(np.zeros(1, dtype=dtype)))
    present = emit("ScatterElements", [zeros, flat_columns, emit("Reshape", [
        emit("Cast", [stored], "stored_slot_values", to=onnx_dtype(dtype)), "flat_layout"],
        "flat_stored_slots")], "present_columns", reduction="add")
    if whole:
        if outputs > 1:
            constants["feature_layout"] = np.array([-1, 1])
            present = emit("Reshape", [present, "feature_layout"], "present_by_feature")
        at = emit("Greater", [present, "zero_value"], "present_features")
        ruled_w, ruled_q = cumulative_l1(step, coef, applied, 2 if outputs > 1 else 1)
        return tuple(emit("Where", [at, ruled, read], f"{read}_kept")
                     for ruled, read in ((ruled_w, coef), (ruled_q, applied)))
    if outputs > 1:
        constants["last_axis"] = np.array([-1])
        at = emit("Greater", [emit("Unsqueeze", [emit("Gather", [present, columns],
                                                      "present_at_slots"), "last_axis"],
                                   "present_by_slot"), "zero_value"], "present_slots")
        w_at, q_at = (emit("Gather", [name, columns], f"{name}_at_slots")
                      for name in (coef, applied))
        rank = 3
    else:
        at = emit("Greater", [emit("GatherElements", [present, flat_columns],
                                   "present_at_slots"), "zero_value"], "present_slots")
        w_at, q_at = (emit("GatherElements", [name, flat_columns], f"{name}_at_slots")
                      for name in (coef, applied))
        rank = 1
    ruled_w, ruled_q = cumulative_l1(step, w_at, q_at, rank)
    new_w, new_q = (emit("Where", [at, ruled, read], f"{read}_kept")
                    for ruled, read in ((ruled_w, w_at), (ruled_q, q_at)))
    if outputs > 1:
        # ScatterND's indices are int64, [b, w, 1].
        indices = emit("Cast", [emit("Unsqueeze", [columns, "last_axis"], "slot_indices")],
                       "slot_indices_int64", to=TensorProto.INT64)
        return (emit("ScatterND", [coef, indices, new_w], "coef_penalized"),
                emit("ScatterND", [applied, indices, new_q], "applied_penalized"))
    return (emit("ScatterElements", [coef, flat_columns, new_w], "coef_penalized"),
            emit("ScatterElements", [applied, flat_columns, new_q], "applied_penalized"))


def sparse_linear_program(
    loss: str, n_features: int, steps: int, batch_rows: int,
    dtype: np.dtype | type = np.float32, l1: bool = False, l2: bool = False,
    threshold: float = 1.0, n_outputs: int = 1, norms: bool = False,
    cumulative: bool = False, whole: bool = False, intercept_step: float = 1.0,
) -> SparseLinearProgram:
    r"""The sparse form of :func:`~skl_ortgrad.training.programs.linear.dense_linear_program`
    (same arguments, same per-loss residual :math:`u`).

    The batch is its rows' stored values, ``Gather``-ed by row from the ``[n, w]``
    layout (:class:`SparseLinearProgram`): columns :math:`J` and values :math:`V` of
    shape ``[b, w]`` (zeros where a row has fewer), :math:`W` flat;
    :math:`s = (W_J \odot V) 1 + b` (``GatherElements`` of the flat columns, ``Mul``,
    ``ReduceSum`` along the rows, ``Add``; ``[b, 1]``) and :math:`W \leftarrow D_W +
    \mathrm{scatter\_add}_J(V \odot (-u))` (``Neg`` of the ``[b, 1]`` residual, ``Mul``,
    ``ScatterElements`` with ``reduction="add"``, which adds every value of a column
    present several times): work in the stored values, none in the width but the
    weights' copy from one step to the next (made once per ``UNROLL_STEPS`` steps where
    the weights are many and the batches small, :func:`unrolled_steps`). Measured per
    value (onnxruntime 1.19, one thread): ``GatherElements`` 0.6 ns, ``Gather`` of
    single values 7.5 ns (hence the flat gather), ``ScatterElements`` 3.0 ns,
    ``ScatterND`` 3.5 ns; a row ``Gather`` copies whole rows.
    With the L2 decay alone, :math:`W = aV`: the decay multiplies the scalar :math:`a`
    and the update of :math:`V` is divided by it, so no step multiplies all of
    :math:`W` (at 500k columns, 291 -> 154 µs per step, measured); :math:`aV` is
    formed once after the call's steps (not with ``cumulative``, whose rule reads
    :math:`W`).

    With ``cumulative``, the cumulative L1 penalty's step after the gradient's scatter,
    at the step's stored columns only (:func:`_cumulative_at_columns`, on the ``whole``
    of :math:`W` kept where stored with ``whole``), its :math:`q` a
    third weight and each row's count of stored values a fourth per-row input
    (``stored_counts``, 0 for padding rows).

    With :math:`K` outputs, :math:`W` ``[d, K]`` gathers ``[b, w, K]`` rows, the values
    are laid out ``[b, w, 1]`` and the steps scattered (``ScatterND``) ``[b, w, K]``.
    """
    outputs = check_linear(loss, steps, n_outputs)
    p = SparseLinearProgram
    elem, b = onnx_dtype(dtype), int(batch_rows)
    row_shape = [b, outputs]
    step = StepGraph(set(RESERVED), dtype)
    emit = step.node
    coef, intercept = p.weights
    rows, target, step_weight = p.per_row
    stored_columns, stored_values = p.stored
    constants: dict[str, np.ndarray] = {
        "intercept_steps": np.full((1, b), intercept_step, dtype=dtype),
        "row_axis": np.ones(1, dtype=np.int64),
        "flat_layout": np.array([-1], dtype=np.int64),
        "stored_layout": np.array([b, -1, 1] if outputs > 1 else [b, -1], dtype=np.int64)}
    # With the L2 decay alone: W = a V, the decay multiplies the scalar a, so no step
    # writes all of W twice (the decay, then the update). Not with the cumulative L1
    # penalty, whose rule works on W.
    scaled = l2 and not l1 and not cumulative
    columns = all_columns = emit("Gather", [stored_columns, rows], "columns", axis=0)
    values = emit("Gather", [stored_values, rows], "values_of_rows", axis=0)
    if outputs > 1:
        # W [d, K] gathers [b, w, K] rows; the values [b, w, 1].
        values = emit("Reshape", [values, "stored_layout"], "values_laid_out")
        at_columns = emit("Gather", [coef, columns], "coef_at_columns")
    else:
        flat_columns = emit("Reshape", [columns, "flat_layout"], "flat_columns")
        at_columns = emit("Reshape", [emit("GatherElements", [coef, flat_columns],
                                           "coef_at_flat"), "stored_layout"],
                          "coef_at_columns")
    products = emit("Mul", [at_columns, values], "products")
    dots = emit("ReduceSum", [products, "row_axis"], "dots",
                keepdims=0 if outputs > 1 else 1)
    if scaled:
        dots = emit("Mul", [dots, SCALE], "scaled_dots")
    s = emit("Add", [dots, intercept], "score")
    extra = step_norms(step, [coef], l1 or cumulative, l2) if norms else []
    if norms and scaled:
        # W = a V: the norms are V's; a is the state the step starts from (as a scalar,
        # as the norms).
        extra.append((SCALES, emit("ReduceSum", [SCALE], "scale_at_start", keepdims=0),
                      ()))
    row_values, u = residual_nodes(step, loss, s, threshold, dtype, row_shape, constants)
    if scaled:
        # a' = a d, then V' = V - u X_B / a': a' V' is the decayed W minus the step.
        new_scale = emit("Mul", [SCALE, step.scalar("decay", 1)], "scale_decayed")
        negated_u = emit("Div", [u, emit("Neg", [new_scale], "negated_scale")],
                         "residual_of_v")
        start = coef
    else:
        negated_u = emit("Neg", [u], "negated_residual")
        start = proximal(step, coef, 1 if outputs == 1 else 2, l1, l2)
    # Each stored value's step -v u_i, added at its column.
    if outputs > 1:
        constants["step_layout"] = np.array([b, 1, outputs], dtype=np.int64)
        steps_at = emit("Mul", [values, emit("Reshape", [negated_u, "step_layout"],
                                             "residual_by_row")], "coef_steps")
        constants["index_layout"] = np.array([b, -1, 1], dtype=np.int64)
        # ScatterND's indices are int64.
        indices = emit("Cast", [emit("Reshape", [columns, "index_layout"], "column_indices")],
                       "column_indices_int64", to=TensorProto.INT64)
        new_coef = emit("ScatterND", [start, indices, steps_at],
                        "coef_stepped", reduction="add")
    else:
        if loss == "hinge":
            # Rows past the margin (and padding rows) step by 0: only the others' values
            # are scattered (on a separable task most rows: 90% of an epoch's scatter).
            stepping = emit("Reshape", [emit("Cast", [u], "steps_row", to=TensorProto.BOOL),
                                        "flat_layout"], "stepping_rows")
            columns, values, negated_u = (
                emit("Compress", [name, stepping], f"stepping_{name}", axis=0)
                for name in (columns, values, negated_u))
            flat_columns = emit("Reshape", [columns, "flat_layout"], "flat_stepping_columns")
        steps_at = emit("Mul", [values, negated_u], "coef_steps")
        new_coef = emit("ScatterElements", [
            start, flat_columns, emit("Reshape", [steps_at, "flat_layout"], "flat_steps")],
            "coef_stepped", reduction="add")
    new_intercept = intercept_update(step, u, True)
    weights, new_weights, per_row = p.weights, p.new_weights, p.per_row
    if cumulative:
        weights, new_weights = (*weights, "coef_applied"), (*new_weights, "new_coef_applied")
        per_row = (*per_row, "stored_counts")
        constants.update({
            "zero_rank": np.zeros((), dtype=np.int64), "one_rank": np.ones((), np.int64),
            "one_axis": np.ones((), dtype=np.int64), "count_layout": np.array([b, 1]),
            "zero_value": np.zeros((), dtype=dtype)})
        new_coef, new_applied = _cumulative_at_columns(
            step, new_coef, weights[2], all_columns, per_row[3], outputs, dtype, constants,
            whole)
    coef_shape = [n_features, outputs] if outputs > 1 else [n_features]
    template = StepTemplate(
        nodes=step.nodes,
        initializers=[numpy_helper.from_array(v, name) for name, v in constants.items()],
        data=[value_info(rows, TensorProto.INT64, [b]), value_info(target, elem, row_shape),
              value_info(step_weight, elem, row_shape),
              *([value_info(per_row[3], TensorProto.INT64, [b])] if cumulative else [])],
        scalars=step.scalar_inputs(),
        weights=[value_info(coef, elem, coef_shape),
                 value_info(intercept, elem, [1, outputs]),
                 *(value_info(name, elem, coef_shape) for name in weights[2:]),
                 *([value_info(SCALE, elem, [1])] if scaled else [])],
        new_weights=[new_coef, new_intercept, *([new_scale] if scaled else []),
                     *([new_applied] if cumulative else [])],
        loss=row_values, loss_shape=tuple(row_shape), elem=elem, opsets=[("", OPSET)],
        ir_version=IR_VERSION, extra=extra,
    )
    # Read by every step as they are (outer inputs of the Scan's body).
    dataset = [value_info(stored_columns, TensorProto.INT32, [None, "width"]),
               value_info(stored_values, elem, [None, "width"])]
    unroll = unrolled_steps(n_features, b) if outputs == 1 else 1
    if scaled:
        graph = scan(template, ["scaled_coef", p.new_weights[1], "final_scale"],
                     losses=p.values, dataset=dataset, unroll=unroll)
        _unscaled(graph, elem, dtype)
    else:
        graph = scan(template, list(new_weights), losses=p.values, dataset=dataset,
                     unroll=unroll)
    return p(
        model=linear_model(graph), loss=loss, threshold=float(threshold), steps=int(steps),
        batch_rows=b, n_features=int(n_features), scalars=template.scalars,
        dtype=np.dtype(dtype), n_outputs=outputs, norms=tuple(name for name, _, _ in extra),
        weights=weights, new_weights=new_weights, per_row=per_row,
    )
