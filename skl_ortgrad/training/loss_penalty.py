"""Where release 0.1.0 kept :class:`~skl_ortgrad.optim.loss_penalty.L2LossPenalty`: its
pickles name the class here."""

from skl_ortgrad.optim.loss_penalty import L2LossPenalty

__all__ = ["L2LossPenalty"]
