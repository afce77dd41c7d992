"""What training shows while it runs, and the line it ends with.

Whatever ``verbose``, every epoch of ``fit``, every ``partial_fit`` call and the end of
every ``fit`` are logged at INFO on the ``skl_ortgrad`` logger (this module's logger is
its child), and the per-batch detail of ``verbose >= 2`` at DEBUG. ``verbose`` decides
what is shown on top of that:

* where a progress bar can be drawn (stderr is a terminal, or tqdm draws widgets in a
  Jupyter notebook), ``verbose >= 1`` draws a bar over the epochs of ``fit`` with the
  loss (and the validation score or loss) as its postfix; it ends at the epochs actually
  run (fewer than ``max_iter`` when training stopped early) and stays on screen, and the
  summary line follows it;
* anywhere else (a log file, a pipe, a CI job) there is no bar and no carriage return:
  every epoch line and the summary are written to stderr as plain lines;
* a line that the logging configuration already writes to the console (a handler on
  stderr or stdout taking INFO records) is not written a second time.

``partial_fit`` runs one epoch per call, so a bar per call would draw one bar per chunk
of a stream: it draws none and writes one line per call (its epoch, rows, time and loss).
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from tqdm.asyncio import tqdm as _text_tqdm
from tqdm.auto import tqdm

logger = logging.getLogger(__name__)

# tqdm.auto's class is tqdm.asyncio's in a console and a subclass of the notebook widget
# inside a Jupyter kernel with ipywidgets: a widget writes no carriage return to stderr.
_WIDGETS = tqdm is not _text_tqdm

# Why a fit stopped, the start of its summary line.
CONVERGED = "converged"
EARLY_STOPPING = "early stopping"
MAX_ITER = "max_iter reached"
INTERRUPTED = "interrupted"
DIVERGED = "diverged"


def draws_bars() -> bool:
    """Whether progress bars can be drawn: stderr is a terminal, or tqdm draws widgets."""
    return _WIDGETS or (sys.stderr is not None and sys.stderr.isatty())


def _logged_to_console(level: int) -> bool:
    """Whether logging writes a record of ``level`` of this module to stderr or stdout.

    Walks the handlers the record would reach, as :meth:`logging.Logger.callHandlers`
    does: those of this logger and of its ancestors up to the first that does not
    propagate.
    """
    if not logger.isEnabledFor(level):
        return False
    console = (sys.stderr, sys.stdout)
    current: logging.Logger | None = logger
    while current is not None:
        for handler in current.handlers:
            if level >= handler.level and getattr(handler, "stream", None) in console:
                return True
        current = current.parent if current.propagate else None
    return False


def _text(shown: dict[str, str]) -> str:
    """``{"loss": "0.1"}`` as ``loss=0.1``."""
    return ", ".join(f"{key}={value}" for key, value in shown.items())


def emit(display: bool, level: int, message: str, *args: Any) -> None:
    """Log ``message % args`` at ``level``; when ``display``, also write it to stderr as a
    plain line, unless logging already writes it there."""
    logger.log(level, message, *args)
    if display and not _logged_to_console(level):
        print(message % args, file=sys.stderr, flush=True)


class TrainingProgress:
    """The progress bar, the epoch lines and the summary line of one training call.

    Parameters
    ----------
    verbose : int
        The optimizer's ``verbose``.
    epochs : int
        Most epochs the call may run (``max_iter`` for ``fit``, 1 for ``partial_fit``).
    partial : bool
        Whether the call is a ``partial_fit``: no bar, no epoch line, and one line at
        the end instead of the summary.
    first_epoch : int
        Number of the call's first epoch, counted since training started.
    n_rows : int
        Rows of the training data.
    prefix : str
        Written before every epoch line (the seed's optimizer names itself there, as
        onnxcustom's does: ``[OrtGradientForwardBackwardOptimizer._iteration]``).

    Attributes
    ----------
    silent : bool
        ``verbose`` 0 and the package's logger off at INFO: nothing the call reports is
        seen, so callers may skip formatting the epochs' values.
    """

    def __init__(
        self, verbose: int, epochs: int, partial: bool, first_epoch: int, n_rows: int,
        prefix: str = "",
    ) -> None:
        self.verbose = int(verbose)
        self.prefix = prefix
        self.partial = partial
        self.first_epoch = first_epoch
        self.n_rows = n_rows
        self.last: dict[str, str] = {}
        # Nothing shown and nothing logged: the epochs need no formatted values (a few µs
        # each, on epochs of under 100 µs for a small dataset).
        self.silent = not self.verbose and not logger.isEnabledFor(logging.INFO)
        self.start = time.perf_counter()
        # Created only when drawn: tqdm costs 0.1 ms even disabled, a tenth of a
        # partial_fit call on a small batch.
        self.bar = (
            tqdm(total=epochs, unit="epoch", file=sys.stderr)
            if self.verbose and not partial and draws_bars() else None
        )

    def epoch(self, number: int, shown: dict[str, str]) -> None:
        """Report the epoch that just ended: ``shown`` maps names to formatted values."""
        self.last = shown
        if self.partial:
            return
        if self.bar is None:
            emit(self.verbose >= 1, logging.INFO, "%sepoch %d: %s", self.prefix, number,
                 _text(shown))
            return
        logger.info("%sepoch %d: %s", self.prefix, number, _text(shown))
        self.bar.set_postfix(shown, refresh=False)
        self.bar.update()

    def close(self, reason: str, epochs: int) -> None:
        """Close the bar and write the summary: ``reason`` stopped it after ``epochs``."""
        seconds = time.perf_counter() - self.start
        if self.bar is not None:
            # The bar ends at the epochs run, at 100% whenever training stopped early.
            self.bar.total = self.bar.n
            self.bar.close()
        last = _text(self.last) or "loss=none"
        if self.partial:
            # A partial_fit that ran its one epoch reached its max_iter: it trained.
            reason = "trained" if reason == MAX_ITER else reason
            emit(self.verbose >= 1, logging.INFO, "partial_fit, epoch %d: %s on %d rows "
                 "in %.3g s, %s", self.first_epoch, reason, self.n_rows, seconds, last)
        else:
            emit(self.verbose >= 1, logging.INFO, "fit: %s after %d epoch(s) in %.3g s, "
                 "final %s", reason, epochs, seconds, last)


class BatchProgress:
    """``verbose >= 2``: the loss and learning rate of every batch of an epoch.

    Shown on a bar under the epochs' one (erased when the epoch ends) where bars are
    drawn, else written as DEBUG lines.
    """

    def __init__(self, n_batches: int, epoch: int) -> None:
        self.epoch = epoch
        self.bar = (
            tqdm(total=n_batches, unit="batch", leave=False, file=sys.stderr)
            if draws_bars() else None
        )

    def update(self, batch: int, loss: float, eta: float) -> None:
        """Report batch ``batch`` (0-based): its mean loss and learning rate."""
        if self.bar is None:
            emit(True, logging.DEBUG, "epoch %d, batch %d: loss=%.4g, eta=%.3g",
                 self.epoch, batch + 1, loss, eta)
            return
        self.bar.set_postfix(loss=f"{loss:.4g}", eta=f"{eta:.3g}", refresh=False)
        self.bar.update()

    def close(self) -> None:
        """Erase the bar."""
        if self.bar is not None:
            self.bar.close()
