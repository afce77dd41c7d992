"""Mini-batches: each row once per epoch, seeded permutations, sparse densified per batch."""

import numpy as np
import scipy.sparse as sp
from onnxruntime.capi._pybind_state import OrtValue

from skl_ortgrad.training.data_loader import MiniBatchLoader
from skl_ortgrad.training.ortgradient import ort_device

CPU = ort_device("cpu")


def _epoch(loader):
    return [(n, feeds[0].numpy().copy(), feeds[1].numpy().copy()) for n, _, feeds, _ in loader]


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
        assert all(len(feeds) == 3 for _, _, feeds, _ in loader)
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


def test_output_gradient_is_inverse_batch_weight():
    X = np.arange(10, dtype=np.float32).reshape((-1, 1))
    w = np.array([1, 2, 0, 0, 3, 1, 1, 1, 1, 1], dtype=np.float32)
    for shuffle in (False, True):
        loader = MiniBatchLoader([X, X.copy(), w], 4, shuffle, np.random.RandomState(0), CPU,
                                 list, weight_index=2)
        for _ in range(2):
            seen = 0.0
            for n, total, feeds, grad in loader:
                weights = feeds[2].numpy()
                assert total == weights.sum() and len(weights) == n
                assert grad[0].numpy() == np.float32(1 / total if total else 0)
                seen += total
            assert seen == w.sum()
    unweighted = MiniBatchLoader([X, X.copy()], 4, False, np.random.RandomState(0), CPU, list)
    assert [(n, t, g[0].numpy()) for n, t, _, g in unweighted] == [
        (4, 4, np.float32(0.25)), (4, 4, np.float32(0.25)), (2, 2, np.float32(0.5))]
