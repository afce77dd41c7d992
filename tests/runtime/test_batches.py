"""Mini-batches: each row once per epoch, seeded permutations, sparse densified per batch;
feeds laid out as the training step expects (rows, weights, output gradient)."""

import numpy as np
import pytest
import scipy.sparse as sp
from _calls import record_calls
from onnxruntime.capi._pybind_state import OrtValue

from skl_ortgrad.runtime import batches, memory
from skl_ortgrad.runtime.batches import MiniBatchLoader
from skl_ortgrad.runtime.devices import ort_device

CPU = ort_device("cpu")


def _batches(loader):
    """(rows, total, feeds) of every batch of one epoch."""
    feed = loader.epoch()
    return [(loader.rows[i], loader.totals[i], feed(i)) for i in range(len(loader))]


def _epoch(loader):
    """(rows, X rows, labels) of every batch, each read as soon as it is fed: sparse
    batches of the same size share one dense buffer."""
    feed = loader.epoch()
    return [(loader.rows[i], *(f.numpy().copy() for f in list(feed(i))[:2]))
            for i in range(len(loader))]


def test_each_row_once_per_epoch_and_tail_appended():
    X = np.arange(30, dtype=np.float32).reshape((10, 3))
    y = np.arange(10, dtype=np.float32).reshape((-1, 1))
    w = np.ones(2, dtype=np.float32)
    loader = MiniBatchLoader([X, y], 4, True, np.random.RandomState(0), CPU,
                             lambda: [OrtValue.ortvalue_from_numpy(w, CPU)])
    assert len(loader) == 3
    for _ in range(2):
        batches = _epoch(loader)
        assert [n for n, _, _ in batches] == [4, 4, 2]
        # X, y, the tail (one weight), the output gradient: the step's feed order.
        assert all(len(feeds) == 4 for _, _, feeds in _batches(loader))
        assert all(np.array_equal(feeds[2].numpy(), w) for _, _, feeds in _batches(loader))
        rows = np.vstack([b[1] for b in batches])
        labels = np.vstack([b[2] for b in batches]).ravel()
        assert sorted(labels.tolist()) == list(range(10))
        np.testing.assert_array_equal(rows, X[labels.astype(int)])


def test_shuffle_is_seeded_and_changes_between_epochs():
    X = np.arange(20, dtype=np.float32).reshape((-1, 1))
    orders = []
    for _ in range(2):
        loader = MiniBatchLoader([X, X.copy()], 20, True, np.random.RandomState(3), CPU, list)
        orders.append([_epoch(loader)[0][1].ravel() for _ in range(2)])
    np.testing.assert_array_equal(orders[0][0], orders[1][0])
    assert not np.array_equal(orders[0][0], orders[0][1])


def test_no_shuffle_keeps_order():
    X = np.arange(12, dtype=np.float32).reshape((-1, 2))
    loader = MiniBatchLoader([X, X[:, :1].copy()], 4, False, np.random.RandomState(0), CPU, list)
    np.testing.assert_array_equal(np.vstack([b[1] for b in _epoch(loader)]), X)


def test_sparse_rows_densified_per_batch():
    dense = np.random.RandomState(0).rand(9, 5).astype(np.float32)
    dense[dense < 0.6] = 0
    X = sp.csr_matrix(dense)
    y = np.arange(9, dtype=np.float32).reshape((-1, 1))
    loader = MiniBatchLoader([X, y], 4, True, np.random.RandomState(0), CPU, list)
    for _ in range(2):
        for n, rows, labels in _epoch(loader):
            assert rows.shape == (n, 5)
            np.testing.assert_array_equal(rows, dense[labels.ravel().astype(int)])


@pytest.mark.parametrize("shuffle", [True, False])
def test_sparse_batches_are_what_toarray_gives(shuffle):
    """Unsorted column indices, explicit zeros and duplicate entries (summed, as
    ``toarray`` sums them; the caller's matrix left as it was), empty rows, a short last
    batch, several epochs and a refill with other values: every batch is the rows of the
    epoch's order, densified, nothing left of the batch before."""
    rng = np.random.RandomState(1)
    dense = rng.rand(23, 7).astype(np.float32)
    dense[dense < 0.7] = 0
    dense[[3, 11]] = 0  # empty rows
    X = sp.csr_matrix(dense)
    # Row 0 gets an explicit zero and a duplicate, in reversed column order.
    data = np.concatenate([[0.0, 0.25, 0.5], X.data[X.indptr[1]:]]).astype(np.float32)
    indices = np.concatenate([[6, 2, 2], X.indices[X.indptr[1]:]])
    indptr = np.concatenate([[0], X.indptr[1:] - X.indptr[1] + 3])
    X = sp.csr_matrix((data, indices, indptr), shape=dense.shape)
    expected = X.toarray()
    assert expected[0, 2] == 0.75 and not X.has_canonical_format
    labels = np.arange(23, dtype=np.float32).reshape((-1, 1))
    loader = MiniBatchLoader([X, labels], 5, shuffle, np.random.RandomState(0), CPU, list)
    for arrays in ([X, labels], [X * 2, labels]):
        assert loader.refill(arrays)
        want = arrays[0].toarray()
        for _ in range(2):
            batches = _epoch(loader)
            assert [n for n, _, _ in batches] == [5, 5, 5, 5, 3]
            for _, rows, ids in batches:
                np.testing.assert_array_equal(rows, want[ids.ravel().astype(int)])
    assert X.indices[:3].tolist() == [6, 2, 2]


