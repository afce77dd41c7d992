"""External data is read only from the folder the caller names, never from the current
directory by default, never through ``..`` or symbolic links."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, numpy_helper
from onnx import helper as oh
from onnx.external_data_helper import set_external_data

from skl_ortgrad.gradient.derivative import onnx_derivative
from skl_ortgrad.gradient.forward_backward import OrtGradientForwardBackward
from skl_ortgrad.graph.external import check_external_data
from skl_ortgrad.graph.weights import get_train_initializer
from skl_ortgrad.objective.merge import add_loss_output
from skl_ortgrad.training.optimizers_partial import OrtGradientForwardBackwardOptimizer

W = np.array([[1.5], [-2.0]], dtype=np.float32)
B = np.array([[0.25]], dtype=np.float32)


def _model(location="weights.bin", constant=False):
    """Y = X @ W + B, W stored as external data at ``location`` (or, with ``constant``, a
    Constant node's tensor)."""
    w = numpy_helper.from_array(W, "W")
    set_external_data(w, location, offset=0, length=W.nbytes)
    w.ClearField("raw_data")
    inits = [numpy_helper.from_array(B, "B")]
    nodes = [oh.make_node("MatMul", ["X", "W"], ["XW"]), oh.make_node("Add", ["XW", "B"], ["Y"])]
    if constant:
        nodes.insert(0, oh.make_node("Constant", [], ["W"], value=w))
    else:
        inits.insert(0, w)
    graph = oh.make_graph(
        nodes, "g", [oh.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2])],
        [oh.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 1])], inits,
    )
    return oh.make_model(graph, opset_imports=[oh.make_opsetid("", 21)], ir_version=10)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    """A folder holding the weights file, which is also the current directory."""
    (tmp_path / "weights.bin").write_bytes(W.tobytes())
    monkeypatch.chdir(tmp_path)
    return tmp_path


_REFUSED = r"The model stores initializer 'W' as external data \(location 'weights.bin'\)"


def test_refused_without_a_folder_everywhere(folder):
    """The file is right there in the current directory: nothing reads it unasked."""
    model = _model()
    with pytest.raises(ValueError, match=_REFUSED):
        check_external_data(model)
    with pytest.raises(ValueError, match=_REFUSED):
        get_train_initializer(model)
    X = np.ones((4, 2), dtype=np.float32)
    y = np.ones(4, dtype=np.float32)
    for weights in (None, ["W", "B"]):
        with pytest.raises(ValueError, match=_REFUSED):
            OrtGradientForwardBackwardOptimizer(model, weights_to_train=weights,
                                                max_iter=1).fit(X, y)
    # The seed API's other entry points.
    for call in (lambda: OrtGradientForwardBackward(model),
                 lambda: onnx_derivative(model),
                 lambda: add_loss_output(model)):
        with pytest.raises(ValueError, match=_REFUSED):
            call()


def test_read_from_the_folder_given(folder):
    model = _model()
    resolved = check_external_data(model, str(folder))
    assert model.graph.initializer[0].data_location == TensorProto.EXTERNAL  # not modified
    np.testing.assert_array_equal(numpy_helper.to_array(resolved.graph.initializer[0]), W)
    weights = get_train_initializer(model, external_data_dir=str(folder))
    np.testing.assert_array_equal(weights["W"], W)
    X = np.random.RandomState(0).randn(16, 2).astype(np.float32)
    optimizer = OrtGradientForwardBackwardOptimizer(
        model, max_iter=1, external_data_dir=str(folder), learning_rate=1e-3
    ).fit(X, (X @ W + B).ravel())
    # Started from the external weights, which fit the data exactly: nothing to learn.
    np.testing.assert_allclose(optimizer.weights_[0], W, atol=1e-6)
    engine = OrtGradientForwardBackward(model, external_data_dir=str(folder))
    np.testing.assert_array_equal(engine.get_initializer("W"), W)
    grad = onnx_derivative(model, external_data_dir=str(folder))
    assert [o.name for o in grad.graph.output] == ["X_grad", "W_grad", "B_grad"]
    with_loss = add_loss_output(model, external_data_dir=str(folder))
    # The result holds the values: nothing external left to refuse.
    assert check_external_data(with_loss) is with_loss


def test_model_without_external_data_is_returned_as_is():
    model = onnx.ModelProto()
    model.CopyFrom(_model())
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(W, "W"))
    assert check_external_data(model) is model


@pytest.mark.parametrize(("location", "message"), [
    ("../secret.bin", r"only a relative path inside .* without '\.\.' may be read"),
    ("sub/../../secret.bin", r"without '\.\.'"),
    ("/etc/passwd", r"only a relative path"),
    ("link.bin", r"through the symbolic link .*link\.bin.*: symbolic links are not followed"),
    ("linked/weights.bin", r"through the symbolic link .*linked.*: symbolic links"),
    ("missing.bin", r"which is not a file in"),
    ("sub", r"'sub', which is not a file in"),
], ids=["parent", "nested-parent", "absolute", "symlink", "symlinked-folder", "missing",
        "folder"])
def test_paths_leaving_the_folder_are_refused(tmp_path, location, message):
    inside = tmp_path / "inside"
    (inside / "sub").mkdir(parents=True)
    (tmp_path / "secret.bin").write_bytes(W.tobytes())
    (inside / "link.bin").symlink_to(tmp_path / "secret.bin")
    (inside / "linked").symlink_to(tmp_path, target_is_directory=True)
    (tmp_path / "weights.bin").write_bytes(W.tobytes())
    with pytest.raises(ValueError, match=message):
        check_external_data(_model(location), str(inside))


def test_constant_nodes_and_training_info_are_checked_too(folder):
    with pytest.raises(ValueError, match=r"stores attribute 'value' of node 'Constant'"):
        check_external_data(_model(constant=True))
    resolved = check_external_data(_model(constant=True), str(folder))
    np.testing.assert_array_equal(numpy_helper.to_array(resolved.graph.node[0].attribute[0].t), W)
    model = _model()
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(W, "W"))
    state = numpy_helper.from_array(W, "state")
    set_external_data(state, "weights.bin", offset=0, length=W.nbytes)
    state.ClearField("raw_data")
    model.training_info.add().algorithm.initializer.append(state)
    with pytest.raises(ValueError, match=r"stores initializer 'state' as external data"):
        check_external_data(model)


def test_a_file_too_short_is_refused(folder):
    (folder / "short.bin").write_bytes(W.tobytes()[:4])
    with pytest.raises(ValueError, match="exceeds"):
        check_external_data(_model("short.bin"), str(folder))


def test_an_optimizer_pickled_before_the_parameter_existed_trains(folder):
    """Pickles of the previous version hold no external_data_dir: they read no external
    data, and train as before."""
    model = onnx.ModelProto()
    model.CopyFrom(_model())
    model.graph.initializer[0].CopyFrom(numpy_helper.from_array(W, "W"))
    X = np.random.RandomState(0).randn(16, 2).astype(np.float32)
    optimizer = OrtGradientForwardBackwardOptimizer(model, max_iter=1).fit(X, X[:, 0])
    state = optimizer.__getstate__()
    del state["external_data_dir"]
    old = OrtGradientForwardBackwardOptimizer.__new__(OrtGradientForwardBackwardOptimizer)
    old.__setstate__(state)
    assert old.external_data_dir is None
    old.partial_fit(X, X[:, 0])
    optimizer.partial_fit(X, X[:, 0])
    np.testing.assert_array_equal(old.weights_[0], optimizer.weights_[0])
