"""Penalties: loss value, proximal update (numpy and ONNX), contract, aliases."""

import pickle

import numpy as np
import pytest
from onnxruntime import InferenceSession
from sklearn.base import BaseEstimator, clone
from sklearn.linear_model import SGDRegressor

from skl_ortgrad.optim.penalties import (
    BaseLearningPenalty,
    ElasticLearningPenalty,
    NoLearningPenalty,
)


def _weights(seed=0, dtype=np.float64):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s).astype(dtype) for s in [(5, 3), (3,), (2, 2, 2)]]


def _buffer(a):
    return a.__array_interface__["data"][0]


def _reference_update(w, eta, l1, l2):
    decayed = w * max(0.0, 1.0 - eta * l2)
    return np.sign(decayed) * np.maximum(np.abs(decayed) - eta * l1, 0.0)


@pytest.mark.parametrize(("l1", "l2"), [(0.5, 0.5), (0.0, 0.3), (0.2, 0.0), (0.0, 0.0)])
def test_penalty_loss(l1, l2):
    weights = _weights()
    expected = sum(l1 * np.abs(w).sum() + 0.5 * l2 * (w**2).sum() for w in weights)
    got = ElasticLearningPenalty(l1=l1, l2=l2).penalty_loss(weights)
    assert isinstance(got, float)
    assert got == pytest.approx(expected, rel=1e-13)
    assert NoLearningPenalty().penalty_loss(weights) == 0.0


@pytest.mark.parametrize(("l1", "l2"), [(0.5, 0.5), (0.0, 0.3), (0.2, 0.0), (1e-4, 1e-4)])
@pytest.mark.parametrize("eta", [1e-3, 0.1, 0.9])
def test_update_matches_numpy(l1, l2, eta):
    weights = _weights()
    expected = [_reference_update(w, eta, l1, l2) for w in weights]
    ElasticLearningPenalty(l1=l1, l2=l2).update_weights(weights, eta)
    for got, exp in zip(weights, expected, strict=True):
        np.testing.assert_allclose(got, exp, rtol=1e-15, atol=1e-300)


def test_update_is_in_place():
    weights = _weights(dtype=np.float32)
    before = [w.copy() for w in weights]
    ids, buffers = [id(w) for w in weights], [_buffer(w) for w in weights]
    views = [w.reshape(-1) for w in weights]  # stands for onnxruntime's borrowed buffer
    ElasticLearningPenalty(l1=0.1, l2=0.1).update_weights(weights, 0.5)
    assert [id(w) for w in weights] == ids and [_buffer(w) for w in weights] == buffers
    for w, v, b in zip(weights, views, before, strict=True):
        assert w.dtype == np.float32
        assert not np.array_equal(w, b)
        np.testing.assert_array_equal(v, w.reshape(-1))
    # No penalty: untouched, same objects.
    NoLearningPenalty().update_weights(weights, 0.5)
    assert [id(w) for w in weights] == ids


def test_no_sign_flip_and_no_wipe():
    rng = np.random.default_rng(3)
    w = rng.standard_normal(1000)
    w[:10] = 0.0
    sign = np.sign(w)
    penalty = ElasticLearningPenalty(l1=1e-4, l2=1e-4)
    # Small eta: one step moves every weight by at most eta * (l1 + l2 |w|), so only the
    # weights already within eta * l1 of zero become zero.
    eta = 0.01
    small = np.abs(w) <= eta * 1e-4 * 1.01
    step = w.copy()
    penalty.update_weights([step], eta)
    assert np.all(np.sign(step)[~small] == sign[~small])
    assert np.count_nonzero(step) == np.count_nonzero(~small & (w != 0))
    assert np.all(np.abs(step - w) <= eta * (1e-4 + 1e-4 * np.abs(w)) + 1e-15)

    # Many steps, large rates, even eta * l2 > 1: magnitudes shrink to zero, signs never flip.
    for eta in [0.5, 2.0, 5.0, 30.0]:
        w2 = w.copy()
        ElasticLearningPenalty(l1=0.05, l2=0.5).update_weights([w2], eta)
        assert np.all(np.sign(w2) * sign >= 0)
        assert np.all(np.abs(w2) <= np.abs(w))
    w3 = w.copy()
    ElasticLearningPenalty(l1=0.0, l2=1.0).update_weights([w3], 3.0)  # 1 - eta * l2 < 0
    np.testing.assert_array_equal(w3, 0.0)

    w4 = w.copy()
    l1_only = ElasticLearningPenalty(l1=0.01, l2=0.0)
    for _ in range(200):
        before = w4.copy()
        l1_only.update_weights([w4], 0.05)
        assert np.all(np.sign(w4) * np.sign(before) >= 0)
        assert np.all(np.abs(w4) <= np.abs(before))
    # every weight moved by exactly eta * l1 per step until it reached zero
    np.testing.assert_allclose(np.abs(w4), np.maximum(np.abs(w) - 200 * 0.05 * 0.01, 0), atol=1e-12)