@pytest.mark.parametrize("layout", ["equal rows", "padded", "long row"])
def test_sparse_stored_rows_one_row_a_row(layout):
    """The training program's layout of the stored values: row i's columns and values in
    row i (zeros after, as wide as the longest row), in the program's dtype, made once;
    None where it would be mostly padding (one long row)."""
    rng = np.random.default_rng(0)
    dense = np.where(rng.random((40, 30)) < 0.2, rng.standard_normal((40, 30)), 0.0)
    if layout == "equal rows":
        dense[:, :4] = 1.0 + rng.random((40, 4))
        dense[:, 4:] = 0.0
    elif layout == "long row":
        dense[7] = 1.0
    X = sp.csr_matrix(dense)
    loader = MiniBatchLoader([X, np.zeros((40, 1))], 8, True, np.random.RandomState(0),
                             CPU, list)
    stored = loader.stored_rows(np.float32)
    if layout == "long row":
        assert stored is None
        return
    columns, values = stored
    assert columns.dtype == np.int32 and values.dtype == np.float32
    assert columns.shape == values.shape == (40, np.diff(X.indptr).max())
    densified = np.zeros((40, 30), dtype=np.float32)
    for i in range(40):
        np.add.at(densified[i], columns[i], values[i])
    np.testing.assert_array_equal(densified, dense.astype(np.float32))
    assert loader.stored_rows(np.float32) is stored


@pytest.mark.parametrize("sparse", [False, True])
def test_squared_norms_of_the_rows_served(sparse):
    """Every row's squared norm, in the order served, summed in float64 from the values
    as the dtype asked for (an empty row: 0; sparse rows' values in their order, bit for
    bit); made once per arrays and dtype, anew for the arrays a refill serves."""
    rng = np.random.default_rng(0)
    dense = np.where(rng.random((40, 30)) < 0.2, rng.standard_normal((40, 30)), 0.0)
    dense[5] = 0.0
    features = sp.csr_matrix(dense) if sparse else dense
    loader = MiniBatchLoader([features, np.zeros((40, 1))], 8, True,
                             np.random.RandomState(0), CPU, list)
    for dtype in (np.float64, np.float32):
        rows = dense.astype(dtype).astype(np.float64)
        norms = loader.squared_norms(dtype)
        assert norms.dtype == np.float64 and norms[5] == 0.0
        # Sparse: each row's values one after the other, as scikit-learn sums them.
        expected = [sum(v * v for v in row[row != 0]) for row in rows]
        np.testing.assert_allclose(norms, expected, rtol=0 if sparse else 1e-14)
        assert loader.squared_norms(dtype) is norms
    assert loader.refill([features * 2, np.zeros((40, 1))])
    np.testing.assert_allclose(loader.squared_norms(np.float32), 4 * norms, rtol=1e-12)


def _short_rows(rng, n_rows, width, low, high):
    """CSR rows of ``low`` to ``high - 1`` values at distinct columns."""
    lengths = rng.integers(low, high, n_rows)
    columns = np.concatenate([rng.choice(width, k, replace=False) for k in lengths])
    X = sp.csr_matrix((rng.standard_normal(lengths.sum()), columns,
                       np.concatenate([[0], np.cumsum(lengths)])), shape=(n_rows, width))
    X.sort_indices()
    return X


def _densified(stored, shape):
    columns, values = stored
    rows = np.repeat(np.arange(shape[0]), columns.shape[1])
    densified = sp.csr_matrix((values.ravel(), (rows, columns.ravel())), shape=shape)
    densified.sum_duplicates()
    return densified.toarray()


