"""What stops an epoch in the middle, and the message a divergence gives the user.

An epoch runner raises :class:`Diverged` at a non-finite batch loss (before any update) or
non-finite weights at the end of an epoch, and :class:`TornUpdate` when any other exception
interrupted an update half-way; the trainer restores the start of the epoch in both cases
and raises :class:`~skl_ortgrad.ConvergenceError` (with :func:`divergence_message`) or the
original exception. On features read as given, unchecked, a non-finite loss (or no
program that reads them) raises :class:`UncheckedRows` instead, for the caller to check
them and run the call again. An estimator, which keeps nothing of a failing call, words
the message with :func:`rolled_back_message`.
"""

from __future__ import annotations


class Diverged(Exception):
    """A batch produced a non-finite loss (or the epoch non-finite weights).

    Parameters
    ----------
    batch : int
        The batch of the epoch.
    loss : float
        The non-finite value.
    eta : float
        The batch's learning rate.
    last : float or None
        The mean loss of the previous batch.
    what : str
        What was not finite, for the message.
    """

    def __init__(
        self, batch: int, loss: float, eta: float, last: float | None,
        what: str = "the loss is",
    ) -> None:
        super().__init__(batch, loss, eta)
        self.batch, self.loss, self.eta, self.last, self.what = batch, loss, eta, last, what


class TornUpdate(Exception):
    """An exception (its ``__cause__``) interrupted an update half-way."""


class UncheckedRows(Exception):
    """The call cannot train on its features as given: dense rows not checked, which
    only the linear training program reads (casting each batch where the model computes
    in another type).

    Raised before any update where no such program runs the call (``permanent``: none
    will for this model and configuration), and at a non-finite loss of the program,
    where a NaN or infinity of ``X`` (or a value beyond float32) would not be told from a
    divergence. The estimator puts everything back, checks and casts ``X``, and runs the
    call again: the result, or the error, of a call on checked input.
    """

    def __init__(self, permanent: bool) -> None:
        super().__init__(permanent)
        self.permanent = permanent


def mean(loss: float, total: float) -> float:
    """A mean loss from its weighted sum (0 for rows weighing nothing)."""
    return loss / total if total else 0.0


def _shown(loss: float | None) -> str:
    return "none" if loss is None else f"{loss:.6g}"


#: How the trainer's message of a divergence ends: what it kept, what to do.
KEPT = ("The weights of the last epoch that ended with a finite loss were kept; use a "
        "smaller learning rate.")


def divergence_message(diverged: Diverged, epoch: int, last_epoch: float | None) -> str:
    """The message of a divergence at ``epoch`` (1-based), ``last_epoch`` the mean loss
    of the last complete epoch (None before the first); it ends with :data:`KEPT`."""
    return (
        f"Training diverged at epoch {epoch}, batch {diverged.batch}: {diverged.what} "
        f"{diverged.loss} with learning rate eta={diverged.eta:.4g}. Last finite loss: "
        f"{_shown(diverged.last)} (mean of the previous batch), {_shown(last_epoch)} "
        f"(mean of the last complete epoch). {KEPT}"
    )


def rolled_back_message(message: str) -> str:
    """The trainer's divergence ``message`` as an estimator says it, which keeps nothing
    of the call (a message of the estimator's own, not ending with :data:`KEPT`, is
    returned as is)."""
    if not message.endswith(KEPT):
        return message
    return message.removesuffix(KEPT) + (
        "The estimator is as it was before the call; the last finite weights are the "
        "error's last_finite_weights; use a smaller learning rate.")
