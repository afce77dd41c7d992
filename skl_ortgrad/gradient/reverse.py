r"""Reverse-mode differentiation of an ONNX graph into standard ONNX operators.

Given a model with outputs :math:`y_j` and the tensors to differentiate (weights
:math:`W`, inputs :math:`X`), :func:`differentiate` writes one graph computing, in a
single run,

.. math::

    (X, W, \bar y) \mapsto \left(y,\ \frac{\partial L}{\partial W},
    \frac{\partial L}{\partial X}\right), \qquad
    \frac{\partial L}{\partial W} = \sum_j \left(\frac{\partial y_j}{\partial W}\right)^T
    \bar y_j,

where :math:`\bar y_j = \partial L / \partial y_j` are inputs ``<output>_grad`` (a
training loss feeds 1). The walk visits the nodes between the differentiated tensors and
the outputs in reverse topological order and asks the rule of each operator
(:mod:`skl_ortgrad.gradient.rules`) for the gradients of its inputs; a tensor read by
several nodes receives the sum of its partial gradients.

Only default-domain operators are emitted, so the result runs on any onnxruntime.
Shapes come from ONNX shape inference: with a static batch dimension every broadcast is
resolved while building, with a symbolic one it is resolved at run time only where the
shapes cannot tell.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, helper, numpy_helper

from skl_ortgrad.gradient.context import Dim, GradientContext
from skl_ortgrad.gradient.rules import NO_GRADIENT, rule_for
from skl_ortgrad.graph.dtypes import FLOAT_TYPES
from skl_ortgrad.graph.model import graph_names
from skl_ortgrad.graph.opset import main_opset
from skl_ortgrad.graph.shapes import declared_shape

MIN_OPSET = 13
# Operators that return their first input when its shape does not change.
_SHAPE_KEEPERS = frozenset({"Reshape", "Expand"})


def _constants(graph: onnx.GraphProto, trained: set[str]) -> dict[str, np.ndarray]:
    values = {init.name: numpy_helper.to_array(init)
              for init in graph.initializer if init.name not in trained}
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            att = node.attribute[0]
            if att.name == "value":
                values[node.output[0]] = numpy_helper.to_array(att.t)
            else:
                values[node.output[0]] = np.asarray(helper.get_attribute_value(att))
    return values


def _infer(model: ModelProto) -> tuple[dict[str, list[Dim] | None], dict[str, int]]:
    """Shapes and element types of every tensor, from ONNX shape inference."""
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    graph = inferred.graph
    shapes: dict[str, list[Dim] | None] = {}
    types: dict[str, int] = {}
    for info in (*graph.input, *graph.value_info, *graph.output):
        if info.type.tensor_type.elem_type:
            types[info.name] = info.type.tensor_type.elem_type
            shapes[info.name] = declared_shape(info)
    for init in graph.initializer:
        types[init.name] = init.data_type
        shapes[init.name] = list(init.dims)
    return shapes, types


def _active(nodes: Sequence[NodeProto], sources: set[str], types: dict[str, int]) -> set[str]:
    """Float tensors that depend on one of ``sources``."""
    active = set(sources)
    for node in nodes:
        if node.op_type in NO_GRADIENT:
            continue
        if any(name in active for name in node.input if name):
            active.update(
                name for name in node.output if name and types.get(name) in FLOAT_TYPES
            )
    return active


def differentiate(
    model: ModelProto,
    weights: Sequence[str],
    inputs: Sequence[str] = (),
) -> tuple[ModelProto, list[str]]:
    """Build the gradient graph of ``model``, see the module docstring.

    Parameters
    ----------
    model : ModelProto
        The model, default-domain operators on the differentiated paths, opset 13-21.
    weights : list of str
        Initializers to differentiate; they become graph inputs after the model's inputs.
    inputs : list of str
        Graph inputs to differentiate.

    Returns
    -------
    (ModelProto, list of str)
        The graph, with inputs: the model inputs, the weights, then ``<output>_grad`` for
        each float output; outputs: the model outputs, ``<input>_grad`` per input, then
        ``<weight>_grad`` per weight (onnxruntime-training's order). And the names of the
        float outputs that take a gradient, in order.

    Raises
    ------
    NotImplementedError
        If a node on a differentiated path has no gradient rule (its name is given).
    ValueError
        If a name is unknown or the opset is out of range.
    """
    graph = model.graph
    opset = main_opset(model)
    if opset < MIN_OPSET:
        raise ValueError(
            f"The 'onnx' gradient backend needs opset >= {MIN_OPSET}, the model has {opset}."
        )
    weights, inputs = list(weights), list(inputs)
    init_names = {init.name for init in graph.initializer}
    input_names = [i.name for i in graph.input if i.name not in init_names]
    unknown = [w for w in weights if w not in init_names]
    unknown += [x for x in inputs if x not in input_names]
    if unknown:
        raise ValueError(f"{unknown} are neither initializers nor inputs of the model.")

    shapes, types = _infer(model)
    active = _active(graph.node, set(weights) | set(inputs), types)
    diff_outputs = [out.name for out in graph.output
                    if out.type.tensor_type.elem_type in FLOAT_TYPES]
    grad_inputs = {name: f"{name}_grad" for name in diff_outputs}
    taken = graph_names(graph) | set(grad_inputs.values())
    taken |= {f"{name}_grad" for name in weights + inputs}
    ctx = GradientContext(shapes, types, opset, taken, active, _constants(graph, set(weights)))

    contributions: dict[str, list[str]] = {}
    for name in diff_outputs:
        if name in active:
            contributions[name] = [grad_inputs[name]]
            ctx.record(grad_inputs[name], name)

    for node in reversed(graph.node):
        if node.op_type in NO_GRADIENT or not any(name in active for name in node.input):
            continue
        grads = [_total(ctx, contributions.pop(name, []), name) if name else None
                 for name in node.output]
        if all(g is None for g in grads):
            continue
        input_grads = rule_for(node)(ctx, node, grads)
        for name, grad in zip(node.input, input_grads, strict=True):
            if grad is not None and ctx.needs(name):
                contributions.setdefault(name, []).append(grad)

    outputs = []
    for name in inputs + weights:
        total = _total(ctx, contributions.get(name, []), name)
        if total is None:
            total = ctx.zeros_like(name)
        ctx.nodes.append(helper.make_node("Identity", [total], [f"{name}_grad"],
                                          name=ctx.fresh(f"{name}_grad")))
        outputs.append(helper.make_tensor_value_info(
            f"{name}_grad", types[name], shapes.get(name)))

    graph_inputs = [i for i in graph.input if i.name not in init_names]
    inits = {init.name: init for init in graph.initializer}
    graph_inputs += [helper.make_tensor_value_info(w, inits[w].data_type, list(inits[w].dims))
                     for w in weights]
    for name in diff_outputs:
        # Typed as shape inference found the output (a model cut at an intermediate result
        # may declare its outputs without a shape).
        graph_inputs.append(helper.make_tensor_value_info(
            grad_inputs[name], types[name], shapes.get(name)))
    result = helper.make_graph(
        [*_without_noop_reshapes(graph.node, shapes), *ctx.nodes],
        graph.name,
        graph_inputs,
        [*graph.output, *outputs],
        [init for init in graph.initializer if init.name not in set(weights)]
        + ctx.initializers,
    )
    gradient = helper.make_model(result, opset_imports=list(model.opset_import),
                                 ir_version=model.ir_version)
    return gradient, diff_outputs


def _without_noop_reshapes(nodes: Sequence[NodeProto], shapes: dict[str, list[Dim] | None]
                           ) -> list[NodeProto]:
    """The forward nodes, a ``Reshape`` or ``Expand`` that keeps a static shape turned into
    ``Identity`` (which onnxruntime removes; it cannot tell at a symbolic batch)."""
    result = []
    for node in nodes:
        before, after = shapes.get(node.input[0]) if node.input else None, None
        if node.op_type in _SHAPE_KEEPERS:
            after = shapes.get(node.output[0])
        static = before is not None and all(isinstance(d, int) for d in before)
        if static and before == after:
            node = helper.make_node("Identity", [node.input[0]], [node.output[0]],
                                    name=node.name)
        result.append(node)
    return result


def _total(ctx: GradientContext, parts: list[str], like: str) -> str | None:
    """The sum of the partial gradients of ``like`` (None when there is none)."""
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return ctx.op("Sum", parts, like=like)

