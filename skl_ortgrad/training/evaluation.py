"""What a trainer computes on data without training it: the loss of every row, their
weighted mean, the score (the opposite of that mean, scikit-learn's convention), and the
value the ``tol`` rule watches on validation data after an epoch."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from skl_ortgrad.training.caches import transient
from skl_ortgrad.training.divergence import Diverged


class EvaluatesLosses:
    r"""The losses of a :class:`~skl_ortgrad.training.trainer.Trainer` on data, at its
    current weights: :math:`s_i \ell_i` for every row (:math:`s_i = 1` without sample
    weights), computed by the engines' row-loss model.

    Reads the trainer's ``cast``, ``setup``, ``weights_to_train_``, ``model_dtype`` and
    ``weights_``; the validation after an epoch also its learning rate, losses, epoch
    count and ``state_``.
    """

    def losses(self, X: Any, y: Any, sample_weight: Any = None) -> np.ndarray:
        r"""The loss of every row, :math:`s_i \ell_i` (:math:`s_i = 1` without sample
        weights), with the current weights: an array of shape ``(n_samples,)``."""
        arrays, weighted = self.cast(X, y, sample_weight)
        if not isinstance(arrays[0], np.ndarray):
            arrays[0] = arrays[0].toarray()
        return transient(self).engines.row_losses(
            self.setup(), self.weights_to_train_, self.model_dtype(), arrays, weighted,
            self.weights_)

    def _mean_loss(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        r"""Weighted mean loss :math:`\sum_i s_i \ell_i / \sum_i s_i` on ``(X, y)``."""
        per_row = self.losses(X, y, sample_weight)
        total = float(np.sum(sample_weight)) if sample_weight is not None else len(per_row)
        return float(np.sum(per_row, dtype=np.float64)) / total if total else 0.0

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """The opposite of the weighted mean of :meth:`losses` (higher is better,
        scikit-learn's convention)."""
        return -self._mean_loss(X, y, sample_weight)

    def _validation(self, X_val: Any, y_val: Any, val_scorer: Any,
                    snapshot: dict[str, Any], last_batch: int, loss: float) -> float:
        """The monitored value of the validation data after an epoch (whose last batch
        is ``last_batch``, its mean loss ``loss``): the validation data's mean loss
        (recorded in ``validation_losses_``) or the opposite of ``val_scorer()``
        (recorded in ``validation_scores_``).

        Raises
        ------
        Diverged
            For a score that is not finite (finite losses, but predictions beyond the
            dtype's range), after undoing the epoch (back to ``snapshot``).
        """
        if val_scorer is None:
            value = self._mean_loss(X_val, y_val)
            self.validation_losses_.append(value)
            return value
        score = float(val_scorer())
        if not math.isfinite(score):
            eta = self.learning_rate_.eta(self.t_)
            self.train_losses_.pop()
            self.epochs_completed_ -= 1
            self.state_.restore(snapshot)
            raise Diverged(last_batch, score, eta, loss, what="the validation score is")
        self.validation_scores_.append(score)
        return -score
