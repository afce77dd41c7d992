"""The one-call training step: the fused gradient graph against numpy and against the
two-call forward/backward of the same engine."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from _backends import requires_training
from _ort_values import feeds

from skl_ortgrad import SquareLearningLoss
from skl_ortgrad.gradient.forward_backward import OrtGradientForwardBackward
from skl_ortgrad.gradient.ort_training import fused_gradient_model
from skl_ortgrad.graph.model import OPSET
from skl_ortgrad.graph.weights import get_train_initializer
from skl_ortgrad.objective.merge import merge_loss_graph
from skl_ortgrad.runtime.step import OrtGradientStep


def _engine(onx, weighted=False, backend="auto"):
    loss = SquareLearningLoss().build_onnx_function(OPSET, "cpu", weighted=weighted)
    train = merge_loss_graph(onx, loss, weight_name="sample_weight" if weighted else None)
    # The loss graph's constants are float initializers too: name the weights.
    return OrtGradientForwardBackward(
        train, weights_to_train=list(get_train_initializer(onx)), backend=backend
    )


def _batch(regression_data, rows):
    X, y = regression_data
    rng = np.random.RandomState(0)
    coef = rng.randn(X.shape[1], 1).astype(np.float32)
    intercept = np.array([0.3], dtype=np.float32)
    return X[:rows].copy(), y[:rows].reshape((-1, 1)).copy(), coef, intercept


@pytest.mark.parametrize("batch_rows", [32, None], ids=["static", "dynamic"])
def test_step_matches_numpy(linear_onnx, regression_data, batch_rows, backend):
    """Loss 1/2 sum r^2 and gradients scale * X^T r, scale * sum r, with r = Xw + b - y."""
    engine = _engine(linear_onnx, backend=backend)
    step = engine.step_function(batch_rows)
    assert step.feed_names == ["X", "label", "coef", "intercept", "loss_grad"]
    assert step.fetch_names == ["loss", "coef_grad", "intercept_grad"]
    X, y, coef, intercept = arrays = _batch(regression_data, 32)
    scale = np.array(1 / 32, dtype=np.float32)
    step.run(feeds([*arrays, scale]))
    loss, g_coef, g_intercept = step.outputs
    residual = X @ coef + intercept - y
    assert float(loss) == pytest.approx(0.5 * float((residual**2).sum()), rel=1e-5)
    np.testing.assert_allclose(g_coef, X.T @ residual / 32, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g_intercept, residual.sum(axis=0) / 32, rtol=1e-5, atol=1e-6)


def test_step_matches_forward_backward_of_the_engine(mlp_onnx, regression_data, backend):
    """An MLP (tanh) with sample weights: the one-call step gives exactly what
    run_forward + run_backward give on the same feeds."""
    _, onx = mlp_onnx
    X, y = regression_data
    engine = _engine(onx, weighted=True, backend=backend)
    names = engine.cls_type_.weights_to_train
    weights = [engine.get_initializer(name) for name in names]
    rows = 50
    sw = np.random.RandomState(2).uniform(0, 2, rows).astype(np.float32)
    arrays = [X[:rows].copy(), y[:rows].reshape((-1, 1)).copy(), sw, *weights]
    scale = np.array(1 / sw.sum(), dtype=np.float32)
    step = engine.step_function(rows)
    step.run(feeds([*arrays, scale]))
    function = engine.new_instance()
    loss = function.forward(arrays, training=True)[0].numpy()
    gradients = function.backward([scale])
    first = len(engine.cls_type_.grad_input_names)  # the inputs' gradients come first
    assert float(step.outputs[0]) == pytest.approx(float(loss), rel=1e-6)
    assert len(step.outputs) == 1 + len(names)
    for i, name in enumerate(names):
        np.testing.assert_allclose(step.outputs[1 + i], gradients[first + i].numpy(), rtol=1e-5,
                                   atol=1e-7, err_msg=name)


def test_steps_of_an_engine_share_their_buffers(linear_onnx, regression_data, backend):
    """The static step (full batches) and the dynamic one (the last, partial batch) write
    into the same arrays, which stay the same objects from call to call."""
    engine = _engine(linear_onnx, backend=backend)
    static, dynamic = engine.step_function(32), engine.step_function(None)
    assert isinstance(static, OrtGradientStep) and engine.step_function(32) is static
    assert all(a is b for a, b in zip(static.outputs, dynamic.outputs, strict=True))
    buffers = [id(a) for a in static.outputs]
    arrays = _batch(regression_data, 7)
    dynamic.run(feeds([*arrays, np.array(1 / 7, dtype=np.float32)]))
    X, y, coef, intercept = arrays
    residual = X @ coef + intercept - y
    np.testing.assert_allclose(static.outputs[1], X.T @ residual / 7, rtol=1e-5, atol=1e-6)
    assert [id(a) for a in static.outputs] == buffers


@requires_training
def test_static_batch_dimension_is_folded(linear_onnx, tmp_path):
    """The reason for the static step: with the batch dimension fixed, onnxruntime's
    optimizer folds the builder's shape computations into constants and runs a smaller
    graph than the one with a symbolic batch."""
    engine = _engine(linear_onnx, backend="onnxruntime-training")
    gradient = onnx.load_from_string(engine.gradient_model_)
    nodes = {}
    for rows in (32, None):
        fused = fused_gradient_model(gradient, engine.onnx_model, ["X", "label"], rows)
        assert not [n for n in fused.graph.node if n.op_type == "YieldOp"]
        dims = {i.name: [d.dim_value or d.dim_param for d in i.type.tensor_type.shape.dim]
                for i in fused.graph.input}
        assert dims["loss_grad"] == [] and dims["X"][1] == 4
        assert (dims["X"][0] == 32) == (rows == 32)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        options.optimized_model_filepath = str(tmp_path / f"{rows}.onnx")
        ort.InferenceSession(fused.SerializeToString(), options,
                             providers=["CPUExecutionProvider"])
        optimized = onnx.load(options.optimized_model_filepath)
        nodes[rows] = len(optimized.graph.node)
    assert nodes[32] < nodes[None] - 5, nodes


def test_static_step_of_the_onnx_backend_has_no_shape_arithmetic(mlp_onnx):
    """With the batch fixed, the standard-ONNX differentiator resolves every broadcast
    while building: no Shape node, no Reshape or Expand that keeps a shape, and fewer
    nodes than with a symbolic batch."""
    engine = _engine(mlp_onnx[1], backend="onnx")
    static, dynamic = (engine.step_function(rows).model for rows in (32, None))
    assert not {n.op_type for n in static.graph.node} & {"Shape", "NonZero"}
    inferred = onnx.shape_inference.infer_shapes(static).graph
    dims = {info.name: [d.dim_value for d in info.type.tensor_type.shape.dim]
            for info in [*inferred.input, *inferred.value_info, *inferred.output]}
    for node in static.graph.node:
        if node.op_type in ("Reshape", "Expand"):
            assert dims[node.input[0]] != dims[node.output[0]], node
    assert len(static.graph.node) < len(dynamic.graph.node)


def test_fused_gradient_model_needs_one_yield_op(linear_onnx):
    with pytest.raises(ValueError, match="Expected one YieldOp in the gradient graph, found 0"):
        fused_gradient_model(linear_onnx, linear_onnx, ["X"], None)


def test_step_of_a_graph_without_loss_is_refused(linear_onnx, backend):
    """A training step writes into buffers allocated once: outputs of unknown shape (a
    prediction with a symbolic batch dimension) cannot be trained through it."""
    engine = OrtGradientForwardBackward(linear_onnx, backend=backend)
    with pytest.raises(ValueError, match="must have static shapes"):
        engine.step_function(None)
