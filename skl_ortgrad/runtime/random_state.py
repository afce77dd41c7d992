"""Random generators seeded without drawing entropy first.

``numpy.random.RandomState(seed)`` builds its ``MT19937`` from fresh operating-system
entropy (a ``SeedSequence`` hashed into 624 words) and then overwrites that state with the
legacy seeding of ``seed``: 87 µs per generator on the CI machine kind, of which the legacy
seeding is 1.5 µs. Every small ``fit`` builds one, so the discarded draw was about 5% of
a breast cancer fit. Here the first state comes from a constant seed sequence instead,
then :meth:`numpy.random.RandomState.seed` seeds it as ``RandomState(seed)`` does: the
same stream, 32 µs.

:func:`rewinder` saves a generator's state to put it back later: ``get_state`` takes
34 µs (numpy copies the 624 words of ``MT19937`` one by one), which a breast cancer fit
paid at every call that runs several epochs at once (a tenth of a millisecond a fit); a
copy of the words where numpy's C code keeps them takes 1 µs.
"""

from __future__ import annotations

import ctypes
import numbers
from collections.abc import Callable
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
#: ``MT19937``'s state as numpy's C code lays it out: the 624 words of its key, then the
#: position in it (an ``int``).
_MT19937_WORDS = ctypes.c_uint32 * 625


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


def rewinder(generator: RandomState) -> Callable[[], None]:
    """A function that puts ``generator`` back in the state it has now, undoing the
    draws made since: of permutations, integers and uniform values (a legacy Gaussian
    draw keeps a second value aside, which is not put back for an ``MT19937``).

    For the ``MT19937`` of a ``RandomState`` (what ``check_random_state`` gives), its
    words are copied from and back to numpy's C structure (see the module); for any
    other bit generator, through ``get_state`` and ``set_state``.
    """
    bit_generator = getattr(generator, "_bit_generator", None)
    if type(bit_generator) is not MT19937:
        state = generator.get_state()
        return lambda: generator.set_state(state)
    # Under the generator's lock, as get_state and the draws (numpy's global generator
    # may be drawn from by other threads).
    with bit_generator.lock:
        saved = _words(bit_generator).copy()

    def rewind() -> None:
        # The view is made again from the bit generator, which the closure keeps alive.
        with bit_generator.lock:
            _words(bit_generator)[...] = saved

    return rewind


def _words(bit_generator: MT19937) -> np.ndarray:
    """A view of the state of ``bit_generator`` (:data:`_MT19937_WORDS`)."""
    return np.frombuffer(_MT19937_WORDS.from_address(bit_generator.ctypes.state_address),
                         dtype=np.uint32)
