"""Exceptions raised by skl_ortgrad."""


class ConvergenceError(ValueError):
    """Training produced a NaN or infinite loss.

    The estimator or optimizer that raises it keeps the weights of the last epoch that
    ended with a finite loss (the weights it had before the call when none did), so it
    stays usable: ``predict`` works and training can resume with a smaller learning rate.
    """


class PickleVersionWarning(UserWarning):
    """An estimator pickled by another version of skl_ortgrad was loaded.

    The state format is the same, so it loads; for models that must outlive a version,
    store ``to_onnx()`` instead.
    """
