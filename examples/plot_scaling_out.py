"""
Scaling out: dask-ml, joblib on a cluster, Parquet streaming
============================================================

The estimators implement ``partial_fit`` and pickle (the ONNX bytes and the numpy weights
travel, onnxruntime sessions are rebuilt where they land), so the tools that scale
scikit-learn scale them too. This example runs, on a :class:`distributed.LocalCluster`
with two worker processes standing in for a real cluster:

* :class:`dask_ml.wrappers.Incremental`: one model trained on a dask array block by
  block, on the workers;
* :class:`dask_ml.wrappers.ParallelPostFit`: the predictions of a fitted model computed
  on the workers, block by block, in parallel;
* a :class:`~sklearn.model_selection.GridSearchCV` whose fits run on the workers through
  joblib's dask backend;

then streams a Parquet file into ``partial_fit`` with pyarrow, a batch at a time. See
:doc:`/scaling` for Spark and Ray, memory and what ships to a worker.
"""

import logging
import os
import tempfile

import dask.array as da
import joblib
import matplotlib.pyplot as plt
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from dask_ml.wrappers import Incremental, ParallelPostFit
from distributed import Client, LocalCluster
from sklearn.model_selection import GridSearchCV

from skl_ortgrad import LearningRateSGD, OnnxSGDRegressor

# distributed logs every worker and connection of the scheduler at INFO, and at WARNING a
# worker process slow to exit when the cluster closes (on a busy machine): errors only.
logging.getLogger("distributed").setLevel(logging.ERROR)

rng = np.random.default_rng(0)
coef = rng.normal(size=8)
X = rng.normal(size=(6000, 8))
y = X @ coef + 0.5 + 0.1 * rng.normal(size=6000)
# 5000 training rows in 10 blocks of 500, 1000 test rows.
X_train = da.from_array(X[:5000], chunks=(500, 8))
y_train = da.from_array(y[:5000], chunks=500)
X_test, y_test = X[5000:], y[5000:]

# %%
# A cluster
# ---------
# Two worker processes. They import this file (Python's ``spawn``): the
# ``__name__ == "__main__"`` guards keep them from running the example themselves.

if __name__ == "__main__":
    cluster = LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                           dashboard_address=":0")  # any free port
    client = Client(cluster)
    print("workers:", len(client.scheduler_info()["workers"]))

# %%
# Training one model on the blocks: ``Incremental``
# -------------------------------------------------
# Each ``partial_fit`` of the wrapper is one pass over the blocks, one after the other
# (the model moves from task to task: training stays sequential, the data need not fit
# in one machine's memory); the wrapped estimator's ``n_iter_`` counts the blocks it has
# learned from.

if __name__ == "__main__":
    model = Incremental(
        OnnxSGDRegressor(learning_rate=LearningRateSGD(learning_rate="constant", eta0=0.02),
                         random_state=0),
        shuffle_blocks=False)
    scores = []
    for _ in range(3):
        model.partial_fit(X_train, y_train)
        scores.append(model.estimator_.score(X_test, y_test))
    estimator = model.estimator_
    print(f"blocks learned: {estimator.n_iter_}, test R² after each pass: "
          f"{np.round(scores, 4)}")

# %%
# Predicting in parallel: ``ParallelPostFit``
# -------------------------------------------
# A model fitted anywhere (here, the one above) predicts a dask array block by block on
# the workers; each worker unpickles the model once per task and rebuilds its session.

if __name__ == "__main__":
    big_X = da.from_array(np.tile(X_test, (20, 1)), chunks=(2000, 8))  # 20,000 rows
    parallel = ParallelPostFit(estimator)
    predicted = parallel.predict(big_X).compute()
    gap = np.abs(predicted - np.tile(estimator.predict(X_test), 20)).max()
    print(f"{len(predicted)} predictions in {big_X.numblocks[0]} blocks; largest gap to "
          f"the local predict: {gap:.1e}")

# %%
# Many fits at once: ``GridSearchCV`` on joblib's dask backend
# ------------------------------------------------------------
# scikit-learn's searches run their fits through joblib; under
# ``joblib.parallel_backend("dask")`` every fit is a task of the cluster (each
# candidate trains on its own worker, the data travel with the task).

if __name__ == "__main__":
    search = GridSearchCV(OnnxSGDRegressor(random_state=0),
                          {"alpha": [1e-5, 1e-4, 1e-3, 1e-2]}, cv=3)
    with joblib.parallel_backend("dask"):
        search.fit(X[:2000], y[:2000])
    print(f"{len(search.cv_results_['params']) * 3} fits on the cluster; best "
          f"{search.best_params_}, R² {search.best_score_:.4f}")
    client.close()
    cluster.close()

# %%
# Streaming a Parquet file
# ------------------------
# Without a cluster, ``partial_fit`` streams a file larger than memory one batch at a
# time. With pyarrow, ``pre_buffer=False`` reads each batch's pages as it needs them:
# pyarrow's default pre-buffering reads ahead, and its peak memory grew with the size of
# the file where this one stayed flat (:doc:`/scaling` gives the measurements). pyarrow
# comes with dask-ml (through ``dask[dataframe]``); skl_ortgrad itself does not need it.

if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "train.parquet")
        columns = {f"x{i}": X[:5000, i] for i in range(8)}
        pq.write_table(pa.table({**columns, "y": y[:5000]}), path, row_group_size=1000)
        stream = OnnxSGDRegressor(learning_rate="constant", eta0=0.01, random_state=0)
        parquet = pq.ParquetFile(path, pre_buffer=False)
        for batch in parquet.iter_batches(batch_size=1000):
            table = batch.to_pandas()
            stream.partial_fit(table.drop(columns="y").to_numpy(), table["y"].to_numpy())
    print(f"Parquet: {parquet.metadata.num_rows} rows in {stream.n_iter_} batches, "
          f"test R² {stream.score(X_test, y_test):.4f}")

# %%
# The coefficients learned on the cluster
# ---------------------------------------

if __name__ == "__main__":
    print("coefficients, true vs learned by Incremental:")
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
