"""Loss graphs: values against numpy, gradients against finite differences."""

from __future__ import annotations

import numpy as np
import pytest
from onnxruntime import InferenceSession

from skl_ortgrad.gradient.derivative import DerivativeOptions, onnx_derivative
from skl_ortgrad.objective.loss_graphs import LOSS_BUILDERS, build_loss_graph

KINDS = [
    "squared_error",
    "absolute_error",
    "elastic",
    "huber",
    "epsilon_insensitive",
    "squared_epsilon_insensitive",
    "poisson",
    "log",
    "softmax_log",
    "hinge",
    "squared_hinge",
    "modified_huber",
]
CLASSIFICATION = {"log", "softmax_log", "hinge", "squared_hinge", "modified_huber"}


def _sigmoid(s):
    return 1 / (1 + np.exp(-s))


def numpy_loss(kind, y, p, w=None, **params):
    """Reference: sum_i w_i sum_k l(y_ik, p_ik)."""
    d = p - y
    if kind == "squared_error":
        ell = 0.5 * d**2
    elif kind == "absolute_error":
        ell = np.abs(d)
    elif kind == "elastic":
        a, b = params.get("l1_weight", 0.5), params.get("l2_weight", 0.5)
        ell = a * np.abs(d) + b * 0.5 * d**2
    elif kind == "huber":
        e = params.get("epsilon", 0.1)
        ell = np.where(np.abs(d) <= e, 0.5 * d**2, e * np.abs(d) - 0.5 * e**2)
    elif kind == "epsilon_insensitive":
        ell = np.maximum(0, np.abs(d) - params.get("epsilon", 0.1))
    elif kind == "squared_epsilon_insensitive":
        ell = np.maximum(0, np.abs(d) - params.get("epsilon", 0.1)) ** 2
    elif kind == "poisson":
        ell = np.exp(p) - y * p
    elif kind == "log":
        eps = params.get("eps", 1e-5)
        q = (1 - eps) * _sigmoid(p) + eps / 2
        ell = -y * np.log(q) - (1 - y) * np.log(1 - q)
    elif kind == "softmax_log":
        eps = params.get("eps", 1e-5)
        e = np.exp(p - p.max(axis=1, keepdims=True))
        q = (1 - eps) * e / e.sum(axis=1, keepdims=True) + eps / p.shape[1]
        ell = -y * np.log(q)
    elif kind == "hinge":
        ell = np.maximum(0, params.get("threshold", 1.0) - (2 * y - 1) * p)
    elif kind == "squared_hinge":
        ell = np.maximum(0, params.get("threshold", 1.0) - (2 * y - 1) * p) ** 2
    elif kind == "modified_huber":
        z = (2 * y - 1) * p
        ell = np.where(z >= -1, np.maximum(0, 1 - z) ** 2, -4 * z)
    else:
        raise AssertionError(kind)
    rows = ell.sum(axis=1)
    return float((rows if w is None else rows * w).sum())


def make_data(kind, n=7, k=3, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    p = rng.standard_normal((n, k)) * 2
    if kind == "softmax_log":
        y = np.eye(k)[rng.integers(0, k, n)]
    elif kind in CLASSIFICATION:
        y = rng.integers(0, 2, (n, k)).astype(np.float64)
    else:
        y = rng.standard_normal((n, k))
    w = rng.uniform(0.5, 2.0, n)
    return y.astype(dtype), p.astype(dtype), w.astype(dtype)


def run_loss(kind, y, p, w=None, **params):
    model = build_loss_graph(kind, y.dtype, weighted=w is not None, **params)
    sess = InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"label": y, "prediction": p}
    if w is not None:
        feeds["weight"] = w
    (loss,) = sess.run(None, feeds)
    return loss


def loss_gradient(kind, y, p, w=None, **params):
    model = build_loss_graph(kind, y.dtype, weighted=w is not None, **params)
    grad = onnx_derivative(model, weights=[], inputs=["prediction"], options=DerivativeOptions.Loss)
    sess = InferenceSession(grad.SerializeToString(), providers=["CPUExecutionProvider"])
    assert [o.name for o in sess.get_outputs()] == ["prediction_grad"]
    feeds = {"label": y, "prediction": p}
    if w is not None:
        feeds["weight"] = w
    return sess.run(None, feeds)[0]


def finite_differences(kind, y, p, w=None, h=1e-6, **params):
    fd = np.empty_like(p)
    for idx in np.ndindex(p.shape):
        up, down = p.copy(), p.copy()
        up[idx] += h
        down[idx] -= h
        fd[idx] = numpy_loss(kind, y, up, w, **params) - numpy_loss(kind, y, down, w, **params)
        fd[idx] /= 2 * h
    return fd


PARAMS = [(kind, {}) for kind in KINDS] + [
    ("log", {"eps": 0}),
    ("softmax_log", {"eps": 0}),
    ("huber", {"epsilon": 0.5}),
    ("epsilon_insensitive", {"epsilon": 0.3}),
    ("squared_epsilon_insensitive", {"epsilon": 0.3}),
    ("hinge", {"threshold": 0.0}),
    ("hinge", {"threshold": 0.5}),
    ("squared_hinge", {"threshold": 0.5}),
    ("elastic", {"l1_weight": 0.2, "l2_weight": 1.5}),
]


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize(("kind", "params"), PARAMS)
def test_loss_value_and_gradient_float64(kind, params, weighted):
    y, p, w = make_data(kind)
    w = w if weighted else None
    loss = run_loss(kind, y, p, w, **params)
    assert loss.shape == ()
    assert loss.dtype == np.float64
    np.testing.assert_allclose(loss, numpy_loss(kind, y, p, w, **params), rtol=1e-10)
    grad = loss_gradient(kind, y, p, w, **params)
    np.testing.assert_allclose(grad, finite_differences(kind, y, p, w, **params), atol=1e-6)


