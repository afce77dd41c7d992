"""add_loss_output as the seed API documents it (seed 003): the loss values and shapes."""

import numpy as np
import pytest
from onnx import TensorProto
from onnxruntime import InferenceSession
from skl2onnx import to_onnx
from sklearn.linear_model import LinearRegression, LogisticRegression

from skl_ortgrad.graph.model import TARGET_OPSET
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
    label_input = next(i for i in with_loss.graph.input if i.name == "y")
    assert label_input.type.tensor_type.elem_type == TensorProto.INT64
    # The binary log loss of the probability of class 1 (the last column).
    proba = clf.predict_proba(X)[:, 1]
    expected = -float(np.sum(labels * np.log(proba) + (1 - labels) * np.log(1 - proba)))
    loss = _run(with_loss, {"X": X, "y": labels.reshape(-1, 1)})
    assert loss.shape == (1, 1)
    assert loss[0, 0] == pytest.approx(expected, rel=1e-3)
    with pytest.raises(ValueError, match=r"Names \['label'\] are already used in the model"):
        add_loss_output(onx, "log", output_index="probabilities")
