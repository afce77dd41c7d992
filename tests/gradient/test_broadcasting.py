"""Property-based gradient checks: broadcasting element-wise operators and reductions over
random shapes, against float64 finite differences.

Shapes are drawn with axes of size 1 and missing leading axes; operands are graph inputs
(with static or symbolic dimensions, so that broadcasts are resolved while building or at
run time) or differentiated initializers. The examples are derandomized and few, so the
file stays fast.
"""

from __future__ import annotations

import numpy as np
from _gradient_cases import REDUCE_OPS, reduce_node
from _gradient_harness import check_case, make_case, run_fused
from hypothesis import example, given, settings
from hypothesis import strategies as st
from onnx.helper import make_node

from skl_ortgrad.gradient.reverse import differentiate

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True, database=None)

#: Operator -> (least, most) operands.
ELEMENTWISE = {"Add": (2, 2), "Sub": (2, 2), "Mul": (2, 2), "Div": (2, 2), "Pow": (2, 2),
               "Max": (2, 3), "Min": (2, 3), "Sum": (1, 3), "Where": (2, 2)}


@st.composite
def broadcast_shapes(draw, count: int) -> list[list[int]]:
    """``count`` shapes broadcasting together: suffixes of one shape, some axes set to 1."""
    # Drawn so that hypothesis' preference for small values favours full shapes.
    rank = draw(st.sampled_from([2, 3, 1, 0]))
    full = draw(st.lists(st.integers(2, 3), min_size=rank, max_size=rank))
    shapes = []
    for _ in range(count):
        own = rank - draw(st.integers(0, rank))
        ones = draw(st.lists(st.booleans(), min_size=own, max_size=own))
        shapes.append([1 if one else dim
                       for dim, one in zip(full[rank - own:], ones, strict=True)])
    return shapes


def declared(shape: list[int], operand: int, mode: str) -> list[int | str]:
    """The dimensions declared for an input: static, symbolic with one name per aligned axis
    (shape inference can match them), or all symbolic with names of their own (it
    cannot: every broadcast is resolved at run time)."""
    if mode == "static":
        return list(shape)
    if mode == "shared":
        return [f"d{len(shape) - i}" if dim > 1 else 1 for i, dim in enumerate(shape)]
    return [f"x{operand}_{i}" for i in range(len(shape))]


def operand_values(op: str, shapes: list[list[int]], rng: np.random.Generator
                   ) -> list[np.ndarray]:
    """Values keeping the operator smooth: no zero divisor, a positive base, no ties."""
    if op == "Div":
        return [rng.standard_normal(shapes[0]),
                rng.choice([-1.0, 1.0], shapes[1]) * rng.uniform(0.5, 2.0, shapes[1])]
    if op == "Pow":
        return [rng.uniform(0.5, 2.0, shapes[0]), rng.uniform(-1.5, 1.5, shapes[1])]
    if op in ("Max", "Min"):
        # Multiples of 1/7 shifted by 0.013 per operand: two operands differ by 0.013 at
        # least, far more than the finite-difference step.
        return [rng.integers(-7, 8, shape) / 7 + 0.013 * i for i, shape in enumerate(shapes)]
    return [rng.standard_normal(shape) for shape in shapes]


@st.composite
def elementwise_problems(draw):
    op = draw(st.sampled_from(sorted(ELEMENTWISE)))
    low, high = ELEMENTWISE[op]
    count = draw(st.integers(low, high))
    # Where also broadcasts its condition.
    shapes = draw(broadcast_shapes(count + (op == "Where")))
    # An operand made an initializer, or none.
    weight = draw(st.sampled_from([-1, *range(count)]))
    seed = draw(st.integers(0, 2**32 - 1))
    return op, shapes, weight, seed


@SETTINGS
@given(elementwise_problems())
# Broadcasts in both directions, along inner and leading axes, always among the examples.
@example(("Mul", [[3, 1], [1, 2]], -1, 0))
@example(("Where", [[2, 1], [1, 3], [3]], -1, 1))
@example(("Max", [[2, 1, 3], [3], [2, 1, 1]], 1, 2))
@example(("Sum", [[3, 1], [2, 1, 2], []], 2, 3))
@example(("Sub", [[2, 3], [2, 1, 3]], 0, 4))
def test_broadcasting_elementwise(problem):
    # Each example is checked with static dimensions, symbolic ones shape inference can
    # match, and symbolic ones it cannot (broadcasts resolved at run time).
    for mode in ("static", "shared", "symbolic"):
        _check_elementwise(*problem, mode)


