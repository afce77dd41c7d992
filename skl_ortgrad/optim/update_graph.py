"""An update rule's ONNX form as a graph of its own (``build_onnx_function``), and the
correctly rounded square root the rules' graphs share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import onnx
from onnx import helper

from skl_ortgrad.graph.dtypes import onnx_dtype
from skl_ortgrad.graph.model import make_model
from skl_ortgrad.graph.step_graph import StepGraph
from skl_ortgrad.optim.checks import check_n_tensors, check_opset

if TYPE_CHECKING:
    from skl_ortgrad.optim.rate import BaseLearningRate


def rounded_sqrt(graph: StepGraph, value: str, hint: str) -> str:
    """``Sqrt`` rounded as numpy's: onnxruntime's float32 ``Sqrt`` is not correctly rounded
    (measured, onnxruntime 1.19 and 1.32: 419 of 1,000 values one unit off numpy's) while
    its float64 one is, and a float64 square root rounded to float32 is the correctly
    rounded float32 one; hence float32 goes through float64."""
    if graph.dtype.itemsize >= 8:
        return graph.node("Sqrt", [value], hint)
    wide = graph.node("Cast", [value], f"{hint}_wide", to=onnx.TensorProto.DOUBLE)
    root = graph.node("Sqrt", [wide], f"{hint}_wide_root")
    return graph.node("Cast", [root], hint, to=onnx_dtype(graph.dtype))


def update_function(
    rule: BaseLearningRate, opset: int, n_tensors: int, dtype: type | np.dtype, name: str,
    states: Sequence[str] = (), counter: Callable[[StepGraph], None] | None = None,
) -> onnx.ModelProto:
    """``rule``'s :meth:`~BaseLearningRate.emit_update` for ``n_tensors`` weights as a graph
    of its own: inputs ``w<i>``, ``g<i>``, ``<state><i>`` (``states``: one prefix per state
    tensor), then ``k`` (a 0-d int64 update counter, when ``counter`` writes the nodes
    computing scalars from it) and ``eta`` (0-d); outputs ``new_w<i>`` then
    ``new_<state><i>``. Scalars and constants are rank 0: the shapes are free."""
    check_opset(opset)
    check_n_tensors(n_tensors)
    elem = onnx_dtype(dtype)
    inputs = [helper.make_tensor_value_info(f"{prefix}{i}", elem, None)
              for prefix in ("w", "g", *states) for i in range(n_tensors)]
    if counter is not None:
        inputs.append(helper.make_tensor_value_info("k", onnx.TensorProto.INT64, []))
    inputs.append(helper.make_tensor_value_info("eta", elem, []))
    outputs = [f"new_{prefix}{i}" for prefix in ("w", *states) for i in range(n_tensors)]
    graph = StepGraph({i.name for i in inputs} | set(outputs), dtype)
    graph.define_scalar("eta", 0, "eta")
    if counter is not None:
        counter(graph)
    final: dict[str, str] = {}
    for i in range(n_tensors):
        new_weight, new_states = rule.emit_update(
            graph, f"w{i}", f"g{i}", [f"{prefix}{i}" for prefix in states], 0)
        final[new_weight] = f"new_w{i}"
        final.update({result: f"new_{prefix}{i}"
                      for prefix, result in zip(states, new_states, strict=True)})
    for node in graph.nodes:
        node.input[:] = [final.get(n, n) for n in node.input]
        node.output[:] = [final.get(n, n) for n in node.output]
    body = helper.make_graph(
        graph.nodes, name, inputs,
        [helper.make_tensor_value_info(out, elem, None) for out in outputs],
        initializer=graph.initializers)
    return make_model(body, opset=opset)