def test_l2_decay_is_sklearn_weight_decay():
    # scikit-learn's SGD multiplies w by max(0, 1 - (1 - l1_ratio) * eta * alpha) for L2.
    alpha, l1_ratio, eta = 0.01, 0.0, 0.7
    w = np.array([1.0, -2.0, 3.0])
    expected = w * max(0.0, 1.0 - (1.0 - l1_ratio) * eta * alpha)
    ElasticLearningPenalty(l1=alpha * l1_ratio, l2=alpha * (1 - l1_ratio)).update_weights([w], eta)
    np.testing.assert_allclose(w, expected, rtol=1e-15)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(
    "penalty",
    [
        ElasticLearningPenalty(),
        ElasticLearningPenalty(l1=0.3, l2=0.0),
        ElasticLearningPenalty(l1=0.0, l2=0.3),
        ElasticLearningPenalty(l1=0.1, l2=2.0),
        NoLearningPenalty(),
    ],
    ids=["default", "l1", "l2", "big_l2", "none"],
)
def test_onnx_update_matches_numpy(penalty, dtype):
    weights = _weights(seed=2, dtype=dtype)
    n = len(weights)
    model = penalty.build_onnx_function(21, "cpu", n, dtype=dtype)
    assert model.ir_version == 10
    sess = InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == [f"w{i}" for i in range(n)] + ["eta"]
    onnx_w = [w.copy() for w in weights]
    for eta in [0.05, 0.2, 0.9, 0.01]:
        penalty.update_weights(weights, eta)
        feeds = {f"w{i}": w for i, w in enumerate(onnx_w)}
        feeds["eta"] = np.array(eta, dtype=dtype)
        onnx_w = sess.run(None, feeds)
    tol = 1e-6 if dtype == np.float32 else 1e-14
    for got, exp in zip(onnx_w, weights, strict=True):
        assert got.dtype == dtype
        np.testing.assert_allclose(got, exp, rtol=tol, atol=tol)
        # the soft threshold zeroes the same coefficients
        assert np.array_equal(got == 0, exp == 0)


def test_validation_at_construction_and_at_use():
    for bad in [{"l1": -1.0}, {"l2": float("inf")}, {"l1": "0.1"}]:
        with pytest.raises(ValueError, match=">= 0"):
            ElasticLearningPenalty(**bad)
        # set_params does not go through __init__: the use checks again.
        penalty = ElasticLearningPenalty().set_params(**bad)
        with pytest.raises(ValueError, match=">= 0"):
            penalty.update_weights([np.zeros(2)], 0.1)
        with pytest.raises(ValueError, match=">= 0"):
            penalty.penalty_loss([np.zeros(2)])
        with pytest.raises(ValueError, match=">= 0"):
            penalty.build_onnx_function(21, "cpu", 1)
    with pytest.raises(ValueError, match="opset"):
        NoLearningPenalty().build_onnx_function(22, "cpu", 1)


def test_params_clone_repr_pickle():
    penalty = ElasticLearningPenalty(l1=0.2)
    assert penalty.get_params() == {"l1": 0.2, "l2": 0.5, "rows": 1, "cumulative": False}
    assert repr(penalty) == "ElasticLearningPenalty(l1=0.2)"
    assert repr(ElasticLearningPenalty()) == "ElasticLearningPenalty()"
    assert repr(NoLearningPenalty()) == "NoLearningPenalty()"
    copy = clone(penalty).set_params(l2=0.1)
    assert copy.get_params() == {"l1": 0.2, "l2": 0.1, "rows": 1, "cumulative": False}
    assert penalty.l2 == 0.5
    restored = pickle.loads(pickle.dumps(copy))
    assert type(restored) is ElasticLearningPenalty and restored.get_params() == copy.get_params()
    assert type(pickle.loads(pickle.dumps(NoLearningPenalty()))) is NoLearningPenalty


class _Holder(BaseEstimator):
    def __init__(self, learning_penalty=None):
        self.learning_penalty = learning_penalty


def test_nested_params():
    holder = _Holder(ElasticLearningPenalty())
    holder.set_params(learning_penalty__l1=0.01)
    copy = clone(holder)
    assert copy.learning_penalty is not holder.learning_penalty
    assert copy.get_params()["learning_penalty__l1"] == 0.01


