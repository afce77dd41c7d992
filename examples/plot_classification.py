"""
Binary and multiclass classification
====================================

:class:`~skl_ortgrad.OnnxSGDClassifier` trains a logistic model in ONNX: one score and
the logistic loss for two classes, one score per class and the softmax cross-entropy
for more. Labels can be any values scikit-learn accepts (here integers, then strings).
Each problem ends with the confusion matrix of the test set.
"""

import matplotlib.pyplot as plt
import numpy as np
from sklearn.datasets import load_breast_cancer, load_digits
from sklearn.linear_model import SGDClassifier
from sklearn.metrics import ConfusionMatrixDisplay
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import OnnxSGDClassifier

# %%
# Binary: breast cancer
# ---------------------
# The parameters are :class:`~sklearn.linear_model.SGDClassifier`'s, with its defaults
# (hinge loss, ``'optimal'`` schedule); ``loss="log_loss"`` gives probabilities.

X, y = load_breast_cancer(return_X_y=True)
X_train, X_test, y_train, y_test = train_test_split(X, y, stratify=y, random_state=0)
binary = make_pipeline(StandardScaler(), OnnxSGDClassifier(loss="log_loss", random_state=0))
binary.fit(X_train, y_train)
reference = make_pipeline(StandardScaler(), SGDClassifier(loss="log_loss", random_state=0))
reference.fit(X_train, y_train)
print(f"skl_ortgrad  accuracy {binary.score(X_test, y_test):.3f}")
print(f"scikit-learn accuracy {reference.score(X_test, y_test):.3f}")
print("probabilities of the first 3 test rows:")
print(np.round(binary.predict_proba(X_test[:3]), 3))

fig, ax = plt.subplots(figsize=(4, 3.5))
ConfusionMatrixDisplay.from_estimator(
    binary, X_test, y_test, display_labels=["malignant", "benign"], ax=ax, colorbar=False
)
ax.set_title("breast cancer (binary)")
fig.tight_layout()

# %%
# Multiclass: digits with string labels
# -------------------------------------
# Ten classes train ten one-vs-rest scores in one graph, as scikit-learn's SGD.
# ``classes_`` keeps the labels as given.

X, y = load_digits(return_X_y=True)
names = np.array(["zero", "one", "two", "three", "four", "five", "six", "seven",
                  "eight", "nine"])
y = names[y]
X_train, X_test, y_train, y_test = train_test_split(X, y, stratify=y, random_state=0)
multiclass = make_pipeline(StandardScaler(), OnnxSGDClassifier(random_state=0))
multiclass.fit(X_train, y_train)
classifier = multiclass[-1]
print("classes_:", classifier.classes_)
print(f"coef_ shape {classifier.coef_.shape}, epochs {classifier.n_iter_}")
print(f"test accuracy {multiclass.score(X_test, y_test):.3f}")

fig, ax = plt.subplots(figsize=(6.5, 5.5))
ConfusionMatrixDisplay.from_estimator(
    multiclass, X_test, y_test, labels=names, ax=ax, colorbar=False,
    xticks_rotation="vertical",
)
ax.set_title("digits (10 classes)")
fig.tight_layout()
plt.show()
