"""What scikit-learn's own test files check of the estimators (issue #31): the early
stopping split, ``n_iter_`` after ``partial_fit``, the cumulative L1 penalty, the ``tol``
objective with sample weights, the MLP's best validation weights; each against
scikit-learn or a numpy reference."""

import pickle
import re
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from skl2onnx import to_onnx
from sklearn.base import is_classifier
from sklearn.datasets import load_breast_cancer, load_diabetes, load_digits, load_iris
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.linear_model import SGDClassifier, SGDRegressor
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import OnnxMLPClassifier, OnnxMLPRegressor, OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.runtime.program_run import LinearProgramRun, ProgramRun, SparseLinearProgramRun
from skl_ortgrad.training.caches import transient


def _scaled(load, rows):
    X, y = load(return_X_y=True)
    return StandardScaler().fit_transform(X)[:rows], y[:rows]


@pytest.mark.parametrize(("ours", "theirs"), [
    (OnnxSGDClassifier, SGDClassifier), (OnnxSGDRegressor, SGDRegressor)],
    ids=["classifier", "regressor"])
def test_early_stopping_splits_the_rows_scikit_learn_splits(ours, theirs):
    """Per sample, the early-stopping fit trains on scikit-learn's training rows, in their
    order, whether ``random_state`` is a seed or a ``RandomState``: same weights."""
    X, y = _scaled(load_iris if ours is OnnxSGDClassifier else load_diabetes, 150)
    y = y if ours is OnnxSGDClassifier else (y - 150) / 80
    for seed in (3, np.random.RandomState(3)):
        params = {"early_stopping": True, "validation_fraction": 0.3, "shuffle": False,
                  "tol": None, "max_iter": 3, "eta0": 0.01, "learning_rate": "constant"}
        reference = theirs(**params, random_state=3).fit(X, y)
        model = ours(**params, random_state=seed, batch_size=1, dtype=np.float64).fit(X, y)
        np.testing.assert_allclose(model.coef_, reference.coef_, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("ours", "theirs"), [
    (OnnxSGDClassifier, SGDClassifier), (OnnxSGDRegressor, SGDRegressor)],
    ids=["classifier", "regressor"])
def test_t_counts_the_validation_rows_and_the_next_call_starts_there(ours, theirs):
    """scikit-learn's t_ adds n_iter_ * n_samples, the validation rows included, and
    its next call's schedule ('optimal' reads t) starts from it: the same t_, and the
    same weights after a partial_fit that follows the early-stopping fit."""
    X, y = _scaled(load_breast_cancer if ours is OnnxSGDClassifier else load_diabetes, 300)
    y = y if ours is OnnxSGDClassifier else (y - 150) / 80
    params = {"early_stopping": True, "validation_fraction": 0.2, "shuffle": False,
              "tol": None, "max_iter": 4, "random_state": 3}
    reference = theirs(**params).fit(X, y)
    model = ours(**params, batch_size=1, dtype=np.float64).fit(X, y)
    assert model.t_ == reference.t_ == 4 * 300 + 1
    for estimator in (model, reference):
        estimator.set_params(early_stopping=False).partial_fit(X[:100], y[:100])
    assert model.t_ == reference.t_ == 4 * 300 + 101
    np.testing.assert_allclose(model.coef_, reference.coef_, rtol=1e-10, atol=1e-12)


def test_early_stopping_refuses_zero_weights_on_the_validation_rows_in_sklearn_words():
    """The SGD estimators' split names the validation rows; the MLPs refuse all-zero
    weights before, as scikit-learn's."""
    X, y = load_iris(return_X_y=True)
    for estimator in (SGDClassifier, OnnxSGDClassifier):
        with pytest.raises(ValueError, match=r"^The sample weights for validation set are all "
                           r"zero, consider using a different random state\.$"):
            estimator(early_stopping=True, validation_fraction=0.4, random_state=0).fit(
                X, y, sample_weight=np.zeros(len(y)))
    for estimator in (MLPClassifier, OnnxMLPClassifier):
        with pytest.raises(ValueError, match=r"^Sample weights must contain at least one "
                           r"non-zero number\.$"):
            estimator(early_stopping=True, random_state=0).fit(
                X, y, sample_weight=np.zeros(len(y)))


@pytest.mark.parametrize(("ours", "theirs"), [
    (OnnxSGDClassifier, SGDClassifier), (OnnxSGDRegressor, SGDRegressor),
    (OnnxMLPClassifier, MLPClassifier), (OnnxMLPRegressor, MLPRegressor)],
    ids=lambda c: c.__name__)
