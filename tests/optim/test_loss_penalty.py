"""L2LossPenalty: the L2 term of every batch's loss, against its formulas; the trainer adds
it per batch as scikit-learn's MLP does."""

import numpy as np
import pytest
from onnxruntime import InferenceSession
from skl2onnx import to_onnx
from sklearn.base import clone
from sklearn.linear_model import LinearRegression

from skl_ortgrad import LearningRateSGD, SquareLearningLoss
from skl_ortgrad.optim.loss_penalty import L2LossPenalty
from skl_ortgrad.optim.penalties import ElasticLearningPenalty, NoLearningPenalty
from skl_ortgrad.training.trainer import Trainer


def _weights(dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in [(5, 3), (3,), (2, 2, 2)]]


def test_value_and_gradient_are_the_formulas():
    weights = _weights()
    penalty = L2LossPenalty(alpha=0.3)
    expected = 0.5 * 0.3 * sum(float((w**2).sum()) for w in weights)
    assert penalty.penalty_loss(weights) == pytest.approx(expected, rel=1e-14)
    for got, w in zip(penalty.gradient(weights), weights, strict=True):
        np.testing.assert_allclose(got, 0.3 * w, rtol=1e-15)


def test_the_gradient_is_the_values_finite_difference():
    weights, penalty, h = _weights(), L2LossPenalty(alpha=0.7), 1e-6
    gradient = penalty.gradient(weights)
    for i, w in enumerate(weights):
        for index in [(0,) * w.ndim, tuple(s - 1 for s in w.shape)]:
            moved = [v.copy() for v in weights]
            moved[i][index] += h
            up = penalty.penalty_loss(moved)
            moved[i][index] -= 2 * h
            down = penalty.penalty_loss(moved)
            assert (up - down) / (2 * h) == pytest.approx(gradient[i][index], rel=1e-7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_loss_term_adds_the_scaled_gradient_and_returns_the_value(dtype):
    """``term(scale)`` adds scale * alpha * W to the gradients in place (in their dtype),
    returns the value at W, and leaves W alone."""
    weights = _weights(dtype)
    gradients = _weights(dtype, seed=1)
    before = [g.copy() for g in gradients]
    kept = [w.copy() for w in weights]
    buffers = [g.ctypes.data for g in gradients]
    term = L2LossPenalty(alpha=2.0).loss_term(weights, gradients)
    value = term(0.25)
    assert isinstance(value, float)
    assert value == pytest.approx(
        sum(float((w.astype(np.float64) ** 2).sum()) for w in weights),
        rel=1e-6 if dtype == np.float32 else 1e-14)
    for g, g0, w, w0, address in zip(gradients, before, weights, kept, buffers, strict=True):
        assert g.dtype == dtype and g.ctypes.data == address
        np.testing.assert_array_equal(g, g0 + w * dtype(0.5))
        np.testing.assert_array_equal(w, w0)
    term(0.25)
    step = weights[0] * dtype(0.5)
    np.testing.assert_array_equal(gradients[0], (before[0] + step) + step)


def test_no_proximal_step_and_the_identity_update_graph():
    weights = _weights(np.float32)
    kept = [w.copy() for w in weights]
    penalty = L2LossPenalty(alpha=5.0)
    penalty.stepper(weights)(0.1)
    penalty.update_weights(weights, 0.1)
    for w, w0 in zip(weights, kept, strict=True):
        np.testing.assert_array_equal(w, w0)
    model = penalty.build_onnx_function(17, "cpu", len(weights))
    session = InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {f"w{i}": w for i, w in enumerate(weights)}
    feeds["eta"] = np.array(0.1, dtype=np.float32)
    for got, w in zip(session.run(None, feeds), weights, strict=True):
        np.testing.assert_array_equal(got, w)


def test_only_the_loss_term_penalty_has_a_term():
    weights = _weights()
    for penalty in (NoLearningPenalty(), ElasticLearningPenalty(l1=0.1, l2=0.2)):
        assert penalty.loss_term(weights, _weights(seed=1)) is None
    assert callable(L2LossPenalty().loss_term(weights, _weights(seed=1)))


@pytest.mark.parametrize("alpha", [-1.0, float("nan"), float("inf"), "0.1", True])
def test_bad_alpha(alpha):
    with pytest.raises(ValueError, match="alpha must be a finite number >= 0"):
        L2LossPenalty(alpha=alpha)
    penalty = L2LossPenalty()
    penalty.alpha = alpha
    with pytest.raises(ValueError, match="alpha must be a finite number >= 0"):
        penalty.loss_term(_weights(), _weights(seed=1))


def test_loss_term_needs_one_gradient_per_weight():
    with pytest.raises(ValueError, match="3 weights but 2 gradients"):
        L2LossPenalty().loss_term(_weights(), _weights()[:2])


def test_params_and_clone():
    penalty = L2LossPenalty(alpha=0.5)
    assert penalty.get_params() == {"alpha": 0.5}
    assert clone(penalty).alpha == 0.5


def test_the_trainer_adds_the_term_per_batch():
    """A linear model trained with the term: every step is :math:`w \\leftarrow w - \\eta
    (X_B^\\top r + \\alpha w) / n_B` on the penalized coefficients (not the intercept),
    and the epoch's loss adds :math:`\\frac{\\alpha}{2} \\lVert w \\rVert^2` per batch,
    checked against numpy in float64 (batches of 16, 16 and 8 rows)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.3
    fitted = LinearRegression().fit(X[:10], y[:10] * 0.5)
    model = to_onnx(fitted, X[:1], black_op={"LinearRegressor"})
    alpha, eta, rows = 0.8, 0.05, 16
    trainer = Trainer(model, max_iter=3, batch_size=rows, shuffle=False, tol=None,
                      learning_rate=LearningRateSGD(eta0=eta, learning_rate="constant"),
                      learning_loss=SquareLearningLoss(),
                      learning_penalty=L2LossPenalty(alpha=alpha))
    trainer.fit(X, y)
    w, b = fitted.coef_.copy(), float(fitted.intercept_)
    losses = []
    for _ in range(3):
        total = 0.0
        for start in range(0, len(X), rows):
            xb, yb = X[start:start + rows], y[start:start + rows]
            r = xb @ w + b - yb
            total += 0.5 * float(r @ r) + 0.5 * alpha * float(w @ w)
            w, b = w - eta * (xb.T @ r + alpha * w) / len(xb), b - eta * r.sum() / len(xb)
        losses.append(total / len(X))
    coef, intercept = trainer.get_state()
    np.testing.assert_allclose(coef.ravel(), w, rtol=1e-12)
    np.testing.assert_allclose(intercept.ravel(), [b], rtol=1e-12)
    np.testing.assert_allclose(trainer.train_losses_, losses, rtol=1e-12)
