"""The classifiers' label checks against scikit-learn's."""

import warnings

import numpy as np
import pytest
from sklearn.utils.multiclass import check_classification_targets

from skl_ortgrad import OnnxSGDClassifier
from skl_ortgrad.estimators.classification import _check_labels

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


def test_fit_refuses_continuous_labels_in_scikit_learns_words():
    X = np.arange(8.0).reshape(4, 2)
    with pytest.raises(ValueError, match="Unknown label type: continuous"):
        OnnxSGDClassifier(max_iter=1, tol=None).fit(X, [0.5, 1.0, 0.5, 1.0])
