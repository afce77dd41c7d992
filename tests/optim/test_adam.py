"""Adam: numpy update against scikit-learn's AdamOptimizer, ONNX graph, contract, training."""

import math
import pickle

import numpy as np
import pytest
from onnxruntime import InferenceSession
from skl2onnx import to_onnx
from sklearn.base import clone
from sklearn.datasets import load_diabetes
from sklearn.linear_model import LinearRegression
from sklearn.neural_network._stochastic_optimizers import AdamOptimizer
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import LearningRateAdam, OnnxSGDRegressor
from skl_ortgrad.optim import BaseLearningRate
from skl_ortgrad.training.optimizers_partial import OrtGradientForwardBackwardOptimizer

SHAPES = [(3, 2), (2,), (1,), (4, 1)]
PARAMS = {"eta0": 0.01, "beta1": 0.8, "beta2": 0.99, "epsilon": 1e-7}


def _buffer(a):
    return a.__array_interface__["data"][0]


def _weights(dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for shape in SHAPES]


def _gradients(n_steps, dtype, seed=1):
    rng = np.random.default_rng(seed)
    # Some zero gradients exercise the epsilon term.
    return [
        [(rng.standard_normal(shape) * (step % 7 != 3)).astype(dtype) for shape in SHAPES]
        for step in range(n_steps)
    ]


def _session(model):
    return InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


# ---------------------------------------------------------------- numpy update
@pytest.mark.parametrize(("dtype", "rtol"), [(np.float64, 1e-12), (np.float32, 1e-5)])
@pytest.mark.parametrize("params", [{}, PARAMS])
def test_matches_scikit_learn_adam(dtype, rtol, params):
    rate = LearningRateAdam(**params)
    weights = _weights(dtype)
    expected = [w.copy() for w in weights]
    skl = AdamOptimizer(
        expected,
        learning_rate_init=rate.eta0,
        beta_1=rate.beta1,
        beta_2=rate.beta2,
        epsilon=rate.epsilon,
    )
    state = rate.init_state(weights)
    for t, grads in enumerate(_gradients(30, dtype), start=1):
        rate.update_weights(weights, grads, state, rate.eta(t * 10))
        skl.update_params(expected, grads)
        for w, e in zip(weights, expected, strict=True):
            assert w.dtype == dtype
            np.testing.assert_allclose(w, e, rtol=rtol, atol=rtol)
    n = len(SHAPES)
    assert int(state[-1]) == skl.t == 30
    for got, ref in zip(state[:n] + state[n : 2 * n], skl.ms + skl.vs, strict=True):
        np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol)


def test_float64_bitwise_like_scikit_learn():
    rate = LearningRateAdam(**PARAMS)
    weights = _weights(np.float64)
    expected = [w.copy() for w in weights]
    skl = AdamOptimizer(expected, 0.01, 0.8, 0.99, 1e-7)
    state = rate.init_state(weights)
    for grads in _gradients(30, np.float64):
        rate.update_weights(weights, grads, state, 0.01)
        skl.update_params(expected, grads)
    for w, e in zip(weights, expected, strict=True):
        np.testing.assert_array_equal(w, e)


def test_first_step_bias_correction():
    # At k = 1, m = (1 - b1) g and v = (1 - b2) g^2, the bias-corrected step is
    # eta * g / (|g| + eps / sqrt(1 - b2)): about eta * sign(g), whatever |g|.
    rate = LearningRateAdam(eta0=0.05, beta1=0.9, beta2=0.999, epsilon=1e-8)
    g = np.array([1e-3, -2.0, 300.0, 0.0])
    w = np.zeros(4)
    state = rate.init_state([w])
    rate.update_weights([w], [g], state, rate.eta(1))
    np.testing.assert_allclose(state[0], 0.1 * g, rtol=1e-15)
    np.testing.assert_allclose(state[1], 0.001 * g**2, rtol=1e-15)
    lr1 = 0.05 * math.sqrt(1 - 0.999) / (1 - 0.9)
    np.testing.assert_allclose(w, -lr1 * 0.1 * g / (np.sqrt(0.001) * np.abs(g) + 1e-8))
    # |step| = eta / (1 + eps / (sqrt(1 - b2) |g|)): within 3.2e-4 of eta for |g| >= 1e-3,
    # while without the correction it would be eta * 0.1 / sqrt(0.001) = 3.16 eta.
    np.testing.assert_allclose(w[:3], -0.05 * np.sign(g[:3]), rtol=4e-4)
    assert w[3] == 0
    assert state[2].shape == () and state[2].dtype == np.int64 and int(state[2]) == 1


def test_eta_is_constant_and_counter_counts_updates():
    rate = LearningRateAdam(eta0=0.02)
    assert [rate.eta(t) for t in (1, 10, 10_000)] == [0.02] * 3
    weights = _weights(np.float32)
    state = rate.init_state(weights)
    for grads in _gradients(5, np.float32):
        rate.update_weights(weights, grads, state, rate.eta(1000))
    assert int(state[-1]) == 5  # updates, not samples


