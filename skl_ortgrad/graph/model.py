"""Building models and naming results: what every ONNX graph built by skl_ortgrad shares.

onnxruntime(-training) 1.19 accepts opset <= 21 and IR version <= 10, while
``onnx.helper.make_model`` stamps the newest IR version and skl2onnx defaults to a
newer opset. Every graph the package builds goes through :func:`make_model` (or
:func:`rebuild_model`, which keeps a model's opsets and producer).
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from onnx import AttributeProto, GraphProto, ModelProto, NodeProto, helper, numpy_helper

from skl_ortgrad.graph.opset import main_opset, other_domains

OPSET = 21
ML_OPSET = 3
IR_VERSION = 10
TARGET_OPSET = {"": OPSET, "ai.onnx.ml": ML_OPSET}

def make_model(
    graph: GraphProto, opset: int = OPSET, domains: Iterable[tuple[str, int]] = ()
) -> ModelProto:
    """Wrap ``graph`` into a model loadable by onnxruntime 1.19 (IR 10, opset ``opset``).

    Parameters
    ----------
    graph : GraphProto
        The graph.
    opset : int
        Version of the main ONNX domain, at most :data:`OPSET`.
    domains : iterable of (str, int)
        Further opset imports, e.g. ``[("ai.onnx.ml", 3)]``.
    """
    if opset > OPSET:
        raise ValueError(f"onnxruntime 1.19 accepts opset <= {OPSET}, got {opset}.")
    imports = [helper.make_opsetid("", opset)]
    imports += [helper.make_opsetid(name, version) for name, version in domains]
    return helper.make_model(graph, opset_imports=imports, ir_version=IR_VERSION)


def rebuild_model(
    onx: ModelProto,
    graph: GraphProto,
    opset: int | None = None,
    extra: tuple[ModelProto, ...] = (),
) -> ModelProto:
    """Wrap ``graph`` with the opsets and producer of ``onx`` (and the domains of
    ``extra``) through :func:`make_model`; ``opset`` overrides the main one."""
    main = opset if opset is not None else main_opset(onx)
    model = make_model(graph, opset=main, domains=other_domains(onx, *extra))
    model.producer_name = onx.producer_name
    model.producer_version = onx.producer_version
    model.doc_string = onx.doc_string
    return model


def rename_results(graph: GraphProto, mapping: dict[str, str]) -> None:
    """Rename results of ``graph`` in place: node inputs and outputs, graph inputs,
    outputs, initializers and value infos (subgraphs are not visited)."""
    if not mapping:
        return
    for node in graph.node:
        node.input[:] = [mapping.get(name, name) for name in node.input]
        node.output[:] = [mapping.get(name, name) for name in node.output]
    for info in (*graph.input, *graph.output, *graph.value_info, *graph.initializer):
        info.name = mapping.get(info.name, info.name)


def copied_model(model: ModelProto) -> ModelProto:
    """A copy of ``model`` that shares nothing with it (protobuf's ``CopyFrom``)."""
    result = ModelProto()
    result.CopyFrom(model)
    return result


def initializer_array(model: ModelProto, name: str) -> np.ndarray:
    """The value of ``model``'s initializer ``name`` (a fixed intercept, say).

    Raises
    ------
    StopIteration
        If ``model`` has no initializer ``name``.
    """
    return numpy_helper.to_array(next(
        init for init in model.graph.initializer if init.name == name))


def initializers_to_inputs(model: ModelProto, names: Iterable[str]) -> ModelProto:
    """Return a copy of ``model`` where initializers ``names`` are graph inputs instead.

    One inference session over that graph serves any value of those weights: they are fed
    at every run, so training can update them without rebuilding the session.
    """
    names = list(names)
    result = copied_model(model)
    graph = result.graph
    kept = [init for init in graph.initializer if init.name not in names]
    moved = {init.name: init for init in graph.initializer if init.name in names}
    missing = [name for name in names if name not in moved]
    if missing:
        raise ValueError(f"No initializers {missing} in the model.")
    del graph.initializer[:]
    graph.initializer.extend(kept)
    graph.input.extend(
        helper.make_tensor_value_info(name, moved[name].data_type, list(moved[name].dims))
        for name in names
    )
    return result


def graph_names(graph: GraphProto) -> set[str]:
    """Every result, initializer, input, output and node name used in ``graph``."""
    names = {i.name for i in graph.input} | {o.name for o in graph.output}
    names |= {i.name for i in graph.initializer} | {v.name for v in graph.value_info}
    for node in graph.node:
        names.update(node.input)
        names.update(node.output)
        names.add(node.name)
        names |= subgraph_inputs(node)
    names.discard("")
    return names


def subgraph_inputs(node: NodeProto) -> set[str]:
    """Names read inside the subgraphs of a control-flow node (If, Loop, Scan)."""
    found: set[str] = set()
    for att in node.attribute:
        graphs = list(att.graphs)
        if att.type == AttributeProto.GRAPH:
            graphs.append(att.g)
        for sub in graphs:
            for sub_node in sub.node:
                found.update(sub_node.input)
                found |= subgraph_inputs(sub_node)
    return found


def unique_name(base: str, taken: set[str]) -> str:
    """Return ``base`` or ``base_<i>``, the first not in ``taken``, and add it to ``taken``."""
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}_{i}"
    taken.add(name)
    return name
