"""skl_ortgrad.save / load of a whole Pipeline ending in an estimator of skl_ortgrad: one
file that onnxruntime serves as is (the whole pipeline as one graph), that loads into a
pipeline predicting the same, whose last step resumes training bit for bit, covered by
the digest; what it cannot hold is refused with the step named."""

from __future__ import annotations

import pickle
import re
import warnings

import numpy as np
import pandas as pd
import pytest
import sklearn
from _file_edits import flip_every_byte
from onnxruntime import InferenceSession
from sklearn.compose import ColumnTransformer, make_column_selector
from sklearn.exceptions import InconsistentVersionWarning, NotFittedError
from sklearn.impute import SimpleImputer
from sklearn.linear_model import Ridge
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    MaxAbsScaler,
    MinMaxScaler,
    OneHotEncoder,
    PolynomialFeatures,
    RobustScaler,
    StandardScaler,
)

from skl_ortgrad import OnnxMLPRegressor, OnnxSGDClassifier, load, save
from skl_ortgrad.estimators import pipeline_state


def _frame(n=300, seed=0):
    """Numeric columns (one with missing values), a string and an integer categorical
    column, and a text column the pipeline drops."""
    rng = np.random.RandomState(seed)
    frame = pd.DataFrame({
        "age": rng.normal(40, 10, n), "income": rng.lognormal(3, 0.5, n),
        "city": rng.choice(["paris", "lyon", "nice"], n), "rooms": rng.choice([1, 2, 3], n),
        "note": rng.choice(["a", "b"], n), "height": rng.normal(170, 8, n),
    })
    frame.loc[::7, "age"] = np.nan
    score = (frame["age"].fillna(40) - 40) / 10 + (frame["city"] == "paris") - 0.3
    labels = np.array(["no", "yes"])[(score > 0).astype(int)]
    return frame, labels


def _pipeline(estimator):
    columns = ColumnTransformer([
        ("num", make_pipeline(SimpleImputer(), StandardScaler()), ["age", "income"]),
        ("height", MinMaxScaler(), ["height"]),
        ("cat", OneHotEncoder(handle_unknown="ignore"), ["city", "rooms"]),
    ], remainder="drop")
    return Pipeline([("columns", columns), ("model", estimator)])


def _classifier():
    return _pipeline(OnnxSGDClassifier(loss="log_loss", max_iter=3, tol=None,
                                       random_state=0, batch_size=16))


def _feeds(session, frame):
    """One (N, 1) column per graph input, of the input's type."""
    types = {"tensor(string)": object, "tensor(int64)": np.int64,
             "tensor(float)": np.float32, "tensor(double)": np.float64}
    return {i.name: frame[[i.name]].to_numpy().astype(types[i.type])
            for i in session.get_inputs()}


