"""MLP estimators: step-for-step equivalence with scikit-learn, quality, export."""

import pickle
import warnings

import numpy as np
import pytest
from onnxruntime import InferenceSession
from sklearn.datasets import (
    load_breast_cancer,
    load_digits,
    load_iris,
    make_friedman1,
    make_multilabel_classification,
)
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.preprocessing import StandardScaler

import skl_ortgrad
from skl_ortgrad import (
    LearningRateAdam,
    LearningRateSGD,
    OnnxMLPClassifier,
    OnnxMLPRegressor,
    OnnxSGDRegressor,
)


def _sgd_pair(ours_cls, theirs_cls, n, activation, alpha):
    common = dict(hidden_layer_sizes=(7, 5), activation=activation, alpha=alpha,
                  batch_size=n, shuffle=False, random_state=0)
    ours = ours_cls(learning_rate=LearningRateSGD(eta0=0.05, learning_rate="constant"),
                    **common)
    theirs = theirs_cls(solver="sgd", momentum=0, learning_rate_init=0.05, **common)
    return ours, theirs


def _assert_same_weights(ours, theirs, **tolerance):
    """Every coefficient and intercept of ``ours`` close to ``theirs``'s."""
    for got, want in zip(ours.coefs_ + ours.intercepts_,
                         theirs.coefs_ + theirs.intercepts_, strict=True):
        np.testing.assert_allclose(got, want, **tolerance)


