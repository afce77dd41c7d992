"""Everything one training call may change in an optimizer, to put back when it fails.

The optimizer restores the start of an epoch by itself on divergence and on an update
torn by an exception (:meth:`~skl_ortgrad.training.trainer.Trainer.set_checkpoint`). A
caller that wants a whole call to be one transaction (the estimators: a failed call
leaves them exactly as they were) needs more: the epochs completed before the failure,
the loss curves, the parameters the call set, and the shuffling generator, whose
permutations the call consumed.
"""

from __future__ import annotations

from typing import Any


class OptimizerSnapshot:
    """The state of an optimizer, taken before a training call.

    Parameters
    ----------
    optimizer : Trainer
        A fitted optimizer (it has ``weights_``).

    Notes
    -----
    Attributes are kept by reference except what a call mutates in place: the weight
    and learning-rate buffers (a checkpoint, copied back into the same buffers, which
    onnxruntime and the cached mini-batch loader borrow), the lists of losses and
    scores (copied), and the generator of the permutations (its state). The caches
    (engines, sessions) only grow with entries that stay valid, and are kept.
    """

    def __init__(self, optimizer: Any) -> None:
        self._optimizer = optimizer
        self._attributes = dict(optimizer.__dict__)
        # The training state is one mutable record: its fields (lists a call may
        # replace, such as a new rule's state) are kept by reference too.
        self._fields = dict(vars(optimizer.state_))
        self._checkpoint = optimizer.get_checkpoint()
        self._lists = {
            name: list(value) for name, value in self._attributes.items()
            if isinstance(value, list)
        }
        rng = self._attributes.get("_rng")
        self._rng_state = None if rng is None else rng.get_state()

    @property
    def weights(self) -> list:
        """The optimizer's weights when the snapshot was taken (copies)."""
        return self._checkpoint["weights"]

    def restore(self) -> None:
        """Put the optimizer back in the state it had when the snapshot was taken."""
        optimizer = self._optimizer
        optimizer.__dict__.clear()
        optimizer.__dict__.update(self._attributes)
        optimizer.__dict__.update({name: list(value) for name, value in self._lists.items()})
        vars(optimizer.state_).update(self._fields)
        optimizer.set_checkpoint(self._checkpoint)
        if self._rng_state is not None:
            self._attributes["_rng"].set_state(self._rng_state)
