"""
Streaming with partial_fit
==========================

``partial_fit`` runs one epoch over the rows it is given and continues from the current
weights and step counter ``t_``, so a model can learn from data arriving in chunks that
never sit in memory together. Here a stream of 40 chunks of a regression problem whose
coefficients drift halfway through is learned chunk by chunk; the score on the next chunk
(before training on it) shows the model following the change.
"""

import matplotlib.pyplot as plt
import numpy as np

from skl_ortgrad import LearningRateSGD, OnnxSGDRegressor

rng = np.random.default_rng(0)
n_features, chunk_size, n_chunks = 10, 250, 40
coef_before = rng.normal(size=n_features)
coef_after = coef_before + rng.normal(scale=1.0, size=n_features)


def chunk(i):
    """Rows ``i * chunk_size`` to ``(i + 1) * chunk_size`` of the stream."""
    X = rng.normal(size=(chunk_size, n_features))
    coef = coef_before if i < n_chunks // 2 else coef_after
    return X, X @ coef + 0.1 * rng.normal(size=chunk_size)


# %%
# Learning the stream
# -------------------
# A constant rate keeps the model able to follow a change; a decaying schedule
# (``invscaling``, the default) would adapt more and more slowly.

model = OnnxSGDRegressor(learning_rate=LearningRateSGD(learning_rate="constant", eta0=0.02),
                         random_state=0)
scores = []
for i in range(n_chunks):
    X, y = chunk(i)
    if i:
        scores.append(model.score(X, y))  # test on the chunk before learning from it
    model.partial_fit(X, y)
print(f"{model.n_iter_} partial_fit calls, t_ = {model.t_:.0f}")
print(f"R² on the chunk before the drift: {scores[n_chunks // 2 - 2]:.3f}, "
      f"right after it: {scores[n_chunks // 2 - 1]:.3f}, at the end: {scores[-1]:.3f}")

fig, ax = plt.subplots(figsize=(6, 3.5))
ax.plot(np.arange(1, n_chunks), scores, marker=".")
ax.axvline(n_chunks // 2, color="C3", linestyle=":", label="coefficients change")
ax.set_xlabel("chunk")
ax.set_ylabel("R² on the chunk, before learning it")
ax.set_ylim(-0.5, 1.05)
ax.set_title("partial_fit over a stream of chunks")
ax.legend(loc="lower right")
fig.tight_layout()
plt.show()
