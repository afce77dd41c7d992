"""Learning rates: schedules, numpy and ONNX updates, scikit-learn contract, aliases."""

import math
import pickle
import warnings

import numpy as np
import pytest
from onnxruntime import InferenceSession
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import SGDRegressor
from sklearn.model_selection import GridSearchCV
from sklearn.neural_network._stochastic_optimizers import SGDOptimizer

from skl_ortgrad.optim import (
    BaseLearningRate,
    LearningRateAdam,
    LearningRateSGD,
    LearningRateSGDNesterov,
)
from skl_ortgrad.optim.base import BaseLearningObject

STEPS = np.arange(1, 1001)


def _session(model):
    return InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _buffer(a):
    return a.__array_interface__["data"][0]


# ---------------------------------------------------------------- schedules
def test_constant_schedule():
    rate = LearningRateSGD(eta0=0.3, learning_rate="constant")
    assert [rate.eta(t) for t in STEPS] == [0.3] * len(STEPS)


@pytest.mark.parametrize("power_t", [0.25, 0.5, 1.0])
def test_invscaling_schedule(power_t):
    rate = LearningRateSGD(eta0=0.05, power_t=power_t, learning_rate="invscaling")
    got = np.array([rate.eta(t) for t in STEPS])
    np.testing.assert_allclose(got, 0.05 / STEPS**power_t, rtol=1e-15)
    # scikit-learn's MLP optimizer exposes the same schedule; its time_step counts from 0.
    skl = SGDOptimizer([np.zeros(1)], 0.05, lr_schedule="invscaling", power_t=power_t)
    expected = []
    for t in STEPS:
        skl.iteration_ends(t - 1)
        expected.append(skl.learning_rate)
    np.testing.assert_allclose(got, expected, rtol=1e-15)


@pytest.mark.parametrize("alpha", [1e-4, 1e-2, 0.5])
def test_optimal_schedule_formula(alpha):
    # The seed's schedule starts at eta0 and decays as 1 / (alpha t).
    rate = LearningRateSGD(eta0=0.05, alpha=alpha, learning_rate="optimal")
    got = np.array([rate.eta(t) for t in STEPS])
    t0 = 1.0 / (alpha * 0.05)
    np.testing.assert_allclose(got, 1.0 / (alpha * (t0 + STEPS - 1)), rtol=1e-14)
    assert got[0] == pytest.approx(0.05)
    assert np.all(np.diff(got) < 0)
    # scikit-learn's start: typw = sqrt(1 / sqrt(alpha)).
    typw = math.sqrt(1.0 / math.sqrt(alpha))
    assert LearningRateSGD.scikit_learn_optimal(alpha).eta(1) == pytest.approx(typw)


def test_loop_yields_the_successive_rates():
    rate = LearningRateSGD(eta0=0.1, power_t=0.5)
    values = list(rate.loop(5))
    np.testing.assert_allclose(values, 0.1 / np.sqrt(np.arange(1, 6)), rtol=1e-15)
    assert list(LearningRateSGD(eta0=0.3, learning_rate="constant").loop(3)) == [0.3] * 3
    assert len(list(LearningRateAdam().loop())) == 1000


