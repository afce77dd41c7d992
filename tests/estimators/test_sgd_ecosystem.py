"""The SGD estimators inside the scikit-learn ecosystem: pipelines, model selection,
cloning, pickling, pandas, sparse input, streaming partial_fit and dask-ml."""

import copy
import io
import pickle
import warnings

import joblib
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.datasets import load_breast_cancer, make_regression
from sklearn.model_selection import GridSearchCV, KFold, cross_validate, train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import LearningRateSGD, OnnxSGDClassifier, OnnxSGDRegressor


@pytest.fixture(scope="module")
def linear_data():
    """Generated linear data, standardized: (X_train, X_test, y_train, y_test)."""
    X, y = make_regression(
        n_samples=600, n_features=8, n_informative=8, noise=5.0, random_state=0
    )
    y = (y - y.mean()) / y.std()
    return train_test_split(X, y, test_size=0.25, random_state=0)


@pytest.fixture(scope="module")
def cancer():
    """Breast cancer data, unscaled: (X_train, X_test, y_train, y_test)."""
    X, y = load_breast_cancer(return_X_y=True)
    return train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)


def _fitted(kind, data):
    X_train, _, y_train, _ = data
    scaler = StandardScaler().fit(X_train)
    if kind == "regressor":
        model = OnnxSGDRegressor(max_iter=20, random_state=0)
    else:
        model = OnnxSGDClassifier(loss="log_loss", max_iter=20, random_state=0)
    return model.fit(scaler.transform(X_train), y_train), scaler


# -- pipelines and model selection --------------------------------------------------------


def test_pipeline_regressor(linear_data):
    X_train, X_test, y_train, y_test = linear_data
    pipe = make_pipeline(StandardScaler(), OnnxSGDRegressor(random_state=0))
    pipe.fit(X_train, y_train)
    assert pipe.predict(X_test).shape == (len(X_test),)
    assert pipe.score(X_test, y_test) > 0.9


def test_pipeline_classifier(cancer):
    X_train, X_test, y_train, y_test = cancer
    pipe = make_pipeline(StandardScaler(), OnnxSGDClassifier(loss="log_loss", random_state=0))
    pipe.fit(X_train, y_train)
    assert_array_equal(pipe.classes_, [0, 1])
    proba = pipe.predict_proba(X_test)
    assert proba.shape == (len(X_test), 2)
    assert_allclose(proba.sum(axis=1), 1, rtol=1e-5)
    assert pipe.score(X_test, y_test) > 0.93


def test_grid_search_learning_rate_object(linear_data):
    X_train, X_test, y_train, y_test = linear_data
    model = OnnxSGDRegressor(
        learning_rate=LearningRateSGD(learning_rate="constant"), max_iter=10, tol=None,
        random_state=0,
    )
    grid = GridSearchCV(
        model, {"learning_rate__eta0": [1e-5, 1e-3, 0.05]}, cv=3, n_jobs=2
    ).fit(X_train, y_train)
    scores = grid.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores))
    # 10 epochs at eta0=1e-5 barely move the weights, 1e-3 not far (R^2 0.15): the step
    # size reaches the nested object, and the largest one wins (R^2 0.999).
    assert scores[0] < scores[1] < scores[2]
    assert grid.best_params_ == {"learning_rate__eta0": 0.05}
    best = grid.best_estimator_
    assert best.learning_rate.eta0 == grid.best_params_["learning_rate__eta0"]
    assert best.learning_rate is not model.learning_rate
    assert best.score(X_test, y_test) > 0.9


def test_cross_validate_return_estimator(cancer):
    X_train, _, y_train, _ = cancer
    pipe = make_pipeline(StandardScaler(), OnnxSGDClassifier(max_iter=20, random_state=0))
    result = cross_validate(
        pipe, X_train, y_train, cv=KFold(3, shuffle=True, random_state=0), n_jobs=2,
        return_estimator=True,
    )
    assert len(result["estimator"]) == 3
    assert np.all(result["test_score"] > 0.9)
    coefs = [est[-1].coef_ for est in result["estimator"]]
    assert all(c.shape == (1, X_train.shape[1]) for c in coefs)
    # Three folds, three different models, none of them the unfitted template.
    assert not np.allclose(coefs[0], coefs[1])
    assert not hasattr(pipe[-1], "coef_")


# -- cloning, pickling, copying ---------------------------------------------------------