def test_n_iter_counts_the_epochs_of_the_last_call_like_scikit_learn(ours, theirs):
    """After three ``partial_fit`` calls ``n_iter_`` is 1 (the epoch of the last call) and
    ``t_`` counts every sample, as scikit-learn's; a warm-started ``fit`` counts its own."""
    X, y = _scaled(load_breast_cancer, 60)
    models = []
    for estimator in (theirs, ours):
        model = estimator()
        extra = {"classes": [0, 1]} if is_classifier(model) else {}
        for _ in range(3):
            model.partial_fit(X, y, **extra)
        models.append(model)
    assert models[1].n_iter_ == models[0].n_iter_ == 1
    assert models[1].t_ == models[0].t_
    for model in models:
        model.set_params(warm_start=True, max_iter=4, tol=None if "SGD" in theirs.__name__
                         else 1e-4)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            model.fit(X, y)
    assert models[1].n_iter_ == models[0].n_iter_ == 4


@pytest.mark.parametrize(("ours", "theirs"), [
    (OnnxSGDClassifier, SGDClassifier), (OnnxSGDRegressor, SGDRegressor)],
    ids=["classifier", "regressor"])
def test_loss_functions_names_scikit_learns_losses(ours, theirs):
    """The class table ``loss_functions`` has scikit-learn's names; each entry builds the
    loss the estimator trains with (class, then its parameters at ``epsilon=0.1``)."""
    assert sorted(ours.loss_functions) == sorted(theirs.loss_functions)
    for name, (cls, *args) in ours.loss_functions.items():
        assert type(ours(loss=name)._loss()) is cls
        assert cls(*args).get_params() == ours(loss=name)._loss().get_params()
    assert ours.loss_functions["huber"][1] == theirs.loss_functions["huber"][1] == 0.1


@pytest.mark.parametrize(("ours", "theirs"), [
    (OnnxSGDClassifier, SGDClassifier), (OnnxSGDRegressor, SGDRegressor)],
    ids=["classifier", "regressor"])
def test_averaged_sgd_keeps_scikit_learns_standard_and_average_weights(ours, theirs):
    X, y = _scaled(load_iris if ours is OnnxSGDClassifier else load_diabetes, 150)
    y = y if ours is OnnxSGDClassifier else (y - 150) / 80
    params = {"average": 20, "shuffle": False, "max_iter": 2, "tol": None, "eta0": 0.01,
              "learning_rate": "constant"}
    reference = theirs(**params).fit(X, y)
    model = ours(**params, batch_size=1, dtype=np.float64).fit(X, y)
    for name in ("_standard_coef", "_standard_intercept", "_average_coef",
                 "_average_intercept"):
        np.testing.assert_allclose(getattr(model, name), getattr(reference, name),
                                   rtol=1e-10, atol=1e-12, err_msg=name)
    np.testing.assert_array_equal(model.coef_, model._average_coef)
    assert not np.allclose(model._standard_coef, model._average_coef)
    model.set_params(average=False).fit(X, y)
    assert not any(hasattr(model, name) for name in ("_standard_coef", "_average_coef"))


def _sparse_scaled(load, rows):
    """:func:`_scaled` with 70% of the values zero, as CSR, and two values stored as
    explicit zeros (scikit-learn's sparse loop visits them: they count as present)."""
    X, y = _scaled(load, rows)
    X[np.random.default_rng(0).random(X.shape) < 0.7] = 0.0
    X = sp.csr_matrix(X)
    X.data[[3, 10]] = 0.0
    return X, y


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
@pytest.mark.parametrize("penalty", ["l1", "elasticnet"])
@pytest.mark.parametrize(("ours", "theirs", "load"), [
    (OnnxSGDClassifier, SGDClassifier, load_breast_cancer),
    (OnnxSGDClassifier, SGDClassifier, load_iris),
    (OnnxSGDRegressor, SGDRegressor, load_diabetes)],
    ids=["binary", "multiclass", "regressor"])
