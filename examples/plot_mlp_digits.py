"""
Neural network on digits
========================

:class:`~skl_ortgrad.OnnxMLPClassifier` builds a scikit-learn ``MLPClassifier`` of the
requested shape, initialized as scikit-learn does, converts it with skl2onnx, and trains
every layer of the ONNX graph with Adam through onnxruntime-training. It is compared
with scikit-learn's own ``MLPClassifier`` on the same split, and the trained graph is
served by onnxruntime.
"""

import time

import matplotlib.pyplot as plt
import numpy as np
from onnxruntime import InferenceSession
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

from skl_ortgrad import OnnxMLPClassifier

X, y = load_digits(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X / 16, y, random_state=0)

models = {
    "skl_ortgrad": OnnxMLPClassifier(hidden_layer_sizes=(64,), random_state=0),
    "scikit-learn": MLPClassifier(hidden_layer_sizes=(64,), random_state=0),
}
for name, model in models.items():
    start = time.perf_counter()
    model.fit(X_train, y_train)
    print(f"{name:<13} accuracy {model.score(X_test, y_test):.4f} "
          f"in {model.n_iter_} epochs, {time.perf_counter() - start:.2f}s")

# %%
# The trained graph, served by onnxruntime, predicts like the estimator.
ours = models["skl_ortgrad"]
session = InferenceSession(ours.to_onnx().SerializeToString())
labels, probabilities = session.run(None, {"X": X_test.astype(np.float32)})
print("labels equal:", np.array_equal(labels, ours.predict(X_test)))
print("largest probability gap:", np.abs(probabilities - ours.predict_proba(X_test)).max())

# %%
# Training loss per epoch of both networks.
fig, ax = plt.subplots(figsize=(6, 3.5))
for name, model in models.items():
    ax.plot(model.loss_curve_, label=name)
ax.set_xlabel("epoch")
ax.set_ylabel("training loss")
ax.set_yscale("log")
ax.legend()
fig.tight_layout()
plt.show()
