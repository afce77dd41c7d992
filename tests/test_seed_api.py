"""Code written for onnxcustom's training API, with only its import lines changed.

The calls, arguments and expected results follow the seed documents (seed 000/001: the
forward/backward engine, 002: ``onnx_derivative``, 003: ``add_loss_output``, 004: partial
training with ``OrtGradientForwardBackwardOptimizer``), on both gradient backends.
"""

import numpy as np
import pytest
from onnxruntime import InferenceSession
from skl2onnx import to_onnx
from sklearn.datasets import make_regression
from sklearn.linear_model import LinearRegression
from sklearn.model_selection import train_test_split

from skl_ortgrad.training import ConvergenceError
from skl_ortgrad.training.grad_helper import DerivativeOptions, onnx_derivative
from skl_ortgrad.training.optimizers_partial import OrtGradientForwardBackwardOptimizer
from skl_ortgrad.training.ortgradient import OrtGradientForwardBackward
from skl_ortgrad.training.sgd_learning_loss import BaseLearningLoss, ElasticLearningLoss
from skl_ortgrad.training.sgd_learning_penalty import ElasticLearningPenalty
from skl_ortgrad.training.sgd_learning_rate import BaseLearningRate, LearningRateSGDNesterov
from skl_ortgrad.utils.orttraining_helper import add_loss_output, get_train_initializer


@pytest.fixture(scope="module")
def regression():
    X, y = make_regression(n_samples=400, n_features=5, noise=1.0, random_state=0)
    X, y = X.astype(np.float32), (y / y.std()).astype(np.float32)
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    reg = LinearRegression().fit(X_train, y_train)
    reg.coef_ = np.zeros_like(reg.coef_)
    reg.intercept_ = np.float64(0.0)
    onx = to_onnx(reg, X_train[:1], target_opset=15, black_op={"LinearRegressor"})
    return onx, X_train, X_test, y_train, y_test


def test_partial_training_tutorial(regression, backend):
    """Seed 004, as written there: three objects, fit, get_state, train_losses_."""
    onx, X_train, X_test, y_train, y_test = regression
    weights = list(get_train_initializer(onx))
    train_session = OrtGradientForwardBackwardOptimizer(
        onx, weights,
        learning_rate=LearningRateSGDNesterov(1e-2, nesterov=False, momentum=0.9),
        learning_loss=ElasticLearningLoss(l1_weight=0.1, l2_weight=0.9),
        learning_penalty=ElasticLearningPenalty(l1=1e-4, l2=1e-4),
        max_iter=20, batch_size=16, backend=backend,
    )
    w_train = np.ones(len(X_train), dtype=np.float32)
    train_session.fit(X_train, y_train, w_train)

    state_tensors = train_session.get_state()
    assert [t.shape for t in state_tensors] == [(5, 1), (1,)]
    losses = train_session.train_losses_
    assert len(losses) == 20 and losses[-1] < losses[0] / 10
    coef, intercept = state_tensors
    prediction = X_test @ coef.ravel() + intercept
    r2 = 1 - np.sum((prediction - y_test) ** 2) / np.sum((y_test - y_test.mean()) ** 2)
    assert r2 > 0.99
    per_row = train_session.losses(X_test, y_test)
    assert per_row.shape == (len(X_test),) and np.all(per_row >= 0)


def test_the_three_attributes_are_objects(regression):
    onx = regression[0]
    opt = OrtGradientForwardBackwardOptimizer(onx, learning_rate="Nesterov",
                                              learning_loss="elastic")
    assert isinstance(opt.learning_rate, BaseLearningRate)
    assert isinstance(opt.learning_loss, BaseLearningLoss)
    elastic = BaseLearningLoss.select("elastic", l1_weight=0.1, l2_weight=0.9)
    assert (elastic.l1_weight, elastic.l2_weight) == (0.1, 0.9)
    assert issubclass(ConvergenceError, ValueError)


def test_forward_backward_tutorial(regression, backend):
    """Seed 000/001: every float initializer is trained by default; forward then backward."""
    onx, X_train, *_ = regression
    fw = OrtGradientForwardBackward(onx, debug=True, backend=backend)
    assert fw.cls_type_.weights_to_train == ["coef", "intercept"]
    inst = fw.new_instance()
    coef = np.random.default_rng(0).standard_normal((5, 1)).astype(np.float32)
    intercept = np.array([0.5], dtype=np.float32)
    outputs = inst.forward([X_train, coef, intercept], training=True)
    np.testing.assert_allclose(outputs[0].numpy(), X_train @ coef + intercept, rtol=1e-5,
                               atol=1e-5)
    grad_output = np.ones((len(X_train), 1), dtype=np.float32)
    grads = inst.backward([grad_output])
    # The gradient of every input (X here), then of every weight.
    assert len(grads) == 3
    np.testing.assert_allclose(grads[0].numpy(), grad_output @ coef.T, rtol=1e-4)
    np.testing.assert_allclose(grads[1].numpy(), X_train.T @ grad_output, rtol=1e-4)
    np.testing.assert_allclose(grads[2].numpy(), [len(X_train)], rtol=1e-6)


def test_derivative_with_a_loss(regression, backend):
    """Seed 002 and 003: a loss appended, its gradient against every real weight."""
    onx, X_train, _, y_train, _ = regression
    with_loss = add_loss_output(onx, weight_name="weight")
    grad = onnx_derivative(with_loss, weights=["coef", "intercept"],
                           options=DerivativeOptions.Loss | DerivativeOptions.KeepOutputs,
                           backend=backend)
    outputs = [o.name for o in grad.graph.output]
    # inputs=None: every real input but the label, the sample weights included.
    assert outputs == ["loss", "X_grad", "weight_grad", "coef_grad", "intercept_grad"]
    session = InferenceSession(grad.SerializeToString(), providers=["CPUExecutionProvider"])
    w = np.random.default_rng(1).uniform(0, 2, len(X_train)).astype(np.float32)
    coef = np.full((5, 1), 0.1, dtype=np.float32)
    intercept = np.array([0.2], dtype=np.float32)
    loss, _, weight_grad, coef_grad, intercept_grad = session.run(None, {
        "X": X_train, "label": y_train.reshape(-1, 1), "weight": w, "coef": coef,
        "intercept": intercept})
    residual = (X_train @ coef).ravel() + 0.2 - y_train
    assert loss.shape == (1, 1)
    assert loss[0, 0] == pytest.approx(float(np.sum(w * residual**2)), rel=1e-4)
    np.testing.assert_allclose(weight_grad, residual**2, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(coef_grad.ravel(), 2 * X_train.T @ (w * residual), rtol=1e-3,
                               atol=1e-3)
    assert intercept_grad[0] == pytest.approx(2 * float(np.sum(w * residual)), rel=1e-3)
