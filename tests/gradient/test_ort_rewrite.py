"""Each gradient operator rewrite computes what onnxruntime's own kernel computes."""

import numpy as np
import onnx
import pytest
from _backends import requires_training
from onnx import TensorProto, helper, numpy_helper
from onnxruntime import GraphOptimizationLevel, InferenceSession, SessionOptions

from skl_ortgrad.gradient.ort_rewrite import (
    FAST_REWRITES,
    GRADIENT_REWRITES,
    MS_DOMAIN,
    fold_gradient_shapes,
    needs_gradient_rewrite,
    rewrite_gradient_graph,
)
from skl_ortgrad.graph.model import IR_VERSION, make_model

# The rewritten operators (ReluGrad, SoftmaxGrad_13...) are onnxruntime-training's kernels:
# they exist only where it is installed.
pytestmark = requires_training


def _one_node_model(op_type, inputs, n_outputs=1, dtype=TensorProto.FLOAT, ranks=None,
                    domain=MS_DOMAIN, **attributes):
    """A model made of one node; ``inputs`` maps names to element types (None: dtype)."""
    ranks = ranks or {}
    infos = [
        helper.make_tensor_value_info(
            name, elem or dtype, [None] * ranks[name] if name in ranks else None
        )
        for name, elem in inputs.items()
    ]
    outputs = [f"Y{i}" for i in range(n_outputs)]
    node = helper.make_node(op_type, list(inputs), outputs, domain=domain, **attributes)
    graph = helper.make_graph(
        [node], "one", infos, [helper.make_tensor_value_info(o, dtype, None) for o in outputs]
    )
    return make_model(graph, domains=[(MS_DOMAIN, 1)])


def _run(model, feeds):
    options = SessionOptions()
    options.graph_optimization_level = GraphOptimizationLevel.ORT_DISABLE_ALL
    return InferenceSession(model.SerializeToString(), options).run(None, feeds)


def _compare(model32, feeds, expected_fn):
    """onnxruntime's float32 kernel == rewritten float64 graph == numpy definition."""
    kernel = _run(model32, {k: v.astype(np.float32) if v.dtype == np.float64 else v
                            for k, v in feeds.items()})
    model64 = onnx.ModelProto()
    model64.CopyFrom(model32)
    for info in (*model64.graph.input, *model64.graph.output):
        if info.type.tensor_type.elem_type == TensorProto.FLOAT:
            info.type.tensor_type.elem_type = TensorProto.DOUBLE
    rewritten = rewrite_gradient_graph(model64)
    assert not needs_gradient_rewrite(rewritten)
    assert rewritten.ir_version <= IR_VERSION
    got = _run(rewritten, feeds)
    expected = expected_fn(**feeds)
    expected = expected if isinstance(expected, list) else [expected]
    for k, g, e in zip(kernel, got, expected, strict=True):
        assert g.dtype == np.float64
        np.testing.assert_allclose(g, e, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(k, e, rtol=1e-5, atol=1e-6)
    return rewritten


@pytest.fixture
def rng():
    return np.random.RandomState(0)


def test_the_ops_without_a_double_kernel_are_registered():
    assert set(GRADIENT_REWRITES) == {
        (MS_DOMAIN, op)
        for op in ("FusedMatMul", "ReluGrad", "SoftmaxGrad_13", "LogSoftmaxGrad_13",
                   "SplitTraining")
    }


@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("trans_a", [0, 1])
@pytest.mark.parametrize("trans_b", [0, 1])
def test_fused_matmul(rng, rank, trans_a, trans_b):
    batch = (2,) * (rank - 2)
    a = rng.randn(*batch, *((4, 3) if trans_a else (3, 4)))
    b = rng.randn(*batch, *((5, 4) if trans_b else (4, 5)))
    alpha = 0.5 if rank == 2 else 1.0
    model = _one_node_model(
        "FusedMatMul", {"A": None, "B": None}, ranks={"A": rank, "B": rank},
        transA=trans_a, transB=trans_b, alpha=alpha,
    )

    def expected(A, B):
        op_a = np.swapaxes(A, -1, -2) if trans_a else A
        op_b = np.swapaxes(B, -1, -2) if trans_b else B
        return alpha * (op_a @ op_b)

    rewritten = _compare(model, {"A": a, "B": b}, expected)
    ops = [n.op_type for n in rewritten.graph.node]
    assert ops == (["Gemm"] if rank == 2 else ["Einsum"])


def test_fused_matmul_rank_from_gradient_name(rng):
    """``x_grad`` has the shape of ``x``: its rank is taken from ``x``."""
    x = helper.make_tensor_value_info("x", TensorProto.DOUBLE, [3, 4])
    x_grad = helper.make_tensor_value_info("x_grad", TensorProto.DOUBLE, None)
    w = helper.make_tensor_value_info("w", TensorProto.DOUBLE, [5, 4])
    node = helper.make_node("FusedMatMul", ["x_grad", "w"], ["y"], domain=MS_DOMAIN, transB=1)
    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["x2"]), node], "g", [x, x_grad, w],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None),
         helper.make_tensor_value_info("x2", TensorProto.DOUBLE, None)],
    )
    rewritten = rewrite_gradient_graph(make_model(graph, domains=[(MS_DOMAIN, 1)]))
    assert [n.op_type for n in rewritten.graph.node] == ["Identity", "Gemm"]


