"""The table of small models, one or more per operator with a gradient rule.

Every case is float64 with small static shapes unless its name says ``symbolic`` (a first
dimension ``"N"``, so that broadcasts are resolved at run time). Points where an operator
is not differentiable (kinks of ``Relu``/``Abs``/``Clip``, ties of ``Max``/``Min``/
``ReduceMax``, zero for ``Log``/``Sqrt``) are kept away from by construction: finite
differences straddling a kink would disagree with any correct rule.
"""

from __future__ import annotations

import numpy as np
from _gradient_harness import Case, make_case
from onnx import TensorProto
from onnx.helper import make_node, make_tensor

_RNG = np.random.default_rng(20240611)
FLOAT = TensorProto.FLOAT
DOUBLE = TensorProto.DOUBLE


def normal(*shape: int) -> np.ndarray:
    """Standard normal float64 values."""
    return _RNG.standard_normal(shape)


def positive(*shape: int, low: float = 0.5, high: float = 2.0) -> np.ndarray:
    """Values in [low, high] (domains of Log, Sqrt, Pow's base, divisors)."""
    return _RNG.uniform(low, high, shape)


def away_from_zero(*shape: int, margin: float = 0.2) -> np.ndarray:
    """Values of both signs at least ``margin`` from 0 (kinks of Relu, Abs, L1)."""
    return _RNG.choice([-1.0, 1.0], shape) * _RNG.uniform(margin, 1.5, shape)


def distinct(*shape: int, offset: float = 0.0) -> np.ndarray:
    """Values at least 0.1 apart from each other (no ties for Max, Min, ReduceMax)."""
    size = int(np.prod(shape))
    return (_RNG.permutation(size) * 0.1 - 0.05 * size + offset).reshape(shape)


def i64(*values) -> np.ndarray:
    return np.asarray(values, dtype=np.int64)


def unary(op: str, x: np.ndarray, **attrs) -> Case:
    return make_case(op.lower(), [make_node(op, ["X"], ["Y"], **attrs)], {"X": x}, ["Y"])


def binary(name: str, op: str, a, b, *, weights=(), **kw) -> Case:
    """``Y = op(A, B)``; operands named in ``weights`` are differentiated initializers."""
    values = {"A": a, "B": b}
    return make_case(
        name, [make_node(op, ["A", "B"], ["Y"])],
        {k: v for k, v in values.items() if k not in weights}, ["Y"],
        weights={k: np.asarray(v[0] if isinstance(v, tuple) else v)
                 for k, v in values.items() if k in weights}, **kw,
    )


