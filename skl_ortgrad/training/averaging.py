r"""Averaged SGD (scikit-learn's ``average``): the running average of the weights after
every update, counted per sample, from the ``start``-th sample on.

After a batch of :math:`n` rows starting at sample :math:`t`, the rows
:math:`t .. t + n - 1` at or beyond :math:`a` (``start``) count:
:math:`k = \min(n, \max(0, t + n - a))`, :math:`c \leftarrow c + k`,
:math:`\bar w \leftarrow \bar w + (w - \bar w)\, k / c`. With one-row batches it is
scikit-learn's average exactly.
"""

from __future__ import annotations

import numpy as np

from skl_ortgrad.training.state import TrainingState


class Averager:
    """Fold the weights of ``state`` into its running average after each batch.

    Parameters
    ----------
    state : TrainingState
        Its ``average`` (started here from the current weights when it has none: averaging
        switched on after training started starts now) and ``average_count``.
    start : bool or int
        ``average``: True averages from the first sample, an int from that sample.
    """

    def __init__(self, state: TrainingState, start: bool | int) -> None:
        self._state = state
        self._start = 1 if start is True else int(start)
        if len(state.average) != len(state.weights):
            state.average = [w.copy() for w in state.weights]
            state.average_count = 0
        self._triples = [(a, w, np.empty_like(w))
                         for a, w in zip(state.average, state.weights, strict=True)]

    def __call__(self, t: int, n: int) -> None:
        """Fold in the weights after a batch of ``n`` rows that started at sample ``t``."""
        k = min(n, max(0, t + n - self._start))
        if not k:
            return
        self._state.average_count += k
        share = k / self._state.average_count
        for a, w, tmp in self._triples:
            np.subtract(w, a, out=tmp)
            np.multiply(tmp, share, out=tmp)
            np.add(a, tmp, out=a)