def test_cumulative_l1_penalty_is_scikit_learns(ours, theirs, load, penalty, sparse):
    """Per sample in float64, 'l1' and 'elasticnet' give scikit-learn's weights, exact
    zeros included, after a fit and after partial_fit calls (each starting its totals
    afresh, as scikit-learn's), trained by the linear program (its cumulative L1 step).
    On sparse X the step touches the features the row stores only (the others catch up
    when they next appear), in the sparse program."""
    X, y = _sparse_scaled(load, 150) if sparse else _scaled(load, 150)
    y = y if ours is OnnxSGDClassifier else (y - 150) / 80
    params = {"penalty": penalty, "alpha": 0.05 if sparse else 0.01, "shuffle": False,
              "max_iter": 5, "tol": None, "eta0": 0.01, "learning_rate": "constant"}
    reference = theirs(**params).fit(X, y)
    model = ours(**params, batch_size=1, dtype=np.float64).fit(X, y)
    assert type(transient(model.optimizer_).programs.binding) is (
        SparseLinearProgramRun if sparse else LinearProgramRun)
    extra = {"classes": np.unique(y)} if ours is OnnxSGDClassifier else {}
    for call in range(3):
        if call:
            reference.partial_fit(X, y, **extra)
            model.partial_fit(X, y, **extra)
        np.testing.assert_allclose(model.coef_, reference.coef_, rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(model.coef_ == 0, reference.coef_ == 0)
    if penalty == "l1" and (sparse or load is not load_diabetes):
        assert (reference.coef_ == 0).any()


@pytest.mark.parametrize("params", [{}, {"average": True}, {"penalty": "elasticnet"}],
                         ids=["plain", "average", "elasticnet"])
@pytest.mark.parametrize(("ours", "theirs", "load"), [
    (OnnxSGDClassifier, SGDClassifier, load_breast_cancer),
    (OnnxSGDClassifier, SGDClassifier, load_iris),
    (OnnxSGDRegressor, SGDRegressor, load_diabetes)],
    ids=["binary", "multiclass", "regressor"])
def test_sparse_intercept_decay_is_scikit_learns(ours, theirs, load, params):
    """Sparse X with the intercept, per sample in float64: the intercept's step times
    scikit-learn's ``intercept_decay`` (0.01, plain SGD's ``step_factors``; averaged
    SGD averages the damped intercept), scikit-learn's coefficients and intercepts
    after a fit and partial_fit calls, in the sparse program (averaging: per batch).
    Dense X keeps the undamped step. The averaged classifiers are compared after the fit
    only: scikit-learn's binary classifier does not keep its standard intercept once
    the average starts (``_standard_intercept`` stays 0), from which its partial_fit
    restarts, on dense data as well."""
    X, y = _sparse_scaled(load, 150)
    y = y if ours is OnnxSGDClassifier else (y - 150) / 80
    params = {"alpha": 0.05, "shuffle": False, "max_iter": 5, "tol": None, "eta0": 0.01,
              "learning_rate": "constant", **params}
    reference = theirs(**params).fit(X, y)
    model = ours(**params, batch_size=1, dtype=np.float64).fit(X, y)
    binding = transient(model.optimizer_).programs.binding
    assert (binding is None if "average" in params
            else type(binding) is SparseLinearProgramRun)
    extra = {"classes": np.unique(y)} if ours is OnnxSGDClassifier else {}
    calls = 1 if "average" in params and ours is OnnxSGDClassifier else 3
    for call in range(calls):
        if call:
            reference.partial_fit(X, y, **extra)
            model.partial_fit(X, y, **extra)
        np.testing.assert_allclose(model.coef_, reference.coef_, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(model.intercept_, reference.intercept_, rtol=1e-10,
                                   atol=1e-12)
    assert model.optimizer_.learning_rate.learning_rate.step_factors == (1.0, 0.01)
    dense = ours(**params, batch_size=1, dtype=np.float64).fit(X.toarray(), y)
    assert dense.optimizer_.learning_rate.learning_rate.step_factors is None
    np.testing.assert_allclose(dense.intercept_, theirs(**params).fit(X.toarray(), y)
                               .intercept_, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize(("ours", "theirs", "load", "seed"), [
    (OnnxSGDClassifier, SGDClassifier, load_breast_cancer, 0),
    (OnnxSGDRegressor, SGDRegressor, load_diabetes, 1)], ids=["classifier", "regressor"])
@pytest.mark.parametrize(("params", "path"), [
    ({}, LinearProgramRun), ({"loss": "huber"}, ProgramRun), ({"average": True}, None),
    ({"penalty": "l1"}, LinearProgramRun)],
    ids=["linear program", "generic program", "averaged per batch", "l1"])
def test_tol_objective_with_sample_weights_is_scikit_learns(ours, theirs, load, seed,
                                                            params, path):
    """With sample weights the tol rule watches the mean of the rows' *unweighted*
    losses plus the penalty, as scikit-learn's ``objective_sum``: per sample in float64,
    scikit-learn's ``n_iter_`` and weights, through the linear program (its per-row
    values), the generic one (the model of the unweighted row losses beside the
    gradient graph) and per batch (the trainer's row losses at every batch)."""
    X, y = _scaled(load, 200)
    y = y if ours is OnnxSGDClassifier else (y - 150) / 80
    weights = np.random.default_rng(seed).uniform(0.0, 5.0, len(y))
    settings = {"penalty": "l2", "alpha": 0.01, "shuffle": False, "tol": 1e-3,
                "eta0": 0.01, "learning_rate": "constant", "max_iter": 200, **params}
    if ours is OnnxSGDClassifier and settings.get("loss") == "huber":
        settings["loss"] = "modified_huber"
    reference = theirs(**settings).fit(X, y, sample_weight=weights)
    model = ours(**settings, batch_size=1, dtype=np.float64).fit(X, y, sample_weight=weights)
    assert type(transient(model.optimizer_).programs.binding) is (
        type(None) if path is None else path)
    assert model.n_iter_ == reference.n_iter_
    np.testing.assert_allclose(model.coef_, reference.coef_, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("estimator", [MLPClassifier, OnnxMLPClassifier],
                         ids=lambda c: c.__name__)
def test_mlp_early_stopping_ends_at_the_best_validation_weights(estimator):
    """scikit-learn's MLPs (and ours) end early stopping with the weights of the epoch of
    the best validation score, those of a fit stopped at that epoch; a refit without
    early stopping resets the validation attributes."""
    X, y = load_digits(return_X_y=True)
    X, y = X[:400] / 16, y[:400]
    params = {"hidden_layer_sizes": (8,), "early_stopping": True, "random_state": 0,
              "max_iter": 60, "learning_rate_init": 0.5, "n_iter_no_change": 3,
              "solver": "sgd", "momentum": 0.9}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = estimator(**params).fit(X, y)
        scores = model.validation_scores_
        best = int(np.argmax(scores))
        assert scores[-1] < scores[best] == model.best_validation_score_
        at_best = estimator(**{**params, "max_iter": best + 1, "tol": 0.0,
                               "n_iter_no_change": 100}).fit(X, y)
    assert at_best.validation_scores_ == scores[:best + 1]
    for got, expected in zip(model.coefs_ + model.intercepts_,
                             at_best.coefs_ + at_best.intercepts_, strict=True):
        np.testing.assert_array_equal(got, expected)
    model.set_params(early_stopping=False, max_iter=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(X, y)
    assert model.validation_scores_ is None and model.best_validation_score_ is None
    assert model.best_loss_ == min(model.loss_curve_)


@pytest.mark.parametrize("estimator", [MLPClassifier, OnnxMLPClassifier],
                         ids=lambda c: c.__name__)
def test_mlp_counts_the_epochs_without_improvement_like_scikit_learn(estimator):
    """``_no_improvement_count``: n_iter_no_change + 1 when the tol rule stopped the fit;
    with a tolerance no epoch meets, every epoch after the first."""
    X, y = load_digits(return_X_y=True)
    X, y = X[:100] / 16, y[:100] % 2
    model = estimator(tol=0.01, max_iter=3000, solver="sgd", n_iter_no_change=4,
                      random_state=0).fit(X, y)
    assert model._no_improvement_count == 5 and model.n_iter_ < 3000
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.set_params(tol=1e9, max_iter=30, n_iter_no_change=np.inf).fit(X, y)
    assert model.n_iter_ == 30 and model._no_improvement_count == 29


@pytest.mark.parametrize("ours", [OnnxSGDClassifier, OnnxSGDRegressor],
                         ids=lambda c: c.__name__)
def test_sparsify_and_densify_keep_predictions_like_scikit_learn(ours):
    X, y = _scaled(load_iris, 150)
    y = y if ours is OnnxSGDClassifier else y / 2.0
    model = ours(penalty="l1", alpha=0.05, random_state=0, max_iter=5, tol=None).fit(X, y)
    dense, predicted = model.coef_.copy(), model.predict(X)
    assert sp.issparse(model.sparsify().coef_)
    np.testing.assert_array_equal(model.coef_.toarray().ravel(), dense.ravel())
    restored = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(restored.predict(X), predicted)
    assert sp.issparse(restored.coef_)
    assert restored.to_onnx().graph.node
    # skl2onnx's converter reads the coefficients densely.
    assert to_onnx(restored, X[:1].astype(np.float32)).graph.node
    np.testing.assert_array_equal(model.densify().coef_, dense)
    # scikit-learn's words.
    name = ours.__name__
    with pytest.raises(NotFittedError,
                       match=f"Estimator, {name}, must be fitted before sparsifying."):
        ours().sparsify()
    with pytest.raises(NotFittedError,
                       match=f"Estimator, {name}, must be fitted before densifying."):
        ours().densify()


def _mlp_training_rows(estimator, monkeypatch, X, y, fits, **params):
    """The training rows of the early-stopping split of each of ``fits`` successive fits
    of ``estimator(**params)`` on ``(X, y)``, in the order they train, as float32 (ours
    casts the rows before its split): scikit-learn's from its ``train_test_split``,
    ours from its split."""
    import sklearn.neural_network._multilayer_perceptron as sklearn_mlp

    from skl_ortgrad.estimators.validation_split import ValidationSplitMixin

    rows = []

    def recording(split):
        def spy(*args, **kwargs):
            parts = split(*args, **kwargs)
            rows.append(np.asarray(parts[0], dtype=np.float32))
            return parts

        return spy

    if issubclass(estimator, ValidationSplitMixin):
        monkeypatch.setattr(estimator, "_validation_split",
                            recording(estimator._validation_split))
    else:
        monkeypatch.setattr(sklearn_mlp, "train_test_split",
                            recording(sklearn_mlp.train_test_split))
    model = estimator(hidden_layer_sizes=(5,), early_stopping=True, max_iter=2, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        for _ in range(fits):
            model.fit(X, y)
    return rows


@pytest.mark.parametrize("target", ["binary", "multiclass", "multilabel", "regression"])
@pytest.mark.parametrize("seed", [0, "RandomState"])
def test_mlp_early_stopping_splits_the_rows_scikit_learn_splits(target, seed, monkeypatch):
    """scikit-learn's MLPs split with ``train_test_split`` on the generator that drew the
    initial weights (after those draws on a fresh fit, from ``random_state`` anew on a
    warm-started one), stratified for two classes only: ours sets aside the same rows
    and trains on the others in the same order, on a fresh fit whether
    ``random_state`` is a seed or a ``RandomState``, and on a warm-started one from a
    seed. (A ``RandomState`` shared by both fits is left by the first where its draws
    left it, which differ: ours does not draw the split from it.)"""
    X, y = load_iris(return_X_y=True)
    y = {"binary": y > 0, "multiclass": y, "multilabel": np.eye(3, dtype=int)[y],
         "regression": X[:, 3]}[target]
    X = X[:, :3]
    pair = ((OnnxMLPRegressor, MLPRegressor) if target == "regression"
            else (OnnxMLPClassifier, MLPClassifier))
    splits = [
        _mlp_training_rows(
            estimator, monkeypatch, X, y, fits=1 if seed == "RandomState" else 2,
            warm_start=True,
            random_state=np.random.RandomState(3) if seed == "RandomState" else seed)
        for estimator in pair
    ]
    ours, theirs = splits
    assert len(ours) == len(theirs)
    for got, expected in zip(ours, theirs, strict=True):
        np.testing.assert_array_equal(got, expected)
    if seed == 0:
        # A warm-started fit draws no initial weights: another split.
        assert not np.array_equal(theirs[0], theirs[1])


@pytest.mark.parametrize(("ours", "theirs"), [
    (OnnxSGDClassifier, SGDClassifier), (OnnxMLPClassifier, MLPClassifier)],
    ids=["sgd", "mlp"])
def test_labels_out_of_the_classes_raise_scikit_learn_s_words_then_ours(ours, theirs):
    """A ``partial_fit`` whose labels are not all in ``classes``: scikit-learn's message
    (its SGD's from ``compute_class_weight``, its MLP's naming both sets), then which
    labels are not."""
    X, y = load_iris(return_X_y=True)
    with pytest.raises(ValueError) as expected:
        theirs().partial_fit(X, y, classes=[0, 1])
    with pytest.raises(ValueError, match=re.escape(str(expected.value)) +
                       r"\.? Labels \[2\] are not in classes_=\[0, 1\]\.$"):
        ours().partial_fit(X, y, classes=[0, 1])