def test_elasticnet_alias_is_sklearn_default():
    skl = SGDRegressor(penalty="elasticnet")
    got = BaseLearningPenalty.select("elasticnet")
    assert got.l1 == pytest.approx(skl.alpha * skl.l1_ratio, rel=1e-15)
    assert got.l2 == pytest.approx(skl.alpha * (1 - skl.l1_ratio), rel=1e-15)


ALIASES = {
    "none": (NoLearningPenalty, {}),
    "l2": (ElasticLearningPenalty, {"l1": 0.0, "l2": 1e-4}),
    "l1": (ElasticLearningPenalty, {"l1": 1e-4, "l2": 0.0}),
    "elasticnet": (ElasticLearningPenalty, {"l1": 1e-4 * 0.15, "l2": 1e-4 * 0.85}),
    "elastic": (ElasticLearningPenalty, {"l1": 0.5, "l2": 0.5}),
    "l1l2": (ElasticLearningPenalty, {"l1": 0.5, "l2": 0.5}),
}


def test_seed_elastic_alias_takes_l1_and_l2():
    """onnxcustom's tests: BaseLearningPenalty.select('elastic', l1=0.1, l2=0.9)."""
    got = BaseLearningPenalty.select("elastic", l1=0.1, l2=0.9)
    assert type(got) is ElasticLearningPenalty
    assert (got.l1, got.l2) == (0.1, 0.9)
    w = np.array([[1.0, -2.0]])
    assert got.penalty_loss([w]) == pytest.approx(0.1 * 3 + 0.9 / 2 * 5)


@pytest.mark.parametrize("alias", sorted(ALIASES))
def test_select_alias(alias):
    klass, params = ALIASES[alias]
    got = BaseLearningPenalty.select(alias)
    assert type(got) is klass
    for key, value in params.items():
        assert getattr(got, key) == pytest.approx(value, rel=1e-12)


def test_select_other_values():
    assert set(BaseLearningPenalty.aliases()) == set(ALIASES)
    assert type(BaseLearningPenalty.select(None)) is NoLearningPenalty
    got = BaseLearningPenalty.select(0.01)
    assert type(got) is ElasticLearningPenalty
    assert got.get_params() == {"l1": 0.0, "l2": 0.01, "rows": 1, "cumulative": False}
    penalty = ElasticLearningPenalty()
    assert BaseLearningPenalty.select(penalty) is penalty
    with pytest.raises(ValueError, match="Unknown learning penalty 'ridge'") as info:
        BaseLearningPenalty.select("ridge")
    for alias in ALIASES:
        assert repr(alias) in str(info.value)
    for bad in (False, [0.1], object()):
        with pytest.raises(TypeError, match="Cannot build a learning penalty"):
            BaseLearningPenalty.select(bad)
    # families do not mix: a learning rate alias is not a penalty
    with pytest.raises(ValueError, match="Unknown learning penalty"):
        BaseLearningPenalty.select("sgd")


@pytest.mark.parametrize("penalty", [
    ElasticLearningPenalty(l1=0.0, l2=0.5),
    ElasticLearningPenalty(l1=0.3, l2=0.0),
    ElasticLearningPenalty(l1=0.2, l2=0.4),
    NoLearningPenalty(),
], ids=["l2", "l1", "elastic", "none"])
def test_stepper_equals_successive_update_weights(penalty):
    """The stepper the training loop builds once per epoch does what update_weights does
    at every batch, bit for bit."""
    rng = np.random.RandomState(0)
    weights = [rng.randn(6, 2).astype(np.float32), rng.randn(4).astype(np.float32)]
    reference = [w.copy() for w in weights]
    step = penalty.stepper(weights)
    for eta in (0.5, 0.1, 3.0):
        step(eta)
        penalty.update_weights(reference, eta)
    for got, expected in zip(weights, reference, strict=True):
        np.testing.assert_array_equal(got, expected)


def test_stepper_validates_when_built():
    with pytest.raises(ValueError, match="l1 must be a finite number >= 0"):
        ElasticLearningPenalty().set_params(l1=-1.0).stepper([np.zeros(2, dtype=np.float32)])


def _cumulative_reference(w, etas, l1):
    """Tsuruoka et al.'s cumulative L1 penalty, written out: after each step the total
    u of the L1 steps, q the penalty applied to each weight so far."""
    w, q, u, out = w.copy(), np.zeros_like(w), 0.0, []
    for eta in etas:
        u += eta * l1
        for j in range(w.size):
            z = w.flat[j]
            if z > 0:
                w.flat[j] = max(0.0, z - (u + q.flat[j]))
            elif z < 0:
                w.flat[j] = min(0.0, z + (u - q.flat[j]))
            q.flat[j] += w.flat[j] - z
        out.append(w.copy())
        # The gradient step between two penalty steps.
        w += np.sin(np.arange(w.size) + eta).reshape(w.shape) * 0.05
    return out