@pytest.mark.parametrize(("kind", "params"), PARAMS)
def test_loss_float32_matches_float64(kind, params):
    y, p, w = make_data(kind, seed=1)
    y32, p32, w32 = y.astype(np.float32), p.astype(np.float32), w.astype(np.float32)
    loss = run_loss(kind, y32, p32, w32, **params)
    assert loss.dtype == np.float32
    np.testing.assert_allclose(loss, numpy_loss(kind, y, p, w, **params), rtol=1e-4)
    grad = loss_gradient(kind, y32, p32, w32, **params)
    assert grad.dtype == np.float32
    np.testing.assert_allclose(grad, loss_gradient(kind, y, p, w, **params), atol=1e-4)


def test_weights_multiply_rows_not_columns():
    # N=4 != K=3: a product across the wrong axis would not even broadcast the same way.
    y, p, _ = make_data("squared_error", n=4, k=3)
    w = np.array([0.0, 1.0, 0.0, 3.0])
    rows = (0.5 * (p - y) ** 2).sum(axis=1)
    assert run_loss("squared_error", y, p, w) == pytest.approx(rows[1] + 3 * rows[3])
    grad = loss_gradient("squared_error", y, p, w)
    np.testing.assert_allclose(grad, (p - y) * w[:, None])


def test_sign_flipped_gradient_is_detected():
    y, p, w = make_data("huber")
    grad = loss_gradient("huber", y, p, w)
    fd = finite_differences("huber", y, p, w)
    np.testing.assert_allclose(grad, fd, atol=1e-6)
    assert not np.allclose(-grad, fd, atol=1e-6)


# The Poisson loss is e^s by definition: at a score of 1e4 it is not representable (the
# optimizer's divergence check stops such training); every other loss stays finite.
@pytest.mark.parametrize(("kind", "params"), [case for case in PARAMS if case[0] != "poisson"])
def test_extreme_scores_are_finite_float32(kind, params):
    p = np.array([[1e4, -1e4, 0.5], [-1e4, 1e4, 1e4]], dtype=np.float32)
    if kind == "softmax_log":
        y = np.array([[0, 1, 0], [1, 0, 0]], dtype=np.float32)
    else:
        y = np.array([[0, 1, 1], [1, 0, 1]], dtype=np.float32)
    w = np.array([1.0, 2.0], dtype=np.float32)
    assert np.isfinite(run_loss(kind, y, p, w, **params))
    assert np.isfinite(loss_gradient(kind, y, p, w, **params)).all()


def test_log_loss_saturates_at_eps():
    # A confident wrong answer costs -log(eps / 2), not infinity.
    p = np.array([[1e4]], dtype=np.float32)
    y = np.array([[0.0]], dtype=np.float32)
    assert run_loss("log", y, p, eps=1e-5) == pytest.approx(-np.log(0.5e-5), rel=1e-3)
    # eps=0: the stable form is exactly the score.
    assert run_loss("log", y, p, eps=0) == pytest.approx(1e4)


def test_aliases():
    assert LOSS_BUILDERS["l2"] is LOSS_BUILDERS["squared_error"]
    assert LOSS_BUILDERS["square_error"] is LOSS_BUILDERS["squared_error"]
    assert LOSS_BUILDERS["l1"] is LOSS_BUILDERS["absolute_error"]
    assert LOSS_BUILDERS["log_loss"] is LOSS_BUILDERS["log"]
    assert LOSS_BUILDERS["neg_log"] is LOSS_BUILDERS["log"]
    y, p, _ = make_data("squared_error")
    assert run_loss("l1", y, p) == pytest.approx(numpy_loss("absolute_error", y, p))


def test_graph_contract():
    model = build_loss_graph("huber", weighted=True)
    assert [i.name for i in model.graph.input] == ["label", "prediction", "weight"]
    assert [o.name for o in model.graph.output] == ["loss"]
    assert model.ir_version == 10
    assert model.opset_import[0].version <= 21


def test_unknown_kind_and_parameter():
    with pytest.raises(ValueError, match=r"Unknown loss kind 'cubic'.*squared_error"):
        build_loss_graph("cubic")
    with pytest.raises(ValueError, match="does not accept parameter"):
        build_loss_graph("squared_error", epsilon=0.1)
    with pytest.raises(ValueError, match="opset"):
        build_loss_graph("squared_error", opset=22)
    for kind in ("hinge", "squared_hinge"):
        with pytest.raises(ValueError, match="threshold >= 0"):
            build_loss_graph(kind, threshold=-0.5)
    with pytest.raises(ValueError, match="epsilon >= 0"):
        build_loss_graph("squared_epsilon_insensitive", epsilon=-0.1)


_ELEMENTWISE = {"Add", "Sub", "Mul", "Div", "LessOrEqual"}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("kind", "params"), PARAMS)
def test_constants_have_the_rank_of_the_tensors_they_meet(kind, params, dtype):
    """Float constants of Add/Sub/Mul/Div/LessOrEqual are [1, 1], never 0-d or [1]:
    onnxruntime's CPU kernels broadcast a 0-d constant against [N, K] on a path 12x slower
    (8 µs per 1000 elements). Clip's bounds stay 0-d, as the operator requires."""
    graph = build_loss_graph(kind, dtype=dtype, **params).graph
    shapes = {init.name: list(init.dims) for init in graph.initializer
              if init.data_type in (1, 11)}  # float, double
    checked = 0
    for node in graph.node:
        for name in node.input:
            if name in shapes:
                expected = [1, 1] if node.op_type in _ELEMENTWISE else []
                assert shapes[name] == expected, (node.op_type, name, shapes[name])
                checked += 1
    assert checked or not shapes
