"""The forward/backward engine against numpy and finite differences."""

import os
import pickle

import numpy as np
import onnx
import pytest
from _backends import TRAINING
from onnxruntime import RunOptions
from onnxruntime.capi._pybind_state import OrtValue, OrtValueVector

from skl_ortgrad.gradient.forward_backward import (
    OrtGradientForwardBackward,
    OrtGradientForwardBackwardFunction,
)
from skl_ortgrad.runtime.devices import device_providers, ort_device, parse_device


def test_linear_forward_backward_matches_numpy(linear_onnx, regression_data, backend):
    X, _ = regression_data
    engine = OrtGradientForwardBackward(linear_onnx, debug=True, backend=backend)
    assert engine.cls_type_.weights_to_train == ["coef", "intercept"]
    assert issubclass(engine.cls_type_, OrtGradientForwardBackwardFunction)
    coef = engine.get_initializer("coef") + 0.5
    intercept = engine.get_initializer("intercept")
    fn = engine.new_instance()
    out = fn.forward([X, coef, intercept], training=True)
    np.testing.assert_allclose(out[0].numpy(), X @ coef + intercept, rtol=1e-5, atol=1e-5)
    g = np.random.RandomState(1).randn(X.shape[0], 1).astype(np.float32)
    grads = fn.backward([g])
    # Seed 001: the gradient of every input, then of every weight.
    assert engine.cls_type_.grad_names == ["X_grad", "coef_grad", "intercept_grad"]
    assert len(grads) == 3
    np.testing.assert_allclose(grads[0].numpy(), g @ coef.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(grads[1].numpy(), X.T @ g, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(grads[2].numpy(), g.sum(axis=0), rtol=1e-4, atol=1e-4)


def test_inference_forward_uses_given_weights(linear_onnx, regression_data, backend):
    X, _ = regression_data
    engine = OrtGradientForwardBackward(linear_onnx, backend=backend)
    coef = np.ones((4, 1), dtype=np.float32)
    intercept = np.array([2.0], dtype=np.float32)
    out = engine.new_instance().forward([X, coef, intercept])
    np.testing.assert_allclose(out[0].numpy().ravel(), X.sum(axis=1) + 2, rtol=1e-5)


def test_weight_order_follows_weights_to_train(linear_onnx, regression_data, backend):
    X, _ = regression_data
    engine = OrtGradientForwardBackward(
        linear_onnx, weights_to_train=["intercept", "coef"], backend=backend
    )
    fn = engine.new_instance()
    intercept = engine.get_initializer("intercept")
    coef = engine.get_initializer("coef")
    fn.forward([X, intercept, coef], training=True)
    grads = fn.backward([np.ones((X.shape[0], 1), dtype=np.float32)])
    assert engine.cls_type_.grad_names == ["X_grad", "intercept_grad", "coef_grad"]
    np.testing.assert_allclose(grads[1].numpy(), [X.shape[0]], rtol=1e-5)
    np.testing.assert_allclose(grads[2].numpy().ravel(), X.sum(axis=0), rtol=1e-4)


def test_mlp_gradient_matches_finite_differences(mlp_onnx, regression_data, backend):
    _, onx = mlp_onnx
    X, _ = regression_data
    X = X[:10]
    engine = OrtGradientForwardBackward(onx, backend=backend)
    names = engine.cls_type_.weights_to_train
    assert len(names) == 4
    weights = [engine.get_initializer(name).astype(np.float32) for name in names]

    def total(ws):
        out = engine.new_instance().forward([X, *ws])
        return float(out[0].numpy().astype(np.float64).sum())

    fn = engine.new_instance()
    fn.forward([X, *weights], training=True)
    grads = fn.backward([np.ones((X.shape[0], 1), dtype=np.float32)])
    eps = 1e-2
    for k, w in enumerate(weights):
        for index in list(np.ndindex(w.shape))[:4]:
            plus = [x.copy() for x in weights]
            minus = [x.copy() for x in weights]
            plus[k][index] += eps
            minus[k][index] -= eps
            numeric = (total(plus) - total(minus)) / (2 * eps)
            assert grads[k + 1].numpy()[index] == pytest.approx(numeric, rel=2e-2, abs=2e-2)


def test_debug_checks_feed_dtype_and_shape(linear_onnx, regression_data, backend):
    X, _ = regression_data
    engine = OrtGradientForwardBackward(linear_onnx, debug=True, backend=backend)
    fn = engine.new_instance()
    coef, intercept = engine.get_initializer("coef"), engine.get_initializer("intercept")
    with pytest.raises(TypeError, match="Input 'X' has dtype float64"):
        fn.forward([X.astype(np.float64), coef, intercept])
    with pytest.raises(ValueError, match="Input 'coef' has shape"):
        fn.forward([X, coef[:2], intercept])
    with pytest.raises(ValueError, match="Expected 3 tensors"):
        fn.forward([X, coef])


def test_backward_checks_gradient_dtype(linear_onnx, regression_data, backend):
    X, _ = regression_data
    engine = OrtGradientForwardBackward(linear_onnx, backend=backend)
    fn = engine.new_instance()
    fn.forward([X, engine.get_initializer("coef"), engine.get_initializer("intercept")], True)
    with pytest.raises(TypeError, match="has dtype float64, the graph expects float32"):
        fn.backward([np.ones((X.shape[0], 1))])
    # The failed call consumed nothing: the right dtype still works.
    grads = fn.backward([np.ones((X.shape[0], 1), dtype=np.float32)])
    np.testing.assert_allclose(grads[2].numpy(), [X.shape[0]])
    with pytest.raises(RuntimeError, match="needs a forward"):
        fn.backward([np.ones((X.shape[0], 1), dtype=np.float32)])


def test_unknown_or_integer_weight_is_an_error(linear_onnx):
    with pytest.raises(ValueError, match="Unknown weights \\['nope'\\]"):
        OrtGradientForwardBackward(linear_onnx, weights_to_train=["nope"])
    with pytest.raises(ValueError, match="not floating point"):
        OrtGradientForwardBackward(linear_onnx, weights_to_train=["shape_tensor"])


def test_pickle_rebuilds_sessions(linear_onnx, regression_data, backend):
    X, _ = regression_data
    engine = OrtGradientForwardBackward(linear_onnx, ["coef", "intercept"], class_name="LinearFB",
                                        backend=backend)
    clone = pickle.loads(pickle.dumps(engine))
    assert clone.cls_type_.__name__ == "LinearFB"
    assert clone.backend_ == engine.backend_ == backend
    # The seed API's repr.
    assert repr(clone) == repr(engine) == "OrtGradientForwardBackward(...)"
    feeds = [X, engine.get_initializer("coef"), engine.get_initializer("intercept")]
    np.testing.assert_array_equal(
        clone.new_instance().forward(feeds)[0].numpy(),
        engine.new_instance().forward(feeds)[0].numpy(),
    )


def test_save_onnx_graph(linear_onnx, tmp_path, backend):
    engine = OrtGradientForwardBackward(linear_onnx, backend=backend)
    paths = engine.save_onnx_graph(str(tmp_path), prefix="lin", suffix=".v1")
    assert sorted(os.path.basename(p) for p in paths.values()) == [
        "lin.forward.v1.onnx", "lin.gradient.v1.onnx"]
    # Seed 001: a classmethod of the generated function class, named after it by default.
    cls = engine.cls_type_
    paths = cls.save_onnx_graph(str(tmp_path / "by_class"))
    assert os.path.basename(paths["forward"]) == f"{cls.__name__}.forward.onnx"
    with open(paths["gradient"], "rb") as f:
        assert f.read() == engine.gradient_model_


def test_get_initializer_missing(linear_onnx, backend):
    engine = OrtGradientForwardBackward(linear_onnx, backend=backend)
    assert engine.get_initializer("nope", exc=False) is None
    with pytest.raises(KeyError, match="No initializer 'nope'"):
        engine.get_initializer("nope")


def test_devices():
    assert parse_device("cuda:1") == ("cuda", 1)
    assert device_providers("cpu") == ["CPUExecutionProvider"]
    with pytest.raises(ValueError, match="Unknown device 'gpu'"):
        parse_device("gpu")
    from onnxruntime import get_available_providers

    if "CUDAExecutionProvider" not in get_available_providers():
        with pytest.raises(ValueError, match="needs CUDAExecutionProvider"):
            device_providers("cuda")


def test_device_name():
    assert OrtGradientForwardBackwardFunction.device_name(ort_device("cpu")) == "cpu"


def test_selected_inputs_outputs_and_run_options(linear_onnx, regression_data, backend):
    """output_names restricts what forward returns; run_options reach the runs."""
    X, _ = regression_data
    model = onnx.ModelProto()
    model.CopyFrom(linear_onnx)
    model.graph.output.append(onnx.helper.make_tensor_value_info(
        "multiplied", onnx.TensorProto.FLOAT, [None, 1]))
    options = RunOptions()
    options.logid = "seed-run"
    engine = OrtGradientForwardBackward(
        model, ["coef"], input_names=["X"], output_names=["multiplied"],
        run_options=options, backend=backend)
    cls = engine.cls_type_
    assert (cls.input_names, cls.output_names) == (["X"], ["multiplied"])
    assert cls._run_options is options
    coef = engine.get_initializer("coef")
    function = engine.new_instance()
    outputs = function.forward([X, coef], training=True)
    assert len(outputs) == 1
    np.testing.assert_allclose(outputs[0].numpy(), X @ coef, rtol=1e-5, atol=1e-6)
    gradient = np.ones((X.shape[0], 1), dtype=np.float32)
    assert cls.grad_names == ["X_grad", "coef_grad"]
    np.testing.assert_allclose(function.backward([gradient])[1].numpy(), X.T @ gradient,
                               rtol=1e-5, atol=1e-5)


def test_graph_builder_config(linear_onnx):
    if not TRAINING:
        with pytest.raises(ValueError, match="needs backend='onnxruntime-training'"):
            OrtGradientForwardBackward(linear_onnx, graph_builder_config=object())
        return
    from onnxruntime.capi._pybind_state import OrtModuleGraphBuilderConfiguration

    config = OrtModuleGraphBuilderConfiguration()
    OrtGradientForwardBackward(linear_onnx, ["coef", "intercept"], graph_builder_config=config,
                               backend="onnxruntime-training")
    # The given configuration is the one the builder used.
    assert list(config.initializer_names_to_train) == ["coef", "intercept"]
    with pytest.raises(ValueError, match="needs backend='onnxruntime-training', got 'onnx'"):
        OrtGradientForwardBackward(linear_onnx, graph_builder_config=config, backend="onnx")


def test_backward_returns_input_gradients_against_finite_differences(mlp_onnx, regression_data,
                                                                     backend):
    """Seed 001: backward returns the gradient of the float inputs before the weights'."""
    _, onx = mlp_onnx
    X = regression_data[0][:6]
    engine = OrtGradientForwardBackward(onx, backend=backend)
    cls = engine.cls_type_
    assert cls.grad_input_names == ["X"]
    assert cls.grad_names == ["X_grad"] + [f"{w}_grad" for w in cls.weights_to_train]
    weights = [engine.get_initializer(name).astype(np.float32) for name in cls.weights_to_train]
    g = np.random.RandomState(2).randn(X.shape[0], 1).astype(np.float32)

    def inner(x):  # <g, f(x)> in float64
        out = engine.new_instance().forward([x, *weights])[0].numpy().astype(np.float64)
        return float((out * g).sum())

    fn = engine.new_instance()
    fn.forward([X, *weights], training=True)
    grads = fn.backward([g])
    assert len(grads) == 1 + len(weights)
    eps = 1e-2
    for index in list(np.ndindex(X.shape))[:8]:
        plus, minus = X.copy(), X.copy()
        plus[index] += eps
        minus[index] -= eps
        numeric = (inner(plus) - inner(minus)) / (2 * eps)
        assert grads[0].numpy()[index] == pytest.approx(numeric, rel=2e-2, abs=2e-2)


def test_backward_skips_integer_and_unused_inputs(backend):
    """An int64 input has no gradient, nor a float input that reaches no output."""
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["xw"]),
         helper.make_node("Cast", ["K"], ["k"], to=TensorProto.FLOAT),
         helper.make_node("Add", ["xw", "k"], ["Y"])],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2]),
         helper.make_tensor_value_info("K", TensorProto.INT64, [None, 1]),
         helper.make_tensor_value_info("unused", TensorProto.FLOAT, [None, 1])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 1])],
        [numpy_helper.from_array(np.array([[1.0], [2.0]], dtype=np.float32), "W")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    engine = OrtGradientForwardBackward(model, backend=backend)
    assert engine.cls_type_.grad_input_names == ["X"]
    assert engine.cls_type_.grad_names == ["X_grad", "W_grad"]
    X = np.array([[1.0, 0.0], [0.0, 3.0], [2.0, 1.0]], dtype=np.float32)
    K = np.array([[1], [2], [3]], dtype=np.int64)
    fn = engine.new_instance()
    out = fn.forward([X, K, np.zeros((3, 1), dtype=np.float32), engine.get_initializer("W")],
                     training=True)
    np.testing.assert_allclose(out[0].numpy(), X @ [[1.0], [2.0]] + K)
    g = np.array([[1.0], [-1.0], [2.0]], dtype=np.float32)
    x_grad, w_grad = (v.numpy() for v in fn.backward([g]))
    np.testing.assert_allclose(x_grad, g @ [[1.0, 2.0]])
    np.testing.assert_allclose(w_grad, X.T @ g)


def test_logistic_regression_backward_has_three_gradients(backend):
    """onnxcustom's test_forward_training_logreg: X, coef and intercept get a gradient."""
    from skl2onnx import to_onnx
    from sklearn.datasets import make_classification
    from sklearn.linear_model import LogisticRegression

    from skl_ortgrad.graph.cut import select_model_output

    X, y = make_classification(60, n_features=5, n_classes=3, n_informative=3, random_state=0)
    X = X.astype(np.float32)
    model = LogisticRegression().fit(X, y)
    onx = to_onnx(model, X, target_opset=21, black_op={"LinearClassifier"},
                  options={"zipmap": False})
    onx = select_model_output(onx, "probabilities")
    engine = OrtGradientForwardBackward(onx, debug=True, backend=backend)
    assert engine.cls_type_.grad_names == ["X_grad", "coef_grad", "intercept_grad"]
    coef = model.coef_.astype(np.float32).T
    # scikit-learn's intercept_ is [3], skl2onnx's initializer [1, 3]: reshaped, as
    # onnxruntime-training's agent takes it (the onnx backend's session would refuse it).
    intercept = model.intercept_.astype(np.float32)
    assert engine.get_initializer("intercept").shape == (1, 3)
    fn = engine.new_instance()
    proba = fn.forward([X, coef, intercept], training=True)[0].numpy()
    np.testing.assert_allclose(proba, model.predict_proba(X), atol=1e-5)
    target = np.eye(3, dtype=np.float32)[y]
    grads = [v.numpy() for v in fn.backward([target])]
    # Gradients have the initializers' shapes.
    assert [g.shape for g in grads] == [X.shape, coef.shape, (1, 3)]
    # d<t, softmax(s)>/ds = p * (t - <t, p>) per row, s = X coef + intercept.
    ds = proba * (target - (target * proba).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(grads[0], ds @ coef.T, atol=1e-4)
    np.testing.assert_allclose(grads[1], X.T @ ds, atol=1e-4)
    np.testing.assert_allclose(grads[2].ravel(), ds.sum(axis=0), atol=1e-4)


def test_weights_of_another_shape_are_reshaped_when_sizes_match(linear_onnx, regression_data,
                                                                backend):
    X, _ = regression_data
    engine = OrtGradientForwardBackward(linear_onnx, debug=True, backend=backend)
    coef = engine.get_initializer("coef")  # [4, 1]
    intercept = engine.get_initializer("intercept")
    expected = X @ coef + intercept
    device = ort_device("cpu")
    for flat in (coef.ravel(), OrtValue.ortvalue_from_numpy(coef.ravel(), device)):
        fn = engine.new_instance()
        out = fn.forward([X, flat, intercept], training=True)
        np.testing.assert_allclose(out[0].numpy(), expected, rtol=1e-5, atol=1e-5)
        grads = fn.backward([np.ones((X.shape[0], 1), dtype=np.float32)])
        assert grads[1].numpy().shape == (4, 1)
    # An OrtValueVector holding it too.
    vector = OrtValueVector()
    for value in (X, coef.ravel(), intercept):
        vector.push_back(OrtValue.ortvalue_from_numpy(value, device))
    out = engine.new_instance().forward(vector)
    np.testing.assert_allclose(out[0].numpy(), expected, rtol=1e-5, atol=1e-5)
    # Another number of values is still an error.
    with pytest.raises(ValueError, match="Input 'coef' has shape \\[3\\]"):
        engine.new_instance().forward([X, coef.ravel()[:3], intercept])


def test_output_gradient_of_another_shape_is_read_in_the_outputs(linear_onnx, regression_data,
                                                                  backend):
    """onnxcustom's test_forward_training_logreg passes y.reshape((1, -1)) for an (n, 1)
    output: onnxruntime-training's agent reads it in the output's shape, so does the
    onnx backend."""
    X, _ = regression_data
    engine = OrtGradientForwardBackward(linear_onnx, backend=backend)
    coef, intercept = engine.get_initializer("coef"), engine.get_initializer("intercept")
    g = np.random.RandomState(5).randn(X.shape[0], 1).astype(np.float32)
    fn = engine.new_instance()
    fn.forward([X, coef, intercept], training=True)
    grads = fn.backward([g.reshape((1, -1)).copy()])
    np.testing.assert_allclose(grads[1].numpy(), X.T @ g, rtol=1e-4, atol=1e-4)
