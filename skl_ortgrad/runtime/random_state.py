"""Random generators seeded without drawing entropy first.

``numpy.random.RandomState(seed)`` builds its ``MT19937`` from fresh operating-system
entropy (a ``SeedSequence`` hashed into 624 words) and then overwrites that state with the
legacy seeding of ``seed``: 87 µs per generator on the CI machine kind, of which the legacy
seeding is 1.5 µs. Every small ``fit`` builds one, so the discarded draw was about 5% of
a breast cancer fit. Here the first state comes from a constant seed sequence instead,
then :meth:`numpy.random.RandomState.seed` seeds it as ``RandomState(seed)`` does: the
same stream, 32 µs.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np
from numpy.random import MT19937, RandomState
from numpy.random.bit_generator import ISeedSequence
from sklearn.utils import check_random_state as sklearn_check_random_state


class _Overwritten(ISeedSequence):
    """A seed sequence for a state that is seeded again at once: all zeros."""

    def generate_state(self, n_words: int, dtype: Any = np.uint32) -> np.ndarray:
        return np.zeros(n_words, dtype=dtype)


_OVERWRITTEN = _Overwritten()


def blank_random_state() -> RandomState:
    """A ``RandomState`` whose state the caller sets at once (``seed``, ``set_state``)."""
    return RandomState(MT19937(_OVERWRITTEN))


def check_random_state(seed: Any) -> RandomState:
    """:func:`sklearn.utils.check_random_state`: None gives numpy's global generator, an
    integer a new ``RandomState(seed)`` (the same stream, without the entropy draw), a
    ``RandomState`` itself; anything else raises scikit-learn's error."""
    if isinstance(seed, numbers.Integral):
        generator = blank_random_state()
        generator.seed(seed)
        return generator
    return sklearn_check_random_state(seed)
