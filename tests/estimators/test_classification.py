"""The classifiers' label checks against scikit-learn's."""

import warnings

import numpy as np
import pytest
from sklearn.utils.multiclass import check_classification_targets

from skl_ortgrad import OnnxSGDClassifier
from skl_ortgrad.estimators.classification import _check_labels, _distinct_labels

LABELS = [
    np.array([0, 1]),
    np.array([-3, 0, 7], dtype=np.int8),
    np.array([1, 2, 3], dtype=np.uint64),
    np.array([False, True]),
    np.array([0.0, 1.0]),
    np.array([-2.0, 5.0, 1e15], dtype=np.float32),
    np.array([0.5, 1.0]),
    np.array([1.0, 2.0**63]),
    np.array([-(2.0**64), 0.0]),
    np.array([1.0, np.nan]),
    np.array(["a", "b"]),
    np.array(["a", "b"], dtype=object),
    np.array([1, "b"], dtype=object),
]


def _outcome(check, labels):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        try:
            check(labels)
        except ValueError as error:
            return str(error)
    return None


@pytest.mark.parametrize("labels", LABELS, ids=lambda labels: f"{labels.dtype}-{labels}")
def test_check_labels_as_scikit_learn(labels):
    assert _outcome(_check_labels, labels) == _outcome(check_classification_targets, labels)


@pytest.mark.parametrize("labels", LABELS, ids=lambda labels: f"{labels.dtype}-{labels}")
def test_distinct_labels_are_numpys_and_checked_the_same(labels):
    """np.unique's result (NaN aside: kept once per NaN, refused all the same), from the
    labels repeated in another order."""
    y = np.concatenate([labels[::-1], labels, labels[:1]])
    if labels.dtype.kind == "O" and len({type(label) for label in labels}) > 1:
        with pytest.raises(TypeError):  # unorderable, as in np.unique
            _distinct_labels(y)
        return
    got = _distinct_labels(y)
    assert got.dtype == y.dtype
    if labels.dtype.kind == "f" and np.isnan(labels).any():
        assert np.array_equal(got[~np.isnan(got)], np.unique(y[~np.isnan(y)]))
        assert np.isnan(got).sum() == np.isnan(y).sum()
    else:
        assert np.array_equal(got, np.unique(y))
    assert _outcome(_check_labels, got) == _outcome(check_classification_targets, y)


def test_fit_refuses_continuous_labels_in_scikit_learns_words():
    X = np.arange(8.0).reshape(4, 2)
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        OnnxSGDClassifier(max_iter=1, tol=None).fit(X, [0.5, 1.0, 0.5, 1.0])


@pytest.mark.parametrize("classes", [
    np.array([0, 1]), np.array([-3, 7], dtype=np.int8), np.array([False, True]),
    np.array([-1.0, 1.0]), np.array(["no", "yes"]), np.array(["a", "bb"], dtype=object),
], ids=lambda classes: f"{classes.dtype}-{classes}")
def test_binary_labels_are_the_classes_of_the_scores_signs(classes):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 3))
    y = classes[(X[:, 0] > 0).astype(int)]
    model = OnnxSGDClassifier(max_iter=3, tol=None, random_state=0).fit(X, y)
    labels = model.predict(X)
    assert labels.dtype == model.classes_.dtype
    expected = np.where(model.decision_function(X) > 0, classes[1], classes[0])
    assert labels.tolist() == expected.tolist()
    assert set(labels.tolist()) == set(classes.tolist())
