"""The JSON + tensors codec of the saved state: what it writes, it reads back as it was."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    MaxAbsScaler,
    MinMaxScaler,
    OneHotEncoder,
    RobustScaler,
    StandardScaler,
)

from skl_ortgrad import LearningRateAdam, LearningRateSGD
from skl_ortgrad.estimators.state_codec import StateDecoder, StateEncoder


def _round_trip(value, random_state=False, transformers=False):
    encoder = StateEncoder(transformers=transformers)
    document = json.loads(json.dumps(encoder.encode(value, "value", random_state)))
    decoder = StateDecoder(encoder.tensors, transformers=transformers)
    return decoder.decode(document, "value"), encoder


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
    (lambda: 0, r"value = <function <lambda> at .*> is a function \(or a class\): code, "
                r"which the format cannot hold"),
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


# -- scikit-learn transformers (files of pipelines) -----------------------------------------

FRAME = pd.DataFrame({
    "a": [0.5, np.nan, 2.0, -1.0, 3.5, 0.0],
    "b": [1.0, 2.0, 3.0, 4.0, 5.0, 7.0],
    "c": ["x", "y", "x", "z", "y", "x"],
    "d": [1, 2, 2, 1, 3, 1],
})


def _transformers():
    return {
        "standard": (StandardScaler(), ["a", "b"]),
        "minmax": (MinMaxScaler(feature_range=(-1, 2)), ["b"]),
        "maxabs": (MaxAbsScaler(), ["b"]),
        "robust": (RobustScaler(quantile_range=(10.0, 90.0)), ["b"]),
        "onehot": (OneHotEncoder(handle_unknown="infrequent_if_exist", min_frequency=2,
                                 drop="if_binary"), ["c", "d"]),
        "impute-mean": (SimpleImputer(), ["a"]),
        "impute-strings": (SimpleImputer(strategy="most_frequent", missing_values=""),
                           ["c"]),
        "columns": (ColumnTransformer([
            ("num", make_pipeline(SimpleImputer(), StandardScaler()), ["a", "b"]),
            ("cat", OneHotEncoder(sparse_output=False), [2, 3]),
        ], remainder="drop"), ["a", "b", "c", "d"]),
        "remainder": (ColumnTransformer([("scale", MinMaxScaler(), slice(1, 2))],
                                        remainder="passthrough"), ["a", "b"]),
    }


@pytest.mark.parametrize("name", list(_transformers()))
def test_a_fitted_transformer_comes_back_transforming_the_same(name):
    transformer, columns = _transformers()[name]
    frame = FRAME[columns]
    transformer.fit(frame)
    back, _ = _round_trip(transformer, transformers=True)
    assert type(back) is type(transformer) and repr(back) == repr(transformer)
    expected = transformer.transform(frame)
    got = back.transform(frame)
    expected, got = (m.toarray() if hasattr(m, "toarray") else np.asarray(m)
                     for m in (expected, got))
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(back.get_feature_names_out(),
                                  transformer.get_feature_names_out())


def test_transformers_are_read_in_pipeline_files_only():
    encoder = StateEncoder(transformers=True)
    document = json.loads(json.dumps(encoder.encode(StandardScaler(), "value")))
    with pytest.raises(ValueError, match=r"value: unknown tag '\$transformer'"):
        StateDecoder(encoder.tensors).decode(document, "value")
    with pytest.raises(ValueError, match=r"value = StandardScaler\(\) \(StandardScaler\) "
                                         r"cannot be saved"):
        StateEncoder().encode(StandardScaler(), "value")
    # A function is code: the format has no form for it.
    with pytest.raises(ValueError, match=r"value\.params\.func = <ufunc 'log1p'> is a "
                                         r"function \(or a class\): code"):
        encoder.encode(FunctionTransformer(np.log1p), "value")


@pytest.mark.parametrize(("document", "message"), [
    ({"$transformer": "sklearn.preprocessing.PolynomialFeatures",
      "params": {"$dict": {}}, "state": {"$dict": {}}},
     r"'sklearn\.preprocessing\.PolynomialFeatures' is not one of the scikit-learn "
     r"transformers the format holds"),
    ({"$transformer": "sklearn.preprocessing.FunctionTransformer",
      "params": {"$dict": {"func": "os.system"}}, "state": {"$dict": {}}},
     r"The 'func' parameter of FunctionTransformer must be a callable or None"),
    ({"$transformer": "sklearn.preprocessing.StandardScaler",
      "params": {"$dict": {"with_mean": "yes"}}, "state": {"$dict": {}}},
     r"StandardScaler refuses its parameters: The 'with_mean' parameter of StandardScaler "
     r"must be an instance of 'bool'"),
    ({"$transformer": "sklearn.preprocessing.StandardScaler",
      "params": {"$dict": {}}, "state": {"$dict": {"with_std": False}}},
     r"value\.state holds attributes that cannot be set: \['with_std'\]"),
    ({"$transformer": "sklearn.preprocessing.StandardScaler",
      "params": {"$dict": {}}, "state": {"$dict": {"__class__": 1}}},
     r"value\.state holds attributes that cannot be set: \['__class__'\]"),
    ({"$slice": [0, "2", None]}, r"a slice holds \[start, stop, step\], integers or null"),
    ({"$dtype": "V8"}, r"'V8' is not a dtype the format uses"),
    ({"$objects": {"$tuple": [1]}}, r"an array of objects holds a list"),
], ids=["class", "function", "parameter", "parameter-as-state", "dunder", "slice", "dtype",
        "objects"])
def test_transformer_decoder_refuses_what_the_encoder_does_not_write(document, message):
    with pytest.raises(ValueError, match=message):
        StateDecoder([], transformers=True).decode(document, "value")
