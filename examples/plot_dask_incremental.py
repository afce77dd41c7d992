"""
Scaling out with dask-ml Incremental
====================================

Because the estimators implement ``partial_fit`` and pickle (the ONNX bytes and the
numpy weights travel, onnxruntime sessions are rebuilt where they land),
:class:`dask_ml.wrappers.Incremental` can train one on a dask array larger than memory:
it passes the blocks one after the other to ``partial_fit`` on the workers of a
cluster. Here a :class:`distributed.LocalCluster` with two worker processes stands in
for a real cluster.
"""

import logging

import dask.array as da
import matplotlib.pyplot as plt
import numpy as np
from dask_ml.wrappers import Incremental
from distributed import Client, LocalCluster

from skl_ortgrad import LearningRateSGD, OnnxSGDRegressor

# distributed logs every worker and connection of the scheduler at INFO: warnings only.
logging.getLogger("distributed").setLevel(logging.WARNING)

rng = np.random.default_rng(0)
coef = rng.normal(size=8)
X = rng.normal(size=(6000, 8))
y = X @ coef + 0.5 + 0.1 * rng.normal(size=6000)
# 5000 training rows in 10 blocks, 1000 test rows.
X_train = da.from_array(X[:5000], chunks=(500, 8))
y_train = da.from_array(y[:5000], chunks=500)
X_test, y_test = X[5000:], y[5000:]


# %%
# Training on the cluster
# -----------------------
# Each ``partial_fit`` of the wrapper is one pass over the blocks; the wrapped
# estimator's ``n_iter_`` counts the blocks it has learned from. The guard keeps the
# worker processes, which import this file, from starting clusters of their own.


def train(client, passes=3):
    """Train on the blocks, return the fitted wrapper and the test R² after each pass."""
    rate = LearningRateSGD(learning_rate="constant", eta0=0.02)
    model = Incremental(OnnxSGDRegressor(learning_rate=rate, random_state=0),
                        shuffle_blocks=False)
    scores = []
    for _ in range(passes):
        model.partial_fit(X_train, y_train)
        scores.append(model.estimator_.score(X_test, y_test))
    return model, scores


if __name__ == "__main__":
    with LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        print("workers:", len(client.scheduler_info()["workers"]))
        model, scores = train(client)
        predicted = model.predict(da.from_array(X_test, chunks=500)).compute()
    estimator = model.estimator_
    print(f"blocks learned: {estimator.n_iter_}, test R² per pass: {np.round(scores, 4)}")
    print("largest gap between the dask and the local predictions:",
          f"{np.abs(predicted - estimator.predict(X_test)).max():.1e}")
    print("coefficients, true vs learned:")
    print(np.round(np.c_[coef, estimator.coef_], 3))

    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.bar(np.arange(8) - 0.2, coef, width=0.4, label="true")
    ax.bar(np.arange(8) + 0.2, estimator.coef_, width=0.4, label="learned on the cluster")
    ax.set_xlabel("feature")
    ax.set_ylabel("coefficient")
    ax.set_title("Incremental(OnnxSGDRegressor) on 2 worker processes")
    ax.legend()
    fig.tight_layout()
    plt.show()