def test_fused_matmul_unsupported_forms():
    model = _one_node_model("FusedMatMul", {"A": None, "B": None}, transBatchA=1)
    with pytest.raises(NotImplementedError, match="transBatch"):
        rewrite_gradient_graph(model)
    model = _one_node_model("FusedMatMul", {"A": None, "B": None}, alpha=2.0)
    with pytest.raises(NotImplementedError, match="alpha"):
        rewrite_gradient_graph(model)
    model = _one_node_model("FusedMatMul", {"A": None, "B": None}, ranks={"A": 1, "B": 2})
    with pytest.raises(NotImplementedError, match="rank"):
        rewrite_gradient_graph(model)


def test_relu_grad(rng):
    x = rng.randn(6, 5)
    x[0, :2] = 0  # ReluGrad lets nothing through at 0, like scikit-learn's derivative.
    d_y = rng.randn(6, 5)
    model = _one_node_model("ReluGrad", {"dY": None, "X": None})
    _compare(model, {"dY": d_y, "X": x}, lambda dY, X: dY * (X > 0))


def _softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_softmax_grad_13(rng, axis):
    y = _softmax(rng.randn(4, 3, 5), axis)
    d_y = rng.randn(4, 3, 5)
    model = _one_node_model("SoftmaxGrad_13", {"dY": None, "Y": None}, axis=axis)
    _compare(model, {"dY": d_y, "Y": y},
             lambda dY, Y: Y * (dY - (dY * Y).sum(axis=axis, keepdims=True)))


def test_softmax_grad_13_is_the_softmax_jacobian(rng):
    """dX = J^T dY with J the finite-difference Jacobian of softmax (one row)."""
    x, d_y = rng.randn(1, 4), rng.randn(1, 4)
    eps = 1e-6
    jac = np.stack([
        (_softmax(x + eps * e, -1) - _softmax(x - eps * e, -1))[0] / (2 * eps)
        for e in np.eye(4)
    ])  # jac[j, i] = d softmax_i / d x_j
    model = _one_node_model("SoftmaxGrad_13", {"dY": None, "Y": None}, axis=-1,
                            dtype=TensorProto.DOUBLE)
    got = _run(rewrite_gradient_graph(model), {"dY": d_y, "Y": _softmax(x, -1)})[0]
    np.testing.assert_allclose(got[0], jac @ d_y[0], rtol=1e-7)


@pytest.mark.parametrize("axis", [-1, 1])
def test_log_softmax_grad_13(rng, axis):
    y = np.log(_softmax(rng.randn(4, 3, 5), axis))
    d_y = rng.randn(4, 3, 5)
    model = _one_node_model("LogSoftmaxGrad_13", {"dY": None, "Y": None}, axis=axis)
    _compare(model, {"dY": d_y, "Y": y},
             lambda dY, Y: dY - np.exp(Y) * dY.sum(axis=axis, keepdims=True))


def test_log_softmax_grad_13_is_the_log_softmax_jacobian(rng):
    x, d_y = rng.randn(1, 4), rng.randn(1, 4)
    eps = 1e-6

    def log_softmax(v):
        return np.log(_softmax(v, -1))

    jac = np.stack([
        (log_softmax(x + eps * e) - log_softmax(x - eps * e))[0] / (2 * eps) for e in np.eye(4)
    ])
    model = _one_node_model("LogSoftmaxGrad_13", {"dY": None, "Y": None}, axis=-1,
                            dtype=TensorProto.DOUBLE)
    got = _run(rewrite_gradient_graph(model), {"dY": d_y, "Y": log_softmax(x)})[0]
    np.testing.assert_allclose(got[0], jac @ d_y[0], rtol=1e-7)


