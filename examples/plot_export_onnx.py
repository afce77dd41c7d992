"""
Export to ONNX and serve with onnxruntime
=========================================

The graph that was trained is the model to deploy: ``to_onnx()`` returns it as an
:class:`onnx.ModelProto` with the trained weights as initializers. Serving needs only
onnxruntime (or any ONNX runtime), neither scikit-learn nor skl_ortgrad. This example
trains a classifier on iris with string labels, saves the ONNX file (in a temporary
folder; ``onnx.save(model.to_onnx(), "iris.onnx")`` saves it where you like), loads it in
an :class:`onnxruntime.InferenceSession` and checks that its outputs are ``predict`` and
``predict_proba``.
"""

import os
import tempfile

import matplotlib.pyplot as plt
import numpy as np
import onnx
from onnxruntime import InferenceSession
from sklearn.datasets import load_iris
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import OnnxSGDClassifier

X, y = load_iris(return_X_y=True)
y = np.array(["setosa", "versicolor", "virginica"])[y]
X_train, X_test, y_train, y_test = train_test_split(X, y, stratify=y, random_state=0)
scaler = StandardScaler().fit(X_train)
X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
model = OnnxSGDClassifier(loss="log_loss", random_state=0).fit(X_train, y_train)
print(f"test accuracy {model.score(X_test, y_test):.3f}")

# %%
# Save the trained graph
# ----------------------
# The ONNX model takes one float32 input named ``X`` and returns the labels and the
# probabilities (no ZipMap: a plain matrix, one column per class of ``classes_``).

onx = model.to_onnx()
folder = tempfile.TemporaryDirectory()  # this example leaves no file behind
path = os.path.join(folder.name, "iris.onnx")
onnx.save(onx, path)
print(f"saved the model, {os.path.getsize(path)} bytes, as iris.onnx in a temporary folder "
      "(removed once onnxruntime has loaded it, below)")
print("inputs: ", [(i.name, i.type.tensor_type.elem_type) for i in onx.graph.input])
print("outputs:", [o.name for o in onx.graph.output])
print("opset:  ", {d.domain or "ai.onnx": d.version for d in onx.opset_import})

# %%
# Serve it with onnxruntime
# -------------------------

session = InferenceSession(path, providers=["CPUExecutionProvider"])
folder.cleanup()
print("temporary folder removed: the session keeps the model in memory")
labels, probabilities = session.run(None, {"X": X_test.astype(np.float32)})
assert np.array_equal(labels, model.predict(X_test))
gap = np.abs(probabilities - model.predict_proba(X_test)).max()
assert gap < 1e-5
print(f"labels equal to predict: True; largest probability gap: {gap:.1e}")
print("first labels served:", labels[:5].tolist())

# %%
# The served probabilities against ``predict_proba``, one point per test row and class.

fig, ax = plt.subplots(figsize=(4.5, 4))
for k, name in enumerate(model.classes_):
    ax.scatter(model.predict_proba(X_test)[:, k], probabilities[:, k], s=12, label=name)
ax.plot([0, 1], [0, 1], color="grey", linewidth=0.8)
ax.set_xlabel("OnnxSGDClassifier.predict_proba")
ax.set_ylabel("onnxruntime on iris.onnx")
ax.set_title("served = trained")
ax.legend()
fig.tight_layout()
plt.show()
