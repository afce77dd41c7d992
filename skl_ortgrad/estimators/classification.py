"""Label handling shared by the classifiers: ``classes_``, label encoding for the loss,
and predictions from the graph's scores and probabilities."""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils.multiclass import check_classification_targets, unique_labels


def onnx_classes(classes: np.ndarray) -> np.ndarray:
    """Class labels as the ONNX graph stores them: int64 for integers, else strings.

    Integral floats (``[0.0, 1.0]``) become int64, which compare equal to the
    estimator's labels.
    """
    if classes.dtype.kind in "iub" or (
        classes.dtype.kind == "f" and np.all(np.equal(np.mod(classes, 1), 0))
    ):
        return classes.astype(np.int64)
    return classes.astype(str)


def _distinct_labels(y: np.ndarray) -> np.ndarray:
    """``np.unique(y)`` of a 1-D ``y``: numbers by a sort and a comparison of neighbours
    (numpy 2.4's ``unique`` hashes them, then sorts: 1.9 ms on 100k int64 labels
    against 0.11 ms), NaN kept once per NaN (``_check_labels`` refuses them either
    way)."""
    if y.dtype.kind not in "biuf":
        return np.unique(y)
    ordered = np.sort(y)
    new = np.empty(ordered.shape, dtype=bool)
    new[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=new[1:])
    return ordered[new]


def _check_labels(labels: np.ndarray) -> None:
    """``check_classification_targets`` on the sorted distinct labels of a 1-D ``y``.

    Integers, booleans and floats equal to their int64 cast are binary or multiclass
    targets whatever their values (``type_of_target``'s rules for 1-D numbers): they pass
    without its checks, which take 100 µs even on two labels (a tenth of a small fit).
    Anything else goes through it, for its errors (floats out of int64's range too: the
    cast it compares with is undefined there).
    """
    kind = labels.dtype.kind
    if kind in "biu" or (kind == "f" and -(2.0**63) <= labels[0] and labels[-1] < 2.0**63
                         and (labels == np.trunc(labels)).all()):
        return
    check_classification_targets(labels)


class ClassifierTargetsMixin:
    """``classes_`` bookkeeping and label encoding for the losses.

    Binary problems train one score: the label becomes ``1.0`` for ``classes_[1]`` and
    ``0.0`` otherwise, shape (n, 1). Multiclass problems train one score per class: the
    label is one-hot, shape (n, K) (softmax cross-entropy, or one-vs-rest margin/log
    losses applied column by column).
    """

    # partial_fit's first call must name the classes (scikit-learn's contract).
    _needs_classes = True
    #: scikit-learn's words for labels out of ``classes_`` (its SGD's), before ours;
    #: ``{classes}`` and ``{labels}`` are ``classes_`` and the distinct labels.
    _unknown_labels = "classes should include all valid labels that can be in y."

    def _stratification(self, y: Any, targets: np.ndarray) -> Any:
        """The early-stopping split keeps the classes in proportion (scikit-learn's
        SGD classifiers stratify on the labels)."""
        return y

    def _check_warm_start_targets(self, y: Any) -> None:
        """A warm-started ``fit`` keeps the classes: ``y`` must have exactly them.

        Raises
        ------
        ValueError
            Otherwise, in scikit-learn's words.
        """
        labels = unique_labels(y)
        if not np.array_equal(labels, self.classes_):
            raise ValueError(
                "warm_start can only be used where `y` has the same classes as in the "
                f"previous call to fit. Previously got {self.classes_}, `y` has {labels}"
            )

    def _prepare_targets(self, y: Any, first_call: bool, classes: Any) -> np.ndarray:
        if first_call:
            # The type of the distinct labels is the type of y (1-D here), checked for a
            # fraction of the cost (scikit-learn's SGD checks its classes the same way,
            # after np.unique); later calls check only labels not in classes_
            # (_class_index).
            labels = _distinct_labels(y)
            _check_labels(labels)
            self.classes_ = (unique_labels(np.asarray(classes)) if classes is not None
                             else labels)
            if len(self.classes_) < 2:
                raise ValueError(
                    # scikit-learn's SGD words, then the class.
                    f"The number of classes has to be greater than one; got 1 class: "
                    f"{self.classes_.tolist()}."
                )
        else:
            if classes is not None and not np.array_equal(
                unique_labels(np.asarray(classes)), self.classes_
            ):
                # scikit-learn's partial_fit contract and wording.
                raise ValueError(
                    f"`classes={classes!r}` is not the same as on last call to "
                    f"partial_fit, was: {self.classes_!r}"
                )
        index = self._class_index(y)
        if len(self.classes_) == 2:
            return (index == 1).astype(np.float32).reshape((-1, 1))
        one_hot = np.zeros((len(index), len(self.classes_)), dtype=np.float32)
        one_hot[np.arange(len(index)), index] = 1
        return one_hot

    def partial_fit(
        self, X: Any, y: Any, classes: Any = None, sample_weight: Any = None
    ) -> ClassifierTargetsMixin:
        """One epoch over ``(X, y)``.

        ``classes`` follows scikit-learn's ``partial_fit`` contract: required on the first
        call, where it may name labels ``y`` lacks (they are learnt from later calls);
        afterwards None, or the same classes.
        """
        return self._partial_fit(X, y, sample_weight, classes=classes)

    def _class_index(self, y: np.ndarray) -> np.ndarray:
        """Position of every label in ``classes_`` (sorted).

        One binary search per label finds the position and, compared back, whether the
        label is there at all: no sort of ``y`` (which was 1 ms of a 50k-row call). Two
        numeric classes are two comparisons instead (50k labels: 60 µs against the
        search's 300 µs).

        Raises
        ------
        ValueError
            If some labels are not in ``classes_`` (scikit-learn's message when they are
            not class labels at all).
        """
        y = np.asarray(y)
        if len(self.classes_) == 2 and y.dtype.kind in "biuf" and (
                self.classes_.dtype.kind in "biuf"):
            positive = y == self.classes_[1]
            known = positive | (y == self.classes_[0])
            index = positive.astype(np.intp)
        else:
            index = np.searchsorted(self.classes_, y)
            known = self.classes_.take(index, mode="clip") == y
        if not known.all():
            check_classification_targets(y)
            unknown = np.unique(y[~known])
            words = self._unknown_labels.format(classes=self.classes_, labels=np.unique(y))
            raise ValueError(f"{words} Labels {unknown.tolist()} are not in "
                             f"classes_={self.classes_.tolist()}.")
        return index

    def _scores(self, outputs: dict[str, np.ndarray]) -> np.ndarray:
        scores = outputs[self._template_.score]
        return scores.ravel() if scores.shape[1] == 1 else scores

    def decision_function(self, X: Any) -> np.ndarray:
        """Raw scores: shape (n,) for binary problems (positive means ``classes_[1]``),
        (n, n_classes) otherwise."""
        return self._scores(self._run(X, self._fitted_template().score))

    def predict(self, X: Any) -> np.ndarray:
        """Predicted class labels (the class of the highest score)."""
        scores = self.decision_function(X)
        if scores.ndim == 1:
            # One byte per row: an index array of 8 (what take reads) costs, on 200k
            # rows, a millisecond of page faults, a tenth of scikit-learn's predict.
            return self.classes_[(scores > 0).view(np.uint8)]
        return self.classes_.take(scores.argmax(axis=1))

    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, shape (n, n_classes), rows summing to 1."""
        return self._run(X, "probabilities")["probabilities"].astype(np.float64)

    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`."""
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))
