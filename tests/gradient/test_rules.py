"""Every gradient rule of the ``"onnx"`` backend against float64 finite differences.

The models are built by hand (:mod:`_gradient_cases`), differentiated by
:func:`skl_ortgrad.gradient.reverse.differentiate` and run on a plain onnxruntime
``InferenceSession``; the gradients it returns must match central differences of
:math:`\\sum_j \\langle y_j, \\bar y_j \\rangle` for a random output gradient
:math:`\\bar y`.
"""

from __future__ import annotations

import numpy as np
import pytest
from _gradient_cases import CASES, distinct, reduce_node
from _gradient_harness import (
    as_float32,
    check_case,
    forward_model,
    make_case,
    output_gradients,
    run_fused,
    runtime,
    session,
)
from onnx import TensorProto
from onnx.helper import make_node

from skl_ortgrad.gradient.reverse import differentiate
from skl_ortgrad.gradient.rules import GRADIENT_RULES, NO_GRADIENT


def test_case_names_are_unique():
    names = [case.name for case in CASES]
    assert len(names) == len(set(names))


def test_every_rule_has_a_case():
    # A newly registered rule without a case here fails this test.
    covered = set().union(*(case.op_types for case in CASES))
    assert sorted(set(GRADIENT_RULES) - covered) == []


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_gradient_matches_finite_differences(case):
    gradients = check_case(case)
    assert set(gradients) == set(case.inputs + case.weights)


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_float32_gradient_matches_float64(case):
    # Some rules write other operators for float64 than for float32 (MatMul's batched
    # products): the float32 graph must give the float64 gradients to float32 precision.
    single = as_float32(case)
    results = {}
    for variant in (case, single):
        fused, _ = differentiate(variant.model, variant.weights, variant.inputs)
        runner = runtime(variant)
        grads = output_gradients(variant, runner(forward_model(variant)))
        results[variant.name] = run_fused(fused, variant, grads, runner)
    for name in case.inputs + case.weights:
        value = results[single.name][f"{name}_grad"]
        assert value.dtype == np.float32
        np.testing.assert_allclose(value, results[case.name][f"{name}_grad"],
                                   rtol=1e-4, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
@pytest.mark.parametrize(("axes", "keepdims", "opset"), [
    ([1], 1, 18), ([1], 0, 18), (None, 0, 18), ([0], 1, 13), ([-1], 0, 17),
])
def test_reduce_extremum_shares_ties(op, axes, keepdims, opset):
    # Finite differences are meaningless at a tie; the documented rule is that the tied
    # elements share the gradient equally. Two values only: every way of reducing meets
    # ties of both extrema.
    x = np.array([[[1.0, 1.0], [0.0, 1.0], [1.0, 0.0]],
                  [[1.0, 0.0], [0.0, 0.0], [1.0, 1.0]]]) * 1.5 - 0.25
    node, constants = reduce_node(op, opset, axes, keepdims=keepdims)
    case = make_case(f"{op}-ties", [node], {"X": x}, ["Y"], constants=constants, opset=opset)
    fused, _ = differentiate(case.model, [], ["X"])
    grads = output_gradients(case, session(forward_model(case)))
    gradient = run_fused(fused, case, grads)["X_grad"]

    reduce = np.max if op == "ReduceMax" else np.min
    axis = None if axes is None else tuple(a % x.ndim for a in axes)
    extremum = reduce(x, axis=axis, keepdims=True)
    g = grads["Y"].reshape(extremum.shape)
    hit = (x == extremum).astype(np.float64)
    expected = g * hit / hit.sum(axis=axis, keepdims=True)
    assert hit.sum() > extremum.size  # the example has ties
    np.testing.assert_allclose(gradient, expected, rtol=1e-12, atol=0)


def _unbroadcast(value: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """``value`` summed over the axes along which an array of ``shape`` was broadcast."""
    lead = value.ndim - len(shape)
    value = value.sum(axis=tuple(range(lead)))
    return value.sum(axis=tuple(i for i, dim in enumerate(shape) if dim == 1), keepdims=True)


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_max_min_ties_go_to_the_first_operand(op):
    # Finite differences are meaningless at a tie; the documented rule gives the whole
    # gradient to the first operand that reaches the extremum.
    values = {"A": np.array([[1.0, 2.0, 0.0], [2.0, 0.5, 2.0]]),
              "B": np.array([2.0, 2.0, 0.0]),
              "C": np.array([[0.0], [2.0]])}
    case = make_case(f"{op}-ties", [make_node(op, list(values), ["Y"])], values, ["Y"])
    fused, _ = differentiate(case.model, [], list(values))
    grads = output_gradients(case, session(forward_model(case)))
    gradients = run_fused(fused, case, grads)

    y = (np.maximum if op == "Max" else np.minimum).reduce(
        np.broadcast_arrays(*values.values()))
    taken = np.zeros(y.shape, dtype=bool)
    for name, value in values.items():
        first = (np.broadcast_to(value, y.shape) == y) & ~taken
        taken |= first
        expected = _unbroadcast(grads["Y"] * first, value.shape)
        np.testing.assert_allclose(gradients[f"{name}_grad"], expected, rtol=1e-12, atol=0)
    assert taken.all()


@pytest.mark.parametrize("op", ["Relu", "LeakyRelu"])
def test_relu_mask_is_exact_in_float32(op):
    """float32 masks [x > 0] with one HardSigmoid of x scaled by 2^127 (slope 2^127): 0 at
    0, -0 and below, 1 from the smallest subnormal up to infinity, the output gradient
    passed unchanged (Relu) or times alpha (LeakyRelu)."""
    special = np.float32([0.0, -0.0, 1e-45, -1e-45, 1e-40, 1.1754942e-38, 1e-30, 2.0**-127,
                          1.0, 3e38, np.inf, -np.inf, -3e38, -1.0])
    x = np.concatenate([special, np.random.default_rng(0).standard_normal(18)
                        .astype(np.float32)]).reshape(4, 8)
    case = make_case(f"{op}-mask", [make_node(op, ["X"], ["Y"], alpha=0.25)
                                    if op == "LeakyRelu" else make_node(op, ["X"], ["Y"])],
                     {"X": x}, {"Y": TensorProto.FLOAT})
    fused, _ = differentiate(case.model, [], ["X"])
    assert "HardSigmoid" in {node.op_type for node in fused.graph.node}
    upstream = {"Y": np.random.default_rng(1).standard_normal(x.shape).astype(np.float32)}
    gradient = run_fused(fused, case, upstream)["X_grad"]
    expected = np.where(x > 0, upstream["Y"],
                        np.float32(0.25) * upstream["Y"] if op == "LeakyRelu" else 0)
    np.testing.assert_array_equal(gradient, expected.astype(np.float32))


def test_no_gradient_ops_give_zero():
    # Sign and Floor feed outputs: their gradient is zero (not an error).
    x = distinct(2, 3, offset=0.03)
    case = make_case("no-gradient",
                     [make_node("Sign", ["X"], ["S"]), make_node("Floor", ["X"], ["F"]),
                      make_node("Mul", ["X", "X"], ["Q"]), make_node("Add", ["Q", "F"], ["Y"])],
                     {"X": x}, ["S", "Y"])
    assert {"Sign", "Floor"} <= NO_GRADIENT
    # Finite differences see Sign and Floor as constant away from their jumps.
    check_case(case)
    fused, _ = differentiate(case.model, [], ["X"])
    only_sign = {"S": np.ones_like(x), "Y": np.zeros_like(x)}
    assert not run_fused(fused, case, only_sign)["X_grad"].any()


def test_no_gradient_op_alone_gives_zeros():
    case = make_case("sign-only", [make_node("Sign", ["X"], ["Y"])], {"X": distinct(3)}, ["Y"])
    fused, outputs = differentiate(case.model, [], ["X"])
    assert outputs == ["Y"]
    gradient = run_fused(fused, case, {"Y": np.ones(3)})["X_grad"]
    assert gradient.shape == (3,)
    assert not gradient.any()


@pytest.mark.parametrize(("op", "attrs", "outputs"), [
    ("Einsum", {"equation": "ij->i"}, ["Y"]),
    ("TopK", {}, ["Y", "I"]),
])
def test_op_without_rule_is_an_error(op, attrs, outputs):
    inputs = ["X", "k"] if op == "TopK" else ["X"]
    node = make_node(op, inputs, outputs, name="the_node", **attrs)
    types = {"Y": TensorProto.DOUBLE, "I": TensorProto.INT64}
    case = make_case("unsupported", [node], {"X": np.ones((2, 3))},
                     {name: types[name] for name in outputs}, constants={"k": np.array([2])})
    with pytest.raises(NotImplementedError, match=rf"'{op}'.*'the_node'"):
        differentiate(case.model, [], ["X"])


def test_other_domain_is_an_error():
    node = make_node("Scaler", ["X"], ["Y"], name="scale", domain="ai.onnx.ml",
                     offset=[0.5, 0.0, 1.0], scale=[2.0, 1.0, 0.5])
    case = make_case("ml", [node], {"X": np.ones((2, 3))}, {"Y": TensorProto.FLOAT},
                     domains=[("ai.onnx.ml", 3)])
    with pytest.raises(NotImplementedError, match=r"ai\.onnx\.ml\.Scaler.*'scale'"):
        differentiate(case.model, [], ["X"])


def test_node_off_the_path_needs_no_rule():
    # An unsupported operator reading only constants is not differentiated.
    case = make_case("off-path",
                     [make_node("Einsum", ["K"], ["E"], equation="ij->i"),
                      make_node("Mul", ["X", "E"], ["Y"])],
                     {"X": np.ones((2, 3))}, ["Y"], constants={"K": np.ones((3, 3))})
    check_case(case)


def test_outputs_without_declared_shapes():
    # Shapes then come from shape inference only; the fused graph still runs and is right
    # (onnx.checker rejects it: its <output>_grad inputs copy the shapeless outputs).
    case = make_case("undeclared", [make_node("MatMul", ["X", "W"], ["H"]),
                                    make_node("Softmax", ["H"], ["Y"])],
                     {"X": (np.arange(12.0).reshape(4, 3) / 10, ["N", 3])}, ["Y"],
                     weights={"W": np.linspace(-1, 1, 6).reshape(3, 2)}, output_shapes=False)
    assert not case.model.graph.output[0].type.tensor_type.HasField("shape")
    assert set(check_case(case)) == {"X", "W"}


def test_old_opset_is_an_error():
    case = make_case("opset12", [make_node("Tanh", ["X"], ["Y"])], {"X": np.ones(3)}, ["Y"],
                     opset=12)
    with pytest.raises(ValueError, match="opset"):
        differentiate(case.model, [], ["X"])


def test_unknown_name_is_an_error():
    case = make_case("unknown", [make_node("Tanh", ["X"], ["Y"])], {"X": np.ones(3)}, ["Y"])
    with pytest.raises(ValueError, match="W"):
        differentiate(case.model, ["W"], ["X"])