def _check_elementwise(op, shapes, weight, seed, mode):
    rng = np.random.default_rng(seed)
    constants = {}
    names = [f"X{i}" for i in range(len(shapes))]
    if op == "Where":
        constants["C"] = rng.random(shapes[0]) < 0.5
        shapes = shapes[1:]
        names = names[:-1]
    values = operand_values(op, shapes, rng)
    inputs = {name: (value, declared(list(value.shape), i, mode))
              for i, (name, value) in enumerate(zip(names, values, strict=True))
              if i != weight}
    weights = {names[weight]: values[weight]} if weight >= 0 else {}
    node_inputs = (["C"] if op == "Where" else []) + names
    case = make_case(f"{op}-broadcast", [make_node(op, node_inputs, ["Y"])], inputs, ["Y"],
                     weights=weights, constants=constants)
    gradients = check_case(case)
    for name, value in zip(names, values, strict=True):
        assert gradients[name].shape == value.shape


@st.composite
def reduction_problems(draw):
    op = draw(st.sampled_from(REDUCE_OPS))
    rank = draw(st.integers(1, 3))
    shape = draw(st.lists(st.integers(1, 3), min_size=rank, max_size=rank))
    axes = draw(st.none() | st.lists(st.integers(-rank, rank - 1), max_size=rank,
                                     unique_by=lambda axis: axis % rank))
    keepdims = draw(st.integers(0, 1))
    noop = draw(st.integers(0, 1))
    opset = draw(st.sampled_from([13, 18]))
    symbolic = draw(st.booleans())
    seed = draw(st.integers(0, 2**32 - 1))
    return op, shape, axes, keepdims, noop, opset, symbolic, seed


@SETTINGS
@given(reduction_problems())
def test_reductions(problem):
    op, shape, axes, keepdims, noop, opset, symbolic, seed = problem
    rng = np.random.default_rng(seed)
    if op in ("ReduceMax", "ReduceMin"):
        # No ties: distinct values at least 0.1 apart.
        x = rng.permutation(int(np.prod(shape))).reshape(shape) * 0.1
    elif op == "ReduceL1":
        x = rng.choice([-1.0, 1.0], shape) * rng.uniform(0.2, 1.5, shape)
    else:
        x = rng.standard_normal(shape)
    attributes = {"keepdims": keepdims, "noop_with_empty_axes": noop}
    if opset < 18 and op != "ReduceSum":
        # Before opset 18 only ReduceSum has noop_with_empty_axes, and an empty axes
        # attribute cannot be written: no attribute means every axis.
        del attributes["noop_with_empty_axes"]
        axes = axes or None
    node, constants = reduce_node(op, opset, axes, **attributes)
    dims = ["N", *shape[1:]] if symbolic else list(shape)
    case = make_case(f"{op}-random", [node], {"X": (x, dims)}, ["Y"], constants=constants,
                     opset=opset)
    assert check_case(case)["X"].shape == x.shape


def test_a_bias_gradient_is_one_gemm():
    """[n, k] + [1, k] with a static n (the static batch graphs): the bias's gradient is
    1^T G, one Gemm (onnxruntime's ReduceSum over the rows is 8 times slower), equal to
    numpy's column sums; finite differences agree."""
    x = np.random.default_rng(0).standard_normal((5, 3))
    bias = np.random.default_rng(1).standard_normal((1, 3))
    case = make_case("bias", [make_node("Add", ["X", "B"], ["Y"])], {"X": x, "B": bias}, ["Y"])
    check_case(case)
    fused, _ = differentiate(case.model, [], ["X", "B"])
    ops = [node.op_type for node in fused.graph.node]
    assert "Gemm" in ops and "ReduceSum" not in ops
    upstream = {"Y": np.random.default_rng(2).standard_normal((5, 3))}
    gradients = run_fused(fused, case, upstream)
    np.testing.assert_allclose(gradients["B_grad"], upstream["Y"].sum(axis=0, keepdims=True),
                               rtol=1e-12, atol=0)
    np.testing.assert_array_equal(gradients["X_grad"], upstream["Y"])
