"""The seed API's optimizer (onnxcustom's ``OrtGradientForwardBackwardOptimizer``).

:class:`OrtGradientForwardBackwardOptimizer` is the :class:`~skl_ortgrad.training.trainer.
Trainer` as a scikit-learn estimator, for code written against the seed API: the same
constructor, plus ``get_params``/``set_params`` (so ``clone`` and grid searches over its
parameters work) and the ``learning_rate``, ``learning_loss`` and ``learning_penalty``
objects of seed 004. The package's own estimators use the plain :class:`Trainer`.
"""

from __future__ import annotations

from typing import Any

from sklearn.base import BaseEstimator

from skl_ortgrad._params import MemoizedParamNames, param_names
from skl_ortgrad.training.trainer import Trainer

__all__ = ["OrtGradientForwardBackwardOptimizer"]


class OrtGradientForwardBackwardOptimizer(Trainer, MemoizedParamNames, BaseEstimator):
    """Train the weights of an ONNX model with mini-batch gradient descent: the seed
    API's estimator over :class:`~skl_ortgrad.training.trainer.Trainer`, whose parameters,
    attributes and methods (``fit``, ``partial_fit``, ``get_state``, ``set_state``,
    ``get_trained_onnx``, ``losses``, ``score``...) it has.

    ``set_params`` sets top-level parameters directly, as scikit-learn does, without the
    ``get_params(deep=True)`` of every nested object that costs more than a small
    training batch; nested ``object__param`` keys go through scikit-learn.
    """

    def set_params(self, **params: Any) -> OrtGradientForwardBackwardOptimizer:
        """Set parameters (scikit-learn's ``set_params``, with a fast path)."""
        if set(params) <= set(param_names(type(self))):
            return self.configure(**params)
        return super().set_params(**params)