def test_a_pipeline_is_served_loaded_and_resumed_bit_for_bit(tmp_path):
    frame, labels = _frame()
    pipeline = _classifier().fit(frame[:200], labels[:200])
    path = tmp_path / "pipeline.onnx"
    save(pipeline, path)

    # Served as is: one input per column read (the dropped one is not an input).
    session = InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [(i.name, i.type) for i in session.get_inputs()] == [
        ("age", "tensor(float)"), ("income", "tensor(float)"), ("city", "tensor(string)"),
        ("rooms", "tensor(int64)"), ("height", "tensor(float)")]
    label, probabilities = session.run(["label", "probabilities"], _feeds(session, frame))
    np.testing.assert_array_equal(label, pipeline.predict(frame))
    np.testing.assert_allclose(probabilities, pipeline.predict_proba(frame), rtol=1e-5,
                               atol=1e-6)

    loaded = load(path)
    assert type(loaded) is Pipeline and repr(loaded) == repr(pipeline)
    for method in ("predict", "predict_proba", "decision_function"):
        expected = getattr(pipeline, method)(frame)
        got = getattr(loaded, method)(frame)
        np.testing.assert_array_equal(got, expected)
        assert got.dtype == expected.dtype
    np.testing.assert_array_equal(loaded[:-1].get_feature_names_out(),
                                  pipeline[:-1].get_feature_names_out())

    # Resumed: the last step's partial_fit continues as the pickled pipeline's would.
    pickled = pickle.loads(pickle.dumps(pipeline))
    for copy in (pickled, loaded):
        features = copy[:-1].transform(frame[200:])
        copy[-1].partial_fit(features, labels[200:])
        copy[-1].partial_fit(features[:50], labels[200:250])
    for got, expected in zip(loaded[-1].optimizer_.weights_ + loaded[-1].optimizer_.lr_state_,
                             pickled[-1].optimizer_.weights_ + pickled[-1].optimizer_.lr_state_,
                             strict=True):
        np.testing.assert_array_equal(got, expected)
    assert (loaded[-1].t_, loaded[-1].n_iter_, loaded[-1].loss_curve_) == (
        pickled[-1].t_, pickled[-1].n_iter_, pickled[-1].loss_curve_)
    np.testing.assert_array_equal(loaded.predict_proba(frame), pickled.predict_proba(frame))

    # Nothing lost: the loaded pipeline saves the same bytes.
    save(load(path), tmp_path / "again.onnx")
    assert (tmp_path / "again.onnx").read_bytes() == path.read_bytes()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_a_pipeline_on_arrays_has_one_input_in_the_estimator_dtype(tmp_path):
    rng = np.random.RandomState(1)
    X = rng.normal(size=(120, 3)) * [1, 10, 100]
    y = X @ [1.0, 0.1, -0.01]
    pipeline = make_pipeline(StandardScaler(), OnnxMLPRegressor(
        hidden_layer_sizes=(5,), max_iter=3, random_state=0, dtype=np.float64)).fit(X, y)
    path = tmp_path / "pipeline.onnx"
    save(pipeline, path)
    session = InferenceSession(str(path), providers=["CPUExecutionProvider"])
    assert [(i.name, i.type, i.shape) for i in session.get_inputs()] == [
        ("X", "tensor(double)", [None, 3])]
    np.testing.assert_allclose(session.run(None, {"X": X})[0].ravel(), pipeline.predict(X),
                               rtol=1e-10)
    loaded = load(path)
    np.testing.assert_array_equal(loaded.predict(X), pipeline.predict(X))
    loaded[-1].partial_fit(loaded[0].transform(X), y)
    pipeline[-1].partial_fit(pipeline[0].transform(X), y)
    np.testing.assert_array_equal(loaded.predict(X), pipeline.predict(X))


_STEPS = {
    "passthrough": ColumnTransformer([("num", SimpleImputer(), ["age"])],
                                     remainder="passthrough"),
    "scalers": ColumnTransformer([
        ("age", make_pipeline(SimpleImputer(), MaxAbsScaler()), ["age"]),
        ("income", RobustScaler(), ["income"]), ("height", "passthrough", ["height"])]),
    "onehot-drop": ColumnTransformer([("cat", OneHotEncoder(drop="first"),
                                       ["city", "rooms"])]),
    "onehot-infrequent": ColumnTransformer([("cat", OneHotEncoder(
        handle_unknown="infrequent_if_exist", min_frequency=90), ["city", "rooms"])]),
}


