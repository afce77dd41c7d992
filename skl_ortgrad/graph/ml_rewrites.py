"""``ai.onnx.ml`` operators rewritten into default-domain ones, which gradients go through."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, TensorProto, helper, numpy_helper

from skl_ortgrad.graph.model import copied_model, graph_names, rebuild_model, unique_name


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
        return copied_model(onx)
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
    return rebuild_model(onx, new_graph)
