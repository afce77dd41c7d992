"""
Fine-tuning a fitted pipeline on new data
=========================================

A model converted to ONNX is usually frozen. Here a scaler + ridge regression pipeline
was fitted on old data; on new data the relation between features and target has
drifted. :class:`~skl_ortgrad.OnnxGradientRegressor` keeps the scaler frozen and
continues training the ridge weights from their fitted values, one ``partial_fit`` per
chunk of new data. ``estimator_`` is the updated scikit-learn pipeline and ``to_onnx()``
the whole updated graph, ready to serve.
"""

import matplotlib.pyplot as plt
import numpy as np
from onnxruntime import InferenceSession
from sklearn.datasets import load_diabetes
from sklearn.linear_model import Ridge
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import OnnxGradientRegressor

X, y = load_diabetes(return_X_y=True)
y = y.copy()
y[200:] = 1.3 * y[200:] + 20  # the new data follows another relation
X_old, y_old, X_new, y_new = X[:200], y[:200], X[200:], y[200:]

fitted = make_pipeline(StandardScaler(), Ridge()).fit(X_old, y_old)
print(f"fitted pipeline on the new data: R² {fitted.score(X_new, y_new):.3f}")

tuned = OnnxGradientRegressor(fitted, learning_rate=0.01, random_state=0)
chunks = np.array_split(np.arange(len(X_new)), 4)
scores = []
for _ in range(25):
    for chunk in chunks:
        tuned.partial_fit(X_new[chunk], y_new[chunk])
    scores.append(tuned.score(X_new, y_new))
print(f"after fine-tuning: R² {scores[-1]:.3f}")

# %%
# The updated pipeline and the exported graph agree with the estimator.
session = InferenceSession(tuned.to_onnx().SerializeToString())
served = session.run(None, {"X": X_new.astype(np.float32)})[0].ravel()
predicted = tuned.predict(X_new)
print("estimator_ vs predict:", np.abs(tuned.estimator_.predict(X_new) - predicted).max())
print("ONNX vs predict:", np.abs(served - predicted).max())

# %%
fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(np.arange(1, len(scores) + 1), scores, marker=".", label="fine-tuned")
ax.axhline(fitted.score(X_new, y_new), color="gray", linestyle="--", label="fitted on old data")
ax.set_xlabel("passes over the new data (4 partial_fit calls each)")
ax.set_ylabel("R² on the new data")
ax.legend()
fig.tight_layout()
plt.show()
