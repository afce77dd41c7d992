"""Loss merging, penalties, graph cutting and rewriting, weight selection."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime import InferenceSession
from skl2onnx import to_onnx
from sklearn.linear_model import LinearRegression, LogisticRegression, SGDClassifier
from sklearn.neural_network import MLPRegressor
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MinMaxScaler, StandardScaler

from skl_ortgrad.gradient.derivative import DerivativeOptions, onnx_derivative
from skl_ortgrad.graph.cut import select_model_output
from skl_ortgrad.graph.ml_rewrites import rewrite_no_gradient_ops
from skl_ortgrad.graph.model import make_model
from skl_ortgrad.graph.weights import get_train_initializer
from skl_ortgrad.objective.loss_graphs import build_loss_graph
from skl_ortgrad.objective.merge import add_loss_output, merge_loss_graph
from skl_ortgrad.objective.penalty import penalty_loss_onnx

TARGET = {"": 21, "ai.onnx.ml": 3}
RNG = np.random.default_rng(0)
X = RNG.standard_normal((40, 3)).astype(np.float32) * 3 + 1
Y = (X @ np.array([1.0, -2.0, 0.5]) + 0.3).astype(np.float32)
YC = (Y > np.median(Y)).astype(np.int64)
Y3 = np.digitize(Y, np.quantile(Y, [0.33, 0.66]))


def run(model, feeds):
    sess = InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def convert(model, classifier=False):
    options = {id(model): {"zipmap": False}} if classifier else None
    return to_onnx(
        model,
        X[:1],
        target_opset=TARGET,
        black_op={"LinearRegressor", "LinearClassifier"},
        options=options,
    )


@pytest.fixture(scope="module")
def linreg():
    model = LinearRegression().fit(X, Y)
    return model, convert(model)


def test_merge_loss_graph_weighted(linreg):
    model, onx = linreg
    merged = merge_loss_graph(
        onx, build_loss_graph("squared_error", weighted=True), weight_name="sw"
    )
    assert [i.name for i in merged.graph.input] == ["X", "label", "sw"]
    assert [o.name for o in merged.graph.output] == ["loss"]
    assert {"coef", "intercept"} <= {i.name for i in merged.graph.initializer}
    assert list(get_train_initializer(merged)) == ["coef", "intercept"]
    label = (Y + RNG.standard_normal(Y.shape)).astype(np.float32).reshape(-1, 1)
    sw = RNG.uniform(0, 2, len(X)).astype(np.float32)
    (loss,) = run(merged, {"X": X, "label": label, "sw": sw})
    expected = (0.5 * (model.predict(X).reshape(-1, 1) - label) ** 2).ravel() @ sw
    assert loss == pytest.approx(expected, rel=1e-4)


def test_merge_loss_graph_rank1_output():
    # A rank-1 prediction [N] must become [N, 1], not broadcast into [N, N].
    w = numpy_helper.from_array(np.array([[1.0], [2.0], [3.0]], dtype=np.float32), "w")
    shape = numpy_helper.from_array(np.array([-1], dtype=np.int64), "shape")
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["X", "w"], ["mm"]),
            helper.make_node("Reshape", ["mm", "shape"], ["pred"]),
        ],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 3])],
        [helper.make_tensor_value_info("pred", TensorProto.FLOAT, [None])],
        [w, shape],
    )
    merged = add_loss_output(make_model(graph), "absolute_error")
    label = Y.reshape(-1, 1)
    (loss,) = run(merged, {"X": X, "label": label})
    assert loss.shape == (1, 1)
    assert loss[0, 0] == pytest.approx(np.abs(X @ [1.0, 2.0, 3.0] - Y).sum(), rel=1e-4)


def test_merge_loss_graph_errors(linreg):
    onx = linreg[1]
    with pytest.raises(ValueError, match="clash"):
        merge_loss_graph(onx, build_loss_graph("l2"), label_name="X")
    with pytest.raises(ValueError, match="weight_name must be given"):
        merge_loss_graph(onx, build_loss_graph("l2", weighted=True))
    with pytest.raises(ValueError, match="output_index"):
        merge_loss_graph(onx, build_loss_graph("l2"), output_index=3)


def test_add_loss_output_with_penalty(linreg):
    model, onx = linreg
    penalty = {"coef": {"l1": 0.1, "l2": 0.4}, "intercept": {"l2": 2.0}}
    with_loss = add_loss_output(onx, "huber", penalty=penalty, epsilon=0.5)
    assert [o.name for o in with_loss.graph.output] == ["loss"]
    label = (Y + RNG.standard_normal(Y.shape)).astype(np.float32).reshape(-1, 1)
    (loss,) = run(with_loss, {"X": X, "label": label})
    d = np.abs(model.predict(X).reshape(-1, 1) - label)
    data = np.where(d <= 0.5, 0.5 * d**2, 0.5 * d - 0.125).sum()
    coef, b = model.coef_, model.intercept_
    # Seed 003: |w| alpha + w^2 beta.
    pen = 0.1 * np.abs(coef).sum() + 0.4 * (coef**2).sum() + 2.0 * b**2
    assert loss.shape == (1, 1)
    assert loss[0, 0] == pytest.approx(data + pen, rel=1e-4)
    # Its gradient, against the closed form in float64 at the fitted weights (not the
    # optimum of the noisy labels): X^T clip(r, -eps, eps) + l1 sign(coef) + 2 l2 coef for
    # the coefficients, sum clip(r, -eps, eps) + 2 l2 b for the intercept, r = Xw + b - y.
    grad = onnx_derivative(with_loss, weights=["coef", "intercept"], inputs=[],
                           options=DerivativeOptions.Loss)
    assert [o.name for o in grad.graph.output] == ["coef_grad", "intercept_grad"]
    coef32 = coef.reshape(-1, 1).astype(np.float32)
    b32 = np.array([b], dtype=np.float32)
    coef_grad, intercept_grad = run(
        grad, {"X": X, "label": label, "coef": coef32, "intercept": b32})
    w, b64, x = coef32.astype(np.float64), b32.astype(np.float64), X.astype(np.float64)
    slope = np.clip(x @ w + b64 - label, -0.5, 0.5)
    penalty_grad = 0.1 * np.sign(w) + 2 * 0.4 * w
    np.testing.assert_allclose(coef_grad, x.T @ slope + penalty_grad, rtol=1e-5)
    np.testing.assert_allclose(intercept_grad, slope.sum(axis=0) + 2 * 2.0 * b64, rtol=1e-5)
    # The penalty's part alone: the same gradient without the penalty differs by it.
    plain = onnx_derivative(add_loss_output(onx, "huber", epsilon=0.5),
                            weights=["coef", "intercept"], inputs=[],
                            options=DerivativeOptions.Loss)
    plain_coef, plain_intercept = run(
        plain, {"X": X, "label": label, "coef": coef32, "intercept": b32})
    np.testing.assert_allclose(coef_grad - plain_coef, penalty_grad, rtol=1e-4)
    np.testing.assert_allclose(intercept_grad - plain_intercept, 2 * 2.0 * b64, rtol=1e-4)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_penalty_loss_onnx(dtype):
    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
    nodes = penalty_loss_onnx("W", dtype, l1=0.3, l2=0.8, existing_names={"W_abs"})
    assert nodes[-1].output[0] == "W_penalty"
    produced = [o for n in nodes for o in n.output]
    assert "W_abs" not in produced
    graph = helper.make_graph(
        nodes,
        "p",
        [helper.make_tensor_value_info("W", elem, [None, None])],
        [helper.make_tensor_value_info("W_penalty", elem, [])],
    )
    W = RNG.standard_normal((4, 2)).astype(dtype)
    (pen,) = run(make_model(graph), {"W": W})
    assert pen.dtype == dtype
    assert pen == pytest.approx(0.3 * np.abs(W).sum() + 0.8 * (W**2).sum(), rel=1e-5)
    with pytest.raises(ValueError, match="already exists"):
        penalty_loss_onnx("W", dtype, l1=1.0, existing_names={"W_penalty"})


@pytest.mark.parametrize("y", [YC, Y3], ids=["binary", "multiclass"])
def test_select_model_output_raw_scores(y):
    model = LogisticRegression().fit(X, y)
    onx = convert(model, classifier=True)
    cut = select_model_output(onx, "raw_scores")
    assert [o.name for o in cut.graph.output] == ["raw_scores"]
    assert [i.name for i in cut.graph.input] == ["X"]
    assert {n.op_type for n in cut.graph.node} == {"MatMul", "Add"}
    assert {i.name for i in cut.graph.initializer} == {"coef", "intercept"}
    (scores,) = run(cut, {"X": X})
    expected = model.decision_function(X)
    if expected.ndim == 1:
        # skl2onnx keeps two columns [-s, s] for a binary LogisticRegression.
        np.testing.assert_allclose(scores[:, 1], expected, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(scores[:, 0], -expected, rtol=1e-4, atol=1e-4)
    else:
        np.testing.assert_allclose(scores, expected, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="No result named"):
        select_model_output(onx, "nothing")


@pytest.mark.parametrize("scaler", [StandardScaler, MinMaxScaler])
def test_rewrite_no_gradient_ops(scaler):
    pipe = make_pipeline(scaler(), LinearRegression()).fit(X, Y)
    onx = convert(pipe)
    rewritten = rewrite_no_gradient_ops(onx)
    assert not any(n.op_type == "Scaler" for n in rewritten.graph.node)
    np.testing.assert_allclose(
        run(rewritten, {"X": X})[0], run(onx, {"X": X})[0], rtol=1e-5, atol=1e-5
    )
    np.testing.assert_allclose(
        run(rewritten, {"X": X})[0].ravel(), pipe.predict(X), rtol=1e-4, atol=1e-4
    )
    # The scaler constants are no weights.
    assert list(get_train_initializer(rewritten)) == ["coef", "intercept"]
    # The squared error sum (Xs w + b - y)^2 of the scaled features Xs: its gradient is
    # 2 Xs^T r and 2 sum r, r = Xs w + b - y (float64 numpy), away from the optimum; at
    # the optimum (Y is exactly linear in X) it is float32 noise next to that.
    grad = onnx_derivative(add_loss_output(rewritten), weights=["coef", "intercept"],
                           inputs=[], options=DerivativeOptions.Loss)
    scaled = pipe[0].transform(X).astype(np.float64)
    optimum = (pipe[-1].coef_.reshape(-1, 1), np.array([pipe[-1].intercept_]))
    shifted = (optimum[0] + np.array([[0.5], [-0.25], [1.0]]), optimum[1] + 0.3)
    shifted = tuple(w.astype(np.float32) for w in shifted)

    def gradient(coef, intercept):
        return run(grad, {"X": X, "label": Y.reshape(-1, 1), "coef": coef.astype(np.float32),
                          "intercept": intercept.astype(np.float32)})

    coef_grad, intercept_grad = gradient(*shifted)
    residual = scaled @ shifted[0] + shifted[1] - Y.reshape(-1, 1)
    np.testing.assert_allclose(coef_grad, 2 * scaled.T @ residual, rtol=1e-5)
    np.testing.assert_allclose(intercept_grad, 2 * residual.sum(axis=0), rtol=1e-5)
    for got, away in zip(gradient(*optimum), (coef_grad, intercept_grad), strict=True):
        assert np.abs(got).max() < 1e-4 * np.abs(away).max()


def test_rewrite_scaler_gradient_is_correct():
    pipe = make_pipeline(StandardScaler(), LinearRegression()).fit(X, Y)
    rewritten = rewrite_no_gradient_ops(convert(pipe))
    grad = onnx_derivative(rewritten, weights=list(get_train_initializer(rewritten)),
                           inputs=["X"])
    # A random output gradient g: the columns of the standardized X sum to 0, so g = 1
    # would expect a coefficient gradient of about 1e-6 that any small value matches.
    g = RNG.standard_normal((len(X), 1)).astype(np.float32)
    coef = pipe[-1].coef_.reshape(-1, 1).astype(np.float32)
    feeds = {"X": X, "coef": coef, "intercept": np.zeros(1, np.float32), "variable_grad": g}
    X_grad, coef_grad, intercept_grad = run(grad, feeds)
    scaled = pipe[0].transform(X).astype(np.float64)
    g64 = g.astype(np.float64)
    np.testing.assert_allclose(coef_grad, scaled.T @ g64, rtol=1e-5)
    np.testing.assert_allclose(intercept_grad, g64.sum(axis=0), rtol=1e-5)
    # y = ((X - mean) / scale) w + b: dy/dX = g (w / scale)^T.
    np.testing.assert_allclose(X_grad, g64 @ (coef.ravel() / pipe[0].scale_)[None, :],
                               rtol=1e-5)


def test_get_train_initializer():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mlp = MLPRegressor(hidden_layer_sizes=(5,), max_iter=5).fit(X, Y)
    cases = [
        (convert(LinearRegression().fit(X, Y)), ["coef", "intercept"]),
        (convert(LogisticRegression().fit(X, YC), classifier=True), ["coef", "intercept"]),
        (convert(SGDClassifier().fit(X, YC)), ["coef", "intercept"]),
        (convert(mlp), ["coefficient", "intercepts", "coefficient1", "intercepts1"]),
        (
            convert(make_pipeline(StandardScaler(), LinearRegression()).fit(X, Y)),
            ["coef", "intercept"],
        ),
    ]
    for onx, expected in cases:
        assert list(get_train_initializer(onx)) == expected
