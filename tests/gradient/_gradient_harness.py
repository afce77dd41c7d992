"""Build tiny ONNX models by hand and check their gradients against finite differences.

A :class:`Case` holds a model whose differentiated weights are initializers, the values
of its graph inputs and what to differentiate. :func:`check_case` differentiates it with
the ``"onnx"`` backend (:func:`skl_ortgrad.gradient.reverse.differentiate`), runs the
fused graph on a plain ``InferenceSession`` with a random output gradient
:math:`\\bar y` and compares every returned gradient with central finite differences of
:math:`\\sum_j \\langle y_j, \\bar y_j \\rangle` computed in float64.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from types import SimpleNamespace

import numpy as np
import onnx
import onnxruntime as ort
from onnx import ModelProto, NodeProto, TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
from onnxruntime.capi import onnxruntime_pybind11_state as ort_errors

from skl_ortgrad.gradient.reverse import differentiate

IR_VERSION = 10
DOUBLE = TensorProto.DOUBLE
_ELEM_TYPES = {
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.bool_): TensorProto.BOOL,
}


@dataclass
class Case:
    """One model to differentiate.

    Attributes
    ----------
    name : str
        Test id.
    model : ModelProto
        The model; ``weights`` are among its initializers.
    feeds : dict
        ``{graph input: value}``.
    inputs, weights : list of str
        The graph inputs and initializers to differentiate.
    weight_values : dict
        ``{weight: value}``, fed to the fused graph (where weights are inputs).
    step, rtol, atol : float
        Finite-difference step and the tolerances of the comparison.
    """

    name: str
    model: ModelProto
    feeds: dict[str, np.ndarray]
    inputs: list[str]
    weights: list[str]
    weight_values: dict[str, np.ndarray] = field(default_factory=dict)
    step: float = 1e-6
    rtol: float = 1e-6
    atol: float = 1e-8
    #: Run ``onnx.checker`` on the fused graph (see ``make_case``'s ``output_shapes``).
    checked: bool = True
    #: A float64 twin of a model computing in float32, for the finite differences.
    twin: ModelProto | None = None

    @property
    def op_types(self) -> set[str]:
        """The operator types of the model's nodes."""
        return {node.op_type for node in self.model.graph.node}

    def __repr__(self) -> str:
        return f"Case({self.name!r})"


def make_case(
    name: str,
    nodes: Sequence[NodeProto],
    inputs: dict[str, np.ndarray | tuple[np.ndarray, list]],
    outputs: Sequence[str] | dict[str, int],
    *,
    weights: dict[str, np.ndarray] | None = None,
    constants: dict[str, np.ndarray] | None = None,
    opset: int = 21,
    domains: Sequence[tuple[str, int]] = (),
    diff: Sequence[str] | None = None,
    output_shapes: bool = True,
    step: float = 1e-6,
    rtol: float = 1e-6,
    atol: float = 1e-8,
) -> Case:
    """A :class:`Case` from nodes and values.

    Parameters
    ----------
    name : str
        Test id; also the prefix of the node names (``<name>_<i>``) that error messages
        quote.
    nodes : list of NodeProto
        The graph's nodes, in topological order.
    inputs : dict
        ``{name: value}`` or ``{name: (value, dims)}``, ``dims`` possibly symbolic
        (``"N"``): graph inputs, typed after the value.
    outputs : list of str or dict
        Graph outputs: names (float64), or ``{name: element type}``.
    weights : dict, optional
        Initializers that are differentiated.
    constants : dict, optional
        Initializers that are not (axes, indices, shapes, bounds).
    opset : int
        Version of the default domain.
    domains : list of (str, int)
        Further opset imports.
    diff : list of str, optional
        Graph inputs to differentiate; all float inputs by default.
    output_shapes : bool
        Declare the outputs' shapes (from ONNX shape inference), as converters do. Without
        them ``<output>_grad`` inputs have no shape either, which ``onnx.checker`` rejects:
        such a case is not checked by it.
    step, rtol, atol : float
        See :class:`Case`.
    """
    weights = dict(weights or {})
    constants = dict(constants or {})
    feeds: dict[str, np.ndarray] = {}
    infos = []
    for input_name, spec in inputs.items():
        value, dims = spec if isinstance(spec, tuple) else (spec, None)
        value = np.asarray(value)
        feeds[input_name] = value
        infos.append(helper.make_tensor_value_info(
            input_name, _ELEM_TYPES[value.dtype], list(value.shape) if dims is None else dims
        ))
    if not isinstance(outputs, dict):
        outputs = dict.fromkeys(outputs, DOUBLE)
    out_infos = [helper.make_tensor_value_info(out, elem, None)
                 for out, elem in outputs.items()]
    named = []
    for i, node in enumerate(nodes):
        if not node.name:
            node.name = f"{name}_{i}"
        named.append(node)
    initializers = [numpy_helper.from_array(np.asarray(v), k)
                    for k, v in {**weights, **constants}.items()]
    graph = helper.make_graph(named, name.replace("-", "_"), infos, out_infos, initializers)
    imports = [helper.make_opsetid("", opset)]
    imports += [helper.make_opsetid(domain, version) for domain, version in domains]
    model = helper.make_model(graph, opset_imports=imports, ir_version=IR_VERSION)
    if output_shapes:
        inferred = onnx.shape_inference.infer_shapes(model).graph.output
        del model.graph.output[:]
        model.graph.output.extend(inferred)
    if diff is None:
        diff = [k for k, v in feeds.items() if v.dtype.kind == "f"]
    return Case(name, model, feeds, list(diff), list(weights),
                {k: np.asarray(v) for k, v in weights.items()}, step, rtol, atol,
                checked=output_shapes)


