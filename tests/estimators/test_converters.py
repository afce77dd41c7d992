"""skl2onnx.to_onnx exports whole pipelines holding the estimators (converters registered
on import) and the exported graph predicts like the pipeline."""

import numpy as np
import pandas as pd
import pytest
from onnxruntime import InferenceSession
from skl2onnx import get_model_alias, to_onnx
from sklearn.compose import ColumnTransformer
from sklearn.datasets import (
    load_breast_cancer,
    load_diabetes,
    load_iris,
    make_multilabel_classification,
)
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from skl_ortgrad import (
    ElasticLearningPenalty,
    NegLogLearningLoss,
    OnnxGradientClassifier,
    OnnxGradientRegressor,
    OnnxMLPClassifier,
    OnnxMLPRegressor,
    OnnxSGDClassifier,
    OnnxSGDRegressor,
)
from skl_ortgrad.graph.model import TARGET_OPSET

pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")

FAST = {"max_iter": 5, "tol": None, "random_state": 0}
# float32: the pipeline scales in float64 then casts, the graph scales in float32, so the
# results differ by a few ulps: atol for values near 0 (small probabilities).
TOLERANCE = {np.float32: {"rtol": 1e-5, "atol": 1e-6}, np.float64: {"rtol": 1e-10, "atol": 1e-12}}
DTYPES = [np.float32, np.float64]
# The former default multiclass loss: a softmax over the classes (3 classes or more).
SOFTMAX = NegLogLearningLoss(eps=0.0, probability_function="softmax")


def _binary():
    return load_breast_cancer(return_X_y=True)


def _multiclass():
    X, y = load_iris(return_X_y=True)
    return X, np.array(["setosa", "versicolor", "virginica"])[y]


def _pipeline(final):
    return Pipeline([("scale", StandardScaler()), ("model", final)])


def _run(onx, feeds):
    session = InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [out.name for out in session.get_outputs()]
    return dict(zip(names, session.run(None, feeds), strict=True))


def _export(model, X, dtype, options=None):
    onx = to_onnx(model, X[:1].astype(dtype), target_opset=TARGET_OPSET, options=options)
    return _run(onx, {"X": X.astype(dtype)})


def _ovr_sigmoids(scores):
    """The normalized one-vs-rest sigmoids of the scores: the probabilities the exported
    graph of a linear classifier without ``predict_proba`` (hinge loss) computes."""
    sigmoids = 1 / (1 + np.exp(-scores))
    return sigmoids / sigmoids.sum(axis=1, keepdims=True)


def _check_classifier(model, X, got, dtype, zipmap=False):
    """Labels equal to predict, probabilities close to predict_proba, in the layout of
    option ``zipmap``: two tensors, a list of dicts, or a column per class. A classifier
    without predict_proba (hinge loss) exports the normalized one-vs-rest sigmoids."""
    label, *columns = got.values()
    if zipmap is True:
        columns = [[row[c] for row in columns[0]] for c in model.classes_]
    np.testing.assert_array_equal(label, model.predict(X))
    if hasattr(model, "predict_proba"):
        expected = model.predict_proba(X)
    else:
        expected = _ovr_sigmoids(model.decision_function(X))
    np.testing.assert_allclose(np.column_stack(columns), expected, **TOLERANCE[dtype])


def _check_regressor(model, X, got, dtype):
    expected = model.predict(X)
    np.testing.assert_allclose(got["variable"], expected.reshape((len(X), -1)), **TOLERANCE[dtype])


def test_every_estimator_is_registered():
    for estimator in (OnnxSGDRegressor, OnnxSGDClassifier, OnnxMLPRegressor, OnnxMLPClassifier,
                      OnnxGradientRegressor, OnnxGradientClassifier):
        assert get_model_alias(estimator) == f"SklOrtgrad{estimator.__name__}"


