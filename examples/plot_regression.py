"""
Regression compared with scikit-learn
=====================================

:class:`~skl_ortgrad.OnnxSGDRegressor` trains the ONNX graph of a linear regression with
onnxruntime-training. Here it learns the diabetes data set next to scikit-learn's
:class:`~sklearn.linear_model.SGDRegressor`, one epoch at a time, and both learning
curves (test R² after every epoch) are drawn; then
:func:`skl_ortgrad.plotting.plot_learning_curve` draws the training loss that ``fit``
records in ``loss_curve_``.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_diabetes
from sklearn.linear_model import SGDRegressor
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import OnnxSGDRegressor
from skl_ortgrad.plotting import plot_learning_curve

X, y = load_diabetes(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
scaler = StandardScaler().fit(X_train)
X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)

# %%
# One epoch per ``partial_fit`` call
# ----------------------------------
# Both estimators use their default schedules (``invscaling``); ours updates the weights
# once per mini-batch of 32 rows with a step scaled to the batch, scikit-learn once per
# sample.

epochs = 60
ours = OnnxSGDRegressor(random_state=0)
theirs = SGDRegressor(random_state=0)
scores = {"skl_ortgrad": [], "scikit-learn": []}
for _ in range(epochs):
    ours.partial_fit(X_train, y_train)
    theirs.partial_fit(X_train, y_train)
    scores["skl_ortgrad"].append(ours.score(X_test, y_test))
    scores["scikit-learn"].append(theirs.score(X_test, y_test))

for name, values in scores.items():
    print(f"{name:<13} test R² after {epochs} epochs: {values[-1]:.3f}")

fig, ax = plt.subplots(figsize=(6, 3.5))
for name, values in scores.items():
    ax.plot(np.arange(1, epochs + 1), values, label=name)
ax.set_xlabel("epoch")
ax.set_ylabel("test R²")
ax.set_ylim(0, 0.5)
ax.set_title("diabetes: test R² per epoch")
ax.legend()
fig.tight_layout()

# %%
# ``fit`` and the recorded loss curve
# -----------------------------------
# ``fit`` stops when the training loss has not improved by ``tol`` for
# ``n_iter_no_change`` epochs, as scikit-learn's SGD does. The loss per epoch is in
# ``loss_curve_`` (half the squared error, plus the penalty).

fitted = OnnxSGDRegressor(random_state=0).fit(X_train, y_train)
print(f"fit: {fitted.n_iter_} epochs, test R² {fitted.score(X_test, y_test):.3f}")
print("coef_:", np.round(fitted.coef_, 1))
ax = plot_learning_curve(fitted)
ax.set_yscale("log")
ax.figure.tight_layout()
plt.show()