@pytest.mark.parametrize("cls", [OnnxSGDRegressor, OnnxSGDClassifier])
def test_clone_unfitted_same_params(cls, cancer):
    X_train, _, y_train, _ = cancer
    model = cls(
        learning_rate=LearningRateSGD(eta0=0.05, learning_rate="constant"), max_iter=3,
        batch_size=16, random_state=3,
    )
    model.fit(StandardScaler().fit_transform(X_train), y_train)
    cloned = clone(model)
    assert not hasattr(cloned, "coef_")
    assert not hasattr(cloned, "optimizer_")
    assert not hasattr(cloned, "n_features_in_")
    params, cloned_params = model.get_params(), cloned.get_params()
    assert params.keys() == cloned_params.keys()
    for name, value in params.items():
        if name == "learning_rate":
            assert cloned_params[name] is not value
            assert cloned_params[name].get_params() == value.get_params()
        else:
            assert cloned_params[name] == value, name


def _roundtrip_pickle(model):
    return pickle.loads(pickle.dumps(model))


def _roundtrip_joblib(model):
    buffer = io.BytesIO()
    joblib.dump(model, buffer)
    buffer.seek(0)
    return joblib.load(buffer)


@pytest.mark.parametrize("roundtrip", [_roundtrip_pickle, _roundtrip_joblib])
@pytest.mark.parametrize("kind", ["regressor", "classifier"])
def test_pickle_roundtrip_and_continue(kind, roundtrip, linear_data, cancer):
    data = linear_data if kind == "regressor" else cancer
    model, scaler = _fitted(kind, data)
    X_train, X_test, y_train, _ = data
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    model.predict(X_test)  # builds the inference session, which must not be pickled
    restored = roundtrip(model)
    assert_array_equal(restored.predict(X_test), model.predict(X_test))
    if kind == "classifier":
        assert_array_equal(restored.predict_proba(X_test), model.predict_proba(X_test))
        assert_array_equal(restored.classes_, model.classes_)
    assert restored.t_ == model.t_
    # partial_fit continues from the same weights, schedule and shuffling state.
    for _ in range(2):
        model.partial_fit(X_train, y_train)
        restored.partial_fit(X_train, y_train)
    assert_array_equal(restored.coef_, model.coef_)
    assert_array_equal(restored.intercept_, model.intercept_)
    assert restored.t_ == model.t_
    assert_array_equal(restored.predict(X_test), model.predict(X_test))


@pytest.mark.parametrize("kind", ["regressor", "classifier"])
def test_deepcopy_is_independent(kind, linear_data, cancer):
    data = linear_data if kind == "regressor" else cancer
    model, scaler = _fitted(kind, data)
    X_train, X_test, y_train, _ = data
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    expected = model.predict(X_test)
    coef = model.coef_.copy()
    copied = copy.deepcopy(model)
    assert_array_equal(copied.predict(X_test), expected)
    copied.partial_fit(X_train, y_train)
    assert not np.array_equal(copied.coef_, coef)
    assert_array_equal(model.coef_, coef)
    assert_array_equal(model.predict(X_test), expected)


# -- input formats and reproducibility -----------------------------------------------


@pytest.mark.parametrize("kind", ["regressor", "classifier"])
def test_pandas_feature_names(kind, linear_data, cancer):
    X_train, X_test, y_train, _ = linear_data if kind == "regressor" else cancer
    scaler = StandardScaler().fit(X_train)
    columns = [f"feat_{i}" for i in range(X_train.shape[1])]
    df_train = pd.DataFrame(scaler.transform(X_train), columns=columns)
    df_test = pd.DataFrame(scaler.transform(X_test), columns=columns)
    cls = OnnxSGDRegressor if kind == "regressor" else OnnxSGDClassifier
    model = cls(max_iter=5, random_state=0).fit(df_train, pd.Series(y_train))
    assert_array_equal(model.feature_names_in_, columns)
    assert model.n_features_in_ == len(columns)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        from_frame = model.predict(df_test)
    with pytest.warns(UserWarning, match="X does not have valid feature names"):
        from_array = model.predict(df_test.to_numpy())
    assert_array_equal(from_array, from_frame)
    with pytest.raises(ValueError, match="feature names"):
        model.predict(df_test[columns[::-1]])