def session(model: ModelProto, optimized: bool = True) -> ort.InferenceSession:
    """A plain CPU session (no training operators needed); ``optimized=False`` turns
    onnxruntime's graph optimizations off."""
    options = ort.SessionOptions()
    if not optimized:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


class ReferenceSession:
    """onnx's reference evaluator behind the part of ``InferenceSession`` used here."""

    def __init__(self, model: ModelProto) -> None:
        self._evaluator = ReferenceEvaluator(model)
        self._outputs = [SimpleNamespace(name=out.name) for out in model.graph.output]

    def get_outputs(self) -> list[SimpleNamespace]:
        return self._outputs

    def run(self, names: list[str] | None, feeds: dict[str, np.ndarray]) -> list:
        return self._evaluator.run(names, feeds)


def onnxruntime_agrees(case: Case) -> bool:
    """True if onnxruntime runs the case's forward model in float64 like onnx's reference
    evaluator does.

    onnxruntime lacks float64 kernels for some operators (``LeakyRelu``, ``Softplus``;
    ``ReduceL1`` and ``ReduceL2`` before opset 18 in 1.19), rounds others to float32
    (1.19's ``ReduceL2``) or mishandles ``noop_with_empty_axes`` (1.19): finite
    differences through such a forward pass say nothing about the gradient rule, and the
    gradient graph, which contains the forward one, cannot run either.
    """
    model = forward_model(case)
    feeds = {**case.feeds, **case.weight_values}
    try:
        got = session(model).run(None, feeds)
    except (ort_errors.Fail, ort_errors.InvalidArgument, ort_errors.NotImplemented,
            ort_errors.RuntimeException):
        return False
    expected = ReferenceEvaluator(model).run(None, feeds)
    # A model computing in float32 agrees to float32 rounding only.
    float32 = case.twin is not None or any(np.asarray(a).dtype == np.float32 for a in got)
    rtol = 1e-5 if float32 else 1e-12
    return all(np.shape(a) == np.shape(b) and np.allclose(a, b, rtol=rtol, atol=0)
               for a, b in zip(got, expected, strict=True))


def runtime(case: Case) -> Callable[[ModelProto], ort.InferenceSession | ReferenceSession]:
    """What runs the case's graphs: onnxruntime, or the reference evaluator where
    :func:`onnxruntime_agrees` is false."""
    return session if onnxruntime_agrees(case) else ReferenceSession


def forward_model(case: Case, model: ModelProto | None = None) -> ModelProto:
    """The case's model (or ``model``) with its weights as graph inputs."""
    copy = ModelProto()
    copy.CopyFrom(case.model if model is None else model)
    model = copy
    graph = model.graph
    moved = [init for init in graph.initializer if init.name in case.weights]
    kept = [init for init in graph.initializer if init.name not in case.weights]
    del graph.initializer[:]
    graph.initializer.extend(kept)
    graph.input.extend(helper.make_tensor_value_info(init.name, init.data_type, init.dims)
                       for init in moved)
    return model


def output_gradients(case: Case, forward: ort.InferenceSession, seed: int = 1
                     ) -> dict[str, np.ndarray]:
    """A random ``<output>_grad`` per float output, shaped like the output."""
    rng = np.random.default_rng(seed)
    names = [out.name for out in forward.get_outputs()]
    values = forward.run(names, {**case.feeds, **case.weight_values})
    return {name: rng.standard_normal(np.shape(value)).astype(np.asarray(value).dtype)
            for name, value in zip(names, values, strict=True)
            if np.asarray(value).dtype.kind == "f"}


