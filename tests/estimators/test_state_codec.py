"""The JSON + tensors codec of the saved state: what it writes, it reads back as it was."""

from __future__ import annotations

import json

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from skl_ortgrad import LearningRateAdam, LearningRateSGD
from skl_ortgrad.estimators.state_codec import StateDecoder, StateEncoder


def _round_trip(value, random_state=False):
    encoder = StateEncoder()
    document = json.loads(json.dumps(encoder.encode(value, "value", random_state)))
    return StateDecoder(encoder.tensors).decode(document, "value"), encoder


def test_values_come_back_with_their_types():
    rng = np.random.RandomState(3)
    rng.normal(size=5)
    value = {
        "tuple": (1, 2.5, None, True), "list": ["a", [1]],
        "f32": np.float32(0.1), "i64": np.int64(-3), "bool": np.bool_(True),
        "type": np.float32, "dtype": np.dtype("float64"),
        "array": np.arange(6, dtype=np.float32).reshape(2, 3), "counter": np.array(4),
        "labels": np.array(["cat", "dog"]), "names": np.array(["a", "b"], dtype=object),
        "rate": LearningRateAdam(eta0=0.01), "rng": rng,
    }
    back, _ = _round_trip(value, random_state=True)
    assert back["tuple"] == value["tuple"] and back["list"] == value["list"]
    for key in ("f32", "i64", "bool"):
        assert type(back[key]) is type(value[key]) and back[key] == value[key]
    assert back["type"] is np.float32 and back["dtype"] == np.dtype("float64")
    for key in ("array", "counter", "labels", "names"):
        np.testing.assert_array_equal(back[key], value[key])
        assert back[key].dtype == value[key].dtype and back[key].shape == value[key].shape
    assert back["array"].flags.writeable  # training updates weights in place
    assert isinstance(back["rate"], LearningRateAdam) and back["rate"].eta0 == 0.01
    np.testing.assert_array_equal(back["rng"].normal(size=4), rng.normal(size=4))


def test_equal_arrays_are_stored_once_and_decoded_apart():
    weights = np.ones((3, 2), dtype=np.float32)
    back, encoder = _round_trip([weights, weights.copy(), weights.astype(np.float64)])
    assert len(encoder.tensors) == 2  # same bytes and dtype: one tensor
    back[0][0, 0] = 5
    assert back[1][0, 0] == 1


def test_a_fitted_scikit_learn_model_comes_back_fitted():
    X = np.random.RandomState(0).normal(size=(30, 2))
    model = LogisticRegression(C=0.5).fit(X, X[:, 0] > 0)
    back, _ = _round_trip(model)
    assert back.C == 0.5
    np.testing.assert_array_equal(back.predict_proba(X), model.predict_proba(X))


class _MyRate(LearningRateSGD):
    """A user's subclass: not a class the decoder knows."""


@pytest.mark.parametrize(("value", "message"), [
    (_MyRate(), r"value = _MyRate\(\) \(_MyRate\) cannot be saved"),
    (np.random.RandomState(0), r"value = RandomState\(MT19937\) .*cannot be saved"),
    ({1: "a"}, r"value = \{1: 'a'\} \(dict\) cannot be saved"),
    (np.array([1 + 2j]), r"value: arrays of dtype complex128 cannot be saved"),
    (lambda: 0, r"\(function\) cannot be saved"),
], ids=["subclass", "random-state-parameter", "int-keys", "complex", "function"])
def test_what_the_format_cannot_hold_is_refused(value, message):
    with pytest.raises(ValueError, match=message):
        StateEncoder().encode(value, "value")


@pytest.mark.parametrize(("document", "message"), [
    ({"$tensor": "t", "extra": 1}, r"expected the fields \['\$tensor'\]"),
    ({"a": 1}, r"is not a value the format writes"),
    ({"$scalar": "object", "value": 1}, r"'object' is not a dtype the format uses"),
    ({"$scalar": "float32", "value": "1"}, r"a numpy scalar holds a number"),
    ({"$strings": ["a", 1], "dtype": "<U1"}, r"holds a list of strings"),
    ({"$learning": "LearningRateSGD", "params": {"$dict": {"eta0": -1.0}}},
     r"LearningRateSGD refuses its parameters: eta0 must be a finite number > 0"),
    ({"$random_state": {"$tuple": ["MT19937", 1]}}, r"not the state of a RandomState"),
], ids=["fields", "plain-object", "dtype", "scalar", "strings", "parameters", "rng"])
def test_decoder_refuses_what_the_encoder_does_not_write(document, message):
    with pytest.raises(ValueError, match=message):
        StateDecoder([]).decode(document, "value")
