"""What a trainer computes on data without training it: the loss of every row, their
weighted mean, and the score (the opposite of that mean, scikit-learn's convention)."""

from __future__ import annotations

from typing import Any

import numpy as np

from skl_ortgrad.training.caches import transient


class EvaluatesLosses:
    r"""The losses of a :class:`~skl_ortgrad.training.trainer.Trainer` on data, at its
    current weights: :math:`s_i \ell_i` for every row (:math:`s_i = 1` without sample
    weights), computed by the engines' row-loss model.

    Reads the trainer's ``cast``, ``setup``, ``weights_to_train_``, ``model_dtype`` and
    ``weights_``.
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
