"""Ctrl-C held until a safe point: the end of the mini-batch being computed (the trainer's
interrupts, :class:`~skl_ortgrad.training.trainer.Trainer`), or the end of a call's set-up
or publication (the estimators' ``fit`` and ``partial_fit``)."""

from __future__ import annotations

import signal
import threading
from typing import Any


class DeferredInterrupt:
    """Hold Ctrl-C (SIGINT) until the code it covers reaches a safe point.

    A KeyboardInterrupt raised by Python's default handler lands between any two
    bytecodes, possibly between the updates of two weights, or of a weight and its
    momentum. Snapshotting the weights before every update would make any interruption
    recoverable, but costs a copy of every weight and every state per batch (measured:
    2 µs per array, 4-5% of a linear model's step, 10-20% of an MLP's with momentum).
    Deferring the signal costs one attribute check per batch: the handler only records
    the interrupt and the loop raises KeyboardInterrupt at the next batch boundary. A
    second Ctrl-C raises at once (an escape from a batch that never ends); an update it
    tears is rolled back to the start of the epoch. The handler is installed only in
    the main thread and only over Python's default handler: a handler of the user's
    stays in charge.

    Blocks nest: an inner block (the trainer's loop inside an estimator's call) shares
    the outer one's :attr:`pending`, and leaves the held interrupt to the outer block,
    which raises it when it ends: the estimator has then published what the completed
    batches trained.
    """

    def __init__(self) -> None:
        self._pending = False
        self._previous: Any = None
        self._outer: DeferredInterrupt | None = None

    @property
    def pending(self) -> bool:
        """Whether a Ctrl-C is held (in this block or the one it is nested in)."""
        return self._outer.pending if self._outer is not None else self._pending

    def _handler(self, signum: int, frame: Any) -> None:
        if self._pending:
            raise KeyboardInterrupt
        self._pending = True

    def __enter__(self) -> DeferredInterrupt:
        if threading.current_thread() is threading.main_thread():
            current = signal.getsignal(signal.SIGINT)
            if current is signal.default_int_handler:
                self._previous = signal.signal(signal.SIGINT, self._handler)
            elif isinstance(getattr(current, "__self__", None), DeferredInterrupt):
                self._outer = current.__self__
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
            self._previous = None
        if self._pending and exc_type is None:
            # The block ended (last batch, early stop, publication) while Ctrl-C was
            # held: honour it.
            raise KeyboardInterrupt
