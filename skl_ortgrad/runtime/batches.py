r"""Mini-batches as onnxruntime feeds, with as little copying as possible.

Gathering rows ``X[idx]`` batch after batch was measured as two thirds of a shuffled
epoch. Instead, each epoch copies the permuted dataset once into buffers allocated once
(``np.take(..., out=buffer)``); every mini-batch is then a contiguous slice of those
buffers, always at the same address. On the CPU, onnxruntime borrows numpy memory, so the
``OrtValue`` of every slice and the whole feed vector of every batch are built once per
loader, when the batch is first fed, and reused at every epoch (a caller that reads the
buffers another way, such as the training program, never pays for them: about 12 µs per
batch, 39 ms for 100k rows at batch 32). Shuffling quality is that of a full permutation
per epoch.

Sparse ``X`` is never densified whole. The training program reads its rows by index
from the stored values laid out one row a row once per matrix served
(:meth:`MiniBatchLoader.stored_rows`); where that layout would be mostly padding, each
call lays out its rows from the matrix's arrays (:meth:`MiniBatchLoader.padded_stored`)
by where each row of the epoch's order starts there and how many values it stores
(:attr:`MiniBatchLoader.row_spans`, a pass over the rows only). The per-batch path lays
the stored values out in batch order once per epoch
(:func:`_csr_rows`, one pass over them, when first asked for), then each batch's rows are
written into a reused dense buffer by one scatter, after zeroing the values the batch
before wrote there. scipy's row indexing and ``toarray`` per batch were most of a sparse epoch: per
batch of 32 rows, 43 -> 6 µs at 1,000 columns and 1% density, 783 -> 18 µs at 50,000
columns and 0.1% (timeit), for about 1.5 ms of layout per epoch of 200k stored values.

Every batch's feeds end with the gradient the backward pass starts from,
:math:`\partial \bar L / \partial L = 1 / \sum_{i \in B} s_i`, which turns the graph's
weighted loss sum :math:`L = \sum_i s_i \ell_i` into the batch's weighted mean: with
integer weights and one batch, that is exactly training on repeated rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import scipy.sparse as sp
from onnxruntime.capi._pybind_state import OrtDevice, OrtValue, OrtValueVector

from skl_ortgrad.runtime.memory import small_page_zeros

#: The most slots per stored value (plus one per row) of
#: :meth:`MiniBatchLoader.stored_rows`, the layout the sparse training program reads rows
#: from: beyond, its memory and its work per step would follow a few long rows. Below,
#: the padded slots cost the steps less than laying out each call's rows (case 6's 20k
#: x 1,000 binary problem, 10 values a row on average and at most 25, 2.5 slots a value:
#: an epoch 4.76x and 4.84x scikit-learn's with a layout per call, 4.31x and 4.19x with
#: this one, the same weights; measured side by side, 15 rounds, twice; 4 and 5 slots a
#: value on sparser rows still gained 5-10%, but the memory grows with the slots).
STORED_ROWS_PADDING = 3


def _csr_rows(X: sp.csr_matrix, order: np.ndarray) -> tuple[np.ndarray, ...]:
    """The stored values of the rows ``order`` of a canonical CSR matrix, row after row:
    ``(indptr, rows, columns, values)``, where the stored values of the ``i``-th row of
    ``order`` are ``indptr[i]:indptr[i + 1]``, ``rows`` gives the position in ``order`` of
    every stored value, ``columns`` and ``values`` its column and value."""
    lengths = np.diff(X.indptr)[order]
    indptr = np.zeros(len(order) + 1, dtype=np.intp)
    np.cumsum(lengths, out=indptr[1:])
    # Where each value is stored in X: its row's start there, plus its rank in the row.
    positions = np.repeat(X.indptr[order] - indptr[:-1], lengths) + np.arange(indptr[-1])
    rows = np.repeat(np.arange(len(order)), lengths)
    return indptr, rows, X.indices[positions], X.data[positions]


def _canonical(X: sp.spmatrix) -> sp.csr_matrix:
    """``X`` as CSR without duplicate entries (a copy where it has some: the input is not
    modified), so that writing each stored value densifies it as ``toarray`` does."""
    if type(X) is not sp.csr_matrix:
        csr = sp.csr_matrix(X)
        if X.format == "csr":
            # The conversion shares the arrays but not scipy's cached check of their order.
            csr.has_canonical_format = X.has_canonical_format
        X = csr
    if not X.has_canonical_format:
        X = X.copy()
        X.sum_duplicates()
    return X


class _LazyFeeds(dict):
    """Feed vectors by batch index, each built by ``build(index)`` on its first lookup;
    later lookups are dict's own, with no Python call per batch."""

    def __init__(self, build: Callable[[int], OrtValueVector]) -> None:
        super().__init__()
        self._build = build

    def __missing__(self, index: int) -> OrtValueVector:
        vector = self[index] = self._build(index)
        return vector