def _steps(ours, theirs, X, y, steps=50, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for _ in range(steps):
            ours.partial_fit(X, y, **kwargs)
            theirs.partial_fit(X, y, **kwargs)
    _assert_same_weights(ours, theirs, atol=1e-5)


@pytest.mark.parametrize("activation", ["relu", "tanh", "logistic", "identity"])
def test_regressor_step_for_step_like_scikit_learn(activation):
    X, y = make_friedman1(n_samples=120, random_state=0)
    y = (y - y.mean()) / y.std()
    ours, theirs = _sgd_pair(OnnxMLPRegressor, MLPRegressor, len(X), activation, alpha=0.0)
    _steps(ours, theirs, X, y)
    assert ours.t_ == theirs.t_ == 50 * len(X)


@pytest.mark.parametrize("loader", [load_breast_cancer, load_iris])
def test_classifier_log_loss_step_for_step_like_scikit_learn(loader):
    X, y = loader(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    ours, theirs = _sgd_pair(OnnxMLPClassifier, MLPClassifier, len(X), "tanh", alpha=0.0)
    _steps(ours, theirs, X, y, classes=np.unique(y))


@pytest.mark.parametrize(("ours_cls", "theirs_cls"), [
    (OnnxMLPRegressor, MLPRegressor), (OnnxMLPClassifier, MLPClassifier)])
def test_loss_is_the_last_epochs_loss_like_scikit_learn(ours_cls, theirs_cls):
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    ours, theirs = _sgd_pair(ours_cls, theirs_cls, len(X), "tanh", alpha=0.0)
    kwargs = {"classes": np.unique(y)} if ours_cls is OnnxMLPClassifier else {}
    _steps(ours, theirs, X, y, steps=5, **kwargs)
    assert ours.loss_ == ours.loss_curve_[-1]
    assert ours.loss_ == pytest.approx(theirs.loss_, rel=1e-6)
    ours.set_params(max_iter=3, tol=None).fit(X, y)
    assert ours.loss_ == ours.loss_curve_[-1] and len(ours.loss_curve_) == 3


SOLVERS = {
    "adam": {"solver": "adam"},
    "nesterov": {"solver": "sgd"},
    "momentum": {"solver": "sgd", "nesterovs_momentum": False},
    "plain sgd": {"solver": "sgd", "momentum": 0.0},
    "adaptive": {"solver": "sgd", "learning_rate": "adaptive"},
    "invscaling": {"solver": "sgd", "learning_rate": "invscaling", "power_t": 0.3},
}


@pytest.mark.parametrize("solver", SOLVERS.values(), ids=SOLVERS.keys())
@pytest.mark.parametrize(("ours_cls", "theirs_cls"), [
    (OnnxMLPRegressor, MLPRegressor), (OnnxMLPClassifier, MLPClassifier)])
def test_alpha_is_scikit_learns_l2_term_step_for_step(ours_cls, theirs_cls, solver):
    """``alpha`` is scikit-learn's L2 term: its gradient goes through Adam's moments
    and the momentum as scikit-learn's does, and the loss curve includes it; the
    'invscaling' rate changes once per epoch, and ``t_`` counts the samples seen, as
    scikit-learn's. float64, batches of 32 rows (the last one 24) over 20 epochs: weights
    and losses to 1e-9, far from the same network trained without the term."""
    X, y = make_friedman1(n_samples=120, random_state=0)
    y = (y - y.mean()) / y.std()
    kwargs = {}
    if ours_cls is OnnxMLPClassifier:
        y = (y > 0).astype(np.int64)
        kwargs = {"classes": [0, 1]}

    def pair(alpha):
        common = dict(hidden_layer_sizes=(7, 5), activation="tanh", alpha=alpha,
                      batch_size=32, shuffle=False, random_state=0,
                      learning_rate_init=0.01, **solver)
        return ours_cls(dtype=np.float64, **common), theirs_cls(**common)

    ours, theirs = pair(alpha=3.0)
    free, _ = pair(alpha=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for _ in range(20):
            for model in (ours, theirs, free):
                model.partial_fit(X, y, **kwargs)
    _assert_same_weights(ours, theirs, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ours.loss_curve_, theirs.loss_curve_, rtol=1e-9)
    assert ours.t_ == theirs.t_ == 20 * len(X)
    assert np.abs(free.coefs_[0] - theirs.coefs_[0]).max() > 1e-2
    assert free.loss_curve_[-1] < 0.9 * theirs.loss_curve_[-1]


@pytest.mark.parametrize("solver", [SOLVERS["adam"], SOLVERS["nesterov"]],
                         ids=["adam", "nesterov"])
def test_alpha_with_sample_weights_step_for_step(solver):
    """With sample weights the term's gradient is scaled by the batch's summed weights, and
    the epoch's loss is the mean over the rows of the batches' weighted means, as
    scikit-learn's: float64 weights and losses to 1e-9 after 20 epochs of 32-row
    batches."""
    X, y = make_friedman1(n_samples=120, random_state=0)
    y = (y - y.mean()) / y.std()
    sample_weight = np.random.default_rng(0).uniform(0.2, 3.0, len(y))
    common = dict(hidden_layer_sizes=(7, 5), activation="tanh", alpha=3.0, batch_size=32,
                  shuffle=False, random_state=0, learning_rate_init=0.01, **solver)
    ours, theirs = OnnxMLPRegressor(dtype=np.float64, **common), MLPRegressor(**common)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for _ in range(20):
            ours.partial_fit(X, y, sample_weight=sample_weight)
            theirs.partial_fit(X, y, sample_weight=sample_weight)
    _assert_same_weights(ours, theirs, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(ours.loss_curve_, theirs.loss_curve_, rtol=1e-9)


@pytest.mark.parametrize("solver", [SOLVERS["adam"], SOLVERS["nesterov"],
                                    SOLVERS["adaptive"]], ids=["adam", "nesterov", "adaptive"])
def test_warm_started_fit_restarts_the_update_rule_like_scikit_learn(solver):
    """scikit-learn's warm-started ``fit`` builds a new optimizer: Adam's moments and
    counter, the velocities and the adaptive divisor start again, ``t_`` and the loss
    curve go on. Three warm fits of 5 epochs, float64: weights to 1e-9."""
    X, y = make_friedman1(n_samples=120, random_state=0)
    y = (y - y.mean()) / y.std()
    common = dict(hidden_layer_sizes=(7,), batch_size=32, shuffle=False, random_state=0,
                  max_iter=5, tol=0.0, n_iter_no_change=1000, warm_start=True,
                  learning_rate_init=0.01, **solver)
    ours, theirs = OnnxMLPRegressor(dtype=np.float64, **common), MLPRegressor(**common)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for _ in range(3):
            ours.fit(X, y)
            theirs.fit(X, y)
    _assert_same_weights(ours, theirs, rtol=1e-9, atol=1e-12)
    assert ours.t_ == theirs.t_ == 15 * len(X)
    np.testing.assert_allclose(ours.loss_curve_, theirs.loss_curve_, rtol=1e-9)


def test_too_small_validation_set_in_scikit_learns_words():
    """Early stopping on 2 rows leaves 1 validation row: the MLPs refuse it with
    scikit-learn's MLP message, the SGD estimators with their own."""
    X, y = make_friedman1(n_samples=2, n_features=5, random_state=0)
    message = "The validation set is too small. Increase 'validation_fraction'"
    for model in (OnnxMLPRegressor(early_stopping=True, random_state=0),
                  MLPRegressor(early_stopping=True, random_state=0)):
        with pytest.raises(ValueError, match=message):
            model.fit(X, y)
    with pytest.raises(ValueError, match=r"validation_fraction=0.1 leaves 1 sample\(s\)"):
        OnnxSGDRegressor(early_stopping=True, random_state=0).fit(X, y)


def test_alpha_shrinks_weights_as_scikit_learns_with_the_defaults():
    """Adam at its defaults on digits, float32: a strong ``alpha`` shrinks the weights
    as much as scikit-learn's (without the term in Adam's moments, a decay of
    :math:`\\eta \\alpha / n_B` per step barely moved them)."""
    X, y = load_digits(return_X_y=True)
    X = (X / 16).astype(np.float32)
    norms = []
    for cls in (OnnxMLPClassifier, MLPClassifier):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model = cls(hidden_layer_sizes=(32,), alpha=10.0, max_iter=30,
                        random_state=0).fit(X, y)
        norms.append(sum(float(np.square(c).sum()) for c in model.coefs_))
    ours, theirs = norms
    assert ours == pytest.approx(theirs, rel=0.02)


def test_digits_accuracy():
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X / 16, y, random_state=0)
    model = OnnxMLPClassifier(hidden_layer_sizes=(64,), random_state=0).fit(X_train, y_train)
    assert model.score(X_test, y_test) >= 0.95
    assert [c.shape for c in model.coefs_] == [(64, 64), (64, 10)]
    assert (model.n_layers_, model.n_outputs_, model.out_activation_) == (3, 10, "softmax")
    np.testing.assert_allclose(model.predict_proba(X_test).sum(axis=1), 1, rtol=1e-5)


def test_friedman_r2_with_tanh():
    X, y = make_friedman1(n_samples=3000, random_state=0)
    X_train, X_test, y_train, y_test = train_test_split(X, (y - y.mean()) / y.std(),
                                                        random_state=0)
    model = OnnxMLPRegressor(activation="tanh", random_state=0,
                             learning_rate=LearningRateAdam(eta0=0.01))
    assert model.fit(X_train, y_train).score(X_test, y_test) >= 0.9
    assert model.out_activation_ == "identity" and model.n_outputs_ == 1


def test_binary_classifier_and_string_labels_export():
    X, y = load_breast_cancer(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    labels = np.array(["benign", "malignant"])[y]
    model = OnnxMLPClassifier(hidden_layer_sizes=(8,), random_state=0)
    model.fit(X, labels)
    assert model.score(X, labels) > 0.97
    assert (model.out_activation_, model.n_outputs_) == ("logistic", 1)
    proba = model.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1, rtol=1e-6)
    session = InferenceSession(model.to_onnx().SerializeToString())
    label, probabilities = session.run(None, {"X": X.astype(np.float32)})
    np.testing.assert_array_equal(label, model.predict(X))
    np.testing.assert_allclose(probabilities, proba, rtol=1e-5, atol=1e-6)


def _multilabel(n_labels, n_samples=120):
    return make_multilabel_classification(n_samples=n_samples, n_features=6,
                                          n_classes=n_labels, random_state=0)


@pytest.mark.parametrize("n_labels", [3, 2])
@pytest.mark.parametrize("solver", ["adam", "sgd", "lbfgs"])
@pytest.mark.parametrize("weighted", [False, True])
def test_multilabel_classification_step_for_step(n_labels, solver, weighted):
    """An indicator matrix ``y`` trains one logistic output per label, each with its log
    loss, as scikit-learn's MLPClassifier: float64, ``shuffle=False``: weights, loss
    curve, ``predict`` (the indicator of the labels above 0.5) and ``predict_proba``
    equal to scikit-learn's to rounding."""
    X, y = _multilabel(n_labels)
    sample_weight = np.random.default_rng(0).uniform(0.2, 3.0, len(y)) if weighted else None
    common = dict(hidden_layer_sizes=(7,), random_state=0, max_iter=20, solver=solver,
                  learning_rate_init=0.01, tol=0.0)
    if solver != "lbfgs":
        common.update(batch_size=32, shuffle=False, n_iter_no_change=1000)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = OnnxMLPClassifier(dtype=np.float64, **common).fit(
            X, y, sample_weight=sample_weight)
        theirs = MLPClassifier(**common).fit(X, y, sample_weight=sample_weight)
    _assert_same_weights(ours, theirs, rtol=1e-9, atol=1e-10)
    if solver != "lbfgs":
        np.testing.assert_allclose(ours.loss_curve_, theirs.loss_curve_, rtol=1e-9)
    np.testing.assert_array_equal(ours.classes_, theirs.classes_)
    assert (ours.out_activation_, ours.n_outputs_) == ("logistic", n_labels)
    prediction = ours.predict(X)
    assert prediction.shape == y.shape and prediction.dtype == np.int64
    np.testing.assert_array_equal(prediction, theirs.predict(X))
    np.testing.assert_allclose(ours.predict_proba(X), theirs.predict_proba(X), rtol=1e-9)
    assert ours.score(X, y) == theirs.score(X, y)


@pytest.mark.parametrize("n_labels", [3, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_multilabel_export(tmp_path, n_labels, dtype):
    """The exported graph's labels and probabilities are ``predict``'s and
    ``predict_proba``'s, ``[N, n_labels]`` each (skl2onnx writes ``[1 - p, p]`` for two
    labels and a Binarizer onnxruntime has no double kernel of: both mended), and a
    pickled or saved model predicts the same."""
    X, y = _multilabel(n_labels)
    model = OnnxMLPClassifier(hidden_layer_sizes=(8,), max_iter=30, random_state=0,
                              dtype=dtype)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    onx = model.to_onnx()
    label_info = next(o for o in onx.graph.output if o.name == "label")
    assert label_info.type.tensor_type.shape.dim[1].dim_value == n_labels
    session = InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"])
    label, probabilities = session.run(None, {"X": X.astype(dtype)})
    np.testing.assert_array_equal(label, model.predict(X))
    np.testing.assert_array_equal(label, (model.predict_proba(X) > 0.5).astype(np.int64))
    np.testing.assert_allclose(probabilities, model.predict_proba(X), rtol=1e-6)
    assert probabilities.shape == (len(X), n_labels)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(model)).predict(X), label)
    skl_ortgrad.save(model, tmp_path / "multilabel.onnx")
    loaded = skl_ortgrad.load(tmp_path / "multilabel.onnx")
    np.testing.assert_array_equal(loaded.predict(X), label)
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))


def test_multilabel_stream_early_stopping_and_errors():
    """partial_fit streams multilabel rows; early stopping splits them unstratified; a
    stream keeps its kind of targets; 2-D targets that are not indicators are refused in
    scikit-learn's words."""
    X, y = _multilabel(3, n_samples=300)
    model = OnnxMLPClassifier(hidden_layer_sizes=(8,), random_state=0)
    model.partial_fit(X[:150], y[:150], classes=np.arange(3))
    model.partial_fit(X[150:], y[150:])
    assert model.predict(X).shape == y.shape
    with pytest.raises(ValueError, match="y has 2 labels; the classifier was fit on 3"):
        model.partial_fit(X, y[:, :2])
    with pytest.raises(ValueError, match=r"fit on 3 labels .* y has one column"):
        model.partial_fit(X, y[:, 0])
    single = OnnxMLPClassifier(hidden_layer_sizes=(8,), random_state=0).partial_fit(
        X, y[:, 0], classes=[0, 1])
    with pytest.raises(ValueError, match="y has 3 labels; the classifier was fit on a 1-D"):
        single.partial_fit(X, y)
    stopped = OnnxMLPClassifier(hidden_layer_sizes=(8,), early_stopping=True,
                                random_state=0).fit(X, y)
    assert 0 < stopped.n_iter_ < 200 and len(stopped.validation_scores_) == stopped.n_iter_
    with pytest.raises(ValueError, match="Multioutput target data is not supported"):
        OnnxMLPClassifier().fit(X, np.column_stack([2 * y[:, 0] + y[:, 1], y[:, 2]]))


def test_multi_output_regression_and_export():
    X, y = make_friedman1(n_samples=600, random_state=0)
    y = (y - y.mean()) / y.std()
    Y = np.c_[y, -2 * y]
    model = OnnxMLPRegressor(hidden_layer_sizes=(32,), random_state=0,
                             learning_rate=LearningRateAdam(eta0=0.01)).fit(X, Y)
    assert model.predict(X).shape == (600, 2) and model.n_outputs_ == 2
    assert model.score(X, Y) > 0.8
    session = InferenceSession(model.to_onnx().SerializeToString())
    got = session.run(None, {"X": X.astype(np.float32)})[0]
    np.testing.assert_allclose(got, model.predict(X), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="y has 1 columns, the model has 2"):
        model.partial_fit(X, y)


def test_float64_network():
    X, y = load_iris(return_X_y=True)
    model = OnnxMLPClassifier(hidden_layer_sizes=(8,), dtype=np.float64, random_state=0,
                              max_iter=100).fit(StandardScaler().fit_transform(X), y)
    assert all(w.dtype == np.float64 for w in model.coefs_)
    assert model.predict_proba(X).dtype == np.float64


def test_bad_hidden_layer_sizes():
    # scikit-learn's errors, word for word.
    with pytest.raises(ValueError, match=r"hidden_layer_sizes must be > 0, got \[3, 0\]\."):
        OnnxMLPRegressor(hidden_layer_sizes=(3, 0)).fit(np.ones((4, 2)), np.ones(4))
    with pytest.raises(TypeError, match="'float' object cannot be interpreted as an integer"):
        OnnxMLPRegressor(hidden_layer_sizes=(2.5,)).fit(np.ones((4, 2)), np.ones(4))


@pytest.mark.parametrize("solver", ["adam", "lbfgs"])
@pytest.mark.parametrize("hidden", [(), []])
def test_no_hidden_layer_as_sklearn(hidden, solver):
    """``hidden_layer_sizes=()`` is scikit-learn's network without a hidden layer: one
    weight matrix, its scores and its served graph."""
    X, y = load_iris(return_X_y=True)
    X = StandardScaler().fit_transform(X)
    params = dict(hidden_layer_sizes=hidden, solver=solver, max_iter=50, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = OnnxMLPClassifier(**params).fit(X, y)
        theirs = MLPClassifier(**params).fit(X, y)
    assert [w.shape for w in ours.coefs_] == [(4, 3)]
    assert ours.n_layers_ == theirs.n_layers_ == 2
    assert abs(ours.score(X, y) - theirs.score(X, y)) <= 0.02
    session = InferenceSession(ours.to_onnx().SerializeToString())
    labels = session.run(None, {"X": X.astype(np.float32)})[0]
    np.testing.assert_array_equal(labels, ours.predict(X))
