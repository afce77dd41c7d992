"""check_random_state: scikit-learn's generators, without the entropy draw."""

import numpy as np
import pytest
import sklearn.utils

from skl_ortgrad.runtime.random_state import blank_random_state, check_random_state


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
