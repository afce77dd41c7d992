"""float64 MLPs: the engine's gradients and training steps match numpy and scikit-learn.

onnxruntime-training 1.19 has no double kernel for several gradient operators; the
engine rewrites them (skl_ortgrad.utils.gradient_rewrite) for float64 weights only.
"""

import warnings

import numpy as np
import onnx
import pytest
from _backends import requires_training
from skl2onnx import to_onnx
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier, MLPRegressor

from skl_ortgrad.gradient.forward_backward import OrtGradientForwardBackward
from skl_ortgrad.gradient.ort_rewrite import GRADIENT_REWRITES
from skl_ortgrad.graph.cut import select_model_output
from skl_ortgrad.graph.model import TARGET_OPSET
from skl_ortgrad.training.optimizers_partial import OrtGradientForwardBackwardOptimizer
from skl_ortgrad.training.sgd_learning_rate import LearningRateSGD

WEIGHTS = ["coefficient", "intercepts", "coefficient1", "intercepts1"]
ACTIVATIONS = ["relu", "tanh", "logistic", "identity"]
_ACT = {
    "relu": (lambda z: np.maximum(z, 0), lambda z, h: (z > 0).astype(z.dtype)),
    "tanh": (np.tanh, lambda z, h: 1 - h**2),
    "logistic": (lambda z: 1 / (1 + np.exp(-z)), lambda z, h: h * (1 - h)),
    "identity": (lambda z: z, lambda z, h: np.ones_like(z)),
}


@pytest.fixture(scope="module")
def data():
    rng = np.random.RandomState(0)
    X = rng.randn(40, 4)
    y = X @ np.array([1.5, -2.0, 0.5, 3.0]) + 0.7 + 0.1 * rng.randn(40)
    return X, y


