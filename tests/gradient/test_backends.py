"""The gradient backends: how one is chosen, the errors, and the same results from both."""

import warnings

import numpy as np
import pytest
from _backends import TRAINING, requires_training
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError

from skl_ortgrad import (
    AbsoluteLearningLoss,
    ElasticLearningLoss,
    NegLogLearningLoss,
    OnnxGradientClassifier,
    OnnxGradientRegressor,
    OnnxMLPClassifier,
    OnnxMLPRegressor,
    OnnxSGDClassifier,
    OnnxSGDRegressor,
)
from skl_ortgrad.gradient import backend as backend_module
from skl_ortgrad.gradient import resolve_backend, training_available
from skl_ortgrad.gradient.forward_backward import OrtGradientForwardBackward
from skl_ortgrad.objective.merge import add_loss_output
from skl_ortgrad.training.caches import transient

VARIABLE = backend_module.ENVIRONMENT_VARIABLE


def _scaled(loader, rows):
    X, y = loader(return_X_y=True)
    return StandardScaler().fit_transform(X[:rows]), y[:rows]


@pytest.fixture(scope="module")
def diabetes():
    X, y = _scaled(load_diabetes, 200)
    return X, y / 100


@pytest.fixture(scope="module")
def cancer():
    return _scaled(load_breast_cancer, 200)


@pytest.fixture(scope="module")
def iris():
    X, y = _scaled(load_iris, 150)
    return X, np.array(["setosa", "versicolor", "virginica"])[y]


def test_training_backend_is_installed_where_promised():
    """requirements.txt installs onnxruntime-training-cpu on Python < 3.13 and plain
    onnxruntime after: its graph builder imports exactly where promised, so a missing or
    broken training install fails here (and in every test of that backend) rather than
    skipping them."""
    assert training_available() == TRAINING, (
        "onnxruntime-training's OrtModuleGraphBuilder "
        + ("does not import: pip install -r requirements.txt" if TRAINING
           else "imports where requirements.txt installs plain onnxruntime"))


def test_auto_is_training_where_installed(monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)
    assert resolve_backend("auto") == ("onnxruntime-training" if TRAINING else "onnx")
    monkeypatch.setattr(backend_module, "training_available", lambda: False)
    assert resolve_backend("auto") == "onnx"


def test_environment_variable_chooses_auto(monkeypatch):
    monkeypatch.setenv(VARIABLE, "onnx")
    assert resolve_backend("auto") == "onnx"
    # An explicit backend wins over the variable.
    assert resolve_backend("onnx") == "onnx"
    monkeypatch.setenv(VARIABLE, "torch")
    with pytest.raises(ValueError, match=f"{VARIABLE}='torch': use one of"):
        resolve_backend("auto")


def test_unknown_backend_is_refused():
    with pytest.raises(ValueError, match=r"backend must be one of \['auto', "):
        resolve_backend("jax")


def test_missing_training_backend_names_the_fix(monkeypatch, linear_onnx):
    monkeypatch.setattr(backend_module, "training_available", lambda: False)
    message = "pip install onnxruntime-training-cpu==1.19.2.*Use backend='onnx'"
    with pytest.raises(ValueError, match=message):
        resolve_backend("onnxruntime-training")
    with pytest.raises(ValueError, match=message):
        OrtGradientForwardBackward(linear_onnx, backend="onnxruntime-training")


def test_estimator_refuses_missing_backend_and_stays_unfitted(monkeypatch, diabetes):
    monkeypatch.setattr(backend_module, "training_available", lambda: False)
    est = OnnxSGDRegressor(backend="onnxruntime-training")
    with pytest.raises(ValueError, match="pip install onnxruntime-training-cpu"):
        est.fit(*diabetes)
    assert not hasattr(est, "optimizer_") and not hasattr(est, "backend_")


def test_estimator_validates_backend(diabetes):
    with pytest.raises(InvalidParameterError, match="'backend' parameter"):
        OnnxSGDRegressor(backend="torch").fit(*diabetes)


def test_estimator_records_the_backend(backend, diabetes, monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)
    # The Huber loss trains on the backend's gradient graph (the squared error on the
    # linear program, written by hand: it builds no engine at all).
    est = OnnxSGDRegressor(backend=backend, loss="huber", max_iter=2, tol=None).fit(*diabetes)
    assert est.backend_ == est.optimizer_.backend_ == backend
    assert transient(est.optimizer_).engines.built() and all(
        engine.backend_ == backend for engine in transient(est.optimizer_).engines.built()
    )
    linear = OnnxSGDRegressor(backend=backend, max_iter=2, tol=None).fit(*diabetes)
    assert linear.backend_ == backend and not transient(linear.optimizer_).engines.built()
    auto = OnnxSGDRegressor(max_iter=2, tol=None).fit(*diabetes)
    assert auto.backend_ == resolve_backend("auto")


