"""Exceptions raised by skl_ortgrad."""


class ConvergenceError(ValueError):
    """Training produced a NaN or infinite loss.

    The estimator or optimizer that raises it keeps the weights of the last epoch that
    ended with a finite loss (the weights it had before the call when none did), so it
    stays usable: ``predict`` works and training can resume with a smaller learning rate.
    """
