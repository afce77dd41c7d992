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
    PassiveAggressiveForm,
    PassiveAggressiveProgram,
    check_linear,
    form_fields,
    intercept_update,
    linear_model,
    residual_nodes,
)
from skl_ortgrad.training.programs.scan import scan
from skl_ortgrad.training.programs.steps import (
    NORMS,
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
        """``[d K]`` and ``[1, K]``: views of the caller's ``[d, K]``, flat, and ``[K]``
        (:math:`K = 1` included); :math:`q` as :math:`W`."""
        shapes = [(self.n_features * self.n_outputs,), (1, self.n_outputs)]
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


@dataclass
class SparsePassiveAggressiveProgram(PassiveAggressiveForm, SparseLinearProgram):
    """The sparse linear program's passive-aggressive form (:func:`sparse_linear_program`'s
    ``passive_aggressive``; see :class:`~skl_ortgrad.training.programs.linear.
    PassiveAggressiveForm`)."""

    variant: str = "pa1"
    C: float = 1.0


#: The sparse program's scale :math:`a` of :math:`W = a V` (a state of its ``Scan``).
SCALE = "scale"

#: Steps per ``Scan`` iteration of the sparse program (:func:`~skl_ortgrad.training.
#: programs.scan.scan`'s ``unroll``) where it trains at least ``UNROLL_FROM_WEIGHTS``
#: values, ``UNROLL_WEIGHTS_PER_ROW`` a batch row or more (``UNROLL_WIDE_STEPS`` from
#: ``UNROLL_WIDE_FROM`` values): there each step's copy of all the weights, which the
#: steps between an iteration's first and last then skip, costs more than the step's
#: stored values. A stream of ``partial_fit`` calls on blocks of 10,000 text-like
#: documents (``bench/bench_sparse.py``, three passes over 60,000; one thread), time per
#: block against scikit-learn's (ad hoc, December 2026, 2-core Intel Xeon, each setting
#: in a process of its own):
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
#: The program alone (ms a step, one thread, 32 steps a call, the text-like rows hashed
#: to :math:`d` columns, :math:`K` outputs; ad hoc, each twice or once):
#:
#: ==========  ==  =====  ===========  ===========  ===========
#: :math:`d`   K   batch  1 a step     8            32
#: ==========  ==  =====  ===========  ===========  ===========
#: 2^20        1   128    0.73         0.36
#: 2^18        5   128    1.71         1.15
#: 2^20        5   128    2.71         2.25         2.08
#: 2^20        20  128    19.2                      7.09
#: 2^20        2   32                  0.33-0.44    0.18-0.19
#: 2^20        5   32                  0.89-0.91    0.47-0.54
#: 2^18        20  32                  1.60-1.82    1.30-1.37
#: ==========  ==  =====  ===========  ===========  ===========
#:
#: The session of 8 steps an iteration takes about 80 ms more to build (16: 140 ms).
#: Elsewhere it did not pay: one epoch of case 8 (``bench/bench_sparse.py``) at 1,000
#: columns, batch 32, 1.7x -> 2.0-2.3x scikit-learn's time (its weights fit in the
#: caches), at 100,000 no change. The default text-like fit at 2^18 columns (batch 128,
#: 2,048 weights a row, ``tol`` keeping the norm) ran 8 steps an iteration once the
#: bound per row went from 4,096 to 2,048: 2.19-2.40 -> 1.84-2.22 s, 3.4x-3.7x -> 3.0x-3.3x
#: scikit-learn's time (4 runs of 3 fits each, alternated; on Python 3.13 and
#: onnxruntime 1.32, 2.00-2.69 -> 1.75-2.16 s). With 1,024 weights a row (2^17 columns
#: at batch 128, 2^18 at 256) and with 2^17 columns at batch 64, 8 steps ran within
#: noise of one (5-epoch fits of 40,000 documents, ad hoc).
#: The weights are the same, bit for bit. With :math:`K` outputs, the weights are all
#: :math:`d K` values of :math:`W`, scattered flat as for one output: 5 outputs at 2^18
#: columns and batches of 32 rows, 0.75 -> 0.31 ms a step (the program alone).
#: Steps of one row (the passive-aggressive step, ``batch_size=1``) are cheaper still
#: against the copy: ``UNROLL_WIDE_STEPS`` of them an iteration from
#: ``UNROLL_FROM_WEIGHTS`` values. A ``'pa1'`` fit of 15,000 text-like documents (2^18
#: columns, 5 epochs, 1,024 steps a call), µs per row at 8 / 32 / 64 / 128 steps an
#: iteration: 35.7 / 24.7 / 22.9 / 21.1 (scikit-learn's: 0.72); its session took 28 /
#: 100 / 265 ms to build (8 / 32 / 64; ad hoc, December 2026, 2-core Intel Xeon).
UNROLL_STEPS, UNROLL_FROM_WEIGHTS, UNROLL_WEIGHTS_PER_ROW = 8, 2**17, 2**11
UNROLL_WIDE_STEPS, UNROLL_WIDE_FROM = 32, 2**21


def unrolled_steps(n_weights: int, batch_rows: int) -> int:
    """Steps per ``Scan`` iteration of a sparse program training ``n_weights`` values
    (:math:`W`'s, all outputs') in batches of ``batch_rows`` rows (see
    ``UNROLL_STEPS``; one-row steps: ``UNROLL_WIDE_STEPS``)."""
    if n_weights < max(UNROLL_FROM_WEIGHTS, UNROLL_WEIGHTS_PER_ROW * batch_rows):
        return 1
    return (UNROLL_WIDE_STEPS if n_weights >= UNROLL_WIDE_FROM or batch_rows == 1
            else UNROLL_STEPS)


#: The scaled sparse program's :math:`\lVert V \rVert_2^2`, a state of its ``Scan`` where
#: it writes the norms (see :func:`sparse_linear_program`).
SQUARED_NORM = "squared_norm"


def _unscaled(graph: GraphProto, elem: int, dtype: np.dtype | type, tracked: bool) -> None:
    r"""The scaled sparse program's outer graph, in place: the scale starts at 1 (an
    initializer, not an input), the new weights are :math:`a V` of the last step and,
    ``tracked``, :math:`\lVert V \rVert_2^2` starts as the weights' squared norm (a
    node, not an input; its last value is no output)."""
    coef = SparseLinearProgram.new_weights[0]
    states = [SCALE, *([SQUARED_NORM] if tracked else [])]
    for name in states:
        del graph.input[[i.name for i in graph.input].index(name)]
    graph.initializer.append(numpy_helper.from_array(np.ones(1, dtype=dtype), SCALE))
    shapes = {o.name: o for o in graph.output}
    finals = ["scaled_coef", *(f"final_{name}" for name in states)]
    outputs = [value_info(coef, elem, dims_of(shapes["scaled_coef"])),
               *(o for o in graph.output if o.name not in finals)]
    del graph.output[:]
    graph.output.extend(outputs)
    if tracked:
        graph.node.insert(0, helper.make_node(
            "ReduceSumSquare", [SparseLinearProgram.weights[0]], [SQUARED_NORM],
            name="squared_norm_at_start", keepdims=1))
    graph.node.append(helper.make_node("Mul", ["scaled_coef", "final_scale"], [coef],
                                       name="unscaled"))


def _flat_indices(step: StepGraph, columns: str, n_features: int, outputs: int,
                  constants: dict[str, np.ndarray]) -> str:
    r"""Where the ``[b, w]`` ``columns`` read the flat :math:`W`: the columns themselves
    for one output; for :math:`K`, the ``[K, b, w]`` indices :math:`j K + k` of the
    values :math:`(j, k)` of ``[d, K]`` (int64 where :math:`d K` passes int32's range).
    The outputs' axis comes first: onnxruntime broadcasts along contiguous spans, here
    :math:`b w` values long (``[b, w, K]``, spans of :math:`K`, took its ``Mul`` and
    ``Add`` 5 to 10 times longer). ``constants`` receives the initializers it needs."""
    if outputs == 1:
        return columns
    emit = step.node
    wide = n_features * outputs > np.iinfo(np.int32).max
    index_type = np.int64 if wide else np.int32
    constants.update({"output_count": np.array(outputs, dtype=index_type),
                      "output_offsets": np.arange(outputs, dtype=index_type).reshape(-1, 1, 1)})
    if wide:
        columns = emit("Cast", [columns], "wide_columns", to=TensorProto.INT64)
    return emit("Add", [emit("Mul", [columns, "output_count"], "first_value_indices"),
                        "output_offsets"], "value_indices")


def _norm_stepped(step: StepGraph, steps: str, before: str, stepped: str,
                  indices: str) -> str:
    r""":math:`\lVert V' \rVert_2^2` after a step that added the ``steps``
    :math:`\delta_s` at the flat ``indices`` :math:`j_s` of :math:`V`, from
    :math:`\lVert V \rVert_2^2` (the state ``SQUARED_NORM``), the values ``before`` the
    step read there (:math:`V_{j_s}`, laid out as the steps) and those of the ``stepped``
    :math:`V'`:

    .. math::

        \lVert V' \rVert_2^2 = \lVert V \rVert_2^2 + \sum_s \delta_s
        (V_{j_s} + V'_{j_s})

    exact where an index repeats too (with :math:`\Delta_j = \sum_{j_s = j}
    \delta_s = V'_j - V_j`, the sum is :math:`\sum_j \Delta_j (V_j + V'_j) =
    \sum_j V'^2_j - V^2_j`): work in the step's values, where the norm of all of
    :math:`V` read its :math:`d K` values a step, and kept the scatters from adding in
    place (5 outputs at :math:`2^{18}` columns, batches of 32 rows: 0.37 -> 1.41 ms a
    step, the program alone; for one output at batches of 128, within noise; ad hoc).
    scikit-learn's SGD keeps its squared norm the same way, sample by sample. Rounding
    drifts from the sum of the squares over the steps of one call, which starts from
    that sum (:func:`_unscaled`).

    The step's scatter waits for the norm it starts from (:func:`_waiting`).
    """
    emit = step.node
    after = emit("GatherElements", [stepped, indices], "coef_stepped_at_columns")
    sums = emit("Add", [emit("Reshape", [before, "flat_layout"], "flat_coef_at_columns"),
                        after], "coef_sums_at_columns")
    change = emit("ReduceSum", [emit("Mul", [steps, sums], "norm_changes")], "norm_change",
                  keepdims=1)
    return emit("Add", [SQUARED_NORM, change], "norm_stepped")


def _waiting(step: StepGraph, indices: str, constants: dict[str, np.ndarray]) -> str:
    """The scatter's flat ``indices``, through a ``Reshape`` whose shape waits for the
    norm the step starts from (``SQUARED_NORM``), so that onnxruntime runs the step
    before's gather of :math:`V'` (:func:`_norm_stepped`) before this step's scatter.
    Otherwise that gather ran after all the steps of an iteration (onnxruntime orders
    each output's ancestors in turn), and the scatters could not add in place (see
    ``UNROLL_STEPS``): 8 steps an iteration at 2^18 columns and batches of 32 rows took
    0.15-0.16 ms a step instead of 0.09 (one output), 0.87-0.95 instead of 0.40-0.49
    (5 outputs; the program alone, ad hoc). ``constants`` receives the initializers it
    needs."""
    constants["first_value"] = np.zeros(1, dtype=np.int64)
    emit = step.node
    # [-1] once the norm is known: [-1] and none of its values. Not its shape, which
    # onnxruntime knows before it runs (it removed that wait).
    none = emit("Cast", [emit("Slice", [SQUARED_NORM, "first_value", "first_value"],
                              "norm_none")], "norm_none_as_index", to=TensorProto.INT64)
    layout = emit("Concat", ["flat_layout", none], "waiting_layout", axis=0)
    return emit("Reshape", [indices, layout], "waiting_indices")


def _cumulative_at_columns(step: StepGraph, coef: str, applied: str, columns: str,
                           indices: str, counts: str, dtype: np.dtype | type,
                           constants: dict[str, np.ndarray],
                           whole: bool) -> tuple[str, str]:
    r"""The cumulative L1 penalty's step of :math:`W` (after the gradient's scatter) at
    the features the batch stores only, as scikit-learn's on sparse rows: :math:`W`
    and :math:`q` (flat, see :func:`sparse_linear_program`) gathered at the flat
    ``indices`` of the ``[b, w]`` ``columns`` (``[b, w]``, ``[K, b, w]`` for :math:`K`
    outputs), the rule of :func:`~skl_ortgrad.training.programs.steps.cumulative_l1`
    applied there, the new values scattered back (``ScatterElements``, no reduction);
    return the new :math:`W` and :math:`q`. With ``whole``, the rule on all of
    :math:`W` and :math:`q` instead, each value's result kept where the batch stores its
    column (``Where``): the same values, cheaper where a batch stores more values than
    there are features (3,200 values of 1,000 features, float64, one thread: about
    98 -> 60 µs a step, measured, against 23 µs without the cumulative penalty).

    A slot is stored when its rank in its row is below the row's ``counts`` (padding
    slots and padding rows are not). A column's slots all read the same :math:`W`,
    :math:`q` and compute the same values, so a column several rows store is written
    once in effect; a padding slot (column 0) writes the rule's value where the batch
    stores its column and the value it read otherwise, so it never contradicts a stored
    one: ``present`` counts the stored slots of every value of :math:`W` (a scatter of
    zeros shaped as :math:`W`). ``constants`` receives the initializers it needs beyond
    the caller's.
    """
    emit = step.node
    ranks = emit("Range", ["zero_rank", emit("Gather", [emit("Shape", [columns],
                                                             "slots_shape"), "one_axis"],
                                             "slots_per_row"), "one_rank"], "slot_ranks")
    stored = emit("Cast", [emit("Less", [ranks, emit("Reshape", [counts, "count_layout"],
                                                     "counts_by_row")], "stored_slots")],
                  "stored_slot_values", to=onnx_dtype(dtype))
    if indices != columns:
        # Every output of a stored column is stored.
        stored = emit("Expand", [stored, emit("Shape", [indices], "indices_shape")],
                      "stored_outputs")
    flat_indices = emit("Reshape", [indices, "flat_layout"], "all_flat_indices")
    zeros = emit("ConstantOfShape", [emit("Shape", [applied], "weight_count")],
                 "no_columns", value=numpy_helper.from_array(np.zeros(1, dtype=dtype)))
    present = emit("ScatterElements", [zeros, flat_indices, emit("Reshape", [
        stored, "flat_layout"], "flat_stored_slots")], "present_columns", reduction="add")
    if whole:
        at = emit("Greater", [present, "zero_value"], "present_features")
        ruled_w, ruled_q = cumulative_l1(step, coef, applied, 1)
        return tuple(emit("Where", [at, ruled, read], f"{read}_kept")
                     for ruled, read in ((ruled_w, coef), (ruled_q, applied)))
    at = emit("Greater", [emit("GatherElements", [present, flat_indices],
                               "present_at_slots"), "zero_value"], "present_slots")
    w_at, q_at = (emit("GatherElements", [name, flat_indices], f"{name}_at_slots")
                  for name in (coef, applied))
    ruled_w, ruled_q = cumulative_l1(step, w_at, q_at, 1)
    new_w, new_q = (emit("Where", [at, ruled, read], f"{read}_kept")
                    for ruled, read in ((ruled_w, w_at), (ruled_q, q_at)))
    return (emit("ScatterElements", [coef, flat_indices, new_w], "coef_penalized"),
            emit("ScatterElements", [applied, flat_indices, new_q], "applied_penalized"))


def sparse_linear_program(
    loss: str, n_features: int, steps: int, batch_rows: int,
    dtype: np.dtype | type = np.float32, l1: bool = False, l2: bool = False,
    threshold: float = 1.0, n_outputs: int = 1, norms: bool = False,
    cumulative: bool = False, whole: bool = False, intercept_step: float = 1.0,
    passive_aggressive: tuple[str, float] | None = None,
) -> SparseLinearProgram:
    r"""The sparse form of :func:`~skl_ortgrad.training.programs.linear.dense_linear_program`
    (same arguments, same per-loss residual :math:`u`; ``passive_aggressive``: the
    passive-aggressive step, :class:`SparsePassiveAggressiveProgram`).

    The batch is its rows' stored values, ``Gather``-ed by row from the ``[n, w]``
    layout (:class:`SparseLinearProgram`): columns :math:`J` and values :math:`V` of
    shape ``[b, w]`` (zeros where a row has fewer), :math:`W` flat;
    :math:`s = (W_J \odot V) 1 + b` (``GatherElements`` of the flat columns, ``Mul``,
    ``ReduceSum`` along the rows, ``Add``; ``[b, 1]``) and :math:`W \leftarrow D_W +
    \mathrm{scatter\_add}_J(V \odot (-u))` (``Neg`` of the ``[b, 1]`` residual, ``Mul``,
    ``ScatterElements`` with ``reduction="add"``, which adds every value of a column
    present several times): work in the stored values, none in the width but the
    weights' copy from one step to the next (made once per ``UNROLL_STEPS`` steps where
    the weights are many, for each batch row too, :func:`unrolled_steps`). Measured per
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

    With :math:`K` outputs, :math:`W` is ``[d, K]`` flat, value :math:`(j, k)` at
    :math:`j K + k` (:func:`_flat_indices`): the values of the stored columns, ``[K, b,
    w]``, are gathered and their steps scattered by ``GatherElements`` and
    ``ScatterElements`` on the flat indices, as for one output (the hinge loss's steps
    those of the rows of each output inside its margin, ``[K b, w]`` compressed).
    ``ScatterND`` on ``[d, K]`` added the same values in the same order, but onnxruntime
    copied all of :math:`W` at every step, where the flat scatter adds in place (see
    ``UNROLL_STEPS``): 5 classes at 2^18 columns and batches of 32 rows, 0.87-1.01 ->
    0.34-0.50 ms a step (the program alone, one thread, 32 steps a call, ad hoc).

    With ``norms`` in the scaled form (the ``tol`` rule on the objective), the squared
    norm of :math:`V` is a state each step updates from its own values
    (:func:`_norm_stepped`) instead of a sum over all of :math:`V` a step.
    """
    outputs = check_linear(loss, steps, n_outputs, batch_rows, passive_aggressive)
    p, per_row = ((SparseLinearProgram, LinearProgram.per_row) if passive_aggressive is None
                  else (SparsePassiveAggressiveProgram, PassiveAggressiveProgram.per_row))
    elem, b = onnx_dtype(dtype), int(batch_rows)
    row_shape = [b, outputs]
    step = StepGraph(set(RESERVED), dtype)
    emit = step.node
    coef, intercept = p.weights
    rows = per_row[0]
    stored_columns, stored_values = p.stored
    constants: dict[str, np.ndarray] = {
        "intercept_steps": np.full((1, b), intercept_step, dtype=dtype),
        "flat_layout": np.array([-1], dtype=np.int64),
        "stored_layout": np.array([outputs, b, -1] if outputs > 1 else [b, -1],
                                  dtype=np.int64)}
    # With the L2 decay alone: W = a V, the decay multiplies the scalar a, so no step
    # writes all of W twice (the decay, then the update). Not with the cumulative L1
    # penalty, whose rule works on W.
    scaled = l2 and not l1 and not cumulative
    columns = emit("Gather", [stored_columns, rows], "columns", axis=0)
    values = emit("Gather", [stored_values, rows], "values_of_rows", axis=0)
    indices = all_indices = _flat_indices(step, columns, n_features, outputs, constants)
    flat_indices = emit("Reshape", [indices, "flat_layout"], "flat_indices")
    at_columns = emit("Reshape", [emit("GatherElements", [coef, flat_indices],
                                       "coef_at_flat"), "stored_layout"], "coef_at_columns")
    products = emit("Mul", [at_columns, values], "products")
    if outputs > 1:
        constants["value_axis"] = np.array([-1], dtype=np.int64)
        dots = emit("Transpose", [emit("ReduceSum", [products, "value_axis"], "dots_by_output",
                                       keepdims=0)], "dots", perm=[1, 0])
    else:
        constants["row_axis"] = np.ones(1, dtype=np.int64)
        dots = emit("ReduceSum", [products, "row_axis"], "dots", keepdims=1)
    if scaled:
        dots = emit("Mul", [dots, SCALE], "scaled_dots")
    s = emit("Add", [dots, intercept], "score")
    # W = a V: the norms are V's, its squared norm a state the steps update (tracked);
    # a is the state the step starts from (as a scalar, as the norms).
    tracked = scaled and norms
    if tracked:
        extra = [(NORMS[0], emit("ReduceSum", [SQUARED_NORM], "norm_at_start", keepdims=0),
                  ()),
                 (SCALES, emit("ReduceSum", [SCALE], "scale_at_start", keepdims=0), ())]
    else:
        extra = step_norms(step, [coef], l1 or cumulative, l2) if norms else []
    row_values, u = residual_nodes(step, loss, s, threshold, dtype, row_shape, constants,
                                   passive_aggressive)
    if scaled:
        # a' = a d, then V' = V - u X_B / a': a' V' is the decayed W minus the step.
        new_scale = emit("Mul", [SCALE, step.scalar("decay", 1)], "scale_decayed")
        negated_u = emit("Div", [u, emit("Neg", [new_scale], "negated_scale")],
                         "residual_of_v")
        start = coef
    else:
        negated_u = emit("Neg", [u], "negated_residual")
        start = proximal(step, coef, 1, l1, l2)
    hinge = loss == "hinge"
    if outputs > 1:
        # [K, b, 1] (each output's rows, as the indices), [K b, 1] to compress its rows.
        constants["step_layout"] = np.array([outputs * b, 1] if hinge else [outputs, b, 1],
                                            dtype=np.int64)
        negated_u = emit("Reshape", [emit("Transpose", [negated_u], "residual_by_output",
                                          perm=[1, 0]), "step_layout"], "residual_by_row")
    if hinge:
        # Rows past the margin (and padding rows) step by 0: only the others' values
        # are scattered (on a separable task most rows: 90% of an epoch's scatter); with
        # K outputs, the rows of each output, [K b, w].
        if outputs > 1:
            constants["output_rows"] = np.array([outputs * b, -1], dtype=np.int64)
            constants["output_tiles"] = np.array([outputs, 1], dtype=np.int64)
            indices = emit("Reshape", [indices, "output_rows"], "indices_by_output_row")
            values = emit("Tile", [values, "output_tiles"], "values_by_output_row")
            if tracked:
                at_columns = emit("Reshape", [at_columns, "output_rows"],
                                  "coef_at_output_rows")
        stepping = emit("Reshape", [emit("Cast", [negated_u], "steps_row",
                                         to=TensorProto.BOOL), "flat_layout"],
                        "stepping_rows")
        indices, values, negated_u = (
            emit("Compress", [name, stepping], f"stepping_{name}", axis=0)
            for name in (indices, values, negated_u))
        if tracked:
            at_columns = emit("Compress", [at_columns, stepping], "stepping_coef_at_columns",
                              axis=0)
        flat_indices = emit("Reshape", [indices, "flat_layout"], "flat_stepping_indices")
    # Each stored value's step -v u_i, added at its column (at each of its K outputs).
    steps_at = emit("Reshape", [emit("Mul", [values, negated_u], "coef_steps"),
                                "flat_layout"], "flat_steps")
    new_coef = emit("ScatterElements", [
        start, _waiting(step, flat_indices, constants) if tracked else flat_indices, steps_at],
        "coef_stepped", reduction="add")
    if tracked:
        new_norm = _norm_stepped(step, steps_at, at_columns, new_coef, flat_indices)
    new_intercept = intercept_update(step, u, True)
    weights, new_weights = p.weights, p.new_weights
    counts = "stored_counts"
    if cumulative:
        weights, new_weights = (*weights, "coef_applied"), (*new_weights, "new_coef_applied")
        per_row = (*per_row, counts)
        constants.update({
            "zero_rank": np.zeros((), dtype=np.int64), "one_rank": np.ones((), np.int64),
            "one_axis": np.ones((), dtype=np.int64), "count_layout": np.array([b, 1]),
            "zero_value": np.zeros((), dtype=dtype)})
        new_coef, new_applied = _cumulative_at_columns(
            step, new_coef, weights[2], columns, all_indices, counts, dtype, constants,
            whole)
    coef_shape = [n_features * outputs]
    template = StepTemplate(
        nodes=step.nodes,
        initializers=[numpy_helper.from_array(v, name) for name, v in constants.items()],
        data=[value_info(name, TensorProto.INT64, [b]) if name in p.index_rows
              else value_info(name, elem, row_shape) for name in per_row],
        scalars=step.scalar_inputs(),
        weights=[value_info(coef, elem, coef_shape),
                 value_info(intercept, elem, [1, outputs]),
                 *(value_info(name, elem, coef_shape) for name in weights[2:]),
                 *([value_info(SCALE, elem, [1])] if scaled else []),
                 *([value_info(SQUARED_NORM, elem, [1])] if tracked else [])],
        new_weights=[new_coef, new_intercept, *([new_scale] if scaled else []),
                     *([new_norm] if tracked else []),
                     *([new_applied] if cumulative else [])],
        loss=row_values, loss_shape=tuple(row_shape), elem=elem, opsets=[("", OPSET)],
        ir_version=IR_VERSION, extra=extra,
    )
    # Read by every step as they are (outer inputs of the Scan's body).
    dataset = [value_info(stored_columns, TensorProto.INT32, [None, "width"]),
               value_info(stored_values, elem, [None, "width"])]
    unroll = unrolled_steps(n_features * outputs, b)
    if scaled:
        graph = scan(template, ["scaled_coef", p.new_weights[1], "final_scale",
                                *([f"final_{SQUARED_NORM}"] if tracked else [])],
                     losses=p.values, dataset=dataset, unroll=unroll)
        _unscaled(graph, elem, dtype, tracked)
    else:
        graph = scan(template, list(new_weights), losses=p.values, dataset=dataset,
                     unroll=unroll)
    return p(
        model=linear_model(graph), loss=loss, threshold=float(threshold), steps=int(steps),
        batch_rows=b, n_features=int(n_features), scalars=template.scalars,
        dtype=np.dtype(dtype), n_outputs=outputs, norms=tuple(name for name, _, _ in extra),
        weights=weights, new_weights=new_weights, per_row=per_row,
        **form_fields(passive_aggressive),
    )
