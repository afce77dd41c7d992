"""add_loss_output as the seed API documents it (seed 003): the loss values and shapes."""

import numpy as np
import pytest
from onnx import TensorProto
from onnxruntime import InferenceSession
from skl2onnx import to_onnx
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.metrics import log_loss

from skl_ortgrad.graph.model import OPSET, TARGET_OPSET
from skl_ortgrad.utils.orttraining_helper import add_loss_output

RNG = np.random.default_rng(3)
X = RNG.standard_normal((30, 3)).astype(np.float32)
Y = (X @ np.array([1.0, -2.0, 0.5]) + 0.3 + RNG.standard_normal(30)).astype(np.float32)


def _run(model, feeds):
    session = InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, feeds)[0]


@pytest.fixture(scope="module")
def linreg():
    model = LinearRegression().fit(X, Y + 1)  # not the optimum of Y: residuals are large
    onx = to_onnx(model, X[:1], target_opset=TARGET_OPSET, black_op={"LinearRegressor"})
    return model, onx


def test_squared_error_is_the_sum_of_squares(linreg):
    model, onx = linreg
    loss = _run(add_loss_output(onx), {"X": X, "label": Y.reshape(-1, 1)})
    assert loss.shape == (1, 1) and loss.dtype == np.float32
    expected = float(np.sum((model.predict(X) - Y) ** 2))
    assert loss[0, 0] == pytest.approx(expected, rel=1e-5)


def test_elastic_is_l1_abs_plus_l2_square(linreg):
    model, onx = linreg
    with_loss = add_loss_output(onx, "elastic", l1_weight=0.3, l2_weight=0.7)
    d = model.predict(X) - Y
    expected = float(np.sum(0.3 * np.abs(d) + 0.7 * d**2))
    assert _run(with_loss, {"X": X, "label": Y.reshape(-1, 1)})[0, 0] == pytest.approx(
        expected, rel=1e-5)


def test_weighted_loss_and_output_by_name(linreg):
    model, onx = linreg
    weights = RNG.uniform(0, 2, len(X)).astype(np.float32)
    with_loss = add_loss_output(onx, output_index="variable", weight_name="weight")
    loss = _run(with_loss, {"X": X, "label": Y.reshape(-1, 1), "weight": weights})
    expected = float(np.sum(weights * (model.predict(X) - Y) ** 2))
    assert loss[0, 0] == pytest.approx(expected, rel=1e-5)
    with pytest.raises(ValueError, match=r"'proba' is not an output of \['variable'\]"):
        add_loss_output(onx, output_index="proba")


def test_log_loss_takes_int64_labels():
    labels = (Y > np.median(Y)).astype(np.int64)
    clf = LogisticRegression().fit(X, labels)
    onx = to_onnx(clf, X[:1], target_opset=TARGET_OPSET, options={"zipmap": False},
                  black_op={"LinearClassifier"})
    with_loss = add_loss_output(onx, "log", output_index="probabilities", label_name="y",
                                eps=1e-7)
    # The seed's graph clips the probabilities themselves (onnxcustom's test reads it).
    assert any(node.op_type == "Clip" and node.input[0] == "probabilities"
               for node in with_loss.graph.node)
    label_input = next(i for i in with_loss.graph.input if i.name == "y")
    assert label_input.type.tensor_type.elem_type == TensorProto.INT64
    # The binary log loss of the probability of class 1 (the last column), averaged.
    proba = clf.predict_proba(X)[:, 1]
    expected = -float(np.mean(labels * np.log(proba) + (1 - labels) * np.log(1 - proba)))
    assert expected == pytest.approx(log_loss(labels, proba), rel=1e-6)
    loss = _run(with_loss, {"X": X, "y": labels.reshape(-1, 1)})
    assert loss.shape == (1, 1)
    assert loss[0, 0] == pytest.approx(expected, rel=1e-3)
    # onnxcustom's test_add_loss_output_cls: the classifier's output 'label' goes with the
    # nodes computing it, the name is free for the label input.
    default = add_loss_output(onx, "log", output_index="probabilities")
    assert "ArgMax" not in {node.op_type for node in default.graph.node}
    assert _run(default, {"X": X, "label": labels.reshape(-1, 1)})[0, 0] == pytest.approx(
        expected, rel=1e-3)
    with pytest.raises(ValueError, match=r"Names \['coef'\] are already used in the model"):
        add_loss_output(onx, "log", output_index="probabilities", label_name="coef")


def _identity_of_probabilities(dtype):
    """A model returning its input: two columns of probabilities."""
    from onnx import helper

    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    graph = helper.make_graph(
        [helper.make_node("Identity", ["X"], ["Y"])], "identity",
        [helper.make_tensor_value_info("X", elem, [None, 2])],
        [helper.make_tensor_value_info("Y", elem, [None, 2])],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             ir_version=10)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_log_loss_is_scikit_learns_mean_with_clipping(dtype):
    """onnxcustom's test_add_log_loss: p in {0, 1} clipped to [eps, 1 - eps], averaged."""
    p = np.array([0, 0, 0.2, 0.5, 0.8, 1, 1])
    y = np.array([0, 1, 0, 1, 1, 1, 0], dtype=np.int64)
    X = np.vstack([1 - p, p]).T.astype(dtype)
    with_loss = add_loss_output(_identity_of_probabilities(dtype), "log", eps=1e-6)
    loss = _run(with_loss, {"X": X, "label": y.reshape(-1, 1)})
    # The clipping bounds in the model's dtype: 1 - 1e-6 rounds to 1 - 1.013e-6 in float32.
    clipped = np.clip(X[:, 1], dtype(1e-6), dtype(1) - dtype(1e-6))
    expected = log_loss(y, np.vstack([1 - clipped, clipped]).T.astype(np.float64))
    assert loss[0, 0] == pytest.approx(expected, rel=1e-6 if dtype == np.float32 else 1e-12)
    if dtype == np.float64:  # the exact bounds: scikit-learn's own clipping
        assert loss[0, 0] == pytest.approx(log_loss(y, np.clip(p, 1e-6, 1 - 1e-6)), rel=1e-12)
    # Weighted: the mean of w_i l_i over the rows (not divided by the sum of weights).
    weights = np.arange(1, 8).astype(dtype)
    weighted = add_loss_output(_identity_of_probabilities(dtype), "log", eps=1e-6,
                               weight_name="weight")
    c = clipped.astype(np.float64)
    per_row = -(y * np.log(c) + (1 - y) * np.log(1 - c))
    loss = _run(weighted, {"X": X, "label": y.reshape(-1, 1), "weight": weights})
    assert loss[0, 0] == pytest.approx(float(np.mean(weights * per_row)), rel=1e-5)


def test_log_loss_eps_at_most_zero_clips_nothing():
    """onnxcustom's test_add_loss_output_cls passes eps=1 - 6: no clipping, no refusal."""
    p = np.array([0.1, 0.4, 0.9])
    y = np.array([0, 1, 1], dtype=np.int64)
    X = np.vstack([1 - p, p]).T.astype(np.float32)
    for eps in (0.0, -5.0):
        with_loss = add_loss_output(_identity_of_probabilities(np.float32), "log", eps=eps)
        loss = _run(with_loss, {"X": X, "label": y.reshape(-1, 1)})
        assert loss[0, 0] == pytest.approx(log_loss(y, p), rel=1e-5)
    with pytest.raises(ValueError, match=r"eps < 0\.5"):
        add_loss_output(_identity_of_probabilities(np.float32), "log", eps=0.5)
