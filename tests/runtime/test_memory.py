"""Large arrays in new memory of small pages."""

import mmap
import pickle
import weakref

import numpy as np
import pytest

from skl_ortgrad.runtime import memory
from skl_ortgrad.runtime.memory import POPULATE_BYTES, populated_empty, small_page_zeros


def _mapping(array):
    """The memory map under ``array``, or None when numpy allocated it."""
    while isinstance(array, np.ndarray):
        array = array.base
    array = array.obj if isinstance(array, memoryview) else array
    return array if isinstance(array, mmap.mmap) else None


@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_large_array_is_mapped_as_np_empty_lays_it_out(order, dtype, monkeypatch):
    monkeypatch.setattr(memory, "_kept", [])  # a new map, not one kept from before
    shape = (POPULATE_BYTES // np.dtype(dtype).itemsize // 8 + 3, 8)
    array = populated_empty(shape, dtype, order)
    expected = np.empty(shape, dtype=dtype, order=order)
    assert _mapping(array) is not None
    assert array.shape == shape and array.dtype == dtype and array.flags.writeable
    assert array.strides == expected.strides
    # Mapped memory starts as zeros; every cell is its own.
    assert not array.any()
    values = np.arange(array.size, dtype=dtype).reshape(shape)
    array[...] = values
    np.testing.assert_array_equal(array, values)
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(array)), values)


def test_a_small_array_is_numpy_s():
    array = populated_empty((3, 4), np.float32)
    assert _mapping(array) is None and array.shape == (3, 4) and array.dtype == np.float32


def test_without_map_populate_numpy_allocates(monkeypatch):
    monkeypatch.delattr(memory.mmap, "MAP_POPULATE", raising=False)
    array = populated_empty((POPULATE_BYTES // 4,), np.float32)
    assert _mapping(array) is None and array.shape == (POPULATE_BYTES // 4,)


@pytest.mark.parametrize("allocate", ["populated_empty", "small_page_zeros"])
def test_the_map_is_released_with_the_array(allocate, monkeypatch):
    monkeypatch.setattr(memory, "KEPT_MAPPINGS", 0)
    array = getattr(memory, allocate)((POPULATE_BYTES,), np.uint8)
    mapping = weakref.ref(_mapping(array))
    view = array[10:]
    del array
    assert mapping() is not None  # a view keeps it
    del view
    assert mapping() is None


def test_the_last_map_serves_the_next_array_of_its_size_once_unused(monkeypatch):
    """A map of at most REUSE_BYTES is kept when its array goes, and given to the next
    request of the same size (a stream of blocks of one shape maps once); never while a
    view of its array lives, and a request of another size maps anew."""
    monkeypatch.setattr(memory, "_kept", [])
    shape = (POPULATE_BYTES // 4,)
    first = populated_empty(shape, np.float32)
    first[:] = 7.0
    mapping = _mapping(first)
    view = first[5:]
    del first
    second = populated_empty(shape, np.float32)  # a view of the first lives: a new map
    second_mapping = _mapping(second)
    assert second_mapping is not mapping and not second.any()
    del view, second
    third = populated_empty((POPULATE_BYTES // 8, 2), np.float32, "F")  # the same size
    assert _mapping(third) is second_mapping  # the last map made, unused now
    del third
    other = populated_empty((POPULATE_BYTES // 4 + 1,), np.float32)
    kept = _mapping(other)
    del other
    again = populated_empty((POPULATE_BYTES // 4 + 1,), np.float32)
    assert _mapping(again) is kept


def test_a_smaller_array_takes_the_smallest_unused_map_that_holds_it(monkeypatch):
    """A request takes the smallest unused kept map that holds it, at most twice its
    size (the stored values of sparse blocks vary in number from block to block): its
    array has the requested shape; a map more than twice its size is left."""
    monkeypatch.setattr(memory, "_kept", [])
    words = POPULATE_BYTES // 4
    large, medium = populated_empty((3 * words,), np.float32), populated_empty(
        (2 * words,), np.float32)
    large_map, medium_map = _mapping(large), _mapping(medium)
    del large, medium
    smaller = populated_empty((words // 2 + 5, 2), np.float32)
    assert _mapping(smaller) is medium_map and smaller.shape == (words // 2 + 5, 2)
    smaller[:] = 1.0
    # The medium map is in use; the large one is more than twice this request.
    small = populated_empty((words,), np.float32)
    assert _mapping(small) not in (large_map, medium_map)


def test_an_array_beyond_reuse_bytes_is_numpy_s(monkeypatch):
    monkeypatch.setattr(memory, "REUSE_BYTES", POPULATE_BYTES)
    array = populated_empty((POPULATE_BYTES // 4 + 1,), np.float32)
    assert _mapping(array) is None and array.shape == (POPULATE_BYTES // 4 + 1,)


# -- small_page_zeros ---------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.bool_])
def test_a_large_array_of_zeros_is_mapped_on_small_pages(dtype, monkeypatch):
    advised = []

    class Recording(mmap.mmap):
        def madvise(self, option, *args):
            advised.append(option)
            return super().madvise(option, *args)

    monkeypatch.setattr(memory.mmap, "mmap", Recording)
    shape = (POPULATE_BYTES // np.dtype(dtype).itemsize // 8 + 3, 8)
    array = small_page_zeros(shape, dtype)
    assert isinstance(_mapping(array), Recording)
    assert advised == [mmap.MADV_NOHUGEPAGE]
    assert array.shape == shape and array.dtype == dtype and array.flags.writeable
    assert array.flags.c_contiguous and not array.any()
    array[-1, -1] = 1
    assert array.sum() == 1


def test_small_zeros_or_no_madvise_are_numpy_s(monkeypatch):
    small = small_page_zeros((3, 4), np.float32)
    assert _mapping(small) is None and small.shape == (3, 4) and not small.any()
    monkeypatch.delattr(memory.mmap, "MADV_NOHUGEPAGE", raising=False)
    large = small_page_zeros((POPULATE_BYTES // 4,), np.float32)
    assert _mapping(large) is None and large.shape == (POPULATE_BYTES // 4,)
    assert not large.any()
