"""k steps as ``Scan`` nodes: the outer graph of every training program.

One ``Scan`` runs one step per iteration. With ``unroll`` :math:`u > 1`, a first ``Scan``
runs :math:`u` steps per iteration over the first :math:`u \\lfloor k / u \\rfloor`
steps, and a second one the :math:`k \\bmod u` steps left, one per iteration, each in an
``If`` that runs it only where it has steps (onnxruntime refuses a ``Scan`` of none):
the same steps in the same order, the same values bit for bit.

What that saves: an iteration's state is a subgraph input, and its new state a subgraph
output, which onnxruntime's planner never lets a kernel write in place; between the two,
a kernel that may run in place (``ScatterElements``) adds into the buffer of the step
before instead of copying all of it first. At :math:`2^{18}` float32 weights and 32-row
batches of the text-like problem of ``bench/bench_sparse.py``, a sparse step's scatter
took 25-33 µs in place against 118 µs copying first (onnxruntime 1.19's profiler, one
thread); where that pays is the sparse program's choice
(:func:`~skl_ortgrad.training.programs.sparse.unrolled_steps`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from onnx import GraphProto, NodeProto, ValueInfoProto, helper, numpy_helper
from onnx.helper import tensor_dtype_to_np_dtype

from skl_ortgrad.training.programs.steps import (
    LOSSES_OUTPUT,
    StepTemplate,
    dims_of,
    value_info,
)


def scan(t: StepTemplate, outputs: list[str], losses: str = LOSSES_OUTPUT,
         dataset: Sequence[ValueInfoProto] = (), unroll: int = 1) -> GraphProto:
    """The graph of the ``Scan`` node(s) whose body is the template, ``unroll`` steps
    an iteration (see the module; above 1, the template's opset must be 15 or later).

    The outer graph names the weights and the stacked per-step inputs as the template
    does; the body's names get a suffix (ONNX forbids a subgraph to redeclare a name of
    the outer graph), except its initializers and the ``dataset``, outer inputs the body
    reads as they are.
    """
    step_inputs = _step_inputs(t)
    sequences = [(losses, t.loss_shape), *((name, shape) for name, _, shape in t.extra)]
    # The stacked inputs have a symbolic first dimension: a chunk of any length runs.
    outer_inputs = [value_info(w.name, t.elem, dims_of(w)) for w in t.weights] + list(dataset)
    outer_inputs += [value_info(name, elem, ["steps", *shape]) for name, elem, shape in step_inputs]
    weight_outputs = [value_info(name, t.elem, dims_of(w))
                      for name, w in zip(outputs, t.weights, strict=True)]
    graph_outputs = [*weight_outputs, *(value_info(name, t.elem, ["steps", *shape])
                                        for name, shape in sequences)]
    weights = [w.name for w in t.weights]
    stacked = [name for name, _, _ in step_inputs]
    if unroll == 1:
        node = _scan_node("steps", _body(t, dataset, 1), weights, stacked,
                          [*outputs, *(name for name, _ in sequences)])
        return helper.make_graph([node], "training_program", outer_inputs, graph_outputs)
    nodes, constants = _split_steps(stacked, step_inputs, unroll)
    middle = [f"{name}__unrolled" for name in weights]
    state_shapes = [dims_of(w) for w in t.weights]
    for name, shape in sequences:
        constants[f"{name}__layout"] = np.array([-1, *shape], dtype=np.int64)
        # What a part of no steps gives: ONNX's Scan would, onnxruntime's refuses to run.
        constants[f"{name}__none"] = np.zeros((0, *shape), dtype=tensor_dtype_to_np_dtype(t.elem))
    grouped = _scan_node("unrolled_steps", _body(t, dataset, unroll), weights,
                         [f"{name}__grouped" for name in stacked],
                         [*middle, *(f"{name}__by_iteration" for name, _ in sequences)])
    flattened = [helper.make_node("Reshape", [f"{name}__by_iteration", f"{name}__layout"],
                                  [f"{name}__head"]) for name, _ in sequences]
    nodes.append(_if_steps("grouped_steps", [grouped, *flattened], weights, middle,
                           [f"{name}__head" for name, _ in sequences], sequences, t.elem,
                           state_shapes))
    rest = _scan_node("steps", _body(t, dataset, 1), middle,
                      [f"{name}__rest" for name in stacked],
                      [*outputs, *(f"{name}__tail" for name, _ in sequences)])
    nodes.append(_if_steps("rest_steps", [rest], middle, outputs,
                           [f"{name}__tail" for name, _ in sequences], sequences, t.elem,
                           state_shapes))
    nodes += [helper.make_node("Concat", [f"{name}__head", f"{name}__tail"], [name], axis=0)
              for name, _ in sequences]
    return helper.make_graph(
        nodes, "training_program", outer_inputs, graph_outputs,
        [numpy_helper.from_array(value, name) for name, value in constants.items()])


def _if_steps(count: str, nodes: list[NodeProto], states: list[str], outputs: list[str],
              parts: list[str], sequences: list[tuple[str, Sequence[int]]], elem: int,
              state_shapes: list[list[int | None]]) -> NodeProto:
    """An ``If`` that runs ``nodes`` (a ``Scan`` of the ``states`` into the ``outputs``,
    and its part of each of the ``sequences``, ``parts``) where the ``count`` of steps is
    positive, and otherwise passes the states through with parts of no steps
    (``<sequence>__none``)."""
    infos = ([value_info(name, elem, shape)
              for name, shape in zip(outputs, state_shapes, strict=True)]
             + [value_info(part, elem, [None, *shape])
                for part, (_, shape) in zip(parts, sequences, strict=True)])
    ran = helper.make_graph(nodes, f"{count}_run", [], infos)
    passed = helper.make_graph(
        [*(helper.make_node("Identity", [state], [output])
           for state, output in zip(states, outputs, strict=True)),
         *(helper.make_node("Identity", [f"{name}__none"], [part])
           for part, (name, _) in zip(parts, sequences, strict=True))],
        f"{count}_passed", [], infos)
    return helper.make_node("If", [f"{count}__any"], [*outputs, *parts],
                            name=f"{count}_if", then_branch=ran, else_branch=passed)


def _step_inputs(t: StepTemplate) -> list[tuple[str, int, list[int | None]]]:
    """Name, element type and shape of one step of every per-step input."""
    return ([(i.name, i.type.tensor_type.elem_type, dims_of(i)) for i in t.data]
            + [(name, t.elem, list(shape)) for name, _, shape in t.scalars])


def _scan_node(name: str, body: GraphProto, states: list[str], stacked: list[str],
               outputs: list[str]) -> NodeProto:
    return helper.make_node("Scan", [*states, *stacked], outputs, name=name, body=body,
                            num_scan_inputs=len(stacked))


def _split_steps(stacked: list[str], step_inputs: list[tuple[str, int, list[int | None]]],
                 unroll: int) -> tuple[list[NodeProto], dict[str, np.ndarray]]:
    """The outer nodes that split every stacked input into its first
    :math:`u \\lfloor k / u \\rfloor` steps grouped by :math:`u` (``<name>__grouped``,
    ``[k / u, u, ...]``) and the others (``<name>__rest``), with each part's flag of
    steps to run (``<part>__any``), and their constants."""
    constants = {"unroll": np.array([unroll], dtype=np.int64),
                 "first_step": np.zeros(1, dtype=np.int64),
                 "past_steps": np.array([np.iinfo(np.int64).max], dtype=np.int64),
                 "no_steps": np.zeros((), dtype=np.int64),
                 "scalar": np.zeros(0, dtype=np.int64)}
    nodes = [helper.make_node("Shape", [stacked[0]], ["step_count"], start=0, end=1),
             helper.make_node("Div", ["step_count", "unroll"], ["unrolled_iterations"]),
             helper.make_node("Mul", ["unrolled_iterations", "unroll"], ["grouped_steps"]),
             helper.make_node("Sub", ["step_count", "grouped_steps"], ["rest_steps"])]
    for count in ("grouped_steps", "rest_steps"):
        nodes += [helper.make_node("Reshape", [count, "scalar"], [f"{count}__scalar"]),
                  helper.make_node("Greater", [f"{count}__scalar", "no_steps"],
                                   [f"{count}__any"])]
    for name, _, shape in step_inputs:
        constants[f"{name}__grouping"] = np.array([-1, unroll, *shape], dtype=np.int64)
        nodes += [
            helper.make_node("Slice", [name, "first_step", "grouped_steps"],
                             [f"{name}__first_steps"]),
            helper.make_node("Reshape", [f"{name}__first_steps", f"{name}__grouping"],
                             [f"{name}__grouped"]),
            helper.make_node("Slice", [name, "grouped_steps", "past_steps"], [f"{name}__rest"]),
        ]
    return nodes, constants


def _body(t: StepTemplate, dataset: Sequence[ValueInfoProto], unroll: int) -> GraphProto:
    """The body of a ``Scan`` running ``unroll`` steps an iteration: its per-step inputs
    ``[unroll, ...]`` (one step's shape for 1), split and run one copy of the template
    after the other, the weights chained; its per-step outputs stacked likewise."""
    shared = {i.name for i in t.initializers} | {i.name for i in dataset}
    step_inputs = _step_inputs(t)
    inner = [name for name, _, _ in step_inputs]
    per_step = [t.loss, *(result for _, result, _ in t.extra)]
    if unroll == 1:
        suffixes, states = ["__body"], {w.name: f"{w.name}__body" for w in t.weights}
        inputs = {name: [f"{name}__body"] for name in inner}
        nodes, initializers = [], list(t.initializers)
    else:
        suffixes = [f"__step{j}" for j in range(unroll)]
        states = {w.name: f"{w.name}__iteration" for w in t.weights}
        inputs = {name: [f"{name}{suffix}" for suffix in suffixes] for name in inner}
        nodes = [helper.make_node("Split", [f"{name}__iteration", "one_each"],
                                  [f"{part}__split" for part in inputs[name]], axis=0)
                 for name in inner]
        nodes += [helper.make_node("Squeeze", [f"{part}__split", "step_axis"], [part])
                  for name in inner for part in inputs[name]]
        initializers = [*t.initializers,
                        numpy_helper.from_array(np.ones(unroll, dtype=np.int64), "one_each"),
                        numpy_helper.from_array(np.zeros(1, dtype=np.int64), "step_axis")]
    body_inputs = [value_info(states[w.name], t.elem, dims_of(w)) for w in t.weights]
    body_inputs += [value_info(f"{name}__iteration" if unroll > 1 else inputs[name][0],
                               elem, [unroll, *shape] if unroll > 1 else shape)
                    for name, elem, shape in step_inputs]
    outputs: dict[str, list[str]] = {name: [] for name in per_step}
    for j, suffix in enumerate(suffixes):
        mapping = {name: f"{name}{suffix}" for node in t.nodes
                   for name in [*node.input, *node.output, node.name]
                   if name and name not in shared}
        mapping.update(states)
        mapping.update({name: inputs[name][j] for name in inner})
        nodes += [renamed(node, mapping) for node in t.nodes]
        states = {w.name: mapping[new] for w, new in zip(t.weights, t.new_weights, strict=True)}
        for name in per_step:
            outputs[name].append(mapping[name])
    shapes = [t.loss_shape, *(shape for _, _, shape in t.extra)]
    if unroll > 1:
        for name in per_step:
            nodes += [helper.make_node("Unsqueeze", [part, "step_axis"], [f"{part}__stacked"])
                      for part in outputs[name]]
            nodes.append(helper.make_node("Concat", [f"{part}__stacked" for part in outputs[name]],
                                          [f"{name}__steps"], axis=0))
        outputs = {name: [f"{name}__steps"] for name in per_step}
        shapes = [[unroll, *shape] for shape in shapes]
    body_outputs = [value_info(states[w.name], t.elem, dims_of(w)) for w in t.weights]
    body_outputs += [value_info(outputs[name][0], t.elem, shape)
                     for name, shape in zip(per_step, shapes, strict=True)]
    return helper.make_graph(nodes, "step", body_inputs, body_outputs, initializers)


def renamed(node: NodeProto, mapping: dict[str, str]) -> NodeProto:
    """A copy of ``node`` whose inputs, outputs and name ``mapping`` renames (the others
    kept)."""
    copy = NodeProto()
    copy.CopyFrom(node)
    copy.input[:] = [mapping.get(name, name) for name in node.input]
    copy.output[:] = [mapping.get(name, name) for name in node.output]
    copy.name = mapping.get(node.name, node.name)
    return copy