def test_a_large_padded_layout_lies_on_small_pages_kept_for_the_next_arrays(monkeypatch):
    """The padded layout and its mask come from
    :func:`~skl_ortgrad.runtime.memory.small_page_zeros` (mapped memory here: the
    threshold lowered) and hold the rows' stored values as a small layout does; the
    next arrays served are laid out in the same memory where it holds them (zeros where
    they store nothing, whatever was there), in new memory where it does not."""
    made = []

    def recording(shape, dtype):
        made.append((shape, np.dtype(dtype)))
        return memory.small_page_zeros(shape, dtype)

    monkeypatch.setattr(batches, "small_page_zeros", recording)
    monkeypatch.setattr(memory, "POPULATE_BYTES", 64)
    rng = np.random.default_rng(0)
    n_rows, width = 300, 50
    X = _short_rows(rng, n_rows, width, 3, 8)
    loader = MiniBatchLoader([X, np.zeros((n_rows, 1))], 32, True,
                             np.random.RandomState(0), CPU, list)
    first = loader.stored_rows(np.float32)
    size = n_rows * 7
    assert made == [((size,), np.dtype(bool)), ((size,), np.dtype(np.int32)),
                    ((size,), np.dtype(np.float32))]
    assert first[0].shape == first[1].shape == (n_rows, 7)
    np.testing.assert_array_equal(_densified(first, X.shape), X.astype(np.float32).toarray())
    # Shorter rows: the same memory, zeros after each row's values.
    shorter = _short_rows(rng, n_rows, width, 1, 4)
    assert loader.refill([shorter, np.zeros((n_rows, 1))])
    second = loader.stored_rows(np.float32)
    assert len(made) == 3 and np.shares_memory(second[1], first[1])
    assert second[1].shape == (n_rows, 3)
    np.testing.assert_array_equal(_densified(second, X.shape),
                                  shorter.astype(np.float32).toarray())
    assert not second[1][np.arange(3) >= np.diff(shorter.indptr)[:, None]].any()
    # Longer rows: new memory.
    longer = _short_rows(rng, n_rows, width, 5, 12)
    assert loader.refill([longer, np.zeros((n_rows, 1))])
    third = loader.stored_rows(np.float32)
    assert len(made) == 6 and not np.shares_memory(third[1], first[1])
    np.testing.assert_array_equal(_densified(third, X.shape),
                                  longer.astype(np.float32).toarray())


def test_output_gradient_is_inverse_batch_weight():
    X = np.arange(10, dtype=np.float32).reshape((-1, 1))
    w = np.array([1, 2, 0, 0, 3, 1, 1, 1, 1, 1], dtype=np.float32)
    for shuffle in (False, True):
        loader = MiniBatchLoader([X, X.copy(), w], 4, shuffle, np.random.RandomState(0), CPU,
                                 list, weight_index=2)
        for _ in range(2):
            seen = 0.0
            for n, total, feeds in _batches(loader):
                weights = feeds[2].numpy()
                assert total == weights.sum() and len(weights) == n
                assert feeds[len(feeds) - 1].numpy() == np.float32(1 / total if total else 0)
                seen += total
            assert seen == w.sum()
    unweighted = MiniBatchLoader([X, X.copy()], 4, False, np.random.RandomState(0), CPU, list)
    assert [(n, t, f[len(f) - 1].numpy()) for n, t, f in _batches(unweighted)] == [
        (4, 4, np.float32(0.25)), (4, 4, np.float32(0.25)), (2, 2, np.float32(0.5))]


def test_feed_vectors_are_built_once_and_refilled_in_place():
    """On the CPU, every epoch returns the same vectors over the same buffers: a new
    permutation is seen through them without rebuilding anything."""
    X = np.arange(16, dtype=np.float32).reshape((-1, 2))
    loader = MiniBatchLoader([X, X[:, :1].copy()], 4, True, np.random.RandomState(1), CPU, list)
    first = _batches(loader)
    rows_first = [feeds[0].numpy().copy() for _, _, feeds in first]
    second = _batches(loader)
    assert all(a[2] is b[2] for a, b in zip(first, second, strict=True))
    rows_second = [feeds[0].numpy().copy() for _, _, feeds in second]
    assert not all(np.array_equal(a, b) for a, b in zip(rows_first, rows_second, strict=True))


