"""Losses: values against numpy formulas, gradients against finite differences, contract."""

import copy
import pickle

import numpy as np
import pytest
from onnxruntime import InferenceSession
from scipy.special import expit, softmax
from sklearn.base import BaseEstimator, clone
from sklearn.linear_model._sgd_fast import Hinge, SquaredEpsilonInsensitive, SquaredHinge

from skl_ortgrad.optim.losses import (
    AbsoluteLearningLoss,
    BaseLearningLoss,
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

N, K = 7, 3


# Independent numpy formulas of the per-element loss: l(y, p) -> array.
def _np_loss(loss, y, p):
    d = p - y
    if isinstance(loss, SquareLearningLoss):
        return 0.5 * d**2
    if isinstance(loss, AbsoluteLearningLoss):
        return np.abs(d)
    if isinstance(loss, ElasticLearningLoss):
        return loss.l1_weight * np.abs(d) + loss.l2_weight * 0.5 * d**2
    if isinstance(loss, HuberLearningLoss):
        e = loss.epsilon
        return np.where(np.abs(d) <= e, 0.5 * d**2, e * np.abs(d) - 0.5 * e**2)
    if isinstance(loss, EpsilonInsensitiveLearningLoss):
        return np.maximum(0, np.abs(d) - loss.epsilon)
    if isinstance(loss, SquaredEpsilonInsensitiveLearningLoss):
        return np.maximum(0, np.abs(d) - loss.epsilon) ** 2
    if isinstance(loss, PoissonLearningLoss):
        return np.exp(p) - y * p
    z = (2 * y - 1) * p
    if isinstance(loss, HingeLearningLoss):
        return np.maximum(0, loss.threshold - z)
    if isinstance(loss, SquaredHingeLearningLoss):
        return np.maximum(0, loss.threshold - z) ** 2
    if isinstance(loss, ModifiedHuberLearningLoss):
        return np.where(z >= -1, np.maximum(0, 1 - z) ** 2, -4 * z)
    eps = loss.eps
    if loss.probability_function == "sigmoid":
        q = (1 - eps) * expit(p) + eps / 2
        q1 = (1 - eps) * expit(-p) + eps / 2
        return -y * np.log(q) - (1 - y) * np.log(q1)
    q = (1 - eps) * softmax(p, axis=1) + eps / p.shape[1]
    return -y * np.log(q)


def _data(loss, seed=0):
    """Labels and float32 predictions kept at least 0.02 away from every kink."""
    rng = np.random.default_rng(seed)
    if loss.requires_one_hot:
        y = np.eye(K)[rng.integers(0, K, N)]
        return y.astype(np.float32), rng.normal(0, 2, (N, K)).astype(np.float32)
    if loss.is_classification:
        y = rng.integers(0, 2, (N, K)).astype(np.float64)
        # margins z = (2y - 1) s in four bands, away from the kinks at z = -1, 0 and 1
        bands = [(-3.0, -1.2), (-0.8, -0.2), (0.2, 0.8), (1.2, 3.0)]
        z = np.array([rng.uniform(*bands[i % 4]) for i in range(N * K)]).reshape(N, K)
        z = rng.permuted(z.ravel()).reshape(N, K)
        return y.astype(np.float32), ((2 * y - 1) * z).astype(np.float32)
    y = rng.normal(0, 1, (N, K))
    # |p - y| in [0.02, 0.08] (inside the huber / epsilon bands of 0.1) or [0.3, 2]
    mags = np.where(rng.random((N, K)) < 0.4, rng.uniform(0.02, 0.08, (N, K)), 0)
    mags = np.where(mags == 0, rng.uniform(0.3, 2, (N, K)), mags)
    d = mags * rng.choice([-1.0, 1.0], (N, K))
    return y.astype(np.float32), (y + d).astype(np.float32)


def _finite_differences(loss, y, p, weight, h=1e-6):
    """Central differences of the float64 loss graph (forward only, run by onnxruntime)."""
    model = loss.build_onnx_function(21, "cpu", weighted=weight is not None, dtype=np.float64)
    sess = InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    feeds = {"label": y.astype(np.float64)}
    if weight is not None:
        feeds["weight"] = weight.astype(np.float64)
    p = p.astype(np.float64)

    def value(pred):
        return float(sess.run(None, {**feeds, "prediction": pred})[0])

    grad = np.empty_like(p)
    for idx in np.ndindex(*p.shape):
        plus, minus = p.copy(), p.copy()
        plus[idx] += h
        minus[idx] -= h
        grad[idx] = (value(plus) - value(minus)) / (2 * h)
    return value(p), grad


def _matches(grad, expected):
    # float32 gradients against float64 differences: float32 rounding dominates
    if grad.dtype == np.float32:
        return np.allclose(grad, expected, rtol=2e-3, atol=2e-4)
    return np.allclose(grad, expected, rtol=1e-6, atol=1e-7)


LOSSES = [
    SquareLearningLoss(),
    AbsoluteLearningLoss(),
    ElasticLearningLoss(),
    ElasticLearningLoss(l1_weight=0.1, l2_weight=2.0),
    HuberLearningLoss(),
    HuberLearningLoss(epsilon=0.5),
    EpsilonInsensitiveLearningLoss(),
    SquaredEpsilonInsensitiveLearningLoss(),
    SquaredEpsilonInsensitiveLearningLoss(epsilon=0.0),
    PoissonLearningLoss(),
    NegLogLearningLoss(),
    NegLogLearningLoss(eps=0.0),
    NegLogLearningLoss(eps=0.01),
    NegLogLearningLoss(probability_function="softmax"),
    NegLogLearningLoss(eps=0.0, probability_function="softmax"),
    NegLogLearningLoss(eps=0.01, probability_function="softmax"),
    HingeLearningLoss(),
    HingeLearningLoss(threshold=0.0),
    SquaredHingeLearningLoss(),
    SquaredHingeLearningLoss(threshold=0.0),
    ModifiedHuberLearningLoss(),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("loss", LOSSES, ids=repr)
def test_loss_gradient(loss, weighted, dtype):
    y, p = _data(loss)
    p = p.astype(dtype)
    weight = np.random.default_rng(1).uniform(0.5, 2, N).astype(np.float32) if weighted else None
    value, grad = loss.loss_gradient(y, p, weight)
    assert isinstance(value, float)
    assert grad.shape == p.shape and grad.dtype == dtype

    # the value: numpy formula, summed with the sample weights
    w = np.ones(N) if weight is None else weight.astype(np.float64)
    per_row = _np_loss(loss, y.astype(np.float64), p.astype(np.float64)).sum(axis=1)
    rel = 1e-5 if dtype == np.float32 else 1e-12
    assert value == pytest.approx(float(per_row @ w), rel=rel)

    # the gradient: central finite differences
    fd_value, fd_grad = _finite_differences(loss, y, p, weight)
    assert fd_value == pytest.approx(value, rel=rel)
    assert np.abs(fd_grad).max() > 0.01  # the comparison below is not trivially true
    assert _matches(grad, fd_grad), np.abs(grad - fd_grad).max()
    # ... and the comparison would catch a wrong sign
    assert not _matches(-grad, fd_grad)


@pytest.mark.parametrize(
    "loss",
    [
        NegLogLearningLoss(),
        NegLogLearningLoss(eps=0.0),
        NegLogLearningLoss(probability_function="softmax"),
        NegLogLearningLoss(eps=0.0, probability_function="softmax"),
    ],
    ids=repr,
)
def test_extreme_scores_stay_finite(loss):
    if loss.requires_one_hot:
        y = np.eye(3, dtype=np.float32)[[0, 1, 2, 0]]
        p = np.array(
            [[1e4, -1e4, 0], [1e4, -1e4, 0], [-1e4, 1e4, 1e4], [-1e4, -1e4, -1e4]],
            dtype=np.float32,
        )
    else:
        y = np.array([[1], [0], [1], [0]], dtype=np.float32)
        p = np.array([[1e4], [1e4], [-1e4], [-1e4]], dtype=np.float32)
    value, grad = loss.loss_gradient(y, p)
    assert np.isfinite(value) and np.all(np.isfinite(grad))
    # wrong confident predictions cost a lot, and the gradient never points the wrong way
    assert value > 1
    up, down = (grad[1, 0], grad[2, 0]) if not loss.requires_one_hot else (grad[1, 0], grad[1, 1])
    assert up >= 0 and down <= 0
    if loss.eps == 0:
        # exact log loss: the gradient is sigma(s) - y (softmax(s) - y), +-1 here
        assert up == pytest.approx(1) and down == pytest.approx(-1)
    else:
        # q is kept in [eps/2, 1 - eps/2]: the loss saturates at -log(eps/2) per element and
        # its gradient vanishes for far wrong scores (documented property of the formula)
        assert value <= grad.size * -np.log(loss.eps / 2 * 0.999)


# Each new loss next to scikit-learn's own (SGDClassifier / SGDRegressor), whose labels
# are signs in {-1, +1}: ours are {0, 1}, the sign 2y - 1.
SKLEARN_LOSSES = [
    (HingeLearningLoss(), Hinge(1.0)),
    (HingeLearningLoss(threshold=0.0), Hinge(0.0)),
    (HingeLearningLoss(threshold=0.5), Hinge(0.5)),
    (SquaredHingeLearningLoss(), SquaredHinge(1.0)),
    (SquaredHingeLearningLoss(threshold=0.5), SquaredHinge(0.5)),
    (SquaredEpsilonInsensitiveLearningLoss(), SquaredEpsilonInsensitive(0.1)),
    (SquaredEpsilonInsensitiveLearningLoss(epsilon=0.5), SquaredEpsilonInsensitive(0.5)),
]


@pytest.mark.parametrize(
    ("loss", "reference"), SKLEARN_LOSSES, ids=[repr(loss) for loss, _ in SKLEARN_LOSSES]
)
def test_matches_scikit_learn(loss, reference):
    # scores k / 10 in [-3, 3]: exact at the hinge kinks z = 0, 0.5, 1, and mostly away from
    # any kink, on both sides of it
    scores = np.arange(-30, 31) / 10
    if loss.is_classification:
        label = np.repeat([0.0, 1.0], len(scores))
        target = 2 * label - 1
    else:
        label = target = np.repeat([-1.3, 0.25], len(scores))
    p = np.tile(scores, 2)
    pairs = list(zip(p, target, strict=True))
    expected_value = np.array([reference.py_loss(pi, ti) for pi, ti in pairs])
    expected_grad = np.array([reference.py_dloss(pi, ti) for pi, ti in pairs])
    assert (expected_grad == 0).any() and (expected_grad != 0).any()

    model = loss.build_onnx_function(21, "cpu", dtype=np.float64, per_row=True)
    sess = InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    (value,) = sess.run(None, {"label": label[:, None], "prediction": p[:, None]})
    np.testing.assert_allclose(value, expected_value, rtol=1e-12, atol=1e-15)
    _, grad = loss.loss_gradient(label, p)
    # the hinge's derivative jumps at z = t, which the scores hit: scikit-learn's side
    np.testing.assert_allclose(grad, expected_grad, rtol=1e-12, atol=1e-15)


def test_one_dimensional_and_float64_inputs():
    loss = SquareLearningLoss()
    y, p = np.array([1.0, 2.0, 3.0]), np.array([1.5, 1.0, 3.0])
    value, grad = loss.loss_gradient(y, p)
    assert value == pytest.approx(0.5 * (0.25 + 1.0))
    assert grad.dtype == np.float64
    np.testing.assert_allclose(grad, p - y)
    with pytest.raises(ValueError, match="must match"):
        loss.loss_gradient(np.zeros(3), np.zeros(4, dtype=np.float32))
    with pytest.raises(ValueError, match="weight"):
        loss.loss_gradient(np.zeros(3), np.zeros(3, dtype=np.float32), np.ones(2))
    with pytest.raises(TypeError, match="float32 or float64"):
        loss.loss_gradient(np.zeros(3), np.zeros(3, dtype=np.int64))


def test_build_onnx_function():
    model = HuberLearningLoss(epsilon=0.3).build_onnx_function(21, "cpu", weighted=True)
    assert model.ir_version == 10
    assert [i.name for i in model.graph.input] == ["label", "prediction", "weight"]
    assert [o.name for o in model.graph.output] == ["loss"]
    model = NegLogLearningLoss().build_onnx_function(17, "cpu", dtype=np.float64)
    assert [i.name for i in model.graph.input] == ["label", "prediction"]
    assert model.opset_import[0].version == 17


def test_kinds_and_label_encoding():
    assert SquareLearningLoss().kind == "squared_error"
    assert NegLogLearningLoss().kind == "log"
    assert NegLogLearningLoss(probability_function="softmax").kind == "softmax_log"
    regression = [SquareLearningLoss, AbsoluteLearningLoss, ElasticLearningLoss]
    regression += [HuberLearningLoss, EpsilonInsensitiveLearningLoss]
    regression += [SquaredEpsilonInsensitiveLearningLoss]
    for klass in regression:
        assert not klass.is_classification and not klass().requires_one_hot
    classification = [NegLogLearningLoss, HingeLearningLoss, SquaredHingeLearningLoss]
    for klass in [*classification, ModifiedHuberLearningLoss]:
        assert klass.is_classification and not klass().requires_one_hot
    assert NegLogLearningLoss(probability_function="softmax").requires_one_hot


def test_validation_at_construction_and_at_use():
    bad = [
        (NegLogLearningLoss, {"probability_function": "tanh"}, "probability_function"),
        (NegLogLearningLoss, {"eps": 1.0}, "eps"),
        (NegLogLearningLoss, {"eps": -0.1}, "eps"),
        (HuberLearningLoss, {"epsilon": -1}, "epsilon"),
        (EpsilonInsensitiveLearningLoss, {"epsilon": "a"}, "epsilon"),
        (ElasticLearningLoss, {"l1_weight": -1}, "l1_weight"),
        (HingeLearningLoss, {"threshold": -1.0}, "threshold"),
        (HingeLearningLoss, {"threshold": np.inf}, "threshold"),
        (SquaredHingeLearningLoss, {"threshold": np.nan}, "threshold"),
        (SquaredEpsilonInsensitiveLearningLoss, {"epsilon": -0.1}, "epsilon"),
    ]
    for klass, params, match in bad:
        with pytest.raises(ValueError, match=match):
            klass(**params)
        # set_params does not go through __init__: the use checks again.
        loss = klass().set_params(**params)
        with pytest.raises(ValueError, match=match):
            loss.build_onnx_function(21, "cpu")
        with pytest.raises(ValueError, match=match):
            loss.loss_gradient(np.zeros((2, 2)), np.zeros((2, 2), dtype=np.float32))


def test_set_params_and_copies_change_the_gradient_as_the_parameters_say():
    loss = HuberLearningLoss(epsilon=0.1)
    y = np.zeros((1, 1), dtype=np.float32)
    p = np.full((1, 1), 0.5, dtype=np.float32)
    assert loss.loss_gradient(y, p)[1][0, 0] == pytest.approx(0.1)
    loss.set_params(epsilon=1.0)
    assert loss.loss_gradient(y, p)[1][0, 0] == pytest.approx(0.5)
    for other in (pickle.loads(pickle.dumps(loss)), copy.deepcopy(loss), clone(loss)):
        assert type(other) is HuberLearningLoss
        assert other.get_params() == {"epsilon": 1.0}
        assert other.loss_gradient(y, p)[1][0, 0] == pytest.approx(0.5)


def test_repr_and_nested_params():
    assert repr(NegLogLearningLoss()) == "NegLogLearningLoss()"
    assert repr(NegLogLearningLoss(probability_function="softmax")) == (
        "NegLogLearningLoss(probability_function='softmax')"
    )
    assert repr(HuberLearningLoss(epsilon=0.2)) == "HuberLearningLoss(epsilon=0.2)"

    class Holder(BaseEstimator):
        def __init__(self, learning_loss=None):
            self.learning_loss = learning_loss

    holder = Holder(ElasticLearningLoss()).set_params(learning_loss__l2_weight=3.0)
    copy_ = clone(holder)
    assert copy_.learning_loss is not holder.learning_loss
    assert copy_.get_params()["learning_loss__l2_weight"] == 3.0


ALIASES = {
    "squared_error": (SquareLearningLoss, {}),
    "square_error": (SquareLearningLoss, {}),
    "l2": (SquareLearningLoss, {}),
    "absolute_error": (AbsoluteLearningLoss, {}),
    "l1": (AbsoluteLearningLoss, {}),
    "elastic": (ElasticLearningLoss, {}),
    "huber": (HuberLearningLoss, {}),
    "epsilon_insensitive": (EpsilonInsensitiveLearningLoss, {}),
    "squared_epsilon_insensitive": (SquaredEpsilonInsensitiveLearningLoss, {}),
    "poisson": (PoissonLearningLoss, {}),
    "log": (NegLogLearningLoss, {}),
    "log_loss": (NegLogLearningLoss, {}),
    "neg_log": (NegLogLearningLoss, {}),
    "softmax": (NegLogLearningLoss, {"probability_function": "softmax"}),
    "multinomial": (NegLogLearningLoss, {"probability_function": "softmax"}),
    "hinge": (HingeLearningLoss, {}),
    "perceptron": (HingeLearningLoss, {"threshold": 0.0}),
    "squared_hinge": (SquaredHingeLearningLoss, {}),
    "modified_huber": (ModifiedHuberLearningLoss, {}),
}


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_select_alias(alias):
    klass, params = ALIASES[alias]
    got = BaseLearningLoss.select(alias)
    assert type(got) is klass
    assert got.get_params() == klass(**params).get_params()


def test_select_other_values():
    assert set(BaseLearningLoss.aliases()) == set(ALIASES)
    assert type(BaseLearningLoss.select(None)) is SquareLearningLoss
    loss = HingeLearningLoss()
    assert BaseLearningLoss.select(loss) is loss
    with pytest.raises(ValueError, match="Unknown learning loss 'cubic'") as info:
        BaseLearningLoss.select("cubic")
    for alias in ALIASES:
        assert repr(alias) in str(info.value)
    with pytest.raises(TypeError, match="A number"):
        BaseLearningLoss.select(0.5)
    for bad in (True, ["log"], SquareLearningLoss):
        with pytest.raises(TypeError):
            BaseLearningLoss.select(bad)
