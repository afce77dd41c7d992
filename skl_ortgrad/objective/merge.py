"""Appending a loss graph (and penalties) to a model: the objective that is differentiated."""

from __future__ import annotations

import numpy as np
from onnx import ModelProto, NodeProto, TensorProto, ValueInfoProto, helper, numpy_helper

from skl_ortgrad.graph.cut import select_model_output
from skl_ortgrad.graph.dtypes import FLOAT_TYPES, numpy_dtype
from skl_ortgrad.graph.external import check_external_data
from skl_ortgrad.graph.model import OPSET, graph_names, rebuild_model, unique_name
from skl_ortgrad.graph.opset import main_opset
from skl_ortgrad.graph.shapes import typed_output
from skl_ortgrad.objective.loss_graphs import MIN_OPSET, build_loss_graph
from skl_ortgrad.objective.penalty import penalty_loss_onnx


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
    external_data_dir: str | None = None,
) -> ModelProto:
    """Connect an output of a model to the ``prediction`` input of a loss graph.

    The result computes :math:`\\mathrm{loss} = \\mathcal{L}(y, f(X; W)[, w])` where
    :math:`f` is ``onx`` restricted to its output ``output_index`` and
    :math:`\\mathcal{L}` the loss graph (see
    :func:`~skl_ortgrad.objective.loss_graphs.build_loss_graph`).

    Parameters
    ----------
    onx : ModelProto
        The model. Its initializers keep their names (they are the weights to train).
    loss_graph : ModelProto
        A graph with inputs ``label``, ``prediction`` (and ``weight``) and one output
        ``loss``, a scalar or one value per row.
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
    external_data_dir : str, optional
        The folder tensors stored as external data may be read from; None refuses them
        (:func:`~skl_ortgrad.graph.external.check_external_data`).

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
    onx = check_external_data(onx, external_data_dir)
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

    prediction_info = typed_output(onx, output_index)
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
    # A scalar loss, or one per row ([N]) when the loss graph says so.
    loss_rank = len(loss_graph.graph.output[0].type.tensor_type.shape.dim)
    merged = helper.make_graph(
        nodes,
        graph.name,
        inputs,
        [helper.make_tensor_value_info(loss_name, elem, [label_dims[0]] * loss_rank)],
        initializers,
        value_info=list(graph.value_info),
    )
    opset = max(main_opset(onx), main_opset(loss_graph))
    return rebuild_model(onx, merged, opset=opset, extra=(loss_graph,))


#: add_loss_output's losses that differ from the training graphs of the same name: the
#: seed's squared error is the plain sum of squares, its elastic loss l1 |d| + l2 d^2,
#: where the training losses halve the square (their gradient is then the residual).
_SEED_PARAMS = {
    "squared_error": lambda params: {"factor": 1.0, **params},
    "l2": lambda params: {"factor": 1.0, **params},
    "square_error": lambda params: {"factor": 1.0, **params},
    "elastic": lambda params: {**params, "l2_weight": 2 * params.get("l2_weight", 0.5)},
}
#: The seed's 'log' takes probabilities (the training 'log' takes raw scores); its labels
#: are classes: an int64 input of one column, cast in the graph.
_CLASS_LABELS = {"log": "log_probability"}


def add_loss_output(
    onx: ModelProto,
    score_name: str = "squared_error",
    loss_name: str = "loss",
    label_name: str = "label",
    weight_name: str | None = None,
    penalty: dict[str, dict[str, float]] | None = None,
    output_index: int | str | None = None,
    external_data_dir: str | None = None,
    **kwargs: float,
) -> ModelProto:
    """Append a loss (and penalties) to a model, the seed API's way.

    .. math::

        \\mathrm{loss} = \\sum_i w_i \\sum_k \\ell(y_{ik}, f(X; W)_{ik})
        + \\sum_{V \\in \\mathrm{penalty}} l_1^V \\sum |V| + l_2^V \\sum V^2

    with, for :math:`d = f(X; W) - y`:

    * ``'squared_error'`` (``'l2'``): :math:`\\ell = d^2`;
    * ``'absolute_error'`` (``'l1'``): :math:`\\ell = |d|`;
    * ``'elastic'``: :math:`\\ell = l_1 |d| + l_2 d^2` (``l1_weight``, ``l2_weight``, 0.5 each
      by default);
    * ``'log'``: the binary log loss of a probability averaged over the :math:`N` rows
      (scikit-learn's ``log_loss``, onnxcustom's ``'log'``): the loss is
      :math:`\\frac1N \\sum_i w_i \\ell_i`,
      :math:`\\ell_i = -y_i \\log p_i - (1 - y_i) \\log(1 - p_i)`, :math:`p` the last column
      of the prediction (``probabilities`` of a binary classifier), clipped to
      :math:`[\\epsilon, 1 - \\epsilon]` (``eps`` < 0.5, default 1e-5; none with
      :math:`\\epsilon \\le 0`); labels in {0, 1} as an int64 column;
    * any other kind of :func:`~skl_ortgrad.objective.loss_graphs.build_loss_graph`
      (``huber``, ``hinge``...), as defined there.

    The training losses of the estimators halve the square; they are built by
    :func:`merge_loss_graph`, not by this function.

    Parameters
    ----------
    onx : ModelProto
        The model.
    score_name : str
        Kind of loss, see above.
    loss_name, label_name : str
        Names of the loss output (shape ``(1, 1)``) and of the label input.
    weight_name : str, optional
        Name of a sample weight input (the loss becomes a weighted sum).
    penalty : dict, optional
        ``{tensor name: {'l1': a, 'l2': b}}``: penalties added to the loss, see
        :func:`~skl_ortgrad.objective.penalty.penalty_loss_onnx`.
    output_index : int or str, optional
        Output of ``onx`` used as the prediction, by position or by name (None: the first
        one). The nodes that only compute the other outputs are removed.
    external_data_dir : str, optional
        The folder tensors stored as external data may be read from; None refuses them
        (:func:`~skl_ortgrad.graph.external.check_external_data`).
    **kwargs
        Parameters of the loss (``epsilon``, ``eps``, ``l1_weight``...).

    Returns
    -------
    ModelProto
        The model whose only output is ``loss_name``, of shape ``(1, 1)``.

    Raises
    ------
    ValueError
        For an unknown output, loss or penalty name.
    """
    onx = check_external_data(onx, external_data_dir)
    outputs = [out.name for out in onx.graph.output]
    if isinstance(output_index, str):
        if output_index not in outputs:
            raise ValueError(f"output_index={output_index!r} is not an output of {outputs}.")
        index = outputs.index(output_index)
    else:
        index = 0 if output_index is None else int(output_index)
    if not 0 <= index < len(outputs):
        raise ValueError(
            f"output_index={output_index} but the model has {len(outputs)} output(s)."
        )
    elem = onx.graph.output[index].type.tensor_type.elem_type
    if elem not in FLOAT_TYPES:
        raise TypeError(f"Output {outputs[index]!r} is not a float tensor.")
    if len(outputs) > 1:
        # The loss is the only output of the result: what computes the other outputs
        # goes, and their names (a classifier's 'label') are free again.
        onx, index = select_model_output(onx, outputs[index]), 0
    params = _SEED_PARAMS.get(score_name, dict)(kwargs)
    # The loss graph follows the model's opset so merging never changes the meaning of
    # the model's operators.
    opset = min(OPSET, max(MIN_OPSET, main_opset(onx)))
    loss_graph = build_loss_graph(
        _CLASS_LABELS.get(score_name, score_name), numpy_dtype(elem),
        weighted=weight_name is not None, opset=opset, **params,
    )
    taken = graph_names(onx.graph)
    clashes = sorted({label_name, loss_name, weight_name} & taken)
    if clashes:
        raise ValueError(
            f"Names {clashes} are already used in the model: choose other label_name, "
            "loss_name or weight_name (or cut the model with select_model_output)."
        )
    taken |= {label_name, loss_name}
    if weight_name is not None:
        taken.add(weight_name)
    class_labels = score_name in _CLASS_LABELS
    float_label = unique_name(f"{label_name}_float", taken) if class_labels else label_name
    data_loss = unique_name(f"{loss_name}_data", taken)
    merged = merge_loss_graph(
        onx, loss_graph, output_index=index, label_name=float_label,
        weight_name=weight_name, loss_name=data_loss,
    )
    graph = merged.graph
    taken |= graph_names(graph)
    nodes: list[NodeProto] = []
    inputs = list(graph.input)
    if class_labels:
        label_info = next(i for i in inputs if i.name == float_label)
        rows = label_info.type.tensor_type.shape.dim[0]
        inputs = [i for i in inputs if i.name != float_label]
        inputs.insert(len(onx.graph.input), helper.make_tensor_value_info(
            label_name, TensorProto.INT64, [rows.dim_param or None, 1]))
        nodes.append(helper.make_node("Cast", [label_name], [float_label], to=elem,
                                      name=unique_name(f"n_{float_label}", taken)))
    nodes.extend(graph.node)
    total = data_loss
    types = {i.name: i.data_type for i in graph.initializer}
    types.update({i.name: i.type.tensor_type.elem_type for i in inputs})
    for name, coefs in (penalty or {}).items():
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
        out = unique_name(f"{loss_name}_partial", taken)
        nodes.append(helper.make_node("Add", [total, pen], [out],
                                      name=unique_name(f"n_{out}", taken)))
        total = out
    # The seed's loss output is a (1, 1) tensor.
    shape = unique_name(f"{loss_name}_shape", taken)
    nodes.append(helper.make_node("Reshape", [total, shape], [loss_name],
                                  name=unique_name(f"n_{loss_name}", taken)))
    new_graph = helper.make_graph(
        nodes,
        graph.name,
        inputs,
        [helper.make_tensor_value_info(loss_name, elem, [1, 1])],
        [*graph.initializer, numpy_helper.from_array(np.array([1, 1], dtype=np.int64), shape)],
        value_info=list(graph.value_info),
    )
    return rebuild_model(merged, new_graph)
