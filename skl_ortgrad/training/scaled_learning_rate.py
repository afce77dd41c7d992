"""Where release 0.1.0 kept :class:`~skl_ortgrad.optim.scaled.ScaledLearningRate`: its
pickles name the class here."""

from skl_ortgrad.optim.scaled import ScaledLearningRate

__all__ = ["ScaledLearningRate"]