def arithmetic_cases() -> list[Case]:
    cases = [
        binary("add-static", "Add", normal(2, 3), normal(3)),
        binary("add-symbolic", "Add", (normal(4, 3), ["N", 3]), normal(1, 3)),
        binary("add-weight-symbolic", "Add", (normal(4, 3), ["N", 3]), normal(3),
               weights=("B",)),
        binary("sub-static", "Sub", normal(2, 3), normal(2, 1)),
        binary("sub-leading", "Sub", normal(3), normal(2, 3)),
        binary("mul-symbolic", "Mul", (normal(4, 3), ["N", 3]), normal(3)),
        binary("mul-scalar", "Mul", normal(2, 3), normal()),
        binary("div-both", "Div", normal(2, 3), away_from_zero(3, margin=0.5)),
        binary("div-symbolic-weight", "Div", (normal(4, 3), ["N", 3]),
               away_from_zero(1, 3, margin=0.5), weights=("B",)),
        # The same tensor twice in one node: both partial gradients add up.
        make_case("mul-square", [make_node("Mul", ["X", "X"], ["Y"])], {"X": normal(2, 3)},
                  ["Y"]),
        unary("Neg", normal(2, 3)),
        make_case("sum-3-broadcast", [make_node("Sum", ["A", "B", "C"], ["Y"])],
                  {"A": normal(2, 3), "B": normal(3), "C": normal(2, 1)}, ["Y"]),
        make_case("sum-3-symbolic", [make_node("Sum", ["A", "B", "C"], ["Y"])],
                  {"A": (normal(4, 3), ["N", 3]), "B": normal(1, 3)}, ["Y"],
                  weights={"C": normal(3)}),
        binary("pow-input-exponent", "Pow", positive(2, 3), normal(3)),
        make_case("pow-constant-exponent", [make_node("Pow", ["X", "P"], ["Y"])],
                  {"X": normal(2, 3)}, ["Y"], constants={"P": np.array(3.0)}),
        make_case("pow-int-exponent", [make_node("Pow", ["X", "P"], ["Y"])],
                  {"X": normal(2, 3)}, ["Y"], constants={"P": i64(2)}),
        make_case("max-2", [make_node("Max", ["A", "B"], ["Y"])],
                  {"A": distinct(2, 3), "B": distinct(3, offset=0.03)}, ["Y"]),
        make_case("max-3", [make_node("Max", ["A", "B", "C"], ["Y"])],
                  {"A": distinct(2, 3), "B": distinct(2, 1, offset=0.03),
                   "C": distinct(3, offset=0.06)}, ["Y"]),
        make_case("min-2", [make_node("Min", ["A", "B"], ["Y"])],
                  {"A": distinct(2, 3), "B": distinct(2, 3, offset=0.03)}, ["Y"]),
        make_case("min-3-symbolic", [make_node("Min", ["A", "B", "C"], ["Y"])],
                  {"A": (distinct(4, 3), ["N", 3]), "B": distinct(1, 3, offset=0.03)}, ["Y"],
                  weights={"C": distinct(3, offset=0.06)}),
        make_case("where", [make_node("Where", ["C", "A", "B"], ["Y"])],
                  {"A": normal(2, 3), "B": normal(3)}, ["Y"],
                  constants={"C": np.array([[True, False, True], [False, False, True]])}),
        make_case("where-broadcast-condition", [make_node("Where", ["C", "A", "B"], ["Y"])],
                  {"A": (normal(4, 1), ["N", 1]), "B": normal(3)}, ["Y"],
                  constants={"C": np.array([True, False, True])}),
    ]
    # Clip: values stay at least 0.05 away from the bounds -0.5 and 0.5.
    x = np.array([[-1.2, -0.45, 0.1], [0.3, 0.7, -0.6]])
    bounds = {"lo": np.array(-0.5), "hi": np.array(0.5)}
    for name, ins in (("clip-both", ["X", "lo", "hi"]), ("clip-min", ["X", "lo"]),
                      ("clip-max", ["X", "", "hi"]), ("clip-none", ["X"])):
        cases.append(make_case(name, [make_node("Clip", ins, ["Y"])], {"X": x}, ["Y"],
                               constants={k: v for k, v in bounds.items() if k in ins}))
    # Differentiated bounds take the gradient of the elements they replace.
    cases.append(make_case("clip-bounds-differentiated",
                           [make_node("Clip", ["X", "lo", "hi"], ["Y"])],
                           {"X": x, **bounds}, ["Y"]))
    return cases


def activation_cases() -> list[Case]:
    cases = [
        unary("Identity", normal(2, 3)),
        unary("Relu", away_from_zero(2, 3)),
        unary("LeakyRelu", away_from_zero(2, 3), alpha=0.2),
        make_case("leakyrelu-default-alpha", [make_node("LeakyRelu", ["X"], ["Y"])],
                  {"X": away_from_zero(3, 2)}, ["Y"]),
        unary("Tanh", normal(2, 3)),
        unary("Sigmoid", normal(2, 3)),
        unary("Softplus", normal(2, 3)),
        unary("Exp", normal(2, 3)),
        unary("Log", positive(2, 3)),
        unary("Sqrt", positive(2, 3)),
        unary("Reciprocal", away_from_zero(2, 3, margin=0.5)),
        unary("Abs", away_from_zero(2, 3)),
    ]
    # float64 -> float32 -> float64: finite differences of the float32 computation would
    # be dominated by its rounding; they are taken on a float64 twin of the model, and the
    # comparison has float32 tolerances.
    x = normal(2, 3)
    f32 = {"rtol": 1e-5, "atol": 1e-6}
    for name, to_type, like in (("cast-chain", FLOAT, np.zeros(1, np.float32)),
                                ("cast-chain-twin", DOUBLE, np.zeros(1))):
        cases.append(make_case(
            name, [make_node("Cast", ["X"], ["H"], to=to_type),
                   make_node("Tanh", ["H"], ["T"]),
                   make_node("Cast", ["T"], ["C"], to=DOUBLE),
                   make_node("CastLike", ["C", "like"], ["L"]),
                   make_node("Mul", ["L", "L"], ["S"]),
                   make_node("CastLike", ["S", "X"], ["Y"])],
            {"X": x}, ["Y"], constants={"like": like}, **f32))
    twin = cases.pop()
    cases[-1].twin = twin.model
    return cases


