"""The estimators replace scikit-learn's: same parameters and defaults, same errors and
warnings, same per-sample SGD with ``batch_size=1``, L-BFGS as good as scikit-learn's."""

import pickle
import re
import warnings

import numpy as np
import pytest
from onnxruntime import InferenceSession
from skl2onnx import to_onnx
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits, make_regression
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import SGDClassifier, SGDRegressor
from sklearn.metrics import mean_poisson_deviance
from sklearn.model_selection import GridSearchCV, train_test_split
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError

from skl_ortgrad import (
    OnnxMLPClassifier,
    OnnxMLPRegressor,
    OnnxSGDClassifier,
    OnnxSGDRegressor,
    load,
    save,
)

PAIRS = [
    (OnnxSGDRegressor, SGDRegressor), (OnnxSGDClassifier, SGDClassifier),
    (OnnxMLPRegressor, MLPRegressor), (OnnxMLPClassifier, MLPClassifier),
]


def _scaled(load):
    X, y = load(return_X_y=True)
    return StandardScaler().fit_transform(X), y


@pytest.mark.parametrize(("ours", "theirs"), PAIRS, ids=lambda c: c.__name__)
def test_every_parameter_of_scikit_learn_with_its_default(ours, theirs):
    """Every key of the counterpart's get_params, same default, batch_size aside (the
    linear models' 'auto' is documented: 32 rows)."""
    expected = theirs().get_params()
    got = ours().get_params()
    assert set(expected) <= set(got)
    for name, value in expected.items():
        if name != "batch_size":
            assert got[name] == value, name


def test_grid_search_written_for_sgd_classifier_runs_unchanged():
    X, y = _scaled(load_breast_cancer)
    grid = {"alpha": [1e-4, 1e-2], "loss": ["hinge", "log_loss"]}
    ours = GridSearchCV(OnnxSGDClassifier(random_state=0), grid, cv=3).fit(X, y)
    theirs = GridSearchCV(SGDClassifier(random_state=0), grid, cv=3).fit(X, y)
    assert ours.cv_results_["params"] == theirs.cv_results_["params"]
    # Every candidate scores as scikit-learn's does (3-fold accuracy), not only the best.
    np.testing.assert_array_less(theirs.cv_results_["mean_test_score"] - 0.02,
                                 ours.cv_results_["mean_test_score"])
    assert ours.best_score_ > theirs.best_score_ - 0.02
    # The refitted estimator is the best candidate's.
    assert {name: ours.best_estimator_.get_params()[name] for name in grid} == (
        ours.best_params_)


def test_issue_example_trains():
    X, y = _scaled(load_breast_cancer)
    model = OnnxSGDClassifier(loss="modified_huber", penalty="elasticnet", alpha=1e-3,
                              l1_ratio=0.3, class_weight="balanced", random_state=0)
    assert model.fit(X, y).score(X, y) > 0.95
    assert model.predict_proba(X).shape == (len(X), 2)


# 'optimal' starts at eta = alpha^-1/4 = 10 per sample: the squared error diverges,
# which scikit-learn hides by clipping every sample's gradient at 1e12 (it ends with
# weights of 1e10), where the optimizer raises ConvergenceError.
_CASES = [
    (OnnxSGDRegressor, SGDRegressor, loss, schedule)
    for loss in ("squared_error", "huber")
    for schedule in ("constant", "invscaling", "adaptive", "optimal")
    if (loss, schedule) != ("squared_error", "optimal")
] + [
    (OnnxSGDClassifier, SGDClassifier, loss, schedule)
    for loss in ("hinge", "perceptron", "log_loss", "modified_huber")
    for schedule in ("constant", "invscaling", "adaptive", "optimal")
]


@pytest.mark.parametrize(("ours", "theirs", "loss", "schedule"), _CASES,
                         ids=lambda v: getattr(v, "__name__", v))