class MiniBatchLoader:
    r"""Mini-batches of ``arrays`` as ``OrtValueVector`` feeds of a training step.

    The feeds of a batch are, in order: its rows of every array of ``arrays``, the
    values of ``tail`` (the weights), then its output gradient
    :math:`1 / \sum_{i \in B} s_i` as a 0-d tensor: the feed order of
    :class:`~skl_ortgrad.runtime.step.OrtGradientStep`.

    Parameters
    ----------
    arrays : sequence of numpy.ndarray (the first may be scipy sparse)
        ``X``, then the other per-row arrays (labels, sample weights), all with the same
        number of rows. Dense arrays must already have the dtype the graph expects, but
        ``X`` for a caller that reads its rows from :attr:`features` only (the linear
        training program, which casts the rows it reads if need be).
    batch_size : int
        Rows per batch; the last batch of an epoch may be smaller.
    shuffle : bool
        Permute the rows at every epoch.
    random_state : numpy.random.RandomState
        Source of the permutations.
    device : OrtDevice
        Where the feeds live.
    tail : callable returning a list of OrtValue
        Feeds appended after the batch (the weights). On the CPU it is called once per
        loader: the weights are numpy buffers updated in place, seen by onnxruntime. On
        another device it is called for every batch, since a device copy would be stale.
    weight_index : int, optional
        Position of the sample weights in ``arrays`` (None: every row weighs 1).
    weighted_mean : bool, default=True
        The output gradient of a batch (its scale) is one over its summed weights, the
        gradient of the batch's weighted mean loss (True), or one over ``batch_size``,
        the short last batch included (False: every row, times its weight, counts as much
        whatever the batch it falls in, as each sample in scikit-learn's SGD; the mean
        over a short batch's rows would give each of them a larger share).

    Attributes
    ----------
    rows : list of int
        Rows of every batch.
    totals : numpy.ndarray
        Rows, or summed sample weights, of every batch of the current epoch.
    generation : int
        How many times :meth:`refill` gave the loader new arrays.
    """

    def __init__(
        self,
        arrays: Sequence[np.ndarray | sp.spmatrix],
        batch_size: int,
        shuffle: bool,
        random_state: np.random.RandomState,
        device: OrtDevice,
        tail: Callable[[], list[OrtValue]],
        weight_index: int | None = None,
        weighted_mean: bool = True,
    ) -> None:
        self.n_rows = arrays[0].shape[0]
        self.weighted_mean = weighted_mean
        self.batch_size = max(1, min(int(batch_size), self.n_rows))
        self.shuffle = shuffle
        self.random_state = random_state
        self.device = device
        self.tail = tail
        self._sparse = sp.issparse(arrays[0])
        self._sources = [_canonical(a) if sp.issparse(a) else a for a in arrays]
        self._reuse = device.device_type() == OrtDevice.cpu()
        self._bounds = [
            (start, min(start + self.batch_size, self.n_rows))
            for start in range(0, self.n_rows, self.batch_size)
        ]
        self.rows = [stop - start for start, stop in self._bounds]
        self._starts = np.array([start for start, _ in self._bounds], dtype=np.intp)
        self._dense = [a for a in self._sources if not sp.issparse(a)]
        if shuffle:
            # Each epoch fills them; the labels and weights start as given (small), so
            # that the totals computed below read no uninitialized memory.
            self._buffers = [np.empty_like(a, order="C") if a is self._sources[0]
                             else np.array(a, order="C") for a in self._dense]
        else:
            self._buffers = [np.ascontiguousarray(a) for a in self._dense]
        if self._sparse:
            x = self._sources[0]
            sizes = {stop - start for start, stop in self._bounds}
            self._x_batches = {n: np.zeros((n, x.shape[1]), dtype=x.dtype) for n in sizes}
            # Where each buffer holds a stored value: the next batch zeroes only those.
            self._written: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        # The memory of the stored rows' layout, kept for the next arrays served.
        self._layout_memory: dict[str, np.ndarray] = {}
        self._order = np.arange(self.n_rows)
        self._new_sources()
        self._pending = False
        self.generation = 0
        self._feeds: _LazyFeeds | None = None
        # Position of the weights among the dense buffers (X may be sparse, not among them).
        self._weight_buffer = (
            None if weight_index is None else weight_index - (1 if self._sparse else 0)
        )
        self.totals = np.empty(len(self._bounds), dtype=np.float64)
        # The labels' type, the graph's: the features may be read as given, of another
        # type (the linear training program casts the rows it reads).
        self._scales = np.empty(len(self._bounds), dtype=arrays[min(1, len(arrays) - 1)].dtype)
        self._update_scales()

    def __len__(self) -> int:
        return len(self._bounds)

    def refill(self, arrays: Sequence[np.ndarray | sp.spmatrix]) -> bool:
        """Serve ``arrays`` from now on with the same buffers and feed vectors, if they fit.

        A stream of ``partial_fit`` calls brings new rows of the same layout at every
        call; building the feed vectors again costs about 2 µs per array per batch (12 ms
        for a 2000-row call at batch 1), more than the epoch's training. When shuffling,
        the rows are copied into the loader's buffers anyway, so new arrays of the same
        shapes and dtypes fit; without shuffling the buffers are the arrays themselves,
        so only arrays over the same (contiguous) memory do, such as a new view of the
        same array.

        Returns
        -------
        bool
            False when ``arrays`` do not fit: build a new loader.
        """
        sources = [_canonical(a) if sp.issparse(a) else a for a in arrays]
        fits = len(sources) == len(self._sources) and all(
            sp.issparse(new) == sp.issparse(old) and new.shape == old.shape
            and new.dtype == old.dtype
            for new, old in zip(sources, self._sources, strict=False)
        )
        dense = [a for a in sources if not sp.issparse(a)]
        if not self.shuffle:
            fits = fits and all(
                a.ctypes.data == b.ctypes.data and a.strides == b.strides
                for a, b in zip(dense, self._buffers, strict=False)
            )
        if not fits:
            return False
        self._sources, self._dense = sources, dense
        self._new_sources()
        self.generation += 1
        self._update_scales()
        return True

    def _new_sources(self) -> None:
        """Forget what was derived from the arrays served before (sparse layouts)."""
        self._padded_stored: tuple[np.ndarray, np.ndarray] | None = None
        self._stored_rows: dict[np.dtype, tuple[np.ndarray, np.ndarray] | None] = {}
        self._squared_norms: tuple[np.dtype, np.ndarray] | None = None
        self._new_order()

    def _new_order(self) -> None:
        """Forget the layouts of the order before: each is made when first asked for."""
        self._sparse_rows: tuple[np.ndarray, ...] | None = None
        self._row_spans: tuple[np.ndarray, np.ndarray] | None = None

    def _fill_sparse(self, index: int) -> None:
        start, stop = self._bounds[index]
        indptr, rows, columns, values = self.sparse_rows
        first, last = indptr[start], indptr[stop]
        batch = self._x_batches[stop - start]
        if stop - start in self._written:
            batch[self._written[stop - start]] = 0
        where = self._written[stop - start] = (rows[first:last] - start, columns[first:last])
        batch[where] = values[first:last]

    def _vector(self, index: int) -> OrtValueVector:
        start, stop = self._bounds[index]
        arrays = [buffer[start:stop] for buffer in self._buffers]
        if self._sparse:
            arrays.insert(0, self._x_batches[stop - start])
        vect = OrtValueVector()
        for array in arrays:
            vect.push_back(OrtValue.ortvalue_from_numpy(array, self.device))
        for value in self._tail_values if self._reuse else self.tail():
            vect.push_back(value)
        # A 0-d view of the scales array: updated in place at every permutation.
        scale = self._scales[index:index + 1].reshape(())
        vect.push_back(OrtValue.ortvalue_from_numpy(scale, self.device))
        return vect

    def _permute(self, features: bool) -> None:
        self._order = self.random_state.permutation(self.n_rows)
        self._new_order()
        # The features wait when not asked for (see fill_features).
        self._pending = not features and not self._sparse
        for source, buffer in list(zip(self._dense, self._buffers, strict=True))[
                int(self._pending):]:
            self._take(source, buffer)
        if self._weight_buffer is not None:
            # Without sample weights the totals are row counts: no permutation changes them.
            self._update_scales()

    def _take(self, source: np.ndarray, buffer: np.ndarray) -> None:
        # mode="clip" skips the bounds check (a permutation is in range): 2.5x faster.
        np.take(source, self._order, axis=0, out=buffer, mode="clip")

    def fill_features(self) -> None:
        """Copy this epoch's permuted features into their buffer if :meth:`epoch` was
        told to leave them (a no-op otherwise): before feeding any batch."""
        if self._pending:
            self._take(self._dense[0], self._buffers[0])
            self._pending = False

    def batch_arrays(self, index: int) -> list[np.ndarray]:
        """The features and labels of batch ``index`` as its feed (``epoch``'s
        ``feed(index)``, called before) holds them: views of the permuted buffers, sparse
        features as the dense batch they were written into."""
        start, stop = self._bounds[index]
        if self._sparse:
            return [self._x_batches[stop - start], self._buffers[0][start:stop]]
        return [buffer[start:stop] for buffer in self._buffers[:2]]

    @property
    def starts(self) -> np.ndarray:
        """The first row of every batch (int)."""
        return self._starts

    @property
    def order(self) -> np.ndarray:
        """The rows of the epoch in batch order (indices into the arrays served)."""
        return self._order

    @property
    def sparse_rows(self) -> tuple[np.ndarray, ...]:
        """Sparse features: the stored values of the epoch's rows in batch order,
        ``(indptr, rows, columns, values)``: those of the ``i``-th row of :attr:`order`
        are ``indptr[i]:indptr[i + 1]``, ``rows`` gives each one's position in
        :attr:`order`. Made once per order, when first asked for."""
        if self._sparse_rows is None:
            self._sparse_rows = _csr_rows(self._sources[0], self._order)
        return self._sparse_rows

    def stored_columns(self, index: int) -> np.ndarray:
        """Sparse features: the column of every value the rows of batch ``index`` store
        (a view; a column several rows store appears once per row)."""
        start, stop = self._bounds[index]
        indptr, _, columns, _ = self.sparse_rows
        return columns[indptr[start]:indptr[stop]]

    @property
    def n_features(self) -> int:
        """The number of columns of the features."""
        return int(self._sources[0].shape[1])

    @property
    def n_stored(self) -> int:
        """Sparse features: the number of values the matrix served stores."""
        return int(self._sources[0].nnz)

    @property
    def row_spans(self) -> tuple[np.ndarray, np.ndarray]:
        """Sparse features: where the stored values of each row of :attr:`order` start
        in the arrays of :meth:`padded_stored` (past their padding value), and how many
        there are (int64): a pass over the rows, none over the values (which
        :attr:`sparse_rows` makes)."""
        if self._row_spans is None:
            indptr = self._sources[0].indptr.astype(np.int64, copy=False)
            starts = indptr[self._order]
            self._row_spans = starts + 1, indptr[self._order + 1] - starts
        return self._row_spans

    def padded_stored(self, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
        """Sparse features: the columns (int32) and values (as ``dtype``) of the stored
        values, in the order of the matrix served, after one padding value: position 0
        reads column 0 and value 0. Made once per arrays served and dtype (the cast of
        float64 data included, not once per epoch)."""
        dtype = np.dtype(dtype)
        if self._padded_stored is None or self._padded_stored[1].dtype != dtype:
            x = self._sources[0]
            columns = small_page_zeros((x.nnz + 1,), np.int32)
            columns[1:] = x.indices
            values = small_page_zeros((x.nnz + 1,), dtype)
            values[1:] = x.data
            self._padded_stored = columns, values
        return self._padded_stored

    def squared_norms(self, dtype: np.dtype) -> np.ndarray:
        r"""Every row's squared norm :math:`\lVert x \rVert^2`, in the order of the
        features served (not permuted): float64 sums of the values as ``dtype`` (the
        stored values of sparse features one after the other, as scikit-learn's
        passive-aggressive step sums them). Made once per arrays served and dtype."""
        dtype = np.dtype(dtype)
        if self._squared_norms is None or self._squared_norms[0] != dtype:
            x = self._sources[0]
            if sp.issparse(x):
                values = x.data.astype(dtype, copy=False).astype(np.float64)
                # bincount adds each row's values in their order.
                rows = np.repeat(np.arange(self.n_rows), np.diff(x.indptr))
                norms = np.bincount(rows, weights=values * values, minlength=self.n_rows)
            else:
                rows = x.astype(dtype, copy=False)
                norms = np.einsum("ij,ij->i", rows, rows, dtype=np.float64)
            self._squared_norms = dtype, norms
        return self._squared_norms[1]

    def stored_rows(self, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray] | None:
        """Sparse features: the stored values one row a row, columns (int32: half the
        bytes a step gathers, and CSR's own indices as they are) and values
        (as ``dtype``) ``[n_rows, w]``, row ``i`` those of row ``i`` of the matrix served
        then column 0 and value 0 up to ``w``, the most values a row stores; None where
        that layout would hold more than ``STORED_ROWS_PADDING`` times the stored values
        (plus a slot a row): a few long rows. Made once per arrays served and dtype (the
        cast of float64 data included, not once per epoch)."""
        dtype = np.dtype(dtype)
        if dtype not in self._stored_rows:
            x = self._sources[0]
            lengths = np.diff(x.indptr)
            width = max(1, int(lengths.max(initial=0)))
            laid_out = None
            if lengths.min(initial=width) == width:
                # Every row as long (no padding): CSR's arrays as they are, reshaped (5.6
                # -> 1.7 ms at 20k rows of 100 values, measured).
                laid_out = (x.indices.astype(np.int32, copy=False).reshape(self.n_rows, width),
                            x.data.astype(dtype, copy=False).reshape(self.n_rows, width))
            elif self.n_rows * width <= STORED_ROWS_PADDING * x.nnz + self.n_rows:
                # CSR order is row after row, as the slots a boolean mask selects.
                shape = (self.n_rows, width)
                inside = np.less(np.arange(width), lengths[:, None],
                                 out=self._layout_zeros("mask", shape, np.dtype(bool)))
                laid_out = (self._layout_zeros("columns", shape, np.dtype(np.int32)),
                            self._layout_zeros(f"values {dtype}", shape, dtype))
                laid_out[0][inside] = x.indices
                laid_out[1][inside] = x.data
            self._stored_rows[dtype] = laid_out
        return self._stored_rows[dtype]

    def _layout_zeros(self, name: str, shape: tuple[int, int], dtype: np.dtype) -> np.ndarray:
        """Zeros of ``shape`` for :meth:`stored_rows`: the memory of the layout of the
        arrays served before, zeroed, where it holds them, else new small pages
        (:func:`~skl_ortgrad.runtime.memory.small_page_zeros`), kept for the next arrays.

        A stream of ``partial_fit`` calls on blocks of one size lays out every block in
        the same memory: new small pages cost their first writes at every call (the
        layout of 10,000 text-like documents of ``bench/bench_sparse.py``: 9.1-9.3 ms
        on new pages, 4.4-4.5 ms on memory written before, measured). The layout served
        before is no longer read: each call of the training program binds the current
        one (:class:`~skl_ortgrad.runtime.program_run.SparseLinearProgramRun`)."""
        size = shape[0] * shape[1]
        memory = self._layout_memory.get(name)
        if memory is None or memory.size < size:
            memory = self._layout_memory[name] = small_page_zeros((size,), dtype)
        else:
            memory[:size] = 0
        return memory[:size].reshape(shape)

    @property
    def features(self) -> np.ndarray:
        """The dense features as given (not permuted)."""
        return self._dense[0]

    @property
    def per_row(self) -> list[np.ndarray]:
        """The epoch's permuted dense arrays (features, labels, sample weights), in
        batch order; the features only once filled (:meth:`fill_features`)."""
        return self._buffers

    @property
    def scales(self) -> np.ndarray:
        r"""The output gradient of every batch of the epoch:
        :math:`1 / \sum_{i \in B} s_i` (or 1 / ``batch_size``, see ``weighted_mean``)."""
        return self._scales

    @property
    def weighted(self) -> bool:
        """Whether the rows carry sample weights."""
        return self._weight_buffer is not None

    @property
    def sparse(self) -> bool:
        """Whether the features are a scipy sparse matrix."""
        return self._sparse

    def _update_scales(self) -> None:
        """Batch totals (rows or summed weights) and their inverses, in place."""
        if self._weight_buffer is None:
            self.totals[:] = self.rows
        else:
            weights = self._buffers[self._weight_buffer]
            self.totals[:] = np.add.reduceat(weights.astype(np.float64), self._starts)
        # A batch whose weights are all zero contributes no gradient; so does one whose
        # total is below the smallest normal float of the graph (its inverse overflows).
        tiny = np.finfo(self._scales.dtype).tiny
        if self.weighted_mean:
            self._scales[:] = np.divide(
                1.0, self.totals, out=np.zeros_like(self.totals), where=self.totals > tiny
            )
        else:
            self._scales[:] = 1.0 / self.batch_size

    def epoch(self, features: bool = True) -> Callable[[int], OrtValueVector]:
        """Start an epoch (a new permutation when shuffling); return ``feed(index)``.

        ``feed(index)`` gives the feed vector of batch ``index``; on the CPU each
        vector is built the first time its batch is fed and reused at every epoch (its
        buffers are refilled in place), so for dense data ``feed`` is then a plain
        dictionary lookup.

        With ``features=False`` the permuted copy of dense features waits for
        :meth:`fill_features`: a caller reading the rows by :attr:`order` from
        :attr:`features` skips it (2.9 ms for 50k x 100 float32, measured).
        """
        if self.shuffle:
            self._permute(features)
        if not self._reuse:
            return self._device_feed
        if self._feeds is None:
            self._tail_values = self.tail()
            self._feeds = _LazyFeeds(self._vector)
        return self._sparse_feed if self._sparse else self._feeds.__getitem__

    def _sparse_feed(self, index: int) -> OrtValueVector:
        self._fill_sparse(index)
        return self._feeds[index]

    def _device_feed(self, index: int) -> OrtValueVector:
        # Off the CPU, every batch is copied to the device with the current weights.
        if self._sparse:
            self._fill_sparse(index)
        return self._vector(index)
