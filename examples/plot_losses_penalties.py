"""
Choosing the loss and the penalty, in float32 or float64
========================================================

The loss and the penalty are objects: :class:`~skl_ortgrad.HuberLearningLoss` keeps a few
outliers from pulling a linear regression away, and
:class:`~skl_ortgrad.ElasticLearningPenalty` with an L1 part sets the coefficients of
useless features to exactly zero. ``dtype=np.float64`` trains the same graph in double
precision.
"""

import matplotlib.pyplot as plt
import numpy as np

from skl_ortgrad import (
    ElasticLearningPenalty,
    HuberLearningLoss,
    LearningRateSGD,
    OnnxSGDRegressor,
    SquareLearningLoss,
)

rng = np.random.RandomState(0)
X = rng.randn(400, 10)
coef = np.array([3.0, -2.0, 1.5, 0, 0, 0, 0, 0, 0, 0])
y = X @ coef + 0.1 * rng.randn(400)
y[:20] += 30  # outliers

models = {
    "squared loss": OnnxSGDRegressor(loss=SquareLearningLoss()),
    "Huber loss": OnnxSGDRegressor(loss=HuberLearningLoss(epsilon=1.0)),
    "Huber loss + L1 penalty, float64": OnnxSGDRegressor(
        loss=HuberLearningLoss(epsilon=1.0),
        penalty=ElasticLearningPenalty(l1=0.03, l2=0.0), dtype=np.float64),
}
fig, ax = plt.subplots(figsize=(7, 3.5))
for i, (name, model) in enumerate(models.items()):
    model.set_params(learning_rate=LearningRateSGD(eta0=0.05, learning_rate="constant"),
                     max_iter=50, tol=None, random_state=0)
    model.fit(X, y)
    print(f"{name:34s} coef_ = {np.round(model.coef_, 2)}, zero: {np.sum(model.coef_ == 0)}")
    ax.bar(np.arange(10) + 0.25 * (i - 1), model.coef_, width=0.25, label=name)
ax.plot(np.arange(10), coef, "k_", markersize=18, label="true coefficients")
ax.set_xlabel("feature")
ax.set_ylabel("coefficient")
ax.set_title("5% outliers: Huber is not pulled away, L1 zeroes useless features")
ax.legend(loc="upper right", fontsize="small")
fig.tight_layout()
plt.show()
