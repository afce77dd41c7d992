"""What the forward/backward engine shares between instances: gradient graphs (by model
structure) and sessions; and what it keeps for itself: output buffers."""

import numpy as np
import onnx
import pytest
from _backends import requires_training
from _ort_values import feeds
from onnx import numpy_helper

from skl_ortgrad import SquareLearningLoss
from skl_ortgrad.gradient.backend import build_gradient
from skl_ortgrad.gradient.forward_backward import OrtGradientForwardBackward
from skl_ortgrad.graph.model import OPSET
from skl_ortgrad.objective.merge import merge_loss_graph

WEIGHTS = ["coef", "intercept"]


def _training_model(linear_onnx, coef_value):
    """The linear model with the loss appended, its coefficients set to ``coef_value``."""
    model = onnx.ModelProto()
    model.CopyFrom(linear_onnx)
    for init in model.graph.initializer:
        if init.name == "coef":
            values = np.full(numpy_helper.to_array(init).shape, coef_value, dtype=np.float32)
            init.CopyFrom(numpy_helper.from_array(values, "coef"))
    loss = SquareLearningLoss().build_onnx_function(OPSET, "cpu")
    return merge_loss_graph(model, loss)


def test_models_differing_in_weight_values_share_graphs_and_sessions(linear_onnx, backend):
    first = OrtGradientForwardBackward(_training_model(linear_onnx, 0.5), WEIGHTS,
                                       backend=backend)
    second_model = _training_model(linear_onnx, -3.0)
    second = OrtGradientForwardBackward(second_model, WEIGHTS, backend=backend)
    assert second.gradient_ is first.gradient_
    assert second.cls_type_._inference_sess is first.cls_type_._inference_sess
    for rows in (32, None):
        step_a, step_b = first.step_function(rows), second.step_function(rows)
        assert step_b._session is step_a._session
        assert step_b.outputs[0] is not step_a.outputs[0]
    # What the cache returned is what a fresh build of the second model gives.
    fresh = build_gradient(second_model, WEIGHTS, backend=backend)
    assert (second.gradient_.fused.SerializeToString()
            == fresh.fused.SerializeToString())
    assert (second.step_function(32).model.SerializeToString()
            == fresh.static(["X", "label"], 32).SerializeToString())
    # Each engine keeps its own weights.
    assert float(first.get_initializer("coef").ravel()[0]) == 0.5
    assert float(second.get_initializer("coef").ravel()[0]) == -3.0


def test_a_structural_change_is_another_graph(linear_onnx, backend):
    first = OrtGradientForwardBackward(_training_model(linear_onnx, 0.5), WEIGHTS,
                                       backend=backend)
    only_coef = OrtGradientForwardBackward(_training_model(linear_onnx, 0.5), ["coef"],
                                           backend=backend)
    assert only_coef.gradient_ is not first.gradient_
    assert only_coef.step_function(None).fetch_names == ["loss", "coef_grad"]


def test_shared_step_sessions_keep_their_own_outputs(linear_onnx, regression_data, backend):
    X, y = regression_data
    first = OrtGradientForwardBackward(_training_model(linear_onnx, 0.0), WEIGHTS,
                                       backend=backend)
    second = OrtGradientForwardBackward(_training_model(linear_onnx, 0.0), WEIGHTS,
                                        backend=backend)
    step_a, step_b = first.step_function(32), second.step_function(32)
    label = y[:32].reshape((-1, 1)).copy()
    scale = np.array(1 / 32, dtype=np.float32)
    coef = np.ones((X.shape[1], 1), dtype=np.float32)
    step_a.run(feeds([X[:32].copy(), label, coef, np.zeros(1, np.float32), scale]))
    loss_a = float(step_a.outputs[0])
    grad_a = step_a.outputs[1].copy()
    step_b.run(feeds([X[:32].copy(), label, -coef, np.ones(1, np.float32), scale]))
    assert float(step_a.outputs[0]) == loss_a
    np.testing.assert_array_equal(step_a.outputs[1], grad_a)
    assert float(step_b.outputs[0]) != loss_a


def test_training_calls_are_built_at_first_use(linear_onnx, regression_data, backend):
    """The two-call forward/backward (a TrainingAgent with onnxruntime-training) costs a
    session that the one-call steps of a fit never need: it waits for its first use."""
    X, y = regression_data
    engine = OrtGradientForwardBackward(_training_model(linear_onnx, 0.5), WEIGHTS,
                                        backend=backend)
    calls = engine.cls_type_._calls
    assert calls._calls is None
    function = engine.new_instance()
    coef = np.full((X.shape[1], 1), 0.5, dtype=np.float32)
    intercept = np.zeros(1, dtype=np.float32)
    label = y[:8].reshape((-1, 1)).copy()
    function.forward([X[:8].copy(), label, coef, intercept], training=True)
    gradients = function.backward([np.array(1.0, dtype=np.float32)])
    assert calls._calls is not None
    residual = X[:8] @ coef + intercept - label
    # Gradients of X, label, then coef (seed 001: the inputs' first).
    assert engine.cls_type_.grad_names[2] == "coef_grad"
    np.testing.assert_allclose(gradients[2].numpy(), X[:8].T @ residual, rtol=1e-5, atol=1e-5)


@requires_training
def test_a_builder_configuration_is_not_cached(linear_onnx):
    from onnxruntime.capi._pybind_state import OrtModuleGraphBuilderConfiguration

    def engine():
        config = OrtModuleGraphBuilderConfiguration()
        config.initializer_names = WEIGHTS
        config.initializer_names_to_train = WEIGHTS
        config.input_names_require_grad = []
        config.build_gradient_graph = True
        return OrtGradientForwardBackward(_training_model(linear_onnx, 0.5), WEIGHTS,
                                          graph_builder_config=config,
                                          backend="onnxruntime-training")

    first, second = engine(), engine()
    assert second.gradient_ is not first.gradient_
    assert (second.step_function(32).model.SerializeToString()
            == first.step_function(32).model.SerializeToString())


@pytest.mark.parametrize("rows", [32, 7])
def test_static_graphs_are_cached_per_batch_size(linear_onnx, backend, rows):
    first = OrtGradientForwardBackward(_training_model(linear_onnx, 0.5), WEIGHTS,
                                       backend=backend)
    second = OrtGradientForwardBackward(_training_model(linear_onnx, 1.5), WEIGHTS,
                                        backend=backend)
    assert second.step_function(rows).model is first.step_function(rows).model
    assert first.step_function(rows).model is not first.step_function(None).model
