"""The gradient of every loss graph, by each backend, equals the loss object's numpy
derivative (``elementwise``), at random points and exactly on the kinks."""

import numpy as np
import pytest

from skl_ortgrad.gradient.loss_gradient import graph_loss_gradient
from skl_ortgrad.graph.model import OPSET
from skl_ortgrad.optim import (
    AbsoluteLearningLoss,
    ElasticLearningLoss,
    EpsilonInsensitiveLearningLoss,
    HingeLearningLoss,
    HuberLearningLoss,
    ModifiedHuberLearningLoss,
    NegLogLearningLoss,
    PoissonLearningLoss,
    SquaredEpsilonInsensitiveLearningLoss,
    SquaredHingeLearningLoss,
    SquareLearningLoss,
)

LOSSES = [
    SquareLearningLoss(),
    AbsoluteLearningLoss(),
    ElasticLearningLoss(l1_weight=0.1, l2_weight=2.0),
    HuberLearningLoss(epsilon=0.5),
    EpsilonInsensitiveLearningLoss(epsilon=0.5),
    SquaredEpsilonInsensitiveLearningLoss(epsilon=0.5),
    PoissonLearningLoss(),
    NegLogLearningLoss(),
    NegLogLearningLoss(eps=0.0),
    NegLogLearningLoss(probability_function="softmax"),
    NegLogLearningLoss(eps=0.0, probability_function="softmax"),
    HingeLearningLoss(),
    HingeLearningLoss(threshold=0.0),
    SquaredHingeLearningLoss(),
    ModifiedHuberLearningLoss(),
]


def _data(loss, dtype):
    """Labels and predictions, a third of them exactly on a kink of ``loss``."""
    rng = np.random.default_rng(0)
    n, k = 12, 3
    if loss.requires_one_hot:
        y = np.eye(k)[rng.integers(0, k, n)]
        return y.astype(dtype), rng.normal(0, 2, (n, k)).astype(dtype)
    if loss.is_classification:
        y = rng.integers(0, 2, (n, k)).astype(dtype)
        # margins z = (2y - 1) s at the hinge kinks (t, and -1 for modified Huber)
        kinks = np.array([getattr(loss, "threshold", 1.0), -1.0, 0.0])
        z = np.where(rng.random((n, k)) < 0.35, kinks[rng.integers(0, 3, (n, k))],
                     rng.normal(0, 2, (n, k)))
        return y, ((2 * y - 1) * z).astype(dtype)
    y = rng.normal(0, 1, (n, k)).astype(dtype)
    # errors at 0 and at +-epsilon (0.5, exact in binary) for a third of the elements
    kinks = np.array([0.0, 0.5, -0.5])
    d = np.where(rng.random((n, k)) < 0.35, kinks[rng.integers(0, 3, (n, k))],
                 rng.normal(0, 1, (n, k)))
    return y, (y + d).astype(dtype)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("loss", LOSSES, ids=repr)
def test_the_graph_gradient_is_the_numpy_derivative(loss, dtype, weighted, backend):
    y, p = _data(loss, dtype)
    weight = (np.random.default_rng(1).uniform(0.5, 2, len(p)).astype(dtype)
              if weighted else None)
    graph = loss.build_onnx_function(OPSET, "cpu", weighted=weighted, dtype=dtype)
    value, gradient = graph_loss_gradient(graph, y, p, weight, backend=backend)
    expected_value, expected = loss.loss_gradient(y, p, weight)
    assert gradient.dtype == dtype and gradient.shape == p.shape
    assert np.abs(expected).max() > 0.1  # not trivially equal
    rtol, atol = (1e-5, 1e-6) if dtype == np.float32 else (1e-12, 1e-13)
    assert value == pytest.approx(expected_value, rel=rtol)
    np.testing.assert_allclose(gradient, expected, rtol=rtol, atol=atol)


def test_a_new_parameter_is_a_new_graph(backend):
    y = np.zeros((1, 1), dtype=np.float32)
    p = np.full((1, 1), 0.5, dtype=np.float32)
    loss = HuberLearningLoss(epsilon=0.1)
    gradients = []
    for epsilon in (0.1, 1.0, 0.1):
        loss.set_params(epsilon=epsilon)
        graph = loss.build_onnx_function(OPSET, "cpu")
        gradients.append(graph_loss_gradient(graph, y, p, backend=backend)[1][0, 0])
    assert gradients == pytest.approx([0.1, 0.5, 0.1])