def test_update_is_in_place():
    rate = LearningRateAdam()
    weights = _weights(np.float32)
    state = rate.init_state(weights)
    buffers = [_buffer(a) for a in weights + state]
    ids = [id(a) for a in weights + state]
    before = [w.copy() for w in weights]
    for grads in _gradients(3, np.float32):
        rate.update_weights(weights, grads, state, 0.001)
    assert [_buffer(a) for a in weights + state] == buffers
    assert [id(a) for a in weights + state] == ids
    assert all(not np.array_equal(w, b) for w, b in zip(weights, before, strict=True))


def test_state_layout():
    weights = _weights(np.float32)
    state = LearningRateAdam().init_state(weights)
    n = len(weights)
    assert len(state) == 2 * n + 1
    for w, m, v in zip(weights, state[:n], state[n : 2 * n], strict=True):
        assert m.shape == v.shape == w.shape and m.dtype == v.dtype == w.dtype
        assert not m.any() and not v.any()
    assert all(isinstance(s, np.ndarray) for s in state)


@pytest.mark.parametrize(
    ("params", "match"),
    [
        ({"eta0": 0}, "eta0"),
        ({"eta0": -1.0}, "eta0"),
        ({"eta0": float("nan")}, "eta0"),
        ({"beta1": 1.0}, "beta1"),
        ({"beta1": -0.1}, "beta1"),
        ({"beta2": 1.5}, "beta2"),
        ({"beta2": "0.9"}, "beta2"),
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": float("inf")}, "epsilon"),
    ],
)
def test_invalid_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        LearningRateAdam(**params)
    # set_params bypasses __init__'s check: every use checks again.
    rate = LearningRateAdam().set_params(**params)
    with pytest.raises(ValueError, match=match):
        rate.eta(1)
    with pytest.raises(ValueError, match=match):
        rate.init_state([np.zeros(2)])
    with pytest.raises(ValueError, match=match):
        rate.build_onnx_function(21, "cpu", 1)


def test_bad_state_and_t():
    rate = LearningRateAdam()
    with pytest.raises(ValueError, match="starts at 1"):
        rate.eta(0)
    w = [np.zeros(3)]
    with pytest.raises(ValueError, match="init_state"):
        rate.update_weights(w, [np.ones(3)], [], 0.1)
    with pytest.raises(ValueError, match="moment"):
        rate.update_weights(w, [np.ones(3)], [np.zeros(2), np.zeros(3), np.zeros((), "int64")], 0.1)


# ---------------------------------------------------------------- ONNX graph
@pytest.mark.parametrize(("dtype", "rtol"), [(np.float64, 1e-12), (np.float32, 1e-5)])
def test_onnx_graph_matches_numpy(dtype, rtol):
    rate = LearningRateAdam(**PARAMS)
    n = len(SHAPES)
    sess = _session(rate.build_onnx_function(21, "cpu", n, dtype=dtype))
    names = [i.name for i in sess.get_inputs()]
    assert names == [f"{p}{i}" for p in "wgmv" for i in range(n)] + ["k", "eta"]
    weights = _weights(dtype)
    state = rate.init_state(weights)
    onnx_w = [w.copy() for w in weights]
    onnx_m = [np.zeros_like(w) for w in weights]
    onnx_v = [np.zeros_like(w) for w in weights]
    eta = np.array(rate.eta(1), dtype=dtype)
    for k, grads in enumerate(_gradients(30, dtype), start=1):
        rate.update_weights(weights, grads, state, float(eta))
        feeds = dict(zip(names, onnx_w + grads + onnx_m + onnx_v, strict=False))
        feeds.update(k=np.array(k, dtype=np.int64), eta=eta)
        out = sess.run(None, feeds)
        onnx_w, onnx_m, onnx_v = out[:n], out[n : 2 * n], out[2 * n :]
        for got, ref in zip(out, weights + state[: 2 * n], strict=True):
            assert got.dtype == dtype
            np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol)


def test_onnx_graph_checks():
    rate = LearningRateAdam()
    model = rate.build_onnx_function(21, "cpu", 2)
    assert model.ir_version == 10 and model.opset_import[0].version == 21
    assert [o.name for o in model.graph.output] == [
        "new_w0",
        "new_w1",
        "new_m0",
        "new_m1",
        "new_v0",
        "new_v1",
    ]
    assert rate.build_onnx_function(13, "cuda", 1).opset_import[0].version == 13
    with pytest.raises(ValueError, match="opset"):
        rate.build_onnx_function(22, "cpu", 1)
    with pytest.raises(ValueError, match="n_tensors"):
        rate.build_onnx_function(21, "cpu", 0)


