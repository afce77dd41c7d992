"""New memory for a large array that is written at once: small pages, mapped together
(:func:`populated_empty`), or faulted as written (:func:`small_page_zeros`).

numpy asks the kernel for transparent huge pages (``madvise``) on every allocation of
4 MiB or more. Where that memory is new to the process, the first write of each 2 MiB
page costs a fault that, on the virtual machines this project is measured on, takes
milliseconds: the 20 MB float32 cast of a 100k x 50 float64 ``X`` (what ``partial_fit``
trains on) took 40 to 50 ms to write instead of 3 when the allocator happened to reuse
memory the process had written before (measured: median 59 ms for the whole first
``partial_fit`` of a new estimator in a warm process, bimodal between 22 and 77 ms). Small
pages mapped and zeroed by the kernel in one call (``MAP_POPULATE``) cost 9 ms for those
20 MB: :func:`populated_empty` (that ``partial_fit``: median 30 ms; its epoch, which
gathers rows of the cast at random, is no slower: 12.5 against 12.3 ms).

Paid at every call, those 9 ms made a stream of ``partial_fit`` calls on 100k x 50
float64 blocks slower than with numpy's memory (the allocator's heap keeps a freed block
of up to 32 MiB and hands it out again, already written: 0.52x -> 0.77x of scikit-learn's
time per block, measured side by side; 0.56x with the reuse below). So the last
:data:`KEPT_MAPPINGS` mappings of at most :data:`REUSE_BYTES` are kept, and one that no
array uses any more serves the next request it holds, up to twice its size: a stream of
blocks of one shape, or of sizes that vary a little, maps twice, then reuses. The
process then holds at most 64 MiB of such memory between calls. A larger array comes
from numpy as before: mapped anew at every call anyway, its small pages cost more to
populate than the huge pages the kernel hands back after the call before freed them (a
40 MB cast at every ``partial_fit`` epoch of 100k x 100 float64: 37 ms a call populated
against 25 ms from numpy, side by side).
"""

from __future__ import annotations

import math
import mmap
import threading
import weakref

import numpy as np

#: Bytes from which :func:`populated_empty` maps its own memory: numpy's threshold for
#: huge pages (smaller arrays come from the allocator's heap, usually written before).
POPULATE_BYTES = 2**22
#: The largest array :func:`populated_empty` maps, keeping the map for reuse once the
#: array is gone (the heap's own limit for the blocks it keeps); numpy allocates larger.
REUSE_BYTES = 2**25

#: How many mappings are kept: two, as a training call still holds the cast of the call
#: before while it casts its own block.
KEPT_MAPPINGS = 2

# The kept mappings, the last made first: (size, map, weak reference to the array made on
# it last, dead once no view of that array remains).
_kept: list[tuple[int, mmap.mmap, weakref.ref]] = []
_kept_lock = threading.Lock()


def populated_empty(shape: tuple[int, ...], dtype: np.dtype | type,
                    order: str = "C") -> np.ndarray:
    """``np.empty(shape, dtype, order)``, but from an anonymous memory map of small
    pages that the kernel maps at once (``MAP_POPULATE``) when the array holds from
    :data:`POPULATE_BYTES` to :data:`REUSE_BYTES` and the platform has that flag: a map
    kept from before (see the module) where one that holds the array, at most twice its
    size, is unused (the smallest), else a new one, released with the array once it is
    no longer among the kept ones. A stream of sparse blocks of 10,000 text-like
    documents, whose stored values vary in number from block to block, mapped the cast
    of every block anew (1.6 ms a call, cProfile) when only a map of the same size
    served.

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
        Writeable, uninitialized (a new map holds zeros, a reused one what was written).
    """
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    populate = getattr(mmap, "MAP_POPULATE", None)
    if not POPULATE_BYTES <= nbytes <= REUSE_BYTES or populate is None:
        return np.empty(shape, dtype=dtype, order=order)
    with _kept_lock:
        # The smallest unused map that holds the array, if not twice as large: blocks of
        # a stream whose sizes vary a little (sparse blocks' stored values) reuse it.
        free = sorted((entry for entry in _kept
                       if nbytes <= entry[0] <= 2 * nbytes and entry[2]() is None),
                      key=lambda entry: entry[0])
        size, memory = free[0][:2] if free else (nbytes, mmap.mmap(
            -1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate))
        flat = np.frombuffer(memory, dtype=dtype, count=math.prod(shape))
        others = [entry for entry in _kept if entry[1] is not memory]
        _kept[:] = [(size, memory, weakref.ref(flat)), *others][:KEPT_MAPPINGS]
    return flat.reshape(shape[::-1]).T if order == "F" else flat.reshape(shape)


def small_page_zeros(shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
    """``np.zeros(shape, dtype)``, from an anonymous memory map of small pages where it
    holds :data:`POPULATE_BYTES` or more: for a large array that a fit builds once and
    reads at every epoch (the stored values of sparse rows, and their cast beyond
    :data:`REUSE_BYTES`), released with the array.

    numpy asks for huge pages there (see the module). On the virtual machines this
    project is measured on, the first write of huge pages the process has not written
    before stalls at times, the more so as fits follow one another: six default fits
    in a row of the text-like problem of ``bench/bench_sparse.py`` (60,000 rows of at
    most 171 stored values; the stored rows' three arrays 10 + 41 + 41 MB) built them in
    0.25 to 1.04 s in 3 or 4 of 6 fits, 0.04-0.08 s otherwise; on small pages
    (``MADV_NOHUGEPAGE``, faulted as they are written) 0.06-0.20 s in all 24 fits, and
    the fits' median ratio to scikit-learn's went from 4.73x-5.12x to 3.77x-4.23x
    (December 2026, four runs of each, alternated). The values' cast (29 MB) stalled too
    (0.12-0.33 s instead of a few ms). Small pages are no cure for every size: the 188
    MB of an MLP fit's permuted rows (60,000 x 784 float32) stalled 1.4-2.0 s in 2 of 6
    fits on them, as on numpy's memory (1.0-2.1 s in 3 of 6).

    Parameters
    ----------
    shape : tuple of int
        The array's shape (C order).
    dtype : numpy.dtype or type
        Its element type.

    Returns
    -------
    numpy.ndarray
        Zeros, writeable.
    """
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    no_huge_pages = getattr(mmap, "MADV_NOHUGEPAGE", None)
    if nbytes < POPULATE_BYTES or no_huge_pages is None:
        return np.zeros(shape, dtype=dtype)
    memory = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    memory.madvise(no_huge_pages)
    return np.frombuffer(memory, dtype=dtype).reshape(shape)
