"""k steps as one ``Scan`` node: the outer graph of every training program."""

from __future__ import annotations

from collections.abc import Sequence

from onnx import GraphProto, NodeProto, ValueInfoProto, helper

from skl_ortgrad.training.programs.steps import (
    LOSSES_OUTPUT,
    StepTemplate,
    dims_of,
    value_info,
)


def scan(t: StepTemplate, outputs: list[str], losses: str = LOSSES_OUTPUT,
          dataset: Sequence[ValueInfoProto] = ()) -> GraphProto:
    """The graph of one ``Scan`` node whose body is the template.

    The outer graph names the weights and the stacked per-step inputs as the template
    does; the body's names get a suffix (ONNX forbids a subgraph to redeclare a name of
    the outer graph), except its initializers and the ``dataset``, outer inputs the body
    reads as they are.
    """
    shared = {i.name for i in t.initializers} | {i.name for i in dataset}
    mapping = {name: f"{name}__body" for node in t.nodes
               for name in [*node.input, *node.output, node.name]
               if name and name not in shared}
    mapping.update({name: f"{name}__body" for name in
                    [*(w.name for w in t.weights), *(i.name for i in t.data),
                     *(name for name, _, _ in t.scalars)]})
    step_inputs = [(i.name, i.type.tensor_type.elem_type, dims_of(i)) for i in t.data]
    step_inputs += [(name, t.elem, list(shape)) for name, _, shape in t.scalars]
    # The stacked inputs have a symbolic first dimension: a chunk of any length runs.
    outer_inputs = [value_info(w.name, t.elem, dims_of(w)) for w in t.weights] + list(dataset)
    outer_inputs += [value_info(name, elem, ["steps", *shape]) for name, elem, shape in step_inputs]
    body = helper.make_graph(
        [renamed(node, mapping) for node in t.nodes], "step",
        [value_info(mapping[w.name], t.elem, dims_of(w)) for w in t.weights]
        + [value_info(mapping[name], elem, shape) for name, elem, shape in step_inputs],
        [value_info(mapping[name], t.elem, dims_of(w))
         for name, w in zip(t.new_weights, t.weights, strict=True)]
        + [value_info(mapping[t.loss], t.elem, t.loss_shape)]
        + [value_info(mapping[result], t.elem, shape) for _, result, shape in t.extra],
        t.initializers)
    node = helper.make_node(
        "Scan", [w.name for w in t.weights] + [name for name, _, _ in step_inputs],
        [*outputs, losses, *(name for name, _, _ in t.extra)], name="steps", body=body,
        num_scan_inputs=len(step_inputs))
    weight_outputs = [value_info(name, t.elem, dims_of(w))
                      for name, w in zip(outputs, t.weights, strict=True)]
    return helper.make_graph(
        [node], "training_program", outer_inputs,
        [*weight_outputs, value_info(losses, t.elem, ["steps", *t.loss_shape]),
         *(value_info(name, t.elem, ["steps", *shape]) for name, _, shape in t.extra)])


def renamed(node: NodeProto, mapping: dict[str, str]) -> NodeProto:
    """A copy of ``node`` whose inputs, outputs and name ``mapping`` renames (the others
    kept)."""
    copy = NodeProto()
    copy.CopyFrom(node)
    copy.input[:] = [mapping.get(name, name) for name in node.input]
    copy.output[:] = [mapping.get(name, name) for name in node.output]
    copy.name = mapping.get(node.name, node.name)
    return copy