def test_cumulative_l1_after_the_step_is_tsuruoka_s_rule():
    """``cumulative=True``: the stepper is the L2 decay alone, and after each step the
    cumulative L1 rule with its totals, equal to the written-out rule (float64); without
    it, nothing comes after the step."""
    penalty = ElasticLearningPenalty(l1=0.3, l2=0.2, cumulative=True)
    weights = [np.array([[0.5, -0.02], [0.01, -0.9]]), np.array([0.0, 0.04, -0.3])]
    etas = [0.1, 0.05, 0.2, 0.1]
    expected = [_cumulative_reference(w, etas, 0.3) for w in weights]
    state = penalty.after_step_state(weights)
    assert state[0].shape == () and [q.shape for q in state[1:]] == [(2, 2), (3,)]
    step = penalty.after_step(weights, state)
    for index, eta in enumerate(etas):
        step(eta)
        for w, reference in zip(weights, expected, strict=True):
            np.testing.assert_allclose(w, reference[index], rtol=1e-15, atol=1e-17)
            w += np.sin(np.arange(w.size) + eta).reshape(w.shape) * 0.05
    assert float(state[0]) == pytest.approx(0.3 * sum(etas), rel=1e-15)
    decayed = [np.ones(3)]
    penalty.stepper(decayed)(0.5)
    np.testing.assert_array_equal(decayed[0], np.full(3, 0.9))
    for plain in (ElasticLearningPenalty(l1=0.3), ElasticLearningPenalty(l1=0.0, l2=0.1,
                                                                         cumulative=True)):
        assert not plain.applies_after_step()
        assert plain.after_step_state(weights) == []
        assert plain.after_step(weights, []) is None
    assert NoLearningPenalty().after_step(weights, []) is None


def _present_reference(w, steps, l1):
    """The cumulative rule of ``steps`` (rate, present rows of w's first axis) written out
    as scikit-learn's sparse loop: u grows at every step, each present row's weights are
    stepped once per step, the others untouched; then the gradient step of
    :func:`_cumulative_reference` (on every weight)."""
    w, q, u, out = w.copy(), np.zeros_like(w), 0.0, []
    for eta, rows in steps:
        u += eta * l1
        for i in sorted(set(rows.tolist())):
            for j in range(w.shape[1]):
                z = w[i, j]
                if z > 0:
                    w[i, j] = max(0.0, z - (u + q[i, j]))
                elif z < 0:
                    w[i, j] = min(0.0, z + (u - q[i, j]))
                q[i, j] += w[i, j] - z
        out.append(w.copy())
        w += np.sin(np.arange(w.size) + eta).reshape(w.shape) * 0.05
    return out


def test_cumulative_l1_steps_the_present_rows_only():
    """``step(eta, present)``: the rule at the rows of the first axis ``present`` lists
    (duplicates once; few of them, by fancy indexing, or many, by a mask), the other rows
    untouched until they are present again, when they catch up (u - q); None for a
    weight stepped whole. As the written-out sparse loop, float64."""
    penalty = ElasticLearningPenalty(l1=0.3, l2=0.0, cumulative=True)
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal((8, 2)) * 0.3, np.array([0.2, -0.01, 0.5])]
    steps = [(0.1, np.array([1, 1])), (0.05, np.array([0, 3, 5, 3, 6, 7, 2])),
             (0.2, np.array([], dtype=np.int64)), (0.1, np.array([1, 4, 1, 0])),
             (0.1, np.array([2, 2, 2, 5, 6, 6]))]
    expected = _present_reference(weights[0], steps, 0.3)
    whole = _cumulative_reference(weights[1], [eta for eta, _ in steps], 0.3)
    state = penalty.after_step_state(weights)
    step = penalty.after_step(weights, state)
    zeros = 0
    for index, (eta, rows) in enumerate(steps):
        step(eta, [rows, None])
        np.testing.assert_allclose(weights[0], expected[index], rtol=1e-15, atol=1e-17)
        np.testing.assert_allclose(weights[1], whole[index], rtol=1e-15, atol=1e-17)
        zeros += int((weights[0] == 0).sum())
        for w in weights:
            w += np.sin(np.arange(w.size) + eta).reshape(w.shape) * 0.05
    assert zeros