def linalg_cases() -> list[Case]:
    cases = [
        binary("matmul-2d", "MatMul", normal(3, 4), normal(4, 2)),
        binary("matmul-symbolic-weight", "MatMul", (normal(5, 4), ["N", 4]), normal(4, 2),
               weights=("B",)),
        binary("matmul-3d-2d", "MatMul", normal(2, 3, 4), normal(4, 2)),
        binary("matmul-2d-3d", "MatMul", normal(3, 4), normal(2, 4, 2)),
        binary("matmul-broadcast-batch", "MatMul", normal(1, 3, 4), normal(5, 4, 2)),
        binary("matmul-4d-3d", "MatMul", normal(2, 1, 2, 3), normal(3, 3, 2)),
        binary("matmul-1d-2d", "MatMul", normal(4), normal(4, 2)),
        binary("matmul-2d-1d", "MatMul", normal(3, 4), normal(4)),
        binary("matmul-1d-1d", "MatMul", normal(4), normal(4)),
        binary("matmul-1d-3d", "MatMul", normal(4), normal(2, 4, 3)),
        binary("matmul-3d-1d", "MatMul", normal(2, 3, 4), normal(4)),
        binary("matmul-symbolic-3d", "MatMul", (normal(2, 3, 4), ["N", 3, 4]), normal(4, 2),
               weights=("B",)),
    ]
    m, k, n = 3, 4, 2
    c_shapes = {"n": [n], "1": [1], "mn": [m, n], "scalar": []}
    for (trans_a, trans_b), c_kind in zip(((0, 0), (0, 1), (1, 0), (1, 1)), c_shapes,
                                          strict=True):
        a = normal(k, m) if trans_a else normal(m, k)
        b = normal(n, k) if trans_b else normal(k, n)
        cases.append(make_case(
            f"gemm-tA{trans_a}-tB{trans_b}-C{c_kind}",
            [make_node("Gemm", ["A", "B", "C"], ["Y"], alpha=0.7, beta=-1.3,
                       transA=trans_a, transB=trans_b)],
            {"A": a, "B": b, "C": normal(*c_shapes[c_kind])}, ["Y"]))
    cases += [
        make_case("gemm-no-c", [make_node("Gemm", ["A", "B"], ["Y"], transB=1)],
                  {"A": normal(3, 4), "B": normal(2, 4)}, ["Y"]),
        make_case("gemm-symbolic-weights",
                  [make_node("Gemm", ["X", "W", "b"], ["Y"], transB=1, alpha=2.0)],
                  {"X": (normal(5, 4), ["N", 4])}, ["Y"],
                  weights={"W": normal(2, 4), "b": normal(2)}),
        make_case("gemm-c-constant", [make_node("Gemm", ["A", "B", "C"], ["Y"], beta=0.5)],
                  {"A": normal(3, 4), "B": normal(4, 2)}, ["Y"], constants={"C": normal(3, 1)}),
    ]
    return cases


REDUCE_OPS = ("ReduceSum", "ReduceMean", "ReduceSumSquare", "ReduceL1", "ReduceL2",
              "ReduceLogSumExp", "ReduceMax", "ReduceMin")


def _reduce_input(op: str, *shape: int) -> np.ndarray:
    if op in ("ReduceMax", "ReduceMin"):
        return distinct(*shape)
    if op == "ReduceL1":
        return away_from_zero(*shape)
    return normal(*shape)


def reduce_node(op: str, opset: int, axes: list[int] | None, **attrs):
    """A reduction node and its constants: axes as an input from opset 18 (13 for
    ReduceSum), as an attribute before."""
    if axes is None:
        return make_node(op, ["X"], ["Y"], **attrs), {}
    if op == "ReduceSum" or opset >= 18:
        return make_node(op, ["X", "axes"], ["Y"], **attrs), {"axes": i64(*axes)}
    return make_node(op, ["X"], ["Y"], axes=axes, **attrs), {}


def reduction_cases() -> list[Case]:
    cases = []
    variants = [
        # (id, opset, axes, attributes, input dims)
        ("axis1-keep", 18, [1], {"keepdims": 1}, None),
        ("axes-neg-drop", 18, [-1, 0], {"keepdims": 0}, None),
        ("attr-axis2-drop", 13, [2], {"keepdims": 0}, None),
        ("attr-axes01-keep", 17, [0, 1], {"keepdims": 1}, None),
        ("all-keep", 18, None, {}, None),
        ("all-drop", 18, None, {"keepdims": 0}, None),
        ("all-drop-opset13", 13, None, {"keepdims": 0}, None),
        ("noop", 18, None, {"noop_with_empty_axes": 1}, None),
        ("noop-empty-axes", 18, [], {"noop_with_empty_axes": 1}, None),
        ("symbolic-axis0-drop", 18, [0], {"keepdims": 0}, ["N", 3, 4]),
        ("symbolic-axis2-keep", 18, [2], {"keepdims": 1}, ["N", 3, 4]),
    ]
    for op in REDUCE_OPS:
        for variant, opset, axes, attrs, dims in variants:
            node, constants = reduce_node(op, opset, axes, **attrs)
            if variant == "noop-empty-axes":
                # An empty axes input (not a missing one) with noop_with_empty_axes=1.
                node, constants = make_node(op, ["X", "axes"], ["Y"], **attrs), {
                    "axes": np.zeros(0, np.int64)}
            x = _reduce_input(op, 2, 3, 4)
            cases.append(make_case(f"{op.lower()}-{variant}", [node],
                                   {"X": x if dims is None else (x, dims)}, ["Y"],
                                   constants=constants, opset=opset))
    return cases


