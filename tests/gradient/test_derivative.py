"""onnx_derivative against analytic gradients and finite differences; random_feed."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from _backends import requires_training
from onnxruntime import InferenceSession
from skl2onnx import to_onnx
from sklearn.linear_model import LinearRegression
from sklearn.neural_network import MLPRegressor

from skl_ortgrad.gradient.derivative import DerivativeOptions, onnx_derivative, random_feed
from skl_ortgrad.objective.merge import add_loss_output

TARGET = {"": 21, "ai.onnx.ml": 3}
D = DerivativeOptions


def session(model):
    return InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


@pytest.fixture(scope="module")
def linreg():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((20, 3)).astype(np.float32)
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.3
    model = LinearRegression().fit(X, y)
    onx = to_onnx(model, X[:1], target_opset=TARGET, black_op={"LinearRegressor"})
    coef = model.coef_.reshape(-1, 1).astype(np.float32)
    intercept = np.array([model.intercept_], dtype=np.float32)
    return onx, X, y.astype(np.float32), coef, intercept


def test_options_are_distinct_flags():
    values = [D.KeepYieldOp, D.KeepOutputs, D.FillGrad, D.Loss]
    assert D.Zero == 0
    assert len({int(v) for v in values}) == 4
    assert all(int(v) & (int(v) - 1) == 0 and int(v) > 0 for v in values)


def test_zero_linear_regression(linreg, backend):
    """Seed 002: weights=None and inputs=None differentiate all real weights and inputs."""
    onx, X, _, coef, intercept = linreg
    grad = onnx_derivative(onx, backend=backend)
    assert not any(n.op_type == "YieldOp" for n in grad.graph.node)
    sess = session(grad)
    names = [i.name for i in sess.get_inputs()]
    assert names == ["X", "coef", "intercept", "variable_grad"]
    assert [o.name for o in sess.get_outputs()] == ["X_grad", "coef_grad", "intercept_grad"]
    g = np.random.default_rng(1).standard_normal((X.shape[0], 1)).astype(np.float32)
    # Other weights than the trained ones: the weights are inputs.
    coef2 = coef + 1
    X_grad, coef_grad, intercept_grad = sess.run(
        None, {"X": X, "coef": coef2, "intercept": intercept, "variable_grad": g}
    )
    np.testing.assert_allclose(X_grad, g @ coef2.T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(coef_grad, X.T @ g, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(intercept_grad, g.sum(axis=0), rtol=1e-5, atol=1e-5)


@requires_training
def test_keep_yield_op(linreg):
    onx = linreg[0]
    grad = onnx_derivative(onx, options=D.KeepYieldOp, backend="onnxruntime-training")
    assert [n.op_type for n in grad.graph.node].count("YieldOp") == 1
    with pytest.raises(ValueError, match="KeepYieldOp"):
        onnx_derivative(onx, options=D.KeepYieldOp | D.FillGrad)


def test_keep_yield_op_needs_the_training_backend(linreg):
    with pytest.raises(ValueError, match=r"KeepYieldOp .* needs backend='onnxruntime-training'"):
        onnx_derivative(linreg[0], options=D.KeepYieldOp, backend="onnx")


def test_keep_outputs_fill_grad(linreg, backend):
    onx, X, _, coef, intercept = linreg
    grad = onnx_derivative(onx, inputs=[], options=D.KeepOutputs | D.FillGrad, backend=backend)
    sess = session(grad)
    assert [i.name for i in sess.get_inputs()] == ["X", "coef", "intercept"]
    assert [o.name for o in sess.get_outputs()] == ["variable", "coef_grad", "intercept_grad"]
    pred, coef_grad, intercept_grad = sess.run(None, {"X": X, "coef": coef, "intercept": intercept})
    np.testing.assert_allclose(pred, X @ coef + intercept, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(coef_grad, X.sum(axis=0).reshape(-1, 1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(intercept_grad, [X.shape[0]], rtol=1e-6)


def test_input_gradient(linreg, backend):
    onx, X, _, coef, intercept = linreg
    grad = onnx_derivative(onx, inputs=["X"], backend=backend)
    sess = session(grad)
    assert [o.name for o in sess.get_outputs()] == ["X_grad", "coef_grad", "intercept_grad"]
    g = np.random.default_rng(2).standard_normal((X.shape[0], 1)).astype(np.float32)
    X_grad = sess.run(None, {"X": X, "coef": coef, "intercept": intercept, "variable_grad": g})[0]
    np.testing.assert_allclose(X_grad, g @ coef.T, rtol=1e-5, atol=1e-6)


def test_loss_option(linreg, tmp_path, backend):
    onx, X, y, coef, intercept = linreg
    with_loss = add_loss_output(onx)
    path = tmp_path / "grad.onnx"
    grad = onnx_derivative(
        with_loss, weights=["coef", "intercept"], options=D.Loss | D.KeepOutputs,
        path_name=str(path), backend=backend,
    )
    assert path.exists()
    assert onnx.load(str(path)).graph.output[0].name == "loss"
    sess = session(grad)
    assert [i.name for i in sess.get_inputs()] == ["X", "label", "coef", "intercept"]
    # inputs=None: every real input but the label.
    assert [o.name for o in sess.get_outputs()] == [
        "loss", "X_grad", "coef_grad", "intercept_grad"]
    coef2 = coef * 0.5
    loss, X_grad, coef_grad, intercept_grad = sess.run(
        None, {"X": X, "label": y.reshape(-1, 1), "coef": coef2, "intercept": intercept}
    )
    residual = X @ coef2 + intercept - y.reshape(-1, 1)
    # add_loss_output's squared error is the plain sum of squares (seed 003).
    assert loss.shape == (1, 1)
    assert loss[0, 0] == pytest.approx((residual**2).sum(), rel=1e-4)
    np.testing.assert_allclose(X_grad, 2 * residual @ coef2.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(coef_grad, 2 * X.T @ residual, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(intercept_grad, 2 * residual.sum(axis=0), rtol=1e-4,
                               atol=1e-4)


def test_errors(linreg):
    onx = linreg[0]
    with pytest.raises(ValueError, match="Nothing to differentiate"):
        onnx_derivative(onx, weights=[], inputs=[])
    with pytest.raises(TypeError, match="options must be a DerivativeOptions"):
        onnx_derivative(onx, options="Loss")
    # Seed 002 (onnxcustom's test_grad_helper_exc): an int is no DerivativeOptions.
    with pytest.raises(TypeError, match="got int 2"):
        onnx_derivative(onx, options=int(D.KeepOutputs))
    # onnxcustom's test_grad_helper_fillgrad: filled output gradients need KeepOutputs.
    with pytest.raises(ValueError, match=r"FillGrad needs DerivativeOptions\.KeepOutputs"):
        onnx_derivative(onx, weights=[], options=D.FillGrad)
    assert onnx_derivative(onx, options=D.KeepOutputs).graph.output[0].name == "variable"
    with pytest.raises(ValueError, match="not initializers"):
        onnx_derivative(onx, weights=["nope"])
    with pytest.raises(ValueError, match="not inputs"):
        onnx_derivative(onx, inputs=["Z"])
    with pytest.raises(ValueError, match="no output 'loss'"):
        onnx_derivative(onx, options=D.Loss)


def test_mlp_regressor_finite_differences(backend):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, 3)).astype(np.float32)
    y = (X[:, 0] - X[:, 1] ** 2).astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mlp = MLPRegressor(hidden_layer_sizes=(4,), activation="tanh", max_iter=20).fit(X, y)
    onx = to_onnx(mlp, X[:1], target_opset=TARGET)
    names = ["coefficient", "intercepts", "coefficient1", "intercepts1"]
    grad = onnx_derivative(add_loss_output(onx), weights=names, inputs=[],
                           options=D.Loss | D.KeepOutputs, backend=backend)
    sess = session(grad)
    assert [i.name for i in sess.get_inputs()][2:] == names
    weights = {n: onnx.numpy_helper.to_array(i) for i in onx.graph.initializer for n in [i.name]}
    feeds = {"X": X, "label": y.reshape(-1, 1), **{n: weights[n].copy() for n in names}}
    _, *grads = sess.run(None, feeds)

    def loss_at(name, idx, delta):
        local = {**feeds, name: feeds[name].copy()}
        local[name][idx] += delta
        return float(sess.run(None, local)[0][0, 0])

    h = 1e-2
    for name, g in zip(names, grads, strict=True):
        assert g.shape == feeds[name].shape
        for idx in list(np.ndindex(g.shape))[:4]:
            fd = (loss_at(name, idx, h) - loss_at(name, idx, -h)) / (2 * h)
            assert g[idx] == pytest.approx(fd, rel=2e-2, abs=2e-3), (name, idx)


def test_random_feed(linreg, backend):
    onx = linreg[0]
    grad = onnx_derivative(onx, backend=backend)
    feeds = random_feed(session(grad).get_inputs(), batch=7)
    assert {k: v.shape for k, v in feeds.items()} == {
        "X": (7, 3),
        "coef": (3, 1),
        "intercept": (1,),
        "variable_grad": (7, 1),
    }
    assert all(v.dtype == np.float32 for v in feeds.values())
    graph = onnx.helper.make_graph(
        [],
        "g",
        [
            onnx.helper.make_tensor_value_info("a", onnx.TensorProto.DOUBLE, ["N", "M", 2]),
            onnx.helper.make_tensor_value_info("b", onnx.TensorProto.INT64, [None]),
        ],
        [],
    )
    feeds = random_feed(graph.input, batch=5, empty_dimension=3)
    assert feeds["a"].shape == (5, 3, 2)
    assert feeds["a"].dtype == np.float64
    assert feeds["b"].shape == (5,)
    assert feeds["b"].dtype == np.int64