def test_split_training(rng):
    x = rng.randn(4, 5)
    model = _one_node_model(
        "SplitTraining", {"X": None, "split": TensorProto.INT64}, n_outputs=2, axis=1
    )
    _compare(model, {"X": x, "split": np.array([2, 3], dtype=np.int64)},
             lambda X, split: [X[:, :2], X[:, 2:]])


def test_split_training_fails_in_double_without_the_rewrite(rng):
    """The reason SplitTraining is rewritten: its double kernel exists but refuses to run."""
    model = _one_node_model(
        "SplitTraining", {"X": None, "split": TensorProto.INT64}, n_outputs=2, axis=1,
        dtype=TensorProto.DOUBLE,
    )
    with pytest.raises(Exception, match="does not support"):
        _run(model, {"X": rng.randn(4, 5), "split": np.array([2, 3], dtype=np.int64)})


def test_other_nodes_are_kept_and_nothing_to_rewrite_gives_a_copy():
    model = _one_node_model("TanhGrad", {"dY": None, "Y": None}, dtype=TensorProto.DOUBLE)
    assert not needs_gradient_rewrite(model)
    copy = rewrite_gradient_graph(model)
    assert copy is not model and copy == model
    # A graph mixing both: the kept node and its position survive.
    relu = helper.make_node("ReluGrad", ["dY", "Y"], ["Z"], domain=MS_DOMAIN, name="r")
    tanh = helper.make_node("TanhGrad", ["Z", "Y"], ["Y0"], domain=MS_DOMAIN, name="t")
    yield_op = helper.make_node("YieldOp", ["Y0"], ["Y1"], domain=MS_DOMAIN, name="yield",
                                full_shape_outputs=[0])
    del model.graph.node[:]
    model.graph.node.extend([relu, tanh, yield_op])
    rewritten = rewrite_gradient_graph(model)
    ops = [n.op_type for n in rewritten.graph.node]
    assert ops == ["Relu", "Sign", "Mul", "TanhGrad", "YieldOp"]
    assert rewritten.graph.node[-1] == yield_op
    assert {(o.domain, o.version) for o in rewritten.opset_import} == {
        (o.domain, o.version) for o in model.opset_import
    }


def test_selected_rewrites_only(rng):
    """float32 graphs get FAST_REWRITES only (ReluGrad): the result is exactly the
    kernel's, and the other training operators (FusedMatMul) stay for the optimizer."""
    relu = _one_node_model("ReluGrad", {"dY": None, "X": None}).graph.node[0]
    matmul = helper.make_node("FusedMatMul", ["A", "B"], ["Y1"], domain=MS_DOMAIN)
    graph = helper.make_graph(
        [relu, matmul], "two",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [None, None])
         for n in ("dY", "X", "A", "B")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y0", "Y1")],
    )
    model = make_model(graph, domains=[(MS_DOMAIN, 1)])
    rewritten = rewrite_gradient_graph(model, FAST_REWRITES)
    # The mask [X > 0]: X scaled by 2^127, then a HardSigmoid of slope 2^127.
    assert [n.op_type for n in rewritten.graph.node] == ["Mul", "HardSigmoid", "Mul",
                                                         "FusedMatMul"]
    assert not needs_gradient_rewrite(rewritten, FAST_REWRITES)
    assert needs_gradient_rewrite(rewritten)
    feeds = {"dY": rng.randn(40, 30), "X": rng.randn(40, 30), "A": rng.randn(40, 3),
             "B": rng.randn(3, 5)}
    feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
    feeds["X"][0, :4] = 0
    # -0, subnormals of both signs, the smallest normal, infinities: the kernel's mask.
    feeds["X"][1, :10] = [-0.0, 1e-45, -1e-45, 1e-40, 1.1754942e-38, 2.0**-127, 3e38,
                          np.inf, -np.inf, -3e38]
    options = SessionOptions()  # optimizations on, as float32 training runs
    got = InferenceSession(rewritten.SerializeToString(), options).run(None, feeds)
    expected = _run(model, feeds)
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_array_equal(g, e)