def softmax_cases() -> list[Case]:
    cases = []
    for op in ("Softmax", "LogSoftmax"):
        for axis in (-1, 0):
            cases.append(make_case(f"{op.lower()}-axis{axis}",
                                   [make_node(op, ["X"], ["Y"], axis=axis)],
                                   {"X": normal(3, 4)}, ["Y"]))
        cases.append(make_case(f"{op.lower()}-symbolic-default-axis",
                               [make_node(op, ["X"], ["Y"])],
                               {"X": (normal(5, 4), ["N", 4])}, ["Y"], opset=13))
        cases.append(make_case(f"{op.lower()}-3d-axis1", [make_node(op, ["X"], ["Y"], axis=1)],
                               {"X": normal(2, 3, 2)}, ["Y"]))
    return cases


def shape_cases() -> list[Case]:
    cases = [
        make_case("transpose-perm", [make_node("Transpose", ["X"], ["Y"], perm=[1, 2, 0])],
                  {"X": normal(2, 3, 4)}, ["Y"]),
        make_case("transpose-no-perm", [make_node("Transpose", ["X"], ["Y"])],
                  {"X": normal(2, 3, 4)}, ["Y"]),
        make_case("concat-axis1", [make_node("Concat", ["A", "K", "B"], ["Y"], axis=1)],
                  {"A": normal(2, 1), "B": normal(2, 3)}, ["Y"], constants={"K": normal(2, 2)}),
        make_case("concat-negative-axis", [make_node("Concat", ["A", "B"], ["Y"], axis=-1)],
                  {"A": normal(2, 2, 1)}, ["Y"], weights={"B": normal(2, 2, 3)}),
        make_case("concat-symbolic-axis0", [make_node("Concat", ["A", "B"], ["Y"], axis=0)],
                  {"A": (normal(3, 2), ["N", 2]), "B": normal(2, 2)}, ["Y"]),
        make_case("split-sizes", [make_node("Split", ["X", "sizes"], ["Y1", "Y2"], axis=1)],
                  {"X": normal(2, 5)}, ["Y1", "Y2"], constants={"sizes": i64(2, 3)}, opset=13),
        make_case("split-num-outputs", [make_node("Split", ["X"], ["Y1", "Y2"], axis=0,
                                                  num_outputs=2)],
                  {"X": normal(5, 2)}, ["Y1", "Y2"], opset=18),
        # Only one output of Split reaches the graph output: the other gets zeros.
        make_case("split-one-used", [make_node("Split", ["X"], ["Y1", "Y2", "Y3"], axis=1,
                                               num_outputs=3),
                                     make_node("Tanh", ["Y2"], ["Y"])],
                  {"X": (normal(4, 6), ["N", 6])}, ["Y"], opset=18),
        make_case("slice-step1", [make_node("Slice", ["X", "s", "e"], ["Y"])],
                  {"X": normal(4, 5)}, ["Y"], constants={"s": i64(1, 0), "e": i64(3, 4)}),
        make_case("slice-step2-negative-start",
                  [make_node("Slice", ["X", "s", "e", "ax", "st"], ["Y"])],
                  {"X": normal(4, 7)}, ["Y"],
                  constants={"s": i64(-6), "e": i64(100), "ax": i64(1), "st": i64(2)}),
        make_case("slice-negative-step",
                  [make_node("Slice", ["X", "s", "e", "ax", "st"], ["Y"])],
                  {"X": normal(5, 3)}, ["Y"],
                  constants={"s": i64(-1), "e": i64(-100), "ax": i64(0), "st": i64(-2)}),
        make_case("slice-symbolic-axis1", [make_node("Slice", ["X", "s", "e", "ax"], ["Y"])],
                  {"X": (normal(3, 6), ["N", 6])}, ["Y"],
                  constants={"s": i64(-4), "e": i64(-1), "ax": i64(-1)}),
        make_case("gather-axis0", [make_node("Gather", ["X", "I"], ["Y"], axis=0)],
                  {"X": normal(4, 3)}, ["Y"], constants={"I": i64(0, -1, 0, 2)}),
        make_case("gather-axis1-2d-indices", [make_node("Gather", ["X", "I"], ["Y"], axis=1)],
                  {"X": normal(2, 4, 3)}, ["Y"], constants={"I": i64([0, -1], [3, 3])}),
        make_case("gather-scalar-index", [make_node("Gather", ["X", "I"], ["Y"], axis=1)],
                  {"X": normal(3, 4)}, ["Y"], constants={"I": i64(-2)}),
        # Indices fed at run time: negative ones are resolved by nodes, not while building.
        make_case("gather-indices-input", [make_node("Gather", ["X", "I"], ["Y"], axis=0)],
                  {"X": (normal(4, 3), ["N", 3]), "I": i64(1, -1, 1)}, ["Y"]),
        make_case("gatherelements-axis0",
                  [make_node("GatherElements", ["X", "I"], ["Y"], axis=0)],
                  {"X": normal(3, 2)}, ["Y"], constants={"I": i64([0, 0], [-1, 2], [0, 1])}),
        make_case("gatherelements-axis1",
                  [make_node("GatherElements", ["X", "I"], ["Y"], axis=1)],
                  {"X": normal(2, 3)}, ["Y"], constants={"I": i64([2, 2, -1, 0], [1, 0, 0, 0])}),
        make_case("expand", [make_node("Expand", ["X", "shape"], ["Y"])],
                  {"X": normal(3, 1)}, ["Y"], constants={"shape": i64(2, 3, 4)}),
        make_case("expand-symbolic", [make_node("Expand", ["X", "shape"], ["Y"])],
                  {"X": (normal(4, 1), ["N", 1])}, ["Y"], constants={"shape": i64(1, 3)}),
        make_case("reshape", [make_node("Reshape", ["X", "shape"], ["Y"])],
                  {"X": normal(2, 6)}, ["Y"], constants={"shape": i64(3, 4)}),
        make_case("reshape-symbolic", [make_node("Reshape", ["X", "shape"], ["Y"])],
                  {"X": (normal(4, 2, 3), ["N", 2, 3])}, ["Y"],
                  constants={"shape": i64(-1, 3)}),
        make_case("flatten", [make_node("Flatten", ["X"], ["Y"], axis=2)],
                  {"X": normal(2, 3, 2)}, ["Y"]),
        make_case("squeeze", [make_node("Squeeze", ["X", "axes"], ["Y"])],
                  {"X": normal(2, 1, 3)}, ["Y"], constants={"axes": i64(1)}),
        make_case("unsqueeze", [make_node("Unsqueeze", ["X", "axes"], ["Y"])],
                  {"X": (normal(2, 3), ["N", 3])}, ["Y"], constants={"axes": i64(0, 2)}),
    ]
    return cases


