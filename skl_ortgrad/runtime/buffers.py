"""Arrays laid one after another in one buffer.

The weights, the gradients and the optimizer's states of a model are allocated this way,
so that an elementwise update can run once over all of them through one 1-D view
(:func:`contiguous_span`) instead of once per weight: an MLP's Adam step is a dozen numpy
calls, each a microsecond or more whatever its size, and a 100-128-10 MLP has four weights
(measured: 52 µs per batch per weight set, a sixth of an epoch at batch 200). Each array
stays an ordinary C-contiguous array that onnxruntime can borrow.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np
from numpy.lib.stride_tricks import as_strided


def packed_zeros(shapes: Sequence[tuple[int, ...]], dtype: np.dtype | type) -> list[np.ndarray]:
    """Zero arrays of ``shapes``, consecutive views of one buffer."""
    # Python integers: numpy's prod and cumsum cost more than the rest on small models.
    sizes = [math.prod(shape) for shape in shapes]
    buffer = np.zeros(sum(sizes), dtype=dtype)
    ends = itertools.accumulate(sizes)
    return [buffer[end - size:end].reshape(shape)
            for size, end, shape in zip(sizes, ends, shapes, strict=True)]


def packed_zeros_like(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Zero arrays shaped and typed as ``arrays``, consecutive views of one buffer
    (separate arrays when their dtypes differ)."""
    dtypes = {np.asarray(a).dtype for a in arrays}
    if len(dtypes) != 1:
        return [np.zeros_like(a, order="C") for a in arrays]
    return packed_zeros([np.shape(a) for a in arrays], dtypes.pop())


def packed_copies(arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Copies of ``arrays``, packed as :func:`packed_zeros_like` packs."""
    copies = packed_zeros_like(arrays)
    for copy, array in zip(copies, arrays, strict=True):
        np.copyto(copy, array)
    return copies


def contiguous_span(arrays: Sequence[np.ndarray]) -> np.ndarray | None:
    """One 1-D view over ``arrays`` if they lie one after another in memory (C order, one
    dtype, no gap: :func:`packed_zeros`), else None; writing through it writes them."""
    if not arrays or not all(isinstance(array, np.ndarray) for array in arrays):
        return None
    first = arrays[0]
    owner, address, dtype = _owner(first), first.ctypes.data, first.dtype
    for array in arrays:
        # One owner: two allocations may also happen to be adjacent.
        if (array.dtype != dtype or not array.flags.c_contiguous
                or not array.flags.writeable or array.ctypes.data != address
                or _owner(array) is not owner):
            return None
        address += array.nbytes
    size = sum(array.size for array in arrays)
    return as_strided(first, shape=(size,), strides=(dtype.itemsize,))


def _owner(array: np.ndarray) -> np.ndarray:
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array
