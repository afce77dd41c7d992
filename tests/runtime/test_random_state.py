"""check_random_state: scikit-learn's generators, without the entropy draw; rewinder."""

import sys

import numpy as np
import pytest
import sklearn.utils

from skl_ortgrad.runtime.random_state import blank_random_state, check_random_state, rewinder


def _same_stream(a: np.random.RandomState, b: np.random.RandomState) -> None:
    first, second = a.get_state(), b.get_state()
    assert first[0] == second[0]
    np.testing.assert_array_equal(first[1], second[1])
    assert first[2:] == second[2:]
    np.testing.assert_array_equal(a.permutation(1000), b.permutation(1000))
    # The Gaussian cache is part of the legacy state.
    assert a.standard_normal() == b.standard_normal()
    assert a.get_state()[3:] == b.get_state()[3:]
    np.testing.assert_array_equal(a.randint(0, 2**31 - 1, 50), b.randint(0, 2**31 - 1, 50))


@pytest.mark.parametrize("seed", [0, 1, 42, 2**32 - 1, np.int32(7), np.uint64(123), True])
def test_integer_seed_gives_scikit_learns_stream(seed):
    generator = check_random_state(seed)
    assert type(generator) is np.random.RandomState
    _same_stream(sklearn.utils.check_random_state(seed), generator)


def test_each_call_is_a_new_generator():
    first, second = check_random_state(3), check_random_state(3)
    assert first is not second
    first.permutation(10)
    _same_stream(np.random.RandomState(3), second)


def test_none_and_generators_as_scikit_learn():
    assert check_random_state(None) is np.random.mtrand._rand
    generator = np.random.RandomState(5)
    assert check_random_state(generator) is generator


@pytest.mark.parametrize("seed", [-1, 2**32])
def test_out_of_range_seed_same_error(seed):
    with pytest.raises(ValueError, match="Seed must be between 0 and 2\\*\\*32 - 1"):
        check_random_state(seed)


def test_other_seed_types_scikit_learns_error():
    with pytest.raises(ValueError, match="cannot be used to seed"):
        check_random_state("seed")


def test_blank_generator_takes_a_state():
    source = np.random.RandomState(11)
    source.standard_normal()  # a cached Gaussian in the state
    generator = blank_random_state()
    generator.set_state(source.get_state())
    _same_stream(source, generator)


@pytest.mark.parametrize("generator", [
    lambda: np.random.RandomState(11),
    lambda: check_random_state(11),
    lambda: np.random.RandomState(np.random.PCG64(11)),  # through get_state
], ids=["MT19937", "blank MT19937", "PCG64"])
@pytest.mark.parametrize("draws", [10, 700, 5000])  # within the key, past one or several
def test_rewinder_undoes_the_draws_since(generator, draws):
    def advanced():
        started = generator()
        started.permutation(37)
        return started

    rewound = advanced()
    rewind = rewinder(rewound)
    for _ in range(2):  # twice from the same point
        rewound.permutation(draws)
        rewound.randint(0, 100, draws)
        rewind()
        untouched = advanced()
        np.testing.assert_array_equal(rewound.permutation(1000), untouched.permutation(1000))
        assert rewound.random_sample() == untouched.random_sample()
        rewind()


def test_rewinder_keeps_its_bit_generator_alive():
    """The copy goes back into the generator's own memory: the rewinder holds it."""
    generator = np.random.RandomState(2)
    bit_generator = generator._bit_generator
    references = sys.getrefcount(bit_generator)
    rewind = rewinder(generator)
    assert sys.getrefcount(bit_generator) == references + 1
    del generator
    rewind()
    np.testing.assert_array_equal(np.random.RandomState(2).get_state()[1],
                                  bit_generator.state["state"]["key"])