@pytest.mark.parametrize("kind", ["regressor", "classifier"])
def test_same_random_state_same_weights(kind, linear_data, cancer):
    X_train, _, y_train, _ = linear_data if kind == "regressor" else cancer
    X_train = StandardScaler().fit_transform(X_train)
    cls = OnnxSGDRegressor if kind == "regressor" else OnnxSGDClassifier
    first = cls(max_iter=5, tol=None, random_state=7).fit(X_train, y_train)
    second = cls(max_iter=5, tol=None, random_state=7).fit(X_train, y_train)
    other = cls(max_iter=5, tol=None, random_state=8).fit(X_train, y_train)
    assert_array_equal(first.coef_, second.coef_)
    assert_array_equal(first.intercept_, second.intercept_)
    assert first.loss_curve_ == second.loss_curve_
    # The seed drives the shuffling: another seed gives other weights.
    assert not np.array_equal(first.coef_, other.coef_)


@pytest.mark.parametrize("kind", ["regressor", "classifier"])
def test_sparse_csr_matches_dense(kind, linear_data, cancer):
    """Without the intercept, which scikit-learn's rule damps on sparse data only
    (compared with scikit-learn in test_sklearn_fidelity.py)."""
    X_train, X_test, y_train, _ = linear_data if kind == "regressor" else cancer
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    X_train[np.abs(X_train) < 0.5] = 0  # really sparse
    cls = OnnxSGDRegressor if kind == "regressor" else OnnxSGDClassifier
    dense = cls(max_iter=5, random_state=0, fit_intercept=False).fit(X_train, y_train)
    sparse = cls(max_iter=5, random_state=0, fit_intercept=False).fit(
        sp.csr_matrix(X_train), y_train)
    assert_allclose(sparse.coef_, dense.coef_, rtol=1e-5, atol=1e-6)
    assert_allclose(
        sparse.predict(sp.csr_matrix(X_test)), dense.predict(X_test), rtol=1e-5, atol=1e-5
    )
    assert_allclose(sparse.predict(X_test), dense.predict(X_test), rtol=1e-5, atol=1e-5)


# -- streaming ------------------------------------------------------------------------


def test_partial_fit_streaming_matches_fit(cancer):
    X_train, X_test, y_train, y_test = cancer
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    reference = OnnxSGDClassifier(max_iter=5, tol=None, random_state=0).fit(X_train, y_train)
    streamed = OnnxSGDClassifier(random_state=0)
    chunks = np.array_split(np.arange(len(X_train)), 10)
    for epoch in range(5):
        for i, rows in enumerate(chunks):
            if epoch == 0 and i == 0:
                streamed.partial_fit(X_train[rows], y_train[rows], classes=[0, 1])
            else:
                streamed.partial_fit(X_train[rows], y_train[rows])
    assert streamed.n_iter_ == 1 and len(streamed.loss_curve_) == 50
    assert streamed.t_ == reference.t_
    assert_array_equal(streamed.classes_, [0, 1])
    fit_score = reference.score(X_test, y_test)
    assert fit_score > 0.93
    assert streamed.score(X_test, y_test) >= fit_score - 0.03


@pytest.mark.slow  # ~20 s: each worker process imports onnxruntime, skl2onnx, skl_ortgrad
def test_dask_ml_incremental_on_local_cluster():
    import dask.array as dask_array
    from dask_ml.wrappers import Incremental
    from distributed import Client, LocalCluster

    rng = np.random.RandomState(0)
    coef = rng.randn(6)
    X = rng.randn(4000, 6)
    y = X @ coef + 0.5 + 0.05 * rng.randn(4000)
    X_test, y_test = X[3000:], y[3000:]
    X_dask = dask_array.from_array(X[:3000], chunks=(300, 6))
    y_dask = dask_array.from_array(y[:3000], chunks=300)
    with LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
    ) as cluster, Client(cluster) as client:
        assert len(client.scheduler_info()["workers"]) == 2
        model = Incremental(
            OnnxSGDRegressor(
                learning_rate=LearningRateSGD(eta0=0.05, learning_rate="constant"),
                random_state=0,
            ),
            shuffle_blocks=False,
        )
        # Incremental.fit starts from a clone; partial_fit continues: three passes.
        for _ in range(3):
            model.partial_fit(X_dask, y_dask)
        estimator = model.estimator_
        assert estimator.n_iter_ == 1
        assert len(estimator.loss_curve_) == 3 * X_dask.numblocks[0]
        predicted = model.predict(dask_array.from_array(X_test, chunks=500)).compute()
    assert cluster.status.name == "closed"
    assert_allclose(predicted, estimator.predict(X_test), rtol=1e-5, atol=1e-5)
    assert estimator.score(X_test, y_test) > 0.9