def test_batch_size_one_is_scikit_learns_per_sample_sgd(ours, theirs, loss, schedule):
    """Same t_, same weights to float64 rounding: the L2 decay, then the gradient step,
    per sample, as scikit-learn."""
    X, y = _scaled(load_breast_cancer if ours is OnnxSGDClassifier else load_diabetes)
    X, y = X[:120], y[:120]
    params = {"loss": loss, "learning_rate": schedule, "eta0": 0.01, "shuffle": False,
              "max_iter": 4, "tol": None}
    reference = theirs(**params).fit(X, y)
    model = ours(**params, batch_size=1, dtype=np.float64).fit(X, y)
    assert model.t_ == reference.t_
    np.testing.assert_allclose(model.coef_, reference.coef_, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(model.intercept_, reference.intercept_, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize(("ours", "theirs", "params"), [
    (OnnxSGDClassifier, SGDClassifier, {}),
    (OnnxSGDRegressor, SGDRegressor, {"alpha": 0.1, "learning_rate": "constant"}),
    (OnnxSGDRegressor, SGDRegressor, {"alpha": 0.1}),
    (OnnxSGDRegressor, SGDRegressor, {"alpha": 0.1, "learning_rate": "adaptive"}),
], ids=["classifier", "regressor constant", "regressor invscaling", "regressor adaptive"])
def test_tol_watches_the_objective_like_scikit_learn(ours, theirs, params):
    """scikit-learn's tol rule watches the loss plus alpha * R(w) at every sample's
    weights: per sample, the same epochs run (the loss alone stops the classifier after 14
    epochs instead of 81, the regressors one epoch early) and the same weights, the
    adaptive rate's divisions included."""
    X, y = _scaled(load_breast_cancer if ours is OnnxSGDClassifier else load_diabetes)
    X, y = X[:200], y[:200] if ours is OnnxSGDClassifier else (y[:200] - 150) / 80
    params = {**params, "eta0": 0.01, "shuffle": False, "max_iter": 300}
    reference = theirs(**params).fit(X, y)
    model = ours(**params, batch_size=1, dtype=np.float64).fit(X, y)
    assert model.n_iter_ == reference.n_iter_ > 5
    assert model.t_ == reference.t_
    np.testing.assert_allclose(model.coef_, reference.coef_, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(model.intercept_, reference.intercept_, rtol=1e-9, atol=1e-9)


def test_a_model_pickled_before_the_objective_rule_watches_it_when_refitted():
    """An optimizer pickled before ``tol_on_objective`` existed loads with the loss rule
    (the seed API's); a warm-started fit of its SGD estimator then watches the objective,
    as the same model pickled now does: the same epochs and weights."""
    X, y = _scaled(load_breast_cancer)
    X, y = X[:200], y[:200]
    model = OnnxSGDClassifier(eta0=0.01, shuffle=False, max_iter=300, warm_start=True,
                              batch_size=1, dtype=np.float64).fit(X, y)
    current = pickle.loads(pickle.dumps(model))
    state = model.optimizer_.__getstate__()
    del state["tol_on_objective"]
    model.optimizer_.__setstate__(state)
    assert model.optimizer_.tol_on_objective is False
    old = pickle.loads(pickle.dumps(model))
    old.fit(X, y)
    current.fit(X, y)
    assert old.optimizer_.tol_on_objective == current.optimizer_.tol_on_objective == "unweighted"
    assert old.n_iter_ == current.n_iter_
    np.testing.assert_array_equal(old.coef_, current.coef_)


def test_sample_and_class_weights_scale_each_samples_step_like_scikit_learn():
    X, y = _scaled(load_breast_cancer)
    X, y = X[:150], y[:150]
    weights = np.random.RandomState(0).uniform(0, 3, len(y))
    params = {"loss": "log_loss", "shuffle": False, "max_iter": 3, "tol": None,
              "class_weight": {0: 0.2, 1: 2.0}}
    reference = SGDClassifier(**params).fit(X, y, sample_weight=weights)
    model = OnnxSGDClassifier(**params, batch_size=1, dtype=np.float64).fit(
        X, y, sample_weight=weights)
    np.testing.assert_allclose(model.coef_, reference.coef_, rtol=1e-9, atol=1e-9)
    # With batches, a batch whose rows share one weight moves that many times further.
    X, y = _scaled(load_diabetes)
    one, three = (OnnxSGDRegressor(max_iter=1, tol=None, shuffle=False, dtype=np.float64,
                                   learning_rate="constant", eta0=1e-4)
                  .fit(X, y, sample_weight=np.full(len(y), w)) for w in (1.0, 3.0))
    assert np.abs(three.intercept_) > 2.5 * np.abs(one.intercept_)


@pytest.mark.parametrize("average", [True, 7, 100_000])
def test_averaged_sgd_is_scikit_learns(average):
    X, y = _scaled(load_diabetes)
    params = {"average": average, "shuffle": False, "max_iter": 3, "tol": None}
    reference = SGDRegressor(**params).fit(X, y)
    model = OnnxSGDRegressor(**params, batch_size=1, dtype=np.float64).fit(X, y)
    np.testing.assert_allclose(model.coef_, reference.coef_, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(model.intercept_, reference.intercept_, rtol=1e-9, atol=1e-9)
    # Served weights are the averaged ones: predictions and the exported graph agree.
    np.testing.assert_allclose(model.predict(X), X @ model.coef_ + model.intercept_,
                               rtol=1e-9)


def test_averaged_sgd_is_served_pickled_and_saved(tmp_path):
    X, y = _scaled(load_diabetes)
    model = OnnxSGDRegressor(average=True, max_iter=2, tol=None, random_state=0).fit(X, y)
    served = InferenceSession(model.to_onnx().SerializeToString(),
                              providers=["CPUExecutionProvider"])
    output = served.run(None, {"X": X.astype(np.float32)})[0].ravel()
    np.testing.assert_allclose(output, model.predict(X), rtol=1e-5)
    path = tmp_path / "model.onnx"
    save(model, path)
    copies = [pickle.loads(pickle.dumps(model)), load(path)]
    for estimator in [model, *copies]:
        estimator.partial_fit(X, y)
    for copy in copies:
        np.testing.assert_array_equal(model.coef_, copy.coef_)
    assert model.optimizer_.average_count_ == 3 * len(X)
    assert not np.array_equal(model.coef_, model.optimizer_.weights_[0].ravel())


def test_batch_1000_learns_about_as_much_per_epoch_as_the_default():
    X, y = make_regression(20_000, 20, noise=1.0, random_state=0)
    X = StandardScaler().fit_transform(X)
    scores = {
        batch: OnnxSGDRegressor(batch_size=batch, max_iter=1, tol=None, random_state=0)
        .fit(X, y).score(X, y)
        for batch in ("auto", 1000)
    }
    assert scores[1000] > 0.95 * scores["auto"] > 0.9


def test_warm_start_restarts_the_schedule_like_scikit_learn():
    X, y = _scaled(load_diabetes)
    model = OnnxSGDRegressor(warm_start=True, max_iter=2, tol=None, shuffle=False).fit(X, y)
    first = model.t_
    model.set_params(alpha=0.001).fit(X, y)
    reference = SGDRegressor(warm_start=True, max_iter=2, tol=None, shuffle=False).fit(X, y)
    reference.set_params(alpha=0.001).fit(X, y)
    assert model.t_ == first == reference.t_


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("estimator", [OnnxSGDRegressor, OnnxMLPRegressor])
def test_fitted_weights_have_the_type_of_the_data(estimator, dtype):
    X, y = _scaled(load_diabetes)
    model = estimator(max_iter=2, tol=None).fit(X.astype(dtype), y)
    weights = [model.coef_] if hasattr(model, "coef_") else model.coefs_
    assert all(w.dtype == dtype for w in weights)


def test_errors_and_warnings_in_scikit_learns_words():
    X, y = _scaled(load_breast_cancer)
    with pytest.raises(ValueError, match="early_stopping should be False with partial_fit"):
        OnnxSGDClassifier(early_stopping=True).partial_fit(X, y)
    with pytest.raises(ValueError, match="partial_fit does not support early_stopping"):
        OnnxMLPClassifier(early_stopping=True).partial_fit(X, y, classes=[0, 1])
    with pytest.raises(ValueError, match="l1_ratio must be set when penalty is 'elasticnet'"):
        OnnxSGDClassifier(penalty="elasticnet", l1_ratio=None).fit(X, y)
    with pytest.raises(ValueError, match="alpha must be > 0 since learning_rate is 'optimal'"):
        OnnxSGDClassifier(alpha=0).fit(X, y)
    for model in (OnnxSGDClassifier, SGDClassifier):
        with pytest.raises(ValueError, match=re.escape(
                "Learning rate 'pa1' only works with loss 'hinge'.")):
            model(learning_rate="pa1", loss="log_loss").fit(X, y)
        # joblib's, which trains scikit-learn's one-vs-rest classes; two classes take
        # no such call.
        model(n_jobs=0, max_iter=2, tol=None).fit(X, y)
        with pytest.raises(ValueError, match="n_jobs == 0 in Parallel has no meaning"):
            model(n_jobs=0).fit(X, np.arange(len(y)) % 3)
        with pytest.raises(ValueError, match="n_jobs == 0 in Parallel has no meaning"):
            model(n_jobs=0).partial_fit(X, np.arange(len(y)) % 3, classes=[0, 1, 2])
    with pytest.raises(InvalidParameterError, match="'loss' parameter of OnnxSGDRegressor"):
        OnnxSGDRegressor(loss="hinge").fit(X, y)
    with pytest.raises(ValueError, match="needs 3 classes or more"):
        from skl_ortgrad import NegLogLearningLoss
        OnnxSGDClassifier(loss=NegLogLearningLoss(probability_function="softmax")).fit(X, y)
    with pytest.raises(AttributeError, match="has no attribute 'predict_proba'") as info:
        OnnxSGDClassifier().fit(X, y).predict_proba(X)
    assert "probability estimates are not available for loss='hinge'" in str(
        info.value.__cause__)
    with pytest.raises(AttributeError, match="has no attribute 'partial_fit'") as info:
        OnnxMLPClassifier(solver="lbfgs").partial_fit(X, y)
    assert "lbfgs is not stochastic" in str(info.value.__cause__)
    with pytest.warns(ConvergenceWarning, match="Maximum number of iteration reached"):
        OnnxSGDClassifier(max_iter=1).fit(X, y)
    with pytest.warns(ConvergenceWarning, match=re.escape("Maximum iterations (1) reached")):
        OnnxMLPClassifier(max_iter=1, hidden_layer_sizes=(4,)).fit(X, y)
    with pytest.warns(FutureWarning, match="Negative values for `power_t`"):
        OnnxSGDRegressor(power_t=-0.5, max_iter=1, tol=None).fit(X, y)
    model = OnnxMLPClassifier(warm_start=True, max_iter=2, tol=None).fit(X[:60], y[:60] % 2)
    with pytest.raises(ValueError, match="warm_start can only be used where `y` has the same"):
        model.fit(X[:60], np.arange(60) % 3)


def test_adaptive_divides_the_rate_by_five_on_a_plateau():
    X, y = _scaled(load_diabetes)
    model = OnnxSGDRegressor(learning_rate="adaptive", eta0=0.01, max_iter=60, tol=10.0,
                             n_iter_no_change=2, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    divisor = float(model.optimizer_.lr_state_[-1][0])
    assert divisor > 1 and np.log(divisor) / np.log(5) == pytest.approx(
        round(np.log(divisor) / np.log(5)))


def test_lbfgs_reaches_scikit_learns_accuracy_on_digits():
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X / 16, y, random_state=0)
    params = {"solver": "lbfgs", "hidden_layer_sizes": (32,), "random_state": 0,
              "max_iter": 100}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = OnnxMLPClassifier(**params).fit(X_train, y_train)
        theirs = MLPClassifier(**params).fit(X_train, y_train)
    assert ours.score(X_test, y_test) >= theirs.score(X_test, y_test) - 0.01
    assert ours.n_iter_ <= 100 and ours.loss_ == pytest.approx(theirs.loss_, rel=0.5)
    # scikit-learn's L-BFGS MLPs record no loss curve.
    for name in ("loss_curve_", "best_loss_", "validation_scores_", "best_validation_score_"):
        assert not hasattr(ours, name) and not hasattr(theirs, name)


def test_mlp_poisson_regression_is_scikit_learns_and_exports():
    rng = np.random.RandomState(0)
    X = rng.randn(1000, 5)
    y = rng.poisson(np.exp(X @ [0.3, -0.2, 0.1, 0.0, 0.2]))
    params = {"loss": "poisson", "hidden_layer_sizes": (16,), "random_state": 0,
              "max_iter": 100}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ours = OnnxMLPRegressor(**params).fit(X, y)
        theirs = MLPRegressor(**params).fit(X, y)
    assert ours.out_activation_ == "exp" and (ours.predict(X) > 0).all()
    assert mean_poisson_deviance(y, ours.predict(X)) < 1.02 * mean_poisson_deviance(
        y, theirs.predict(X))
    session = InferenceSession(ours.to_onnx().SerializeToString(),
                               providers=["CPUExecutionProvider"])
    served = session.run(None, {"X": X.astype(np.float32)})[0].ravel()
    np.testing.assert_allclose(served, ours.predict(X), rtol=1e-5)
    exported = to_onnx(ours, X[:1].astype(np.float32), target_opset=21)
    session = InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(session.run(None, {"X": X.astype(np.float32)})[0].ravel(),
                               ours.predict(X), rtol=1e-5)
    with pytest.raises(ValueError, match="negative which is not allowed for Poisson"):
        OnnxMLPRegressor(loss="poisson").fit(X, y - 1.0)