@pytest.mark.parametrize("case", list(_STEPS))
def test_each_transformer_is_served_and_loaded(tmp_path, case):
    frame, labels = _frame()
    if case == "passthrough":
        frame = frame[["age", "income", "height"]]
    pipeline = Pipeline([("columns", _STEPS[case]), ("model", OnnxSGDClassifier(
        loss="log_loss", max_iter=2, tol=None, random_state=0))]).fit(frame, labels)
    path = tmp_path / "pipeline.onnx"
    save(pipeline, path)
    session = InferenceSession(str(path), providers=["CPUExecutionProvider"])
    label, probabilities = session.run(None, _feeds(session, frame))
    np.testing.assert_array_equal(label, pipeline.predict(frame))
    np.testing.assert_allclose(probabilities, pipeline.predict_proba(frame), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_array_equal(load(path).predict_proba(frame),
                                  pipeline.predict_proba(frame))


def test_one_byte_changed_anywhere_in_a_pipeline_file_is_refused(tmp_path):
    frame, labels = _frame(n=60)
    path = tmp_path / "pipeline.onnx"
    save(_classifier().fit(frame, labels), path)
    messages = flip_every_byte(path, load)
    assert [position for position, m in messages.items() if m is None] == []
    expected = re.compile(rf"^Cannot load '{re.escape(str(path))}' as a skl_ortgrad "
                          r"estimator: .*the file was damaged, or changed after "
                          r"skl_ortgrad\.save wrote it\.$")
    assert [m for m in messages.values() if not expected.match(m)] == []


def test_a_file_of_another_scikit_learn_version_warns(tmp_path, monkeypatch):
    """Transformers keep scikit-learn's private state, which another version may read
    differently: as its pickles, scikit-learn warns."""
    frame, labels = _frame(n=60)
    pipeline = _classifier().fit(frame, labels)
    path = tmp_path / "pipeline.onnx"
    save(pipeline, path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load(path)
    monkeypatch.setattr(sklearn, "__version__", "1.0.0")
    save(pipeline, path)
    monkeypatch.undo()
    with pytest.warns(InconsistentVersionWarning, match=r"Trying to unpickle estimator "
                                                        r"Pipeline from version 1\.0\.0 when "
                                                        rf"using version {sklearn.__version__}"):
        load(path)


def _with_step(step, columns=("age", "income")):
    return Pipeline([("columns", ColumnTransformer([("num", step, list(columns))])),
                     ("model", OnnxSGDClassifier(max_iter=1, tol=None))])


_REFUSED = [
    ("function", _with_step(FunctionTransformer(np.log1p)),
     r"Step 'columns' > 'num' is a FunctionTransformer: it holds a function "
     r"\(<ufunc 'log1p'>\), code, which a saved file cannot hold"),
    ("unknown-transformer", _with_step(make_pipeline(SimpleImputer(), PolynomialFeatures())),
     r"Step 'columns' > 'num' > 'polynomialfeatures' is a PolynomialFeatures: a saved "
     r"pipeline holds the transformers \[.*'StandardScaler'\] and ends in an estimator of "
     r"skl_ortgrad"),
    ("indicator", _with_step(SimpleImputer(add_indicator=True)),
     r"Step 'columns' > 'num' is a SimpleImputer with add_indicator=True: skl2onnx does "
     r"not convert its missing indicator"),
    ("column-selector", Pipeline([
        ("columns", ColumnTransformer([
            ("num", SimpleImputer(), make_column_selector(dtype_include="number"))])),
        ("model", OnnxSGDClassifier(max_iter=1, tol=None))]),
     r"Step 'columns' > 'num' selects its columns with <sklearn\.compose.*, a function"),
    ("last-step", make_pipeline(SimpleImputer(), Ridge()),
     r"skl_ortgrad\.save writes Pipelines ending in an estimator of skl_ortgrad \[.*\]; "
     r"this one ends in step 'ridge' \(Ridge\)"),
]


@pytest.mark.parametrize(("case", "pipeline", "message"), _REFUSED,
                         ids=[row[0] for row in _REFUSED])
def test_what_a_pipeline_file_cannot_hold_is_refused_naming_the_step(tmp_path, case,
                                                                       pipeline, message):
    frame, labels = _frame(n=60)
    target = labels if case != "last-step" else (labels == "yes").astype(float)
    pipeline.fit(frame[["age", "income"]].fillna(40), target)
    with pytest.raises(ValueError, match=message):
        save(pipeline, tmp_path / "pipeline.onnx")
    assert not any(tmp_path.iterdir())


def test_save_refuses_an_unfitted_pipeline_and_a_bare_column_transformer(tmp_path):
    with pytest.raises(NotFittedError):
        save(_classifier(), tmp_path / "pipeline.onnx")
    frame, _ = _frame(n=20)
    columns = _classifier()[0].fit(frame)
    with pytest.raises(ValueError, match=r"skl_ortgrad\.save writes the estimators \[.*\] "
                                         r"and Pipelines ending in one, got "
                                         r"ColumnTransformer"):
        save(columns, tmp_path / "pipeline.onnx")
    assert not any(tmp_path.iterdir())


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_input_types_follow_what_each_column_feeds():
    frame, labels = _frame(n=40)
    frame["age"] = frame["age"].fillna(40)
    frame["rooms"] = frame["rooms"].astype(float)
    pipeline = Pipeline([
        ("columns", ColumnTransformer([
            # skl2onnx imputes strings marked missing by a string only.
            ("city", make_pipeline(SimpleImputer(strategy="most_frequent", missing_values=""),
                                   OneHotEncoder()), [2]),
            ("rooms", OneHotEncoder(), ["rooms"]),
            ("rest", "passthrough", slice(0, 2)),
        ], remainder="drop")),
        ("model", OnnxSGDClassifier(max_iter=1, tol=None))]).fit(frame, labels)
    types = pipeline_state._input_types(pipeline, np.dtype(np.float32))
    assert [(name, type(kind).__name__) for name, kind in types] == [
        ("age", "FloatTensorType"), ("income", "FloatTensorType"),
        ("city", "StringTensorType"), ("rooms", "FloatTensorType"),
        ("note", "FloatTensorType"), ("height", "FloatTensorType")]
    # The columns dropped are no inputs of the served graph.
    session = InferenceSession(pipeline_state.served_model(pipeline).SerializeToString(),
                               providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["age", "income", "city", "rooms"]
    label, _ = session.run(None, _feeds(session, frame))
    np.testing.assert_array_equal(label, pipeline.predict(frame))