@pytest.mark.parametrize(
    "params",
    [
        {"learning_rate": "constant", "eta0": 0.02},
        {"learning_rate": "invscaling", "eta0": 0.05, "power_t": 0.3},
        {"learning_rate": "optimal", "alpha": 0.1},
    ],
)
def test_schedule_matches_sgdregressor(params):
    # One epoch of scikit-learn's SGD with batch size 1, no penalty and the squared loss,
    # (gradient p - y), replayed with our schedule and update: same t, same eta, same weights.
    rng = np.random.default_rng(0)
    # Small features and alpha=0.1: 'optimal' starts with eta = typw = 1.8, which must not
    # diverge (scikit-learn clips gradients at 1e12, the replay does not).
    X = 0.1 * rng.standard_normal((200, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.3 + 0.1 * rng.standard_normal(200)
    skl = SGDRegressor(penalty=None, max_iter=1, tol=None, shuffle=False, random_state=0, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        skl.fit(X, y)

    rate = (LearningRateSGD.scikit_learn_optimal(params["alpha"])
            if params["learning_rate"] == "optimal" else LearningRateSGD(**params))
    coef, intercept = np.zeros(3), np.zeros(1)
    state = rate.init_state([coef, intercept])
    for t, (x, target) in enumerate(zip(X, y, strict=True), start=1):
        dloss = x @ coef + intercept[0] - target
        rate.update_weights([coef, intercept], [dloss * x, np.array([dloss])], state, rate.eta(t))
    assert skl.t_ == len(X) + 1
    assert np.all(np.abs(skl.coef_) < 10)
    np.testing.assert_allclose(coef, skl.coef_, rtol=1e-10)
    np.testing.assert_allclose(intercept, skl.intercept_, rtol=1e-10)


def test_schedule_validation_at_construction_and_at_use():
    # The seed API refuses a bad value where the object is built (LearningRateSGD("EXC"));
    # set_params bypasses __init__, so eta/init_state check again.
    cases = [
        (LearningRateSGD, {"eta0": 0}, "eta0"),
        (LearningRateSGD, {"eta0": -1.0}, "eta0"),
        (LearningRateSGD, {"eta0": float("nan")}, "eta0"),
        (LearningRateSGD, {"eta0": "EXC"}, "eta0"),
        (LearningRateSGD, {"learning_rate": "adaptive"}, "learning_rate must be one of"),
        (LearningRateSGD, {"alpha": 0, "learning_rate": "optimal"}, "alpha"),
        (LearningRateSGDNesterov, {"momentum": 1.0}, "momentum"),
        (LearningRateSGDNesterov, {"momentum": -0.1}, "momentum"),
        (LearningRateSGDNesterov, {"nesterov": "yes"}, "nesterov"),
    ]
    for klass, params, match in cases:
        with pytest.raises(ValueError, match=match):
            klass(**params)
        rate = klass().set_params(**params)
        with pytest.raises(ValueError, match=match):
            rate.eta(1)
        with pytest.raises(ValueError, match=match):
            rate.init_state([np.zeros(2)])
    with pytest.raises(ValueError, match="eta0"):
        LearningRateSGD("EXC")
    with pytest.raises(ValueError, match="starts at 1"):
        LearningRateSGD().eta(0)


# ---------------------------------------------------------------- numpy updates
def _random_problem(seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    shapes = [(4, 3), (3,), (3, 1)]
    weights = [rng.standard_normal(s).astype(dtype) for s in shapes]
    grads = [[rng.standard_normal(s).astype(dtype) for s in shapes] for _ in range(20)]
    return weights, grads


@pytest.mark.parametrize(
    ("rate", "skl_kwargs"),
    [
        (LearningRateSGD(eta0=0.05, learning_rate="constant"), {"momentum": 0.0}),
        (
            LearningRateSGDNesterov(eta0=0.05, learning_rate="constant", momentum=0.9),
            {"momentum": 0.9, "nesterov": True},
        ),
        (
            LearningRateSGDNesterov(
                eta0=0.05, learning_rate="constant", momentum=0.7, nesterov=False
            ),
            {"momentum": 0.7, "nesterov": False},
        ),
    ],
    ids=["sgd", "nesterov", "momentum"],
)
def test_update_matches_sklearn_sgdoptimizer(rate, skl_kwargs):
    weights, grads = _random_problem()
    expected = [w.copy() for w in weights]
    skl = SGDOptimizer(expected, learning_rate_init=0.05, lr_schedule="constant", **skl_kwargs)
    state = rate.init_state(weights)
    for t, g in enumerate(grads, start=1):
        rate.update_weights(weights, g, state, rate.eta(t))
        skl.update_params(expected, g)
    for got, exp in zip(weights, expected, strict=True):
        np.testing.assert_allclose(got, exp, rtol=1e-13, atol=1e-15)
    for got, exp in zip(state, skl.velocities if skl_kwargs["momentum"] else [], strict=False):
        np.testing.assert_allclose(got, exp, rtol=1e-13, atol=1e-15)


def test_init_state():
    weights = [np.ones((2, 3), dtype=np.float32), np.ones(3, dtype=np.float64)]
    assert LearningRateSGD().init_state(weights) == []
    state = LearningRateSGDNesterov().init_state(weights)
    assert [(v.shape, v.dtype) for v in state] == [((2, 3), np.float32), ((3,), np.float64)]
    assert all(not v.any() and v.flags.c_contiguous for v in state)


@pytest.mark.parametrize(
    "rate",
    [LearningRateSGD(), LearningRateSGDNesterov(), LearningRateSGDNesterov(nesterov=False)],
)
def test_updates_are_in_place(rate):
    weights, grads = _random_problem(dtype=np.float32)
    before = [w.copy() for w in weights]
    ids, buffers = [id(w) for w in weights], [_buffer(w) for w in weights]
    # A view stands for onnxruntime borrowing the buffer: it must see the new values.
    views = [w.reshape(-1) for w in weights]
    state = rate.init_state(weights)
    state_buffers = [_buffer(v) for v in state]
    rate.update_weights(weights, grads[0], state, 0.1)
    assert [id(w) for w in weights] == ids
    assert [_buffer(w) for w in weights] == buffers
    assert [_buffer(v) for v in state] == state_buffers
    assert all(w.dtype == np.float32 for w in weights)
    for w, v, b in zip(weights, views, before, strict=True):
        assert not np.array_equal(w, b)
        np.testing.assert_array_equal(v, w.reshape(-1))


def test_update_checks_shapes():
    rate = LearningRateSGDNesterov()
    w = [np.zeros(3)]
    with pytest.raises(ValueError, match="gradients"):
        rate.update_weights(w, [], rate.init_state(w), 0.1)
    with pytest.raises(ValueError, match="shape"):
        rate.update_weights(w, [np.zeros(4)], rate.init_state(w), 0.1)
    with pytest.raises(ValueError, match="velocities"):
        rate.update_weights(w, [np.zeros(3)], [], 0.1)


# ---------------------------------------------------------------- ONNX updates
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "rate",
    [
        LearningRateSGD(),
        LearningRateSGDNesterov(momentum=0.8),
        LearningRateSGDNesterov(momentum=0.8, nesterov=False),
    ],
    ids=["sgd", "nesterov", "momentum"],
)
def test_onnx_update_matches_numpy(rate, dtype):
    weights, grads = _random_problem(seed=1, dtype=dtype)
    n = len(weights)
    model = rate.build_onnx_function(21, "cpu", n, dtype=dtype)
    assert model.ir_version == 10
    sess = _session(model)
    names = [i.name for i in sess.get_inputs()]
    momentum = isinstance(rate, LearningRateSGDNesterov)
    expected_inputs = [f"w{i}" for i in range(n)] + [f"g{i}" for i in range(n)]
    expected_inputs += [f"v{i}" for i in range(n)] if momentum else []
    assert names == [*expected_inputs, "eta"]

    onnx_w = [w.copy() for w in weights]
    state = rate.init_state(weights)
    onnx_v = [v.copy() for v in state]
    for t, g in enumerate(grads[:5], start=1):
        eta = rate.eta(t)
        rate.update_weights(weights, g, state, eta)
        feeds = {f"w{i}": w for i, w in enumerate(onnx_w)}
        feeds.update({f"g{i}": gi for i, gi in enumerate(g)})
        feeds.update({f"v{i}": v for i, v in enumerate(onnx_v)})
        feeds["eta"] = np.array(eta, dtype=dtype)
        out = sess.run(None, feeds)
        onnx_w, onnx_v = out[:n], out[n:]
    rtol = 1e-6 if dtype == np.float32 else 1e-14
    for got, exp in zip(onnx_w + onnx_v, weights + state, strict=True):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, exp, rtol=rtol, atol=rtol)


def test_onnx_update_arguments():
    with pytest.raises(ValueError, match="opset"):
        LearningRateSGD().build_onnx_function(22, "cpu", 1)
    with pytest.raises(ValueError, match="n_tensors"):
        LearningRateSGD().build_onnx_function(21, "cpu", 0)
    with pytest.raises(TypeError, match="dtype"):
        LearningRateSGD().build_onnx_function(21, "cpu", 1, dtype=np.complex64)


# ---------------------------------------------------------------- scikit-learn contract
def test_params_roundtrip_and_clone():
    rate = LearningRateSGDNesterov(eta0=0.1, momentum=0.5, nesterov=False)
    params = rate.get_params()
    assert params == {
        "eta0": 0.1,
        "alpha": 0.0001,
        "power_t": 0.25,
        "learning_rate": "invscaling",
        "momentum": 0.5,
        "nesterov": False,
    }
    copy = clone(rate)
    assert copy is not rate and copy.get_params() == params
    copy.set_params(eta0=0.2, learning_rate="constant")
    assert copy.eta(7) == 0.2 and rate.eta0 == 0.1
    with pytest.raises(ValueError, match="Invalid parameter"):
        copy.set_params(unknown=1)


def test_repr_shows_changed_params_only():
    assert repr(LearningRateSGD()) == "LearningRateSGD()"
    assert repr(LearningRateSGDNesterov(eta0=0.5)) == "LearningRateSGDNesterov(eta0=0.5)"
    assert repr(LearningRateSGDNesterov(nesterov=False)) == (
        "LearningRateSGDNesterov(nesterov=False)"
    )


class _Holder(RegressorMixin, BaseEstimator):
    """An estimator with a learning rate as parameter, standing for the real ones."""

    def __init__(self, learning_rate=None):
        self.learning_rate = learning_rate

    def fit(self, X, y):
        self.eta_ = BaseLearningRate.select(self.learning_rate).eta(1)
        return self

    def predict(self, X):
        # The best eta0 of the grid below is the one that makes predictions closest to y.
        return np.full(len(X), self.eta_)


def test_nested_params_clone_and_gridsearch():
    holder = _Holder(learning_rate=LearningRateSGD(learning_rate="constant"))
    holder.set_params(learning_rate__eta0=0.5)
    assert holder.get_params()["learning_rate__eta0"] == 0.5
    copy = clone(holder)
    assert copy.learning_rate is not holder.learning_rate
    assert copy.learning_rate.eta0 == 0.5

    X, y = np.zeros((12, 1)), np.full(12, 0.3)
    grid = GridSearchCV(holder, {"learning_rate__eta0": [0.1, 0.3, 1.0]}, cv=3)
    grid.fit(X, y)
    assert grid.best_params_ == {"learning_rate__eta0": 0.3}
    assert grid.best_estimator_.learning_rate.eta0 == 0.3
    assert holder.learning_rate.eta0 == 0.5  # the search worked on clones


def test_pickle_roundtrip():
    rate = LearningRateSGDNesterov(eta0=0.3, momentum=0.2)
    copy = pickle.loads(pickle.dumps(rate))
    assert type(copy) is LearningRateSGDNesterov
    assert copy.get_params() == rate.get_params()
    assert copy.eta(3) == rate.eta(3)


# ---------------------------------------------------------------- select
ALIASES = {
    "SGD": (LearningRateSGD, {}),
    "sgd": (LearningRateSGD, {}),
    "constant": (LearningRateSGD, {"learning_rate": "constant"}),
    "invscaling": (LearningRateSGD, {"learning_rate": "invscaling"}),
    "optimal": (LearningRateSGD, {"learning_rate": "optimal"}),
    "SGDNesterov": (LearningRateSGDNesterov, {}),
    "nesterov": (LearningRateSGDNesterov, {}),
    "Nesterov": (LearningRateSGDNesterov, {}),
    "momentum": (LearningRateSGDNesterov, {"nesterov": False}),
    "adam": (LearningRateAdam, {}),
    "Adam": (LearningRateAdam, {}),
}


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_select_alias(alias):
    klass, params = ALIASES[alias]
    got = BaseLearningRate.select(alias)
    assert type(got) is klass
    assert got.get_params() == klass(**params).get_params()
    assert BaseLearningRate.select(alias) is not got  # fresh object each time


def test_select_other_values():
    assert set(BaseLearningRate.aliases()) == set(ALIASES)
    assert repr(BaseLearningRate.select(None)) == "LearningRateSGD()"
    got = BaseLearningRate.select(0.25)
    assert type(got) is LearningRateSGD
    # onnxcustom's select: a number is eta0 of the default schedule (invscaling)
    assert got.get_params() == LearningRateSGD(eta0=0.25).get_params()
    assert got.learning_rate == "invscaling"
    assert BaseLearningRate.select(np.float32(0.5)).eta0 == 0.5
    rate = LearningRateSGDNesterov()
    assert BaseLearningRate.select(rate) is rate
    # the registry is per family: subclasses share their root's aliases
    assert type(LearningRateSGD.select("momentum")) is LearningRateSGDNesterov


def test_select_errors():
    with pytest.raises(ValueError, match="Unknown learning rate 'adagrad'") as info:
        BaseLearningRate.select("adagrad")
    for alias in ALIASES:
        assert repr(alias) in str(info.value)
    for bad in ([0.1], True, {"eta0": 0.1}, LearningRateSGD):
        with pytest.raises(TypeError, match=r"Cannot build a learning rate .* expected None"):
            BaseLearningRate.select(bad)


def test_registry_errors():
    with pytest.raises(TypeError, match="belongs to no family"):
        BaseLearningObject.select("sgd")
    with pytest.raises(TypeError, match="is not a learning rate"):
        BaseLearningRate.register_alias("bad", dict)


# -- per-epoch forms used by the training loop ------------------------------------------

RATES = [
    LearningRateSGD(eta0=0.05, learning_rate="constant"),
    LearningRateSGD(eta0=0.05, power_t=0.3, learning_rate="invscaling"),
    LearningRateSGD(alpha=1e-3, learning_rate="optimal"),
    LearningRateSGDNesterov(eta0=0.05, learning_rate="invscaling"),
    LearningRateSGDNesterov(eta0=0.05, nesterov=False, learning_rate="constant"),
    LearningRateAdam(eta0=0.01),
]
RATE_IDS = ["constant", "invscaling", "optimal", "nesterov", "momentum", "adam"]


@pytest.mark.parametrize("rate", RATES, ids=RATE_IDS)
def test_schedule_is_eta_at_every_t(rate):
    ts = np.array([1, 2, 33, 1000, 123457])
    etas = rate.schedule(ts)
    assert etas.dtype == np.float64 and etas.shape == ts.shape
    np.testing.assert_allclose(etas, [rate.eta(int(t)) for t in ts], rtol=1e-15)
    with pytest.raises(ValueError, match="starts at 1, got 0"):
        rate.schedule(np.array([3, 0]))


def test_base_schedule_calls_eta():
    class Halving(LearningRateSGD):
        def eta(self, t):
            return 1.0 / 2 ** t

    np.testing.assert_array_equal(BaseLearningRate.schedule(Halving(), [1, 2, 3]),
                                  [0.5, 0.25, 0.125])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rate", RATES, ids=RATE_IDS)
def test_stepper_equals_successive_update_weights(rate, dtype):
    """The training loop builds one stepper per epoch over gradient buffers that change
    at every batch: bit for bit the same as calling update_weights batch after batch."""
    rng = np.random.RandomState(0)
    shapes = [(5, 3), (3,)]
    weights = [rng.randn(*shape).astype(dtype) for shape in shapes]
    reference = [w.copy() for w in weights]
    gradients = [np.zeros(shape, dtype=dtype) for shape in shapes]
    state, reference_state = rate.init_state(weights), rate.init_state(reference)
    step = rate.stepper(weights, gradients, state)
    for eta in (0.1, 0.05, 0.01):
        batch = [rng.randn(*shape).astype(dtype) for shape in shapes]
        for buffer, value in zip(gradients, batch, strict=True):
            buffer[...] = value
        step(eta)
        rate.update_weights(reference, batch, reference_state, eta)
    for got, expected in zip([*weights, *state], [*reference, *reference_state], strict=True):
        np.testing.assert_array_equal(got, expected)
        assert got.dtype == expected.dtype


@pytest.mark.parametrize("klass, params, message", [
    (LearningRateSGD, {"eta0": -1.0}, "eta0 must be a finite number > 0"),
    (LearningRateSGDNesterov, {"momentum": 1.5}, "momentum must be in"),
    (LearningRateAdam, {"beta1": 1.0}, "beta1 must be a number in"),
    (LearningRateSGD, {"step_factors": (0.0,)}, "step_factors must be finite numbers > 0"),
    (LearningRateSGD, {"step_factors": (1.0, 0.01)}, "step_factors holds 2 factors for 1"),
])
def test_stepper_validates_when_built(klass, params, message):
    # set_params bypasses __init__'s check: the stepper checks again.
    rate = klass().set_params(**params)
    weights = [np.zeros((2, 2), dtype=np.float32)]
    with pytest.raises(ValueError, match=message):
        rate.stepper(weights, [np.zeros((2, 2), dtype=np.float32)], [])


def test_update_weights_takes_eta_as_a_python_float():
    """A numpy float64 eta updates float32 weights exactly as the Python float does:
    the arithmetic stays in float32 (no float64 detour with another rounding)."""
    rng = np.random.RandomState(3)
    weights = rng.randn(50).astype(np.float32)
    gradient = rng.randn(50).astype(np.float32)
    eta = np.float64(0.1234567891)
    by_numpy, by_float = weights.copy(), weights.copy()
    rate = LearningRateSGD(learning_rate="constant")
    rate.update_weights([by_numpy], [gradient], [], eta)
    rate.update_weights([by_float], [gradient], [], float(eta))
    np.testing.assert_array_equal(by_numpy, by_float)
    np.testing.assert_array_equal(by_float, weights - np.float32(eta) * gradient)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_step_factors_scale_each_weights_step(dtype):
    """Plain SGD's ``step_factors`` (scikit-learn's ``intercept_decay``):
    :math:`w_i \\leftarrow w_i - \\eta f_i g_i`, in the weights' dtype, packed weights
    too; the factors are part of the rate's parameters, pickles and update key, and a
    rate pickled before they existed reads None (every factor 1)."""
    rng = np.random.RandomState(0)
    packed = rng.randn(5).astype(dtype)
    weights, gradients = [packed[:4].reshape(2, 2), packed[4:]], [
        rng.randn(2, 2).astype(dtype), rng.randn(1).astype(dtype)]
    expected = [w - g * dtype(0.1) * dtype(f)
                for w, g, f in zip(weights, gradients, (1.0, 0.01), strict=True)]
    rate = LearningRateSGD(learning_rate="constant", step_factors=(1.0, 0.01))
    rate.stepper(weights, gradients, [])(0.1)
    for got, want in zip(weights, expected, strict=True):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == dtype
    copy = pickle.loads(pickle.dumps(rate))
    assert copy.get_params()["step_factors"] == (1.0, 0.01)
    assert copy.update_key() != LearningRateSGD().update_key()
    del copy.__dict__["step_factors"]
    assert copy.step_factors is None
    assert copy.update_key() == LearningRateSGD().update_key()


@pytest.mark.parametrize("schedule", ["optimal", "invscaling", "constant"])
def test_the_scaled_rate_s_decaying_cap_follows_the_schedule_over_the_batches(schedule):
    """min(s eta_t, eta_max g_t): g_t = 1 for the cap that stays; with decaying_cap,
    eta_k / eta_1 at k = 1 + (t - 1) / s batches (1 for a constant schedule); a pickle
    without the attribute (release 0.1.0) reads False."""
    from skl_ortgrad.optim.scaled import ScaledLearningRate

    inner = (LearningRateSGD.scikit_learn_optimal(1e-4) if schedule == "optimal"
             else LearningRateSGD(eta0=0.5, power_t=0.25, learning_rate=schedule))
    ts = np.array([1.0, 33.0, 1000.0, 10**5, 10**7])
    scaled = inner.schedule(ts) * 32
    stays = ScaledLearningRate(inner, scale=32, max_eta=2.0)
    np.testing.assert_array_equal(stays.schedule(ts), np.minimum(scaled, 2.0))
    decays = ScaledLearningRate(inner, scale=32, max_eta=2.0, decaying_cap=True)
    batches = 1 + (ts - 1) / 32
    expected = np.minimum(scaled, 2.0 * inner.schedule(batches) / inner.schedule(ts[:1]))
    np.testing.assert_allclose(decays.schedule(ts), expected, rtol=1e-15)
    if schedule == "constant":
        np.testing.assert_array_equal(decays.schedule(ts), stays.schedule(ts))
    else:
        assert decays.schedule(ts)[-1] < stays.schedule(ts)[-1]
    old = pickle.loads(pickle.dumps(decays))
    del old.__dict__["decaying_cap"]
    np.testing.assert_array_equal(old.schedule(ts), stays.schedule(ts))
