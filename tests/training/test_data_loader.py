"""The seed API's mini-batch loader: batch counts, starts, contents, devices, pickling."""

import pickle

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnxruntime import InferenceSession
from onnxruntime.capi._pybind_state import OrtValue

from skl_ortgrad.training.data_loader import OrtDataLoader

RNG = np.random.default_rng(0)
X = RNG.standard_normal((101, 3))
Y = RNG.standard_normal(101)
W = RNG.uniform(1, 2, 101)


def test_sequential_batches_are_full_and_cover_every_row():
    data = OrtDataLoader(X, Y, batch_size=5, random_iter=False)
    assert len(data) == 101
    assert data.starts() == [*range(0, 100, 5), 96]  # ceil(101 / 5) = 21, the last moved back
    batches = list(data.iter_numpy())
    assert len(batches) == 21
    for (x, y), start in zip(batches, data.starts(), strict=True):
        np.testing.assert_array_equal(x, X[start:start + 5])
        np.testing.assert_array_equal(y, Y[start:start + 5].reshape((-1, 1)))
    covered = np.zeros(101, dtype=bool)
    for start in data.starts():
        covered[start:start + 5] = True
    assert covered.all()


def test_random_starts_are_reproducible_and_in_range():
    first = OrtDataLoader(X, Y, W, batch_size=7, random_state=3)
    second = OrtDataLoader(X, Y, W, batch_size=7, random_state=3)
    starts = first.starts()
    assert starts == second.starts()
    assert len(starts) == 15 and min(starts) >= 0 and max(starts) <= 101 - 7
    for x, y, w in first.iter_numpy():
        assert x.shape == (7, 3) and y.shape == (7, 1) and w.shape == (7,)
        start = int(np.flatnonzero((X == x[0]).all(axis=1))[0])
        np.testing.assert_array_equal(w, W[start:start + 7])


def test_a_small_dataset_is_one_batch_and_desc():
    data = OrtDataLoader(X[:11], Y[:11], W[:11], batch_size=15)
    assert data.starts() == [0]
    (x, y, w), = data.iter_numpy()
    assert x.shape == (11, 3) and y.shape == (11, 1) and w.shape == (11,)
    assert data.desc == [((11, 3), np.float64), ((11, 1), np.float64), ((11,), np.float64)]
    assert isinstance(data.data_np, tuple) and isinstance(data.data_ort, tuple)
    assert repr(data) == "OrtDataLoader(..., ..., batch_size=15, device='cpu')"
    # A label matrix keeps its columns.
    assert OrtDataLoader(X, np.ones((101, 2)), batch_size=5).desc[1] == ((101, 2), np.float64)


def test_ort_values_borrow_the_rows():
    data = OrtDataLoader(X, Y, batch_size=10, random_iter=False)
    for (x, y), start in zip(data.iter_ortvalue(), data.starts(), strict=True):
        assert isinstance(x, OrtValue) and x.shape() == [10, 3]
        np.testing.assert_array_equal(x.numpy(), X[start:start + 10])
        # On the CPU a batch is the dataset's own memory, at its row.
        assert x.data_ptr() == data.data_np[0][start:].ctypes.data
        np.testing.assert_array_equal(y.numpy().ravel(), Y[start:start + 10])


def test_pickle_keeps_data_and_settings():
    data = pickle.loads(pickle.dumps(OrtDataLoader(X, Y, W, batch_size=5, random_iter=False)))
    assert data.desc == [((101, 3), np.float64), ((101, 1), np.float64), ((101,), np.float64)]
    assert isinstance(data.data_ort[2], OrtValue)
    batches = list(data.iter_ortvalue())
    assert len(batches) == 21
    np.testing.assert_array_equal(batches[-1][2].numpy(), W[96:])


def test_errors():
    with pytest.raises(ValueError, match="Unknown device 'cpu2'"):
        OrtDataLoader(X, Y, batch_size=5, device="cpu2")
    with pytest.raises(ValueError, match=r"as many rows, got \[101, 100\]"):
        OrtDataLoader(X, Y[:100])
    with pytest.raises(ValueError, match="a name for each of the 3 arrays"):
        next(OrtDataLoader(X, Y, W).iter_bind(None, ["X", "y"]))


def test_iter_bind_feeds_each_batch_to_a_session():
    graph = helper.make_graph(
        [helper.make_node("Identity", ["X"], ["X_out"]),
         helper.make_node("Identity", ["y"], ["y_out"])],
        "pass", [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [None, 3]),
                 helper.make_tensor_value_info("y", TensorProto.DOUBLE, [None, 1])],
        [helper.make_tensor_value_info("X_out", TensorProto.DOUBLE, [None, 3]),
         helper.make_tensor_value_info("y_out", TensorProto.DOUBLE, [None, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                              ir_version=10)
    onnx.checker.check_model(model)
    session = InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    binding = session.io_binding()
    data = OrtDataLoader(X, Y, batch_size=8, random_iter=False)
    sizes = []
    for size, start in zip(data.iter_bind(binding._iobinding, ["X", "y"]), data.starts(),
                           strict=True):
        binding.bind_output("X_out")
        binding.bind_output("y_out")
        session.run_with_iobinding(binding)
        x_out, y_out = binding.copy_outputs_to_cpu()
        np.testing.assert_array_equal(x_out, X[start:start + 8])
        np.testing.assert_array_equal(y_out.ravel(), Y[start:start + 8])
        sizes.append(size)
    assert sizes == [8] * 13