def test_refill_reuses_the_loader_for_arrays_of_the_same_layout():
    """A partial_fit stream: new rows of the same shapes flow through the same vectors
    when shuffling; other shapes, dtypes or sparsity need a new loader."""
    rng = np.random.RandomState(0)
    X1, X2 = rng.rand(10, 3).astype(np.float32), rng.rand(10, 3).astype(np.float32)
    y1, y2 = (np.arange(10, 20, dtype=np.float32).reshape((-1, 1)) + k for k in (0, 10))
    loader = MiniBatchLoader([X1, y1], 4, True, np.random.RandomState(0), CPU, list)
    first = loader.epoch()(0)
    assert loader.refill([X2, y2])
    batches = _epoch(loader)
    assert loader.epoch()(0) is first
    labels = np.vstack([b[2] for b in batches]).ravel()
    assert sorted(labels.tolist()) == y2.ravel().tolist()
    np.testing.assert_array_equal(np.vstack([b[1] for b in batches]),
                                  X2[(labels - 20).astype(int)])
    assert not loader.refill([X2[:9], y2[:9]])
    assert not loader.refill([X2.astype(np.float64), y2])
    assert not loader.refill([sp.csr_matrix(X2), y2])


def test_refill_without_shuffle_only_takes_the_same_arrays():
    """Without shuffling the batches are views of the arrays themselves: other arrays,
    even of the same shape, need new vectors; the same ones (possibly changed in place)
    are served again, sample-weight totals recomputed."""
    X = np.arange(12, dtype=np.float32).reshape((-1, 2))
    y = X[:, :1].copy()
    w = np.ones(6, dtype=np.float32)
    loader = MiniBatchLoader([X, y, w], 4, False, np.random.RandomState(0), CPU, list,
                             weight_index=2)
    assert not loader.refill([X.copy(), y, w])
    assert not loader.refill([X[::-1], y, w])  # same memory, other rows: new vectors
    w[:4] = 2
    assert loader.refill([X, y.reshape((-1, 1)), w])  # a new view of the same memory
    loader.epoch()
    np.testing.assert_array_equal(loader.totals, [8, 2])


def test_feed_vectors_are_built_on_first_use(monkeypatch):
    """An epoch whose batches are read another way (the training program reads the
    buffers) builds no feed vector; a batch fed builds its own only, once."""
    built = record_calls(monkeypatch, MiniBatchLoader, "_vector")
    X = np.arange(16, dtype=np.float32).reshape((-1, 2))
    loader = MiniBatchLoader([X, X[:, :1].copy()], 2, True, np.random.RandomState(1), CPU, list)
    loader.epoch()
    assert built == []
    feed = loader.epoch()
    first = feed(2)
    assert feed(2) is first
    assert loader.epoch()(2) is first
    assert built == [2]


def test_epoch_without_features_draws_the_same_order_and_fills_on_demand():
    """``epoch(features=False)`` permutes the other arrays only: the order (and the random
    stream) are those of a full epoch, and ``fill_features`` copies the features in that
    order when a batch must be fed after all."""
    X = np.arange(40, dtype=np.float32).reshape((20, 2))
    y = np.arange(20, dtype=np.float32).reshape((-1, 1))
    full = MiniBatchLoader([X, y], 8, True, np.random.RandomState(5), CPU, list)
    lazy = MiniBatchLoader([X, y], 8, True, np.random.RandomState(5), CPU, list)
    assert lazy.generation == 0 and lazy.refill([X, y]) and lazy.generation == 1
    for _ in range(2):
        full.epoch()
        lazy.epoch(features=False)
        np.testing.assert_array_equal(lazy.order, full.order)
        np.testing.assert_array_equal(lazy.per_row[1], y[lazy.order])
        assert not np.array_equal(lazy.per_row[0], X[lazy.order])
        lazy.fill_features()
        np.testing.assert_array_equal(lazy.per_row[0], X[lazy.order])
        np.testing.assert_array_equal(lazy.starts, [0, 8, 16])
    assert lazy.features is X


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "sparse"])
def test_batch_arrays_are_the_rows_and_labels_fed(sparse):
    """``batch_arrays(i)`` after ``feed(i)``: the batch's features (densified) and labels
    as the feed holds them, a short last batch too."""
    rng = np.random.RandomState(2)
    dense = rng.rand(13, 4).astype(np.float32)
    dense[dense < 0.5] = 0
    labels = np.arange(13, dtype=np.float32).reshape((-1, 1))
    X = sp.csr_matrix(dense) if sparse else dense
    loader = MiniBatchLoader([X, labels], 5, True, np.random.RandomState(0), CPU, list)
    feed = loader.epoch()
    for index in range(len(loader)):
        fed = [value.numpy() for value in list(feed(index))[:2]]
        rows, ids = loader.batch_arrays(index)
        np.testing.assert_array_equal(rows, fed[0])
        np.testing.assert_array_equal(ids, fed[1])
        np.testing.assert_array_equal(rows, dense[ids.ravel().astype(int)])
