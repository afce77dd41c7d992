"""Bad input gets a clear error and leaves a fitted estimator exactly as it was."""

import numpy as np
import pytest
from sklearn.datasets import load_iris

from skl_ortgrad import ConvergenceError, LearningRateSGD, OnnxSGDClassifier, OnnxSGDRegressor


@pytest.fixture
def data():
    X, y = load_iris(return_X_y=True)
    return (X - X.mean(axis=0)) / X.std(axis=0), y


def _snapshot(model):
    return [w.copy() for w in model.optimizer_.weights_], model.t_, model.n_iter_


def _assert_unchanged(model, snapshot):
    weights, t, n_iter = snapshot
    for a, b in zip(model.optimizer_.weights_, weights, strict=True):
        np.testing.assert_array_equal(a, b)
    assert (model.t_, model.n_iter_) == (t, n_iter)


def _bad_cases(X, y):
    X_nan = X.copy()
    X_nan[3, 1] = np.nan
    X_inf = X.copy()
    X_inf[0, 0] = np.inf
    y_nan = y.astype(float)
    y_nan[5] = np.nan
    return {
        "nan in X": ((X_nan, y), "NaN"),
        "inf in X": ((X_inf, y), "infinity"),
        "nan in y": ((X, y_nan), "NaN"),
        "strings in X": ((np.full(X.shape, "a"), y), "could not convert|dtype"),
        "lengths": ((X, y[:-1]), "inconsistent numbers of samples"),
        "empty": ((X[:0], y[:0]), "0 sample"),
        "1-D X": ((X[:, 0], y), "Expected 2D array"),
        "features": ((X[:, :3], y), "has 3 features"),
    }


@pytest.mark.parametrize("case", list(_bad_cases(np.zeros((9, 4)), np.arange(9))))
@pytest.mark.parametrize("estimator", [OnnxSGDRegressor, OnnxSGDClassifier])
def test_partial_fit_bad_input_changes_nothing(data, estimator, case):
    X, y = data
    model = estimator(random_state=0, max_iter=3)
    model.fit(X, y)
    snapshot = _snapshot(model)
    (bad_X, bad_y), message = _bad_cases(X, y)[case]
    with pytest.raises(ValueError, match=message):
        if estimator is OnnxSGDClassifier:
            model.partial_fit(bad_X, bad_y, classes=np.unique(y))
        else:
            model.partial_fit(bad_X, bad_y)
    _assert_unchanged(model, snapshot)
    model.predict(X)


@pytest.mark.parametrize("estimator", [OnnxSGDRegressor, OnnxSGDClassifier])
def test_predict_checks_features(data, estimator):
    X, y = data
    model = estimator(max_iter=2).fit(X, y)
    with pytest.raises(ValueError, match=r"has 3 features, but .* is expecting 4"):
        model.predict(X[:, :3])


def test_unknown_labels_in_partial_fit(data):
    X, y = data
    model = OnnxSGDClassifier(random_state=0)
    with pytest.raises(ValueError, match="classes must be passed on the first call"):
        model.partial_fit(X, y)
    model.partial_fit(X[y < 2], y[y < 2], classes=[0, 1])
    snapshot = _snapshot(model)
    with pytest.raises(ValueError, match=r"Labels \[2\] are not in classes_=\[0, 1\]"):
        model.partial_fit(X, y)
    with pytest.raises(ValueError, match="is not the same as on last call to partial_fit"):
        model.partial_fit(X, y, classes=[0, 1, 2])
    _assert_unchanged(model, snapshot)


def test_unknown_labels_of_another_type(data):
    """String classes, then labels that sort anywhere among them or are not strings:
    every unknown label is named once, sorted, whatever its position."""
    X, y = data
    names = np.array(["b", "d", "f"])[y]
    model = OnnxSGDClassifier(random_state=0).fit(X, names)
    snapshot = _snapshot(model)
    other = names.astype(object)
    other[:3], other[3:5] = "a", "z"
    with pytest.raises(ValueError, match=r"Labels \['a', 'z'\] are not in classes_="
                                         r"\['b', 'd', 'f'\]"):
        model.partial_fit(X, other)
    with pytest.raises(ValueError, match=r"Labels \[0, 1, 2\] are not in classes_"):
        model.partial_fit(X, y)
    _assert_unchanged(model, snapshot)


def test_single_class_is_an_error(data):
    X, _ = data
    with pytest.raises(ValueError,
                       match="The number of classes has to be greater than one; got 1 class"):
        OnnxSGDClassifier().fit(X, np.zeros(len(X)))


@pytest.mark.parametrize("param, value, message", [
    ("loss", "nope", r"The 'loss' parameter of OnnxSGDRegressor must be a str among "
                     r"\{[^}]*'huber'[^}]*\}.* Got 'nope' instead"),
    ("learning_rate", "nope", r"The 'learning_rate' parameter of OnnxSGDRegressor must be a "
                              r"str among \{[^}]*'optimal'[^}]*\}.* Got 'nope' instead"),
    ("penalty", "nope", r"The 'penalty' parameter of OnnxSGDRegressor must be a str among "
                        r"\{[^}]*'l2'[^}]*\}.* Got 'nope' instead"),
])
def test_unknown_alias_lists_valid_ones(data, param, value, message):
    from sklearn.utils._param_validation import InvalidParameterError

    X, y = data
    with pytest.raises(InvalidParameterError, match=message):
        OnnxSGDRegressor(**{param: value}).fit(X, y)


