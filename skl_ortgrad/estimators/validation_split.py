"""The early-stopping split of the estimators' training rows and the score of the rows
it keeps aside (:class:`ValidationSplitMixin`)."""

from __future__ import annotations

import math
import warnings
from typing import Any

import numpy as np
from sklearn.base import is_classifier
from sklearn.metrics import accuracy_score, r2_score
from sklearn.model_selection import ShuffleSplit, StratifiedShuffleSplit
from sklearn.utils._param_validation import InvalidParameterError


class ValidationSplitMixin:
    """``early_stopping``'s split (``validation_fraction``, ``random_state``) and the
    validation score, as scikit-learn's SGD estimators and MLPs compute them."""

    #: Whether the early-stopping split, rather than the weights' check, refuses
    #: all-zero sample weights (scikit-learn's SGD).
    _zero_weights_to_split = False

    #: The error of an early-stopping split leaving fewer than 2 validation rows.
    _too_small_validation = ("validation_fraction={fraction} leaves {rows} sample(s) for "
                             "validation: too few for early stopping.")

    #: Whether both parts keep the rows in their order (scikit-learn's SGD: a validation
    #: mask) or take them in the split's shuffled order (its MLPs: ``train_test_split``).
    _split_keeps_order = True

    def _validation_split(self, X: Any, targets: np.ndarray, sample_weight: Any, y: Any,
                          restart: bool) -> tuple:
        """(X, X_val, targets, targets_val, sample_weight, y_val, sample_weight_val) of a
        ``fit`` (``restart``: a fresh one).

        scikit-learn's split: ``ShuffleSplit``, or ``StratifiedShuffleSplit`` on
        :meth:`_stratification`, drawn from :meth:`_split_random_state`, so that both
        pick the same rows. With :attr:`_split_keeps_order`, the rows of both parts keep
        their order (``shuffle=False`` then trains on the rows in the order given).
        """
        if not 0 < self.validation_fraction < 1:
            # scikit-learn's words for its SGD estimators (its MLPs accept 0.0 and fail
            # in train_test_split).
            raise InvalidParameterError(
                f"The 'validation_fraction' parameter of {type(self).__name__} must be a "
                f"float in the range (0.0, 1.0) when early_stopping=True. Got "
                f"{self.validation_fraction!r} instead.")
        stratify = self._stratification(y, targets)
        splitter = ShuffleSplit if stratify is None else StratifiedShuffleSplit
        train, validation = next(
            splitter(test_size=self.validation_fraction,
                     random_state=self._split_random_state(X.shape[1], restart))
            .split(np.zeros((X.shape[0], 1)), stratify)
        )
        if self._split_keeps_order:
            train, validation = np.sort(train), np.sort(validation)
        if sample_weight is not None and not np.any(sample_weight[validation] > 0):
            raise ValueError("The sample weights for validation set are all zero, consider "
                             "using a different random state.")
        if validation.shape[0] < 2:
            raise ValueError(self._too_small_validation.format(
                fraction=self.validation_fraction, rows=validation.shape[0]))
        y = np.asarray(y)
        weights = (None, None) if sample_weight is None else (
            sample_weight[train], sample_weight[validation])
        return (X[train], X[validation], targets[train], targets[validation], weights[0],
                y[validation], weights[1])

    def _split_random_state(self, n_features: int, restart: bool) -> Any:
        """What the split draws from: ``random_state`` itself, as scikit-learn's SGD
        estimators (a ``RandomState`` is drawn from before the shuffles, as theirs)."""
        return self.random_state

    def _stratification(self, y: Any, targets: np.ndarray) -> Any:
        """The labels the early-stopping split keeps in proportion: none (regressors);
        classifiers override it."""
        return None

    def _validation_score(self, X: Any, y: Any, sample_weight: Any) -> float:
        """The mixins' :meth:`score` (accuracy or R²) on the validation rows, weighted as
        scikit-learn weighs them, from one prediction.

        The rows went through ``validate_data`` with the training data: their feature
        names are gone, which ``predict`` would report at every epoch.
        """
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="X does not have valid feature names")
            prediction = self.predict(X)
        if is_classifier(self):
            return float(accuracy_score(y, prediction, sample_weight=sample_weight))
        if not np.isfinite(prediction).all():
            # The optimizer stops on a non-finite score as on a diverged loss.
            return math.nan
        return float(r2_score(y, prediction, sample_weight=sample_weight))