def _fit(model, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return model.fit(X, y)


def _engine_gradients(onx, X, rng, backend):
    """Forward + backward with a random output gradient; returns it, outputs, gradients."""
    engine = OrtGradientForwardBackward(onx, weights_to_train=WEIGHTS, backend=backend)
    function = engine.new_instance()
    weights = [np.ascontiguousarray(engine.get_initializer(w)) for w in WEIGHTS]
    outputs = function.forward([X, *weights], training=True)
    output = outputs[0].numpy()
    grad_output = rng.randn(*output.shape)
    gradients = function.backward([grad_output])
    # The inputs' gradients come first (seed 001).
    first = len(engine.cls_type_.grad_input_names)
    return engine, grad_output, output, [gradients[first + i].numpy()
                                         for i in range(len(WEIGHTS))]


def _backprop(model, X, d_out):
    """Gradient of <d_out, out> w.r.t. (W0, b0, W1, b1) given d(out)/d(scores) = d_out."""
    forward, derivative = _ACT[model.activation]
    z = X @ model.coefs_[0] + model.intercepts_[0]
    h = forward(z)
    d_z = (d_out @ model.coefs_[1].T) * derivative(z, h)
    return [X.T @ d_z, d_z.sum(axis=0), h.T @ d_out, d_out.sum(axis=0)], h


def _assert_close(got, expected):
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == np.float64
        np.testing.assert_allclose(g.reshape(e.shape), e, rtol=1e-10, atol=1e-13)


def _no_rewritten_op_left(engine):
    graph = onnx.load_from_string(engine.gradient_model_).graph
    return not any((n.domain, n.op_type) in GRADIENT_REWRITES for n in graph.node)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_mlp_regressor_gradients(data, activation, backend):
    X, y = data
    mlp = _fit(MLPRegressor(hidden_layer_sizes=(6,), activation=activation, max_iter=20,
                            random_state=0), X, y)
    onx = to_onnx(mlp, X[:1], target_opset=TARGET_OPSET)
    engine, d_out, out, got = _engine_gradients(onx, X, np.random.RandomState(1), backend)
    np.testing.assert_allclose(out.ravel(), mlp.predict(X), rtol=1e-12)
    expected, _ = _backprop(mlp, X, d_out)
    _assert_close(got, expected)
    assert _no_rewritten_op_left(engine)


def _classifier(data, activation, n_classes):
    X, y = data
    labels = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    mlp = _fit(MLPClassifier(hidden_layer_sizes=(6,), activation=activation, max_iter=20,
                             random_state=0), X, labels)
    onx = to_onnx(mlp, X[:1], target_opset=TARGET_OPSET, options={"zipmap": False})
    return X, mlp, onx


@pytest.mark.parametrize("n_classes", [2, 3])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_mlp_classifier_probability_gradients(data, activation, n_classes, backend):
    X, mlp, onx = _classifier(data, activation, n_classes)
    onx = select_model_output(onx, "probabilities")
    engine, d_proba, proba, got = _engine_gradients(onx, X, np.random.RandomState(2), backend)
    np.testing.assert_allclose(proba, mlp.predict_proba(X), rtol=1e-12)
    if n_classes == 2:
        # probabilities = [1 - p, p] with p = sigmoid(score) (the Concat in the graph).
        p = proba[:, 1:]
        d_scores = (d_proba[:, 1:] - d_proba[:, :1]) * p * (1 - p)
    else:
        d_scores = proba * (d_proba - (d_proba * proba).sum(axis=1, keepdims=True))
    expected, _ = _backprop(mlp, X, d_scores)
    _assert_close(got, expected)
    assert _no_rewritten_op_left(engine)


@pytest.mark.parametrize("n_classes", [2, 3])
def test_mlp_classifier_raw_score_gradients(data, n_classes, backend):
    X, mlp, onx = _classifier(data, "relu", n_classes)
    # The scores are the input of the output activation (Sigmoid or Softmax).
    last = next(n for n in onx.graph.node if n.op_type in ("Sigmoid", "Softmax"))
    onx = select_model_output(onx, last.input[0])
    _, d_scores, scores, got = _engine_gradients(onx, X, np.random.RandomState(3), backend)
    expected, h = _backprop(mlp, X, d_scores)
    np.testing.assert_allclose(scores, h @ mlp.coefs_[1] + mlp.intercepts_[1], rtol=1e-12)
    _assert_close(got, expected)


def test_gradients_match_central_finite_differences(data, backend):
    """Independent of the analytic formulas above: d<g, f(W)>/dW by finite differences."""
    X, _, onx = _classifier(data, "tanh", 3)
    onx = select_model_output(onx, "probabilities")
    rng = np.random.RandomState(4)
    engine, d_proba, _, got = _engine_gradients(onx, X, rng, backend)
    function = engine.new_instance()
    weights = [np.ascontiguousarray(engine.get_initializer(w)) for w in WEIGHTS]

    def objective():
        return float(np.sum(d_proba * function.forward([X, *weights])[0].numpy()))

    eps = 1e-6
    for weight, grad in zip(weights, got, strict=True):
        flat = weight.reshape(-1)
        numeric = np.empty_like(flat)
        for i in range(flat.size):
            flat[i] += eps
            up = objective()
            flat[i] -= 2 * eps
            down = objective()
            flat[i] += eps
            numeric[i] = (up - down) / (2 * eps)
        np.testing.assert_allclose(grad.reshape(-1), numeric, rtol=1e-6, atol=1e-8)


@requires_training
def test_float32_graph_is_not_rewritten(data):
    """float32 keeps onnxruntime-training's fused, optimized gradient graph."""
    X, y = data
    X = X.astype(np.float32)
    mlp = _fit(MLPRegressor(hidden_layer_sizes=(6,), max_iter=20, random_state=0), X, y)
    engine = OrtGradientForwardBackward(to_onnx(mlp, X[:1], target_opset=TARGET_OPSET),
                                        weights_to_train=WEIGHTS,
                                        backend="onnxruntime-training")
    assert not _no_rewritten_op_left(engine)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_mlp_step_for_step_like_scikit_learn_in_float64(data, activation):
    """50 full-batch SGD steps in float64 give scikit-learn's weights to 1e-10."""
    X, y = data
    n = X.shape[0]
    y = y / 5
    mlp = MLPRegressor(hidden_layer_sizes=(6,), activation=activation, solver="sgd", momentum=0,
                       alpha=0, learning_rate_init=0.01, batch_size=n, shuffle=False,
                       random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        mlp.partial_fit(X, y)
    assert mlp.coefs_[0].dtype == np.float64
    onx = to_onnx(mlp, X[:1], target_opset=TARGET_OPSET)
    opt = OrtGradientForwardBackwardOptimizer(
        onx, batch_size=n, shuffle=False, learning_loss="squared_error",
        learning_rate=LearningRateSGD(eta0=0.01, learning_rate="constant"),
        learning_penalty=None,
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for _ in range(50):
            mlp.partial_fit(X, y)
            opt.partial_fit(X, y)
    expected = [w for pair in zip(mlp.coefs_, mlp.intercepts_, strict=True) for w in pair]
    assert opt.weights_to_train_ == WEIGHTS
    for got, want in zip(opt.weights_, expected, strict=True):
        assert got.dtype == np.float64
        np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-10, atol=1e-13)
    assert opt.t_ == 1 + 50 * n