@pytest.mark.parametrize(
    ("dtype", "zipmap"),
    # ONNX's ZipMap reads float32 only: skl2onnx's float64 classifiers need another layout.
    [(np.float32, True), (np.float32, False), (np.float32, "columns"),
     (np.float64, False), (np.float64, "columns")],
)
@pytest.mark.parametrize(
    ("data", "loss"),
    [(_binary, "log_loss"), (_multiclass, "log_loss"), (_multiclass, SOFTMAX)],
    ids=["binary-log_loss", "multiclass-log_loss", "multiclass-softmax"],
)
def test_sgd_classifier_pipeline(data, loss, dtype, zipmap):
    X, y = data()
    model = _pipeline(OnnxSGDClassifier(loss=loss, dtype=dtype, **FAST)).fit(X, y)
    got = _export(model, X, dtype, options={"zipmap": zipmap})
    _check_classifier(model, X, got, dtype, zipmap=zipmap)


@pytest.mark.parametrize(
    "final", [OnnxSGDClassifier(loss="log_loss", **FAST), OnnxMLPClassifier(**FAST)]
)
def test_nocl_gives_class_indices(final):
    X, y = _multiclass()
    model = _pipeline(final).fit(X, y)
    got = _export(model, X, np.float32, options={"zipmap": False, "nocl": True})
    np.testing.assert_array_equal(got["label"], np.searchsorted(model.classes_, model.predict(X)))
    np.testing.assert_allclose(got["probabilities"], model.predict_proba(X), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("data", [_binary, _multiclass])
def test_raw_scores_give_decision_function(data):
    X, y = data()
    # The logistic loss (the former default for two classes) keeps the scores small
    # enough for the float32 tolerance; hinge's 'optimal' steps make them reach 1e3.
    model = _pipeline(OnnxSGDClassifier(loss="log_loss", **FAST)).fit(X, y)
    got = _export(model, X, np.float32, options={"zipmap": False, "model__raw_scores": True})
    scores = model.decision_function(X)
    if scores.ndim == 1:
        # skl2onnx writes a binary linear classifier's raw scores as [-s, s].
        scores = np.c_[-scores, scores]
    np.testing.assert_array_equal(got["label"], model.predict(X))
    np.testing.assert_allclose(got["probabilities"], scores, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("loss", ["hinge", "log_loss"])
def test_one_vs_rest_label_follows_scores(loss, dtype):
    # Scaled-up inputs give scores beyond 17, where several sigmoids round to 1 in
    # float32: the label must still be the class of the highest score, as predict.
    X, y = _multiclass()
    X = StandardScaler().fit_transform(X)
    model = OnnxSGDClassifier(loss=loss, dtype=dtype, **FAST).fit(X, y)
    X_large = 30 * X
    assert (np.sort(model.decision_function(X_large), axis=1)[:, -2] > 17).any()
    got = _export(model, X_large, dtype, options={"zipmap": False})
    _check_classifier(model, X_large, got, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_sgd_regressor_pipeline(dtype):
    X, y = load_diabetes(return_X_y=True)
    model = _pipeline(OnnxSGDRegressor(dtype=dtype, **FAST)).fit(X, y)
    _check_regressor(model, X, _export(model, X, dtype), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("data", [_binary, _multiclass])
def test_mlp_classifier_pipeline(data, dtype):
    X, y = data()
    model = _pipeline(OnnxMLPClassifier(hidden_layer_sizes=(8,), dtype=dtype, **FAST)).fit(X, y)
    got = _export(model, X, dtype, options={"zipmap": False})
    _check_classifier(model, X, got, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_labels", [2, 3])
def test_multilabel_mlp_classifier_pipeline(n_labels, dtype):
    """A multilabel OnnxMLPClassifier in a pipeline: labels (the indicator of ``predict``)
    and probabilities ``[N, n_labels]``, for two labels and in float64 too."""
    X, y = make_multilabel_classification(n_samples=100, n_features=5, n_classes=n_labels,
                                          random_state=0)
    model = _pipeline(OnnxMLPClassifier(hidden_layer_sizes=(8,), dtype=dtype, **FAST)).fit(X, y)
    got = _export(model, X, dtype, options={"zipmap": False})
    label, probabilities = got.values()
    assert label.shape == probabilities.shape == (len(X), n_labels)
    np.testing.assert_array_equal(label, model.predict(X))
    np.testing.assert_allclose(probabilities, model.predict_proba(X), **TOLERANCE[dtype])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n_outputs", [1, 2])
def test_mlp_regressor_pipeline(n_outputs, dtype):
    X, y = load_diabetes(return_X_y=True)
    y = y if n_outputs == 1 else np.c_[y, -2 * y]
    model = _pipeline(OnnxMLPRegressor(hidden_layer_sizes=(8,), dtype=dtype, **FAST)).fit(X, y)
    got = _export(model, X, dtype)
    assert got["variable"].shape == (len(X), n_outputs)
    _check_regressor(model, X, got, dtype)


@pytest.mark.parametrize(
    "final",
    [OnnxSGDClassifier(loss="log_loss", **FAST),
     OnnxMLPClassifier(hidden_layer_sizes=(4,), **FAST)],
)
def test_column_transformer_on_a_frame(final):
    rng = np.random.RandomState(0)
    colors = rng.choice(["red", "green", "blue"], 120)
    frame = pd.DataFrame({"size": rng.randn(120), "color": colors})
    y = np.where(frame["size"] + (frame["color"] == "red") > 0.3, "yes", "no")
    prep = ColumnTransformer(
        [("num", StandardScaler(), ["size"]), ("cat", OneHotEncoder(), ["color"])]
    )
    model = Pipeline([("prep", prep), ("model", final)]).fit(frame, y)
    onx = to_onnx(model, frame[:1], target_opset=TARGET_OPSET, options={"zipmap": False})
    # One graph input per column, as skl2onnx reads a frame.
    feeds = {"size": frame[["size"]].to_numpy(), "color": frame[["color"]].to_numpy(dtype=object)}
    _check_classifier(model, frame, _run(onx, feeds), np.float32)


def test_grid_search_best_pipeline():
    X, y = _multiclass()
    grid = GridSearchCV(
        _pipeline(OnnxSGDClassifier(loss="log_loss", **FAST)),
        {"model__penalty": [ElasticLearningPenalty(l1=0.0, l2=1e-4),
                            ElasticLearningPenalty(l1=0.0, l2=1e-1)]},
        cv=2,
    ).fit(X, y)
    got = _export(grid.best_estimator_, X, np.float32, options={"zipmap": False})
    _check_classifier(grid.best_estimator_, X, got, np.float32)
    # skl2onnx converts the search itself through its best estimator.
    got = _export(grid, X, np.float32, options={id(grid): {"zipmap": False}})
    _check_classifier(grid, X, got, np.float32)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("data", [_binary, _multiclass])
def test_gradient_classifier_in_a_pipeline(data, dtype):
    X, y = data()
    final = OnnxGradientClassifier(LogisticRegression(max_iter=20), dtype=dtype, **FAST)
    model = _pipeline(final).fit(X, y)
    _check_classifier(model, X, _export(model, X, dtype, options={"zipmap": False}), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_gradient_regressor_in_a_pipeline(dtype):
    X, y = load_diabetes(return_X_y=True)
    model = _pipeline(OnnxGradientRegressor(Ridge(), dtype=dtype, **FAST)).fit(X, y)
    _check_regressor(model, X, _export(model, X, dtype), dtype)


def test_gradient_classifier_of_a_pipeline_takes_options_to_its_last_step():
    X, y = _multiclass()
    model = OnnxGradientClassifier(_pipeline(LogisticRegression(max_iter=20)), **FAST).fit(X, y)
    got = _export(model, X, np.float32, options={"zipmap": False, "nocl": True})
    np.testing.assert_array_equal(got["label"], np.searchsorted(model.classes_, model.predict(X)))
    np.testing.assert_allclose(got["probabilities"], model.predict_proba(X), rtol=1e-5, atol=1e-6)


def test_unsupported_options_are_refused():
    X, y = _multiclass()
    model = _pipeline(OnnxMLPClassifier(hidden_layer_sizes=(4,), **FAST)).fit(X, y)
    with pytest.raises(NameError, match="raw_scores"):
        _export(model, X, np.float32, options={"model__raw_scores": True})