# ---------------------------------------------------------------- contract
def test_select_and_aliases():
    for alias in ("adam", "Adam"):
        rate = BaseLearningRate.select(alias)
        assert type(rate) is LearningRateAdam
        assert rate.get_params() == {"eta0": 0.001, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8}
    assert BaseLearningRate.select("adam") is not BaseLearningRate.select("adam")
    rate = LearningRateAdam()
    assert BaseLearningRate.select(rate) is rate
    assert isinstance(BaseLearningRate.aliases()["adam"], LearningRateAdam)


def test_clone_params_pickle():
    rate = LearningRateAdam(**PARAMS)
    assert rate.get_params() == PARAMS
    assert repr(rate) == "LearningRateAdam(beta1=0.8, beta2=0.99, epsilon=1e-07, eta0=0.01)"
    cloned = clone(rate)
    assert cloned is not rate and cloned.get_params() == PARAMS
    cloned.set_params(eta0=0.5)
    assert rate.eta0 == 0.01 and cloned.eta(1) == 0.5
    restored = pickle.loads(pickle.dumps(rate))
    assert restored.get_params() == PARAMS
    weights = _weights(np.float64)
    state = rate.init_state(weights)
    state = pickle.loads(pickle.dumps(state))
    assert state[-1].dtype == np.int64 and state[-1].shape == ()


# ---------------------------------------------------------------- training
@pytest.fixture(scope="module")
def linear_data():
    rng = np.random.RandomState(0)
    X = rng.randn(100, 3).astype(np.float32)
    y = (X @ np.array([1.5, -2.0, 0.5], dtype=np.float32) + 0.7).astype(np.float32)
    model = LinearRegression().fit(X, y * 0 + 1)
    onx = to_onnx(
        model, X[:1], target_opset={"": 21, "ai.onnx.ml": 3}, black_op={"LinearRegressor"}
    )
    return X, y, onx


def _optimizer(onx, **kwargs):
    return OrtGradientForwardBackwardOptimizer(
        onx,
        batch_size=10,
        learning_rate=LearningRateAdam(eta0=0.05),
        random_state=0,
        **kwargs,
    )


def test_optimizer_trains_with_adam_alias(linear_data):
    X, y, onx = linear_data
    opt = OrtGradientForwardBackwardOptimizer(
        onx, max_iter=20, batch_size=10, learning_rate="adam", random_state=0
    )
    opt.fit(X, y)
    assert isinstance(opt.learning_rate_, LearningRateAdam)
    assert opt.train_losses_[-1] < opt.train_losses_[0]
    assert np.all(np.diff(opt.train_losses_) < 0)
    assert int(opt.lr_state_[-1]) == 20 * 10  # one count per update, 10 batches per epoch
    assert opt.t_ == 1 + 20 * 100

    fast = _optimizer(onx, max_iter=60).fit(X, y)
    assert fast.train_losses_[-1] < fast.train_losses_[0] / 100


def test_optimizer_state_round_trip(linear_data):
    # shuffle=False: the same epochs see the same batches, so after restoring the state
    # continued training must repeat itself bit for bit (moments and counter included).
    X, y, onx = linear_data
    opt = _optimizer(onx, max_iter=3, shuffle=False)
    opt.fit(X, y)
    saved = opt.get_checkpoint()
    assert len(saved["lr_state"]) == 2 * 2 + 1
    assert saved["lr_state"][-1].shape == () and int(saved["lr_state"][-1]) == 30
    buffers = [_buffer(a) for a in opt.weights_ + opt.lr_state_]
    for _ in range(3):
        opt.partial_fit(X, y)
    after = [a.copy() for a in opt.weights_ + opt.lr_state_]
    assert int(opt.lr_state_[-1]) == 60
    assert opt.train_losses_[-1] < opt.train_losses_[0]
    assert not np.array_equal(saved["weights"][0], after[0])

    opt.set_checkpoint(saved)
    # set_checkpoint copies into the buffers onnxruntime borrows; the saved copy is untouched.
    assert [_buffer(a) for a in opt.weights_ + opt.lr_state_] == buffers
    assert int(opt.lr_state_[-1]) == 30 and opt.t_ == saved["t"]
    for _ in range(3):
        opt.partial_fit(X, y)
    for got, ref in zip(opt.weights_ + opt.lr_state_, after, strict=True):
        np.testing.assert_array_equal(got, ref)
    assert int(saved["lr_state"][-1]) == 30

    # Restoring only the weights but not Adam's state would train differently.
    opt.set_checkpoint(saved)
    opt.lr_state_[-1][...] = 0
    opt.partial_fit(X, y)
    assert not np.array_equal(opt.weights_[0], after[0])


def test_onnx_sgd_regressor_adam_on_diabetes():
    X, y = load_diabetes(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    y = (y - y.mean()) / y.std()
    reg = OnnxSGDRegressor(learning_rate=LearningRateAdam(), max_iter=60, random_state=0, tol=None)
    reg.fit(X, y)
    assert isinstance(reg.optimizer_.learning_rate_, LearningRateAdam)
    assert reg.loss_curve_[-1] < reg.loss_curve_[0]
    assert reg.score(X, y) > 0.4