# Every estimator and loss, trained a few epochs the same way by both backends.
CASES = {
    "sgd-regressor-squared": (lambda **p: OnnxSGDRegressor(**p), "diabetes"),
    "sgd-regressor-huber": (lambda **p: OnnxSGDRegressor(loss="huber", **p), "diabetes"),
    "sgd-regressor-epsilon": (
        lambda **p: OnnxSGDRegressor(loss="epsilon_insensitive", **p), "diabetes"),
    "sgd-regressor-absolute": (
        lambda **p: OnnxSGDRegressor(loss=AbsoluteLearningLoss(), **p), "diabetes"),
    "sgd-regressor-elastic": (
        lambda **p: OnnxSGDRegressor(loss=ElasticLearningLoss(), **p), "diabetes"),
    "sgd-classifier-log": (lambda **p: OnnxSGDClassifier(loss="log_loss", **p), "cancer"),
    "sgd-classifier-hinge": (lambda **p: OnnxSGDClassifier(loss="hinge", **p), "cancer"),
    "sgd-classifier-modified-huber": (
        lambda **p: OnnxSGDClassifier(loss="modified_huber", **p), "cancer"),
    "sgd-classifier-multiclass": (
        lambda **p: OnnxSGDClassifier(
            loss=NegLogLearningLoss(eps=0.0, probability_function="softmax"), **p),
        "iris"),
    "mlp-regressor-relu": (
        lambda **p: OnnxMLPRegressor(hidden_layer_sizes=(8,), **p), "diabetes"),
    "mlp-regressor-tanh": (
        lambda **p: OnnxMLPRegressor(hidden_layer_sizes=(8,), activation="tanh", **p),
        "diabetes"),
    "mlp-classifier-binary": (
        lambda **p: OnnxMLPClassifier(hidden_layer_sizes=(8,), **p), "cancer"),
    "mlp-classifier-multiclass": (
        lambda **p: OnnxMLPClassifier(hidden_layer_sizes=(8, 6), activation="logistic", **p),
        "iris"),
    "fine-tuning-ridge": (lambda **p: OnnxGradientRegressor(Ridge(), **p), "diabetes"),
    "fine-tuning-logistic": (
        lambda **p: OnnxGradientClassifier(LogisticRegression(), **p), "iris"),
}


def _train_both(case, dtype, request):
    make, data = CASES[case]
    X, y = request.getfixturevalue(data)
    fitted = []
    for backend in ("onnxruntime-training", "onnx"):
        est = make(backend=backend, dtype=dtype, max_iter=3, tol=None, random_state=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            fitted.append(est.fit(X, y))
    return X, fitted


@requires_training
@pytest.mark.parametrize("case", sorted(CASES))
def test_same_weights_in_float64(case, request):
    """Three epochs of mini-batch training: the same weights to 1e-7 (float64)."""
    _, (training, onnx) = _train_both(case, np.float64, request)
    assert (training.backend_, onnx.backend_) == ("onnxruntime-training", "onnx")
    for name, a, b in zip(training.optimizer_.weights_to_train_, training.optimizer_.weights_,
                          onnx.optimizer_.weights_, strict=True):
        assert a.dtype == b.dtype == np.float64
        np.testing.assert_allclose(b, a, rtol=1e-7, atol=1e-12, err_msg=name)
    assert onnx.loss_curve_ == pytest.approx(training.loss_curve_, rel=1e-7)


@requires_training
@pytest.mark.parametrize("case", sorted(CASES))
def test_same_predictions_in_float32(case, request):
    X, (training, onnx) = _train_both(case, np.float32, request)
    if hasattr(training, "predict_proba"):
        np.testing.assert_allclose(onnx.predict_proba(X), training.predict_proba(X),
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(onnx.predict(X), training.predict(X))
    elif hasattr(training, "decision_function"):
        # A classifier whose loss has no probabilities (hinge): the scores instead.
        np.testing.assert_allclose(onnx.decision_function(X), training.decision_function(X),
                                   rtol=1e-4, atol=1e-5)
        np.testing.assert_array_equal(onnx.predict(X), training.predict(X))
    else:
        np.testing.assert_allclose(onnx.predict(X), training.predict(X), rtol=1e-4, atol=1e-5)


@requires_training
def test_engine_gradients_agree(mlp_onnx, regression_data):
    """The seed API: forward/backward of the same MLP with a loss, 1e-6 apart."""
    X, y = regression_data
    model = add_loss_output(mlp_onnx[1])
    gradients = {}
    for backend in ("onnxruntime-training", "onnx"):
        engine = OrtGradientForwardBackward(model, backend=backend)
        weights = [engine.get_initializer(name) for name in engine.cls_type_.weights_to_train]
        function = engine.new_instance()
        loss = function.forward([X, y.reshape(-1, 1), *weights], training=True)[0].numpy()
        grads = function.backward([np.ones((1, 1), dtype=np.float32)])
        gradients[backend] = [loss, *(grads[i].numpy() for i in range(len(weights)))]
    for a, b in zip(*gradients.values(), strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-6, atol=1e-6)