def finite_differences(case: Case, forward: ort.InferenceSession,
                       grads: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    r"""Central differences of :math:`\sum_j \langle y_j, \bar y_j \rangle`, in float64."""
    values = {**case.feeds, **case.weight_values}
    names = list(grads)

    def objective(feed: dict[str, np.ndarray]) -> float:
        outs = forward.run(names, feed)
        return float(sum(np.sum(np.asarray(out, dtype=np.float64) * grads[name])
                         for name, out in zip(names, outs, strict=True)))

    result = {}
    for name in case.inputs + case.weights:
        base = values[name]
        numeric = np.zeros(base.shape, dtype=np.float64)
        for index in np.ndindex(*base.shape):
            sides = []
            for sign in (1.0, -1.0):
                moved = base.copy()
                moved[index] += sign * case.step
                sides.append(objective({**values, name: moved}))
            numeric[index] = (sides[0] - sides[1]) / (2 * case.step)
        result[name] = numeric
    return result


def run_fused(fused: ModelProto, case: Case, grads: dict[str, np.ndarray],
              runner: Callable = session) -> dict[str, np.ndarray]:
    """Every output of ``fused`` by name, fed the case's values and ``grads``."""
    sess = runner(fused)
    feeds = {**case.feeds, **case.weight_values,
             **{f"{name}_grad": value for name, value in grads.items()}}
    names = [out.name for out in sess.get_outputs()]
    return dict(zip(names, sess.run(names, feeds), strict=True))


def check_layout(case: Case, fused: ModelProto, diff_outputs: list[str]) -> None:
    """The fused graph's inputs and outputs are in the documented order."""
    graph = case.model.graph
    inits = {init.name for init in graph.initializer}
    model_inputs = [i.name for i in graph.input if i.name not in inits]
    model_outputs = [o.name for o in graph.output]
    assert [i.name for i in fused.graph.input] == (
        model_inputs + case.weights + [f"{name}_grad" for name in diff_outputs]
    )
    assert [o.name for o in fused.graph.output] == (
        model_outputs + [f"{name}_grad" for name in case.inputs + case.weights]
    )


def check_case(case: Case) -> dict[str, np.ndarray]:
    """Differentiate ``case`` with the ``"onnx"`` backend and compare with finite
    differences; return the gradients (``{name: value}``)."""
    fused, diff_outputs = differentiate(case.model, case.weights, case.inputs)
    if case.checked:
        onnx.checker.check_model(fused)
    # Standard operators only: the graph must run on any onnxruntime.
    assert {node.domain for node in fused.graph.node} <= {"", "ai.onnx"}
    check_layout(case, fused, diff_outputs)

    runner = runtime(case)
    forward = runner(forward_model(case))
    grads = output_gradients(case, forward)
    assert list(grads) == diff_outputs
    results = run_fused(fused, case, grads, runner)
    expected_outputs = forward.run(list(grads), {**case.feeds, **case.weight_values})
    for name, value in zip(grads, expected_outputs, strict=True):
        np.testing.assert_allclose(results[name], value, rtol=1e-12, atol=0)

    if case.twin is not None:
        forward = runner(forward_model(case, case.twin))
    numeric = finite_differences(case, forward, grads)
    gradients = {}
    for name in case.inputs + case.weights:
        analytic = results[f"{name}_grad"]
        reference = {**case.feeds, **case.weight_values}[name]
        assert analytic.shape == reference.shape, name
        assert analytic.dtype == reference.dtype, name
        np.testing.assert_allclose(analytic, numeric[name], rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case.name}: gradient of {name!r}")
        gradients[name] = analytic
    return gradients


def as_float32(case: Case) -> Case:
    """``case`` with its model and values in float32 (:func:`to_float32`)."""

    def cast(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {k: v.astype(np.float32) if v.dtype == np.float64 else v
                for k, v in values.items()}

    return replace(case, name=f"{case.name}-float32", model=to_float32(case.model),
                   feeds=cast(case.feeds), weight_values=cast(case.weight_values), twin=None)


def to_float32(model: ModelProto) -> ModelProto:
    """A copy of ``model`` with every float64 tensor, constant and cast made float32."""
    result = ModelProto()
    result.CopyFrom(model)
    graph = result.graph
    for info in (*graph.input, *graph.output, *graph.value_info):
        if info.type.tensor_type.elem_type == DOUBLE:
            info.type.tensor_type.elem_type = TensorProto.FLOAT
    for index, init in enumerate(graph.initializer):
        if init.data_type == DOUBLE:
            value = numpy_helper.to_array(init).astype(np.float32)
            graph.initializer[index].CopyFrom(numpy_helper.from_array(value, init.name))
    for node in graph.node:
        for att in node.attribute:
            if node.op_type == "Cast" and att.name == "to" and att.i == DOUBLE:
                att.i = TensorProto.FLOAT
            if att.type == onnx.AttributeProto.TENSOR and att.t.data_type == DOUBLE:
                value = numpy_helper.to_array(att.t).astype(np.float32)
                att.t.CopyFrom(numpy_helper.from_array(value, att.t.name))
    return result