def walk_cases() -> list[Case]:
    """Graphs exercising the walk: fan-out, an intermediate output, constant nodes."""
    return [
        # H is both an output and an input of later nodes: its gradient is the fed one
        # plus what flows back from Y.
        make_case("walk-intermediate-output",
                  [make_node("Tanh", ["X"], ["H"]), make_node("Mul", ["H", "W"], ["Y"])],
                  {"X": normal(2, 3)}, ["H", "Y"], weights={"W": normal(3)}),
        # X feeds three nodes; a Constant node and a NO_GRADIENT branch are on the way.
        make_case("walk-fan-out",
                  [make_node("Constant", [], ["c"], value=make_tensor(
                      "c", TensorProto.DOUBLE, [1], [0.5])),
                   make_node("Sigmoid", ["X"], ["S"]),
                   make_node("Exp", ["X"], ["E"]),
                   make_node("Floor", ["X"], ["F"]),
                   make_node("Mul", ["S", "c"], ["Sc"]),
                   make_node("Sum", ["Sc", "E", "F", "X"], ["Y"])],
                  {"X": normal(2, 3) + 0.3}, ["Y"]),
        # An integer output beside a float one: only the float one takes a gradient.
        make_case("walk-int-output",
                  [make_node("ArgMax", ["X"], ["I"], axis=1),
                   make_node("Tanh", ["X"], ["Y"])],
                  {"X": distinct(2, 3)}, {"I": TensorProto.INT64, "Y": TensorProto.DOUBLE}),
    ]


CASES: list[Case] = (arithmetic_cases() + activation_cases() + linalg_cases()
                     + reduction_cases() + softmax_cases() + shape_cases() + walk_cases())
