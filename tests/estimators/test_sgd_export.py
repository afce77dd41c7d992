"""to_onnx(): the trained graph served by onnxruntime predicts like the estimator."""

import numpy as np
import pytest
from onnxruntime import InferenceSession
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris

from skl_ortgrad import NegLogLearningLoss, OnnxSGDClassifier, OnnxSGDRegressor

# The former default multiclass loss: a softmax over the classes.
SOFTMAX = NegLogLearningLoss(eps=0.0, probability_function="softmax")


def _run(model, X):
    session = InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [out.name for out in session.get_outputs()]
    return dict(zip(names, session.run(None, {"X": X.astype(np.float32)}), strict=True))


def test_regressor_export_matches_predict():
    X, y = load_diabetes(return_X_y=True)
    model = OnnxSGDRegressor(random_state=0, max_iter=20).fit(X, y)
    onx = model.to_onnx()
    assert onx.ir_version <= 10
    assert all(op.version <= 21 for op in onx.opset_import if op.domain == "")
    got = _run(onx, X)
    np.testing.assert_allclose(got[onx.graph.output[0].name].ravel(), model.predict(X), rtol=1e-5)


@pytest.mark.parametrize("loss", [SOFTMAX, "log_loss", "hinge", "modified_huber"],
                         ids=["softmax", "log_loss", "hinge", "modified_huber"])
@pytest.mark.parametrize("labels", [None, ["setosa", "versicolor", "virginica"]])
def test_multiclass_export_matches_predict_and_proba(loss, labels):
    X, y = load_iris(return_X_y=True)
    if labels is not None:
        y = np.array(labels)[y]
    model = OnnxSGDClassifier(loss=loss, random_state=0, max_iter=20).fit(X, y)
    got = _run(model.to_onnx(), X)
    np.testing.assert_array_equal(got["label"], model.predict(X))
    if loss == "hinge":
        # No predict_proba for the hinge loss, as scikit-learn; the graph still writes
        # its normalized one-vs-rest sigmoids (uniform where float32 underflows them all).
        assert not hasattr(model, "predict_proba")
        assert (got["probabilities"] >= 0).all()
        np.testing.assert_allclose(got["probabilities"].sum(axis=1), 1, rtol=1e-5)
    else:
        np.testing.assert_allclose(got["probabilities"], model.predict_proba(X),
                                   rtol=1e-5, atol=1e-6)


def test_binary_string_labels_export():
    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(axis=0)) / X.std(axis=0)
    y = np.array(["benign", "malignant"])[y]
    model = OnnxSGDClassifier(loss="log_loss", random_state=0, max_iter=20).fit(X, y)
    got = _run(model.to_onnx(), X)
    np.testing.assert_array_equal(got["label"], model.predict(X))
    np.testing.assert_allclose(got["probabilities"], model.predict_proba(X), rtol=1e-5, atol=1e-6)
    # The export is a snapshot: later training does not change it.
    before = model.to_onnx()
    model.partial_fit(X, y)
    assert not np.allclose(_run(before, X)["probabilities"], model.predict_proba(X))
