"""Exceptions raised by skl_ortgrad."""


from typing import Any


class ConvergenceError(ValueError):
    """Training produced a NaN or infinite loss, or weights beyond the finite range.

    An estimator that raises it is exactly as it was before the call (unfitted after a
    first ``fit``): a failed call changes nothing, so ``predict`` works as before and
    training can resume with a smaller learning rate. What training reached is in
    :attr:`last_finite_weights`. The seed API's optimizer keeps the weights of the last
    epoch that ended with a finite loss.

    Attributes
    ----------
    last_finite_weights : dict of str to numpy.ndarray, or None
        For an estimator's error: the weights (by the name of the ONNX initializer, as
        the model serves them) at the start of the epoch that diverged, the last ones
        that were finite; None when the error comes from elsewhere.
    """

    def __init__(self, message: str,
                 last_finite_weights: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.last_finite_weights = last_finite_weights


class PickleVersionWarning(UserWarning):
    """An estimator pickled by another version of skl_ortgrad was loaded.

    The state format is the same, so it loads; for models that must outlive a version,
    store ``to_onnx()`` instead.
    """
