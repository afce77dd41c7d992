"""Graph helpers for training: which initializers are weights, loss and penalty graphs."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import (
    GraphProto,
    ModelProto,
    NodeProto,
    TensorProto,
    ValueInfoProto,
    helper,
    numpy_helper,
)

from skl_ortgrad.utils.onnx_model import (
    OPSET,
    graph_names,
    make_model,
    onnx_dtype,
    subgraph_inputs,
    unique_name,
)

_FLOAT_TYPES = {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16}
# (op_type, input index) pairs that hold the parameters of a linear layer.
_WEIGHT_SLOTS = {("MatMul", 1), ("Gemm", 1), ("Gemm", 2), ("Conv", 1), ("Conv", 2)}
_LINEAR_OPS = {"MatMul", "Gemm", "Conv"}


def get_train_initializer(onx: ModelProto) -> dict[str, np.ndarray]:
    """Return the float initializers of ``onx`` that are trainable weights, in graph order.

    skl2onnx graphs also carry float constants as initializers (``unity``, ``negate``,
    scaler offsets) next to int64 shape tensors, so "every float initializer" is wrong.
    The rule: a float initializer is a weight when it parameterizes a linear layer,

    * it is the second input of ``MatMul``, ``Gemm`` or ``Conv`` (the matrix / kernel),
    * it is the third input of ``Gemm`` or ``Conv`` (the bias),
    * or it is an operand of an ``Add`` whose other operand is produced by a
      ``MatMul``, ``Gemm`` or ``Conv`` node (the bias of ``X @ W + b``).

    Parameters
    ----------
    onx : ModelProto
        The model.

    Returns
    -------
    dict
        ``{name: numpy array}`` for every weight, in the order of ``graph.initializer``.
    """
    graph = onx.graph
    floats = {init.name for init in graph.initializer if init.data_type in _FLOAT_TYPES}
    producer = {out: node.op_type for node in graph.node for out in node.output}
    selected: set[str] = set()
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name not in floats:
                continue
            if (node.op_type, index) in _WEIGHT_SLOTS:
                selected.add(name)
            elif node.op_type == "Add":
                others = [other for other in node.input if other != name]
                if any(producer.get(other) in _LINEAR_OPS for other in others):
                    selected.add(name)
    return {
        init.name: numpy_helper.to_array(init)
        for init in graph.initializer
        if init.name in selected
    }


# --------------------------------------------------------------------------------------
# Loss, penalty and graph surgery helpers.
# --------------------------------------------------------------------------------------

_ONNX_TO_NP = {
    TensorProto.FLOAT: np.float32,
    TensorProto.DOUBLE: np.float64,
    TensorProto.FLOAT16: np.float16,
}


def _main_opset(onx: ModelProto) -> int:
    for op in onx.opset_import:
        if op.domain in ("", "ai.onnx"):
            return op.version
    raise ValueError("The model does not import the main ONNX domain.")


def _other_domains(*models: ModelProto) -> list[tuple[str, int]]:
    versions: dict[str, int] = {}
    for model in models:
        for op in model.opset_import:
            if op.domain not in ("", "ai.onnx"):
                versions[op.domain] = max(versions.get(op.domain, 0), op.version)
    return sorted(versions.items())


def _rebuild(
    onx: ModelProto,
    graph: GraphProto,
    opset: int | None = None,
    extra: tuple[ModelProto, ...] = (),
) -> ModelProto:
    """Wrap ``graph`` with the opsets of ``onx`` (and ``extra``) through make_model."""
    main = opset if opset is not None else _main_opset(onx)
    model = make_model(graph, opset=main, domains=_other_domains(onx, *extra))
    model.producer_name = onx.producer_name
    model.producer_version = onx.producer_version
    model.doc_string = onx.doc_string
    return model


def _rank(info: ValueInfoProto) -> int | None:
    tensor = info.type.tensor_type
    return len(tensor.shape.dim) if tensor.HasField("shape") else None


def merge_loss_graph(
    onx: ModelProto,
    loss_graph: ModelProto,
    output_index: int = 0,
    label_name: str = "label",
    weight_name: str | None = None,
    loss_name: str = "loss",
) -> ModelProto:
    """Connect an output of a model to the ``prediction`` input of a loss graph.

    The result computes :math:`\\mathrm{loss} = \\mathcal{L}(y, f(X; W)[, w])` where
    :math:`f` is ``onx`` restricted to its output ``output_index`` and
    :math:`\\mathcal{L}` the loss graph (see
    :func:`~skl_ortgrad.utils.loss_graphs.build_loss_graph`).

    Parameters
    ----------
    onx : ModelProto
        The model. Its initializers keep their names (they are the weights to train).
    loss_graph : ModelProto
        A graph with inputs ``label``, ``prediction`` (and ``weight``) and one scalar
        output ``loss``.
    output_index : int
        Which output of ``onx`` is the prediction. A rank-1 output ``[N]`` is reshaped
        into ``[N, 1]`` to match the label ``[N, 1]``.
    label_name : str
        Name of the label input of the result.
    weight_name : str, optional
        Name of the sample weight input of the result; required when the loss graph is
        weighted, forbidden otherwise.
    loss_name : str
        Name of the only output of the result.

    Returns
    -------
    ModelProto
        Inputs: the inputs of ``onx``, ``label_name`` (and ``weight_name``); one output
        ``loss_name``. The internal names of the loss graph are prefixed to avoid clashes.
        The main opset is the highest of the two graphs'.

    Raises
    ------
    ValueError
        On a name clash, a missing or unexpected weight, or a bad ``output_index``.
    """
    graph = onx.graph
    if not 0 <= output_index < len(graph.output):
        raise ValueError(
            f"output_index={output_index} but the model has {len(graph.output)} output(s)."
        )
    loss_inputs = [i.name for i in loss_graph.graph.input]
    if [o.name for o in loss_graph.graph.output] != ["loss"] or loss_inputs[:2] != [
        "label",
        "prediction",
    ]:
        raise ValueError(
            "The loss graph must have inputs ('label', 'prediction'[, 'weight']) and one "
            f"output 'loss', got {loss_inputs} -> {[o.name for o in loss_graph.graph.output]}."
        )
    weighted = "weight" in loss_inputs
    if weighted and weight_name is None:
        raise ValueError("The loss graph is weighted: weight_name must be given.")
    if not weighted and weight_name is not None:
        raise ValueError(f"weight_name={weight_name!r} but the loss graph is not weighted.")

    taken = graph_names(graph)
    new_names = [label_name, loss_name] + ([weight_name] if weighted else [])
    clashes = [n for n in new_names if n in taken]
    if clashes or len(set(new_names)) != len(new_names):
        raise ValueError(
            f"Names {new_names} must be distinct and unused in the model, "
            f"{clashes or new_names} clash (cut the graph with select_model_output first?)."
        )
    taken |= set(new_names)

    prediction_info = graph.output[output_index]
    elem = prediction_info.type.tensor_type.elem_type
    rank = _rank(prediction_info)
    nodes = list(graph.node)
    initializers = list(graph.initializer)
    prediction = prediction_info.name
    dims = list(prediction_info.type.tensor_type.shape.dim) if rank else []
    first_dim = dims[0] if dims else None
    if rank == 1:
        # label is [N, 1]: a rank-1 prediction would broadcast into [N, N] in the loss.
        shape = unique_name("loss_reshape_shape", taken)
        initializers.append(numpy_helper.from_array(np.array([-1, 1], dtype=np.int64), shape))
        reshaped = unique_name(f"{prediction}_2d", taken)
        nodes.append(helper.make_node("Reshape", [prediction, shape], [reshaped], name=reshaped))
        prediction = reshaped
        n_cols: int | None = 1
    elif rank == 2 and dims[1].HasField("dim_value"):
        n_cols = dims[1].dim_value
    else:
        n_cols = None

    # One prefix for every internal name of the loss graph, chosen so none clashes.
    internal = graph_names(loss_graph.graph) - {"label", "prediction", "weight", "loss"}
    prefix, i = "loss_", 0
    while any(prefix + n in taken for n in internal):
        i += 1
        prefix = f"loss{i}_"
    mapping = {n: prefix + n for n in internal}
    mapping.update(label=label_name, prediction=prediction, loss=loss_name)
    if weighted:
        mapping["weight"] = weight_name

    for node in loss_graph.graph.node:
        new_node = NodeProto()
        new_node.CopyFrom(node)
        new_node.name = prefix + node.name if node.name else unique_name(prefix + "node", taken)
        del new_node.input[:]
        del new_node.output[:]
        new_node.input.extend(mapping.get(n, n) if n else n for n in node.input)
        new_node.output.extend(mapping.get(n, n) if n else n for n in node.output)
        nodes.append(new_node)
    for init in loss_graph.graph.initializer:
        new_init = TensorProto()
        new_init.CopyFrom(init)
        new_init.name = mapping[init.name]
        initializers.append(new_init)

    label_dims = [first_dim.dim_param if first_dim is not None and first_dim.dim_param else None]
    label_dims.append(n_cols)
    inputs = list(graph.input)
    inputs.append(helper.make_tensor_value_info(label_name, elem, label_dims))
    if weighted:
        inputs.append(helper.make_tensor_value_info(weight_name, elem, [label_dims[0]]))
    merged = helper.make_graph(
        nodes,
        graph.name,
        inputs,
        [helper.make_tensor_value_info(loss_name, elem, [])],
        initializers,
        value_info=list(graph.value_info),
    )
    opset = max(_main_opset(onx), _main_opset(loss_graph))
    return _rebuild(onx, merged, opset=opset, extra=(loss_graph,))


def penalty_loss_onnx(
    name: str,
    dtype: np.dtype | type | int,
    l1: float | None = None,
    l2: float | None = None,
    existing_names: set[str] | None = None,
) -> list[NodeProto]:
    """Nodes computing the elastic penalty of a tensor ``W`` named ``name``.

    .. math::

        \\mathrm{<name>\\_penalty} = l_1 \\sum |W| + \\frac{l_2}{2} \\sum W^2

    a scalar of type ``dtype``. Its gradient is
    :math:`l_1\\,\\mathrm{sign}(W) + l_2 W`.

    Parameters
    ----------
    name : str
        The tensor (an initializer or an input).
    dtype : numpy dtype or ONNX element type
        Its element type.
    l1, l2 : float, optional
        Coefficients; None means 0. With both zero the output is a constant 0.
    existing_names : set of str, optional
        Names already used in the graph: intermediate results and nodes avoid them.

    Returns
    -------
    list of NodeProto
        Nodes (with ``Constant`` nodes for the coefficients) ending in ``<name>_penalty``.

    Raises
    ------
    ValueError
        If ``<name>_penalty`` is in ``existing_names``.
    """
    elem = dtype if isinstance(dtype, int) else onnx_dtype(dtype)
    taken = set(existing_names or ())
    output = f"{name}_penalty"
    if output in taken:
        raise ValueError(f"{output!r} already exists in the graph.")
    taken.add(output)
    l1 = float(l1 or 0.0)
    l2 = float(l2 or 0.0)
    nodes: list[NodeProto] = []

    def const(value: float, hint: str) -> str:
        out = unique_name(f"{name}_{hint}", taken)
        tensor = helper.make_tensor(out, elem, [], [value])
        nodes.append(helper.make_node("Constant", [], [out], name=out, value=tensor))
        return out

    def op(op_type: str, inputs: list[str], hint: str, out: str | None = None, **kw) -> str:
        out = out or unique_name(f"{name}_{hint}", taken)
        nodes.append(
            helper.make_node(op_type, inputs, [out], name=unique_name(f"n_{out}", taken), **kw)
        )
        return out

    terms = []
    if l1 != 0:
        abs_sum = op("ReduceSum", [op("Abs", [name], "abs")], "l1sum", keepdims=0)
        terms.append(op("Mul", [abs_sum, const(l1, "l1")], "l1pen"))
    if l2 != 0:
        sq_sum = op("ReduceSum", [op("Mul", [name, name], "sq")], "l2sum", keepdims=0)
        terms.append(op("Mul", [sq_sum, const(l2 / 2, "l2")], "l2pen"))
    if not terms:
        nodes.append(
            helper.make_node(
                "Constant",
                [],
                [output],
                name=unique_name(f"n_{output}", taken),
                value=helper.make_tensor(output, elem, [], [0.0]),
            )
        )
    elif len(terms) == 1:
        op("Identity", terms, "", out=output)
    else:
        op("Add", terms, "", out=output)
    return nodes


def add_loss_output(
    onx: ModelProto,
    score_name: str = "squared_error",
    loss_name: str = "loss",
    label_name: str = "label",
    weight_name: str | None = None,
    penalty: dict[str, dict[str, float]] | None = None,
    output_index: int | None = None,
    **kwargs: float,
) -> ModelProto:
    """Append a loss (and penalties) to a model, see :func:`merge_loss_graph`.

    .. math::

        \\mathrm{loss} = \\sum_i w_i \\sum_k \\ell(y_{ik}, f(X; W)_{ik})
        + \\sum_{V \\in \\mathrm{penalty}} l_1^V \\sum |V| + \\frac{l_2^V}{2} \\sum V^2

    Parameters
    ----------
    onx : ModelProto
        The model.
    score_name : str
        Kind of loss, any name accepted by
        :func:`~skl_ortgrad.utils.loss_graphs.build_loss_graph`.
    loss_name, label_name : str
        Names of the loss output and of the label input.
    weight_name : str, optional
        Name of a sample weight input (the loss becomes a weighted sum).
    penalty : dict, optional
        ``{tensor name: {'l1': a, 'l2': b}}``: penalties added to the loss.
    output_index : int, optional
        Output of ``onx`` used as the prediction (None: the first one).
    **kwargs
        Parameters of the loss (``epsilon``, ``eps``, ...).

    Returns
    -------
    ModelProto
        The model whose only output is ``loss_name``.
    """
    from skl_ortgrad.utils.loss_graphs import MIN_OPSET, build_loss_graph

    index = 0 if output_index is None else output_index
    if not 0 <= index < len(onx.graph.output):
        raise ValueError(
            f"output_index={output_index} but the model has {len(onx.graph.output)} output(s)."
        )
    elem = onx.graph.output[index].type.tensor_type.elem_type
    if elem not in _ONNX_TO_NP:
        raise TypeError(f"Output {onx.graph.output[index].name!r} is not a float tensor.")
    # The loss graph follows the model's opset so merging never changes the meaning of
    # the model's operators.
    opset = min(OPSET, max(MIN_OPSET, _main_opset(onx)))
    loss_graph = build_loss_graph(
        score_name,
        _ONNX_TO_NP[elem],
        weighted=weight_name is not None,
        opset=opset,
        **kwargs,
    )
    if not penalty:
        return merge_loss_graph(
            onx,
            loss_graph,
            output_index=index,
            label_name=label_name,
            weight_name=weight_name,
            loss_name=loss_name,
        )

    taken = graph_names(onx.graph) | {label_name, loss_name}
    if weight_name is not None:
        taken.add(weight_name)
    data_loss = unique_name(f"{loss_name}_data", taken)
    merged = merge_loss_graph(
        onx,
        loss_graph,
        output_index=index,
        label_name=label_name,
        weight_name=weight_name,
        loss_name=data_loss,
    )
    graph = merged.graph
    types = {i.name: i.data_type for i in graph.initializer}
    types.update({i.name: i.type.tensor_type.elem_type for i in graph.input})
    taken |= graph_names(graph)
    nodes = list(graph.node)
    total = data_loss
    for name, coefs in penalty.items():
        if name not in types:
            raise ValueError(f"Penalty on {name!r}, which is no initializer or input.")
        unknown = set(coefs) - {"l1", "l2"}
        if unknown:
            raise ValueError(f"Penalty keys must be 'l1' and 'l2', got {sorted(unknown)}.")
        pen_nodes = penalty_loss_onnx(
            name, types[name], l1=coefs.get("l1"), l2=coefs.get("l2"), existing_names=taken
        )
        for node in pen_nodes:
            taken.update(node.output)
            taken.add(node.name)
        nodes.extend(pen_nodes)
        pen = pen_nodes[-1].output[0]
        if types[name] != elem:
            pen = unique_name(f"{pen}_cast", taken)
            nodes.append(helper.make_node("Cast", [pen_nodes[-1].output[0]], [pen], to=elem))
        is_last = name == list(penalty)[-1]
        out = loss_name if is_last else unique_name(f"{loss_name}_partial", taken)
        node_name = unique_name(f"n_{out}", taken)
        nodes.append(helper.make_node("Add", [total, pen], [out], name=node_name))
        total = out
    new_graph = helper.make_graph(
        nodes,
        graph.name,
        list(graph.input),
        [helper.make_tensor_value_info(loss_name, elem, [])],
        list(graph.initializer),
        value_info=list(graph.value_info),
    )
    return _rebuild(merged, new_graph)


def select_model_output(onx: ModelProto, output_name: str) -> ModelProto:
    """Cut a model so that it computes only ``output_name``.

    Used to keep the raw scores of a classifier (skl2onnx's ``raw_scores`` or ``score``
    results) and drop ``ArgMax``, ``ZipMap`` and the probabilities, which the gradient
    builder cannot go through or which the loss does not need.

    Parameters
    ----------
    onx : ModelProto
        The model.
    output_name : str
        An output of the model or any intermediate result.

    Returns
    -------
    ModelProto
        The model with one output ``output_name``; nodes, initializers and inputs it does
        not need are removed (the order of what remains is kept).

    Raises
    ------
    ValueError
        If no node, input or initializer produces ``output_name``.
    """
    graph = onx.graph
    produced = {o for node in graph.node for o in node.output}
    produced |= {i.name for i in graph.input} | {i.name for i in graph.initializer}
    if output_name not in produced:
        raise ValueError(f"No result named {output_name!r} in the model.")

    info = next((o for o in graph.output if o.name == output_name), None)
    if info is None:
        info = next((v for v in graph.value_info if v.name == output_name), None)
    if info is None:
        inferred = onnx.shape_inference.infer_shapes(onx)
        info = next((v for v in inferred.graph.value_info if v.name == output_name), None)
    if info is None:
        # Type unknown to onnx shape inference (custom domain): onnxruntime infers it.
        info = helper.make_empty_tensor_value_info(output_name)

    needed = {output_name}
    kept: list[NodeProto] = []
    for node in reversed(graph.node):
        if needed & set(node.output):
            kept.append(node)
            needed.update(n for n in node.input if n)
            needed |= subgraph_inputs(node)
    kept.reverse()
    new_graph = helper.make_graph(
        kept,
        graph.name,
        [i for i in graph.input if i.name in needed],
        [info],
        [i for i in graph.initializer if i.name in needed],
        value_info=[v for v in graph.value_info if v.name in needed and v.name != output_name],
    )
    return _rebuild(onx, new_graph)


def _scaler_to_standard(
    node: NodeProto, types: dict[str, int], taken: set[str]
) -> tuple[list[NodeProto], list[TensorProto]]:
    """``ai.onnx.ml`` ``Scaler``: :math:`Y = (X - \\mathrm{offset}) \\cdot \\mathrm{scale}`.

    Scaler always returns float32, whatever its input type, so a non-float input is cast
    first. offset and scale become initializers of ``Sub`` and ``Mul``: they are no
    weights for :func:`get_train_initializer` (only MatMul/Gemm/Conv operands and biases
    are).
    """
    atts = {a.name: list(a.floats) for a in node.attribute}
    offset = np.array(atts.get("offset", [0.0]), dtype=np.float32)
    scale = np.array(atts.get("scale", [1.0]), dtype=np.float32)
    base = node.name or node.output[0]
    x = node.input[0]
    nodes: list[NodeProto] = []
    if types.get(x, TensorProto.FLOAT) != TensorProto.FLOAT:
        cast = unique_name(f"{base}_cast", taken)
        nodes.append(helper.make_node("Cast", [x], [cast], name=cast, to=TensorProto.FLOAT))
        x = cast
    offset_name = unique_name(f"{base}_offset", taken)
    scale_name = unique_name(f"{base}_scale", taken)
    centered = unique_name(f"{base}_centered", taken)
    nodes.append(
        helper.make_node(
            "Sub", [x, offset_name], [centered], name=unique_name(f"{base}_sub", taken)
        )
    )
    nodes.append(
        helper.make_node(
            "Mul", [centered, scale_name], [node.output[0]], name=unique_name(f"{base}_mul", taken)
        )
    )
    inits = [
        numpy_helper.from_array(offset, offset_name),
        numpy_helper.from_array(scale, scale_name),
    ]
    return nodes, inits


# (domain, op_type) -> rewrite into standard operators whose gradient onnxruntime-training
# 1.19 implements. Measured there: Scaler has no gradient; Reciprocal, Cast (float to
# float), Concat, Softmax, Sigmoid, Div, Abs, ReduceSum, Identity, Reshape have one, and the
# int64 outputs of ArgMax / ArrayFeatureExtractor are marked non-differentiable.
_REWRITES = {
    ("ai.onnx.ml", "Scaler"): _scaler_to_standard,
}


def rewrite_no_gradient_ops(onx: ModelProto) -> ModelProto:
    """Rewrite operators without a gradient in onnxruntime-training into standard ones.

    * ``ai.onnx.ml`` ``Scaler`` (skl2onnx's StandardScaler and friends):
      :math:`Y = (X - o) \\cdot s` becomes ``Sub`` + ``Mul`` with initializers
      (a ``Cast`` to float first when the input is not float).

    Parameters
    ----------
    onx : ModelProto
        The model.

    Returns
    -------
    ModelProto
        A new model computing the same outputs; the model is returned unchanged (a copy)
        when nothing needs a rewrite.
    """
    graph = onx.graph
    if not any((n.domain, n.op_type) in _REWRITES for n in graph.node):
        copy = ModelProto()
        copy.CopyFrom(onx)
        return copy
    types = {i.name: i.type.tensor_type.elem_type for i in graph.input}
    types.update({i.name: i.data_type for i in graph.initializer})
    types.update({v.name: v.type.tensor_type.elem_type for v in graph.value_info})
    needs_inference = any(
        (n.domain, n.op_type) in _REWRITES and n.input[0] not in types for n in graph.node
    )
    if needs_inference:
        inferred = onnx.shape_inference.infer_shapes(onx).graph.value_info
        types.update({v.name: v.type.tensor_type.elem_type for v in inferred})
    taken = graph_names(graph)
    nodes: list[NodeProto] = []
    initializers = list(graph.initializer)
    for node in graph.node:
        rewrite = _REWRITES.get((node.domain, node.op_type))
        if rewrite is None:
            nodes.append(node)
            continue
        new_nodes, new_inits = rewrite(node, types, taken)
        nodes.extend(new_nodes)
        initializers.extend(new_inits)
    new_graph = helper.make_graph(
        nodes,
        graph.name,
        list(graph.input),
        list(graph.output),
        initializers,
        value_info=list(graph.value_info),
    )
    return _rebuild(onx, new_graph)


def fused_gradient_model(
    gradient_model: ModelProto,
    training_model: ModelProto,
    batch_inputs: list[str],
    batch_rows: int | None = None,
) -> ModelProto:
    r"""Turn the two-part gradient graph of ``OrtModuleGraphBuilder`` into one plain graph.

    The builder's gradient graph runs in two halves around a ``YieldOp`` node: its
    inputs are the forward outputs :math:`y_i`, handed to the caller, and its outputs
    are the output gradients :math:`\partial L / \partial y_i` the caller hands back
    (``TrainingAgent.run_forward`` then ``run_backward``). When the caller knows the
    output gradients before the forward pass, as a training loop does (the loss
    output's gradient is :math:`1 / \sum_{i \in B} s_i`), nothing has to come back in
    between: removing ``YieldOp``, making its inputs graph outputs and its outputs graph
    inputs gives a graph a plain ``InferenceSession`` runs in one call,

    .. math::

        (x, W, \partial L/\partial y) \mapsto (y, \partial L/\partial W_1, \dots).

    Measured on 1.19.2: one call of the fused graph costs 10 µs for a linear model at
    batch 32 where ``run_forward`` + ``run_backward`` cost 14-16 µs.

    Parameters
    ----------
    gradient_model : ModelProto
        ``OrtModuleGraphBuilder.get_gradient_model()``, possibly rewritten.
    training_model : ModelProto
        The model given to the builder: its outputs give the types of the forward
        outputs, which the gradient graph does not always record.
    batch_inputs : list of str
        Graph inputs whose first dimension is the batch (data, labels, sample weights).
    batch_rows : int, optional
        Fix that first dimension to this many rows. With every shape static,
        onnxruntime's optimizer folds the ``Shape`` nodes of the generated gradient into
        constants (40 nodes become 27 for a linear model: 10 µs instead of 14 µs per
        call at batch 32); it leaves ``BroadcastGradientArgs`` and the ``ReduceSum``,
        ``Reshape`` and ``Expand`` nodes that read it, which
        :func:`~skl_ortgrad.utils.gradient_rewrite.fold_gradient_shapes` removes.

    Returns
    -------
    ModelProto
        Inputs: the original inputs, then one ``<output>_grad`` per differentiable
        forward output; outputs: the forward outputs, then the weight gradients.

    Raises
    ------
    ValueError
        If the graph does not hold exactly one ``YieldOp``.
    """
    fused = ModelProto()
    fused.CopyFrom(gradient_model)
    graph = fused.graph
    yields = [node for node in graph.node if node.op_type == "YieldOp"]
    if len(yields) != 1:
        raise ValueError(
            f"Expected one YieldOp in the gradient graph, found {len(yields)}."
        )
    node = yields[0]
    attributes = {att.name: helper.get_attribute_value(att) for att in node.attribute}
    skipped = set(attributes.get("non_differentiable_outputs", []))
    differentiable = [name for i, name in enumerate(node.input) if i not in skipped]
    infos = {
        info.name: info
        for info in [*graph.value_info, *graph.output, *graph.input,
                     *training_model.graph.output]
    }
    kept = [other for other in graph.node if other is not node]
    del graph.node[:]
    graph.node.extend(kept)

    forward_outputs = []
    for name in node.input:
        if name not in infos:
            raise ValueError(f"The forward output {name!r} has no type in either graph.")
        info = ValueInfoProto()
        info.CopyFrom(infos[name])
        forward_outputs.append(info)
    grad_inputs = []
    for forward_name, grad_name in zip(differentiable, node.output, strict=True):
        info = ValueInfoProto()
        info.CopyFrom(next(i for i in forward_outputs if i.name == forward_name))
        info.name = grad_name
        grad_inputs.append(info)
    weight_grads = list(graph.output)
    del graph.output[:]
    graph.output.extend([*forward_outputs, *weight_grads])
    graph.input.extend(grad_inputs)

    if batch_rows is not None:
        for info in graph.input:
            if info.name in batch_inputs and info.type.tensor_type.shape.dim:
                info.type.tensor_type.shape.dim[0].Clear()
                info.type.tensor_type.shape.dim[0].dim_value = int(batch_rows)
    return fused