def test_invalid_parameters_are_rejected_at_fit(data):
    X, y = data
    from sklearn.utils._param_validation import InvalidParameterError

    for params in ({"max_iter": -1}, {"batch_size": 0}, {"validation_fraction": 1.5}):
        model = OnnxSGDRegressor(**params)  # __init__ only stores
        with pytest.raises(InvalidParameterError, match=next(iter(params))):
            model.fit(X, y)


def test_divergence_keeps_last_finite_weights(data):
    X, y = data
    model = OnnxSGDRegressor(random_state=0, max_iter=2, tol=None, penalty=None,
                             learning_rate=LearningRateSGD(eta0=0.01, learning_rate="constant"))
    model.fit(X, y * 1e3)
    snapshot = _snapshot(model)
    model.set_params(learning_rate=LearningRateSGD(eta0=1e8, learning_rate="constant"))
    with pytest.raises(ConvergenceError, match="smaller learning rate") as info:
        model.partial_fit(X, y * 1e3)
    assert isinstance(info.value, ValueError)
    _assert_unchanged(model, snapshot)
    assert np.isfinite(model.predict(X)).all()


def test_sparse_predict_matches_dense(data):
    """A linear model scores sparse X with scipy (float64 sums, rounded once to float32),
    the dense path in the graph (float32 sums): the scores agree to float32 accuracy
    (the sparse ones are the exact scores rounded), so do the probabilities; the labels
    are equal."""
    import scipy.sparse as sp

    X, y = data
    model = OnnxSGDClassifier(loss="log_loss", random_state=0, max_iter=5).fit(X, y)
    coef, intercept = model.coef_.astype(np.float64), model.intercept_.astype(np.float64)
    exact = X.astype(np.float32).astype(np.float64) @ coef.T + intercept
    sparse_scores = model.decision_function(sp.csr_matrix(X))
    np.testing.assert_array_equal(sparse_scores, exact.astype(np.float32))
    scale = np.abs(X @ coef.T).max()
    np.testing.assert_allclose(model.decision_function(X), exact, rtol=0, atol=1e-6 * scale)
    np.testing.assert_allclose(model.predict_proba(sp.csr_matrix(X)), model.predict_proba(X),
                               rtol=0, atol=1e-6)
    np.testing.assert_array_equal(model.predict(sp.csr_matrix(X)), model.predict(X))


def test_sparse_predict_densifies_a_bounded_number_of_values(monkeypatch):
    """A graph whose score is not linear in X (an MLP), on wide sparse data: each
    densified chunk holds at most ``_SPARSE_CHUNK_VALUES`` values, one row at the least,
    whatever the columns."""
    import scipy.sparse as sp

    from skl_ortgrad import OnnxMLPClassifier
    from skl_ortgrad.estimators import inference

    rng = np.random.default_rng(0)
    X = sp.random(50, 20_000, density=0.001, format="csr", random_state=0)
    y = (X @ rng.standard_normal(20_000) > 0).astype(int)
    model = OnnxMLPClassifier(hidden_layer_sizes=(3,), max_iter=2, random_state=0).fit(X, y)
    expected = model.predict_proba(X.toarray())
    rows_fed = []
    session = model._session()
    features = session.get_inputs()[0].name

    class Recording:
        def __getattr__(self, name):
            return getattr(session, name)

        def run(self, names, feeds):
            assert feeds[features].shape[1] == 20_000
            rows_fed.append(feeds[features].shape[0])
            return session.run(names, feeds)

    monkeypatch.setattr(type(model), "_session", lambda self, *args: Recording())
    for limit, rows in ((8 * 20_000, 8), (3, 1)):
        monkeypatch.setattr(inference, "_SPARSE_CHUNK_VALUES", limit)
        rows_fed.clear()
        np.testing.assert_allclose(model.predict_proba(X), expected, rtol=1e-6)
        assert rows_fed == [rows] * (50 // rows) + [50 % rows] * (50 % rows > 0)


@pytest.mark.parametrize("labels", [
    np.array([0, 1]), np.array([-1.0, 2.0]), np.array([False, True]),
    np.array([3, 7], dtype=np.uint8),
])
def test_two_numeric_classes_index_as_a_binary_search(data, labels):
    """Two numeric classes take their comparison path: the same positions as the binary
    search of every other case, the same training, and the same error for a label
    out of the classes, or NaN (which no comparison matches)."""
    X, y = data
    two = labels[(y > 0).astype(int)]
    model = OnnxSGDClassifier(max_iter=2, tol=None, random_state=0).fit(X, two)
    index = model._class_index(two)
    assert index.dtype == np.intp
    np.testing.assert_array_equal(index, np.searchsorted(model.classes_, two))
    as_floats = two.astype(np.float64)
    np.testing.assert_array_equal(model._class_index(as_floats), index)
    as_floats[:2] = [4.0, 9.0]
    with pytest.raises(ValueError, match=r"Labels \[4.0, 9.0\] are not in classes_"):
        model._class_index(as_floats)
    as_floats[0] = np.nan
    with pytest.raises(ValueError, match="Input y contains NaN"):
        model._class_index(as_floats)