def _broadcast_model(rows, extra=()):
    """dB of Y = A + B (A [rows, 3], B [3]) the way the gradient builder writes it:
    Shape -> BroadcastGradientArgs -> ReduceSum over the returned axes."""
    nodes = [
        helper.make_node("Shape", ["A"], ["sa"]),
        helper.make_node("Shape", ["B"], ["sb"]),
        helper.make_node("BroadcastGradientArgs", ["sa", "sb"], ["ra", "rb"],
                         domain=MS_DOMAIN),
        helper.make_node("ReduceSum", ["A", "rb"], ["rs"], keepdims=1,
                         noop_with_empty_axes=1),
        helper.make_node("Reshape", ["rs", "sb"], ["dB"]),
        *extra,
    ]
    outputs = [helper.make_tensor_value_info("dB", TensorProto.FLOAT, None)]
    if extra:
        outputs.append(helper.make_tensor_value_info(extra[-1].output[0], TensorProto.FLOAT,
                                                     None))
    graph = helper.make_graph(
        nodes, "broadcast",
        [helper.make_tensor_value_info("A", TensorProto.FLOAT, [rows, 3]),
         helper.make_tensor_value_info("B", TensorProto.FLOAT, [3])],
        outputs,
    )
    return make_model(graph, domains=[(MS_DOMAIN, 1)])


def test_fold_gradient_shapes(rng):
    """The reduction axes become constants, the nodes that computed them go, and the
    result is the same as the unfolded graph's."""
    model = _broadcast_model(5)
    folded = fold_gradient_shapes(model)
    assert [n.op_type for n in folded.graph.node] == ["Shape", "ReduceSum", "Reshape"]
    axes = {i.name: numpy_helper.to_array(i) for i in folded.graph.initializer}
    np.testing.assert_array_equal(axes["rb"], [0])
    feeds = {"A": rng.randn(5, 3).astype(np.float32), "B": rng.randn(3).astype(np.float32)}
    (expected,) = _run(model, feeds)
    (got,) = InferenceSession(folded.SerializeToString()).run(None, feeds)
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_allclose(got, feeds["A"].sum(axis=0), rtol=1e-6)


def test_fold_gradient_shapes_removes_what_does_nothing_at_static_shapes(rng):
    """A ReduceSum over axes of size 1 and a Reshape to the shape the tensor already has
    become Identity; the shape computations they read disappear."""
    extra = (
        helper.make_node("Shape", ["dB"], ["sdb"]),
        helper.make_node("Reshape", ["dB", "sdb"], ["same"]),
        helper.make_node("Unsqueeze", ["same", "zero"], ["row"]),
        helper.make_node("ReduceSum", ["row", "zero"], ["summed"], keepdims=1),
        helper.make_node("Shape", ["summed"], ["ss"]),
        helper.make_node("Expand", ["summed", "ss"], ["out"]),
    )
    model = _broadcast_model(4, extra=extra)
    model.graph.initializer.append(numpy_helper.from_array(np.array([0], np.int64), "zero"))
    folded = fold_gradient_shapes(model)
    ops = [n.op_type for n in folded.graph.node]
    assert ops.count("Identity") == 3 and "Expand" not in ops and ops.count("Shape") == 1
    feeds = {"A": rng.randn(4, 3).astype(np.float32), "B": rng.randn(3).astype(np.float32)}
    for got, expected in zip(InferenceSession(folded.SerializeToString()).run(None, feeds),
                             _run(model, feeds), strict=True):
        np.testing.assert_array_equal(got, expected)


def test_fold_gradient_shapes_keeps_shapes_it_cannot_prove_static():
    """A symbolic batch dimension, or a shape read from data (here a Range whose limit
    is a sum of the input): nothing is folded."""
    symbolic = _broadcast_model(None)
    assert fold_gradient_shapes(symbolic) == symbolic
    data_shaped = _broadcast_model(5, extra=(
        helper.make_node("ReduceSum", ["A"], ["total"], keepdims=0),
        helper.make_node("Range", ["total", "total", "total"], ["steps"]),
    ))
    assert fold_gradient_shapes(data_shaped) == data_shaped


def test_fold_gradient_shapes_keeps_graphs_the_cpu_cannot_run():
    """The probe runs on the CPU: an operator it does not implement leaves the graph as
    it is, to fail (or not) where it runs for real."""
    model = _broadcast_model(5, extra=(
        helper.make_node("NotAKernelHere", ["dB"], ["other"], domain=MS_DOMAIN),
    ))
    assert fold_gradient_shapes(model) == model
