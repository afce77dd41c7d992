"""Cutting a model at one of its results: what computes it (:func:`select_model_output`),
or what follows it (:func:`select_model_input`)."""

from __future__ import annotations

from collections.abc import Hashable

import onnx
from onnx import ModelProto, NodeProto, ValueInfoProto, helper
from onnx.utils import Extractor

from skl_ortgrad._cache import BoundedCache
from skl_ortgrad.graph.dtypes import FLOAT_TYPES
from skl_ortgrad.graph.model import rebuild_model, subgraph_inputs

#: Types onnx shape inference gave to results, by graph (weights by type and shape only).
INFERRED: BoundedCache[ValueInfoProto | None] = BoundedCache(64)


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
        info = INFERRED.get(_structure(onx, output_name),
                            lambda: _inferred_info(onx, output_name))
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
    return rebuild_model(onx, new_graph)


def _structure(onx: ModelProto, output_name: str) -> Hashable:
    """What onnx shape inference reads of ``onx``: nodes, inputs, opsets, initializers,
    but of the floating-point initializers (weights) only their types and shapes.

    A small fit cuts the same graph with other weights every time, and inference was a
    tenth of its fixed cost. Integer initializers (shapes, axes) keep their values: they
    decide inferred shapes, which float values do not in the graphs cut here.
    """
    graph = onx.graph
    return (
        output_name,
        tuple(node.SerializeToString(deterministic=True) for node in graph.node),
        tuple(i.SerializeToString(deterministic=True) for i in graph.input),
        tuple((i.name, i.data_type, tuple(i.dims)) if i.data_type in FLOAT_TYPES
              else i.SerializeToString(deterministic=True) for i in graph.initializer),
        tuple((o.domain, o.version) for o in onx.opset_import),
    )


def _inferred_info(onx: ModelProto, output_name: str) -> ValueInfoProto | None:
    """The type onnx shape inference gives to ``output_name``, if any."""
    inferred = onnx.shape_inference.infer_shapes(onx)
    return next((v for v in inferred.graph.value_info if v.name == output_name), None)


def select_model_input(onx: ModelProto, input_name: str) -> ModelProto:
    """Cut a model so that it starts at ``input_name``: that result in, the model's
    outputs out, the nodes before it removed.

    Used to serve the outputs of a linear model (labels, probabilities) from scores
    computed elsewhere (sparse ``X`` times the weights, by scipy).

    Raises
    ------
    ValueError
        If an output needs another input than ``input_name`` (or is ``input_name``).
    """
    outputs = [o.name for o in onx.graph.output]
    if input_name in outputs:
        raise ValueError(f"{input_name!r} is an output of the model: nothing follows it.")
    cut = Extractor(onnx.shape_inference.infer_shapes(onx)).extract_model(
        [input_name], outputs)
    initialized = {i.name for i in cut.graph.initializer}
    needed = {name for node in cut.graph.node for name in node.input if name}
    missing = needed - initialized - {o for node in cut.graph.node for o in node.output}
    if missing - {input_name}:
        raise ValueError(f"The outputs after {input_name!r} also need {sorted(missing)}.")
    return cut
