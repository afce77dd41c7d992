"""New memory for a large array that is written at once: small pages, mapped together.

numpy asks the kernel for transparent huge pages (``madvise``) on every allocation of
4 MiB or more. Where that memory is new to the process, the first write of each 2 MiB
page costs a fault that, on the virtual machines this project is measured on, takes
milliseconds: the 20 MB float32 cast of a 100k x 50 float64 ``X`` (what ``partial_fit``
trains on) took 40 to 50 ms to write instead of 3 when the allocator happened to reuse
memory the process had written before (measured: median 59 ms for the whole first
``partial_fit`` of a new estimator in a warm process, bimodal between 22 and 77 ms). Small
pages mapped and zeroed by the kernel in one call (``MAP_POPULATE``) cost 9 ms for those
20 MB, every time: :func:`populated_empty` (that ``partial_fit``: median 30 ms; its
epoch, which gathers rows of the cast at random, is no slower: 12.5 against 12.3 ms).
"""

from __future__ import annotations

import math
import mmap

import numpy as np

#: Bytes from which :func:`populated_empty` maps its own memory: numpy's threshold for
#: huge pages (smaller arrays come from the allocator's heap, usually written before).
POPULATE_BYTES = 2**22


def populated_empty(shape: tuple[int, ...], dtype: np.dtype | type,
                    order: str = "C") -> np.ndarray:
    """``np.empty(shape, dtype, order)``, but from an anonymous memory map of small
    pages that the kernel maps at once (``MAP_POPULATE``) when the array holds at least
    :data:`POPULATE_BYTES` and the platform has that flag; the map is released with the
    array.

    Parameters
    ----------
    shape : tuple of int
        The array's shape.
    dtype : numpy.dtype or type
        Its element type.
    order : {"C", "F"}
        Its layout.

    Returns
    -------
    numpy.ndarray
        Writeable, uninitialized in the ``np.empty`` case, zeros in the mapped one.
    """
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    populate = getattr(mmap, "MAP_POPULATE", None)
    if nbytes < POPULATE_BYTES or populate is None:
        return np.empty(shape, dtype=dtype, order=order)
    memory = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate)
    flat = np.frombuffer(memory, dtype=dtype)
    return flat.reshape(shape[::-1]).T if order == "F" else flat.reshape(shape)
