"""The measurements of the "Scaling out" page (docs/scaling.rst), one command each.

    python examples/scaling_measurements.py parquet-write PATH ROWS
        ROWS x 100 float64 features and y into a Parquet file, row groups of 125,000
    python examples/scaling_measurements.py parquet-stream PATH 0|1
        partial_fit over the file in batches of 10,000 rows, pyarrow's pre_buffer
        False (0) or True (1): the peak resident memory of the process
    python examples/scaling_measurements.py worker-memory ROWS [mlp]
        the peak resident memory of a process that imports skl_ortgrad, holds one block of
        ROWS x 100 float64 and runs 3 partial_fit on it (OnnxSGDRegressor, or an
        OnnxMLPRegressor with 128 hidden units)
    python examples/scaling_measurements.py pickle-size
        the pickle of fitted estimators and of their scikit-learn counterparts, and its
        largest parts

Each parquet and memory command must run in a fresh process: the peak is the process's
(``ru_maxrss``). pyarrow is needed for the Parquet commands only.
"""

import pickle
import resource
import sys
import time
import warnings

import numpy as np

FEATURES, ROW_GROUP, BATCH = 100, 125_000, 10_000


def peak_gib() -> float:
    """Peak resident memory of this process so far, in GiB (Linux: ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def parquet_write(path: str, rows: int) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(0)
    coef = rng.normal(size=FEATURES)
    names = [*(f"x{i}" for i in range(FEATURES)), "y"]
    schema = pa.schema([(name, pa.float64()) for name in names])
    with pq.ParquetWriter(path, schema) as writer:
        for start in range(0, rows, ROW_GROUP):
            X = rng.normal(size=(min(ROW_GROUP, rows - start), FEATURES))
            y = X @ coef + 0.1 * rng.normal(size=len(X))
            writer.write_table(pa.table(dict(zip(names, [*X.T, y], strict=True))))


def parquet_stream(path: str, pre_buffer: bool) -> None:
    import pyarrow.parquet as pq

    from skl_ortgrad import OnnxSGDRegressor

    model = OnnxSGDRegressor(learning_rate="constant", eta0=1e-3, random_state=0)
    start, rows = time.perf_counter(), 0
    for batch in pq.ParquetFile(path, pre_buffer=pre_buffer).iter_batches(batch_size=BATCH):
        table = batch.to_pandas().to_numpy()
        model.partial_fit(table[:, :-1], table[:, -1])
        rows += len(table)
    print(f"pre_buffer={pre_buffer}: {rows} rows in {time.perf_counter() - start:.1f} s, "
          f"peak RSS {peak_gib():.2f} GiB, R² on the last batch "
          f"{model.score(table[:, :-1], table[:, -1]):.4f}")


def worker_memory(rows: int, mlp: bool) -> None:
    from skl_ortgrad import OnnxMLPRegressor, OnnxSGDRegressor

    imports = peak_gib()
    X = np.random.default_rng(0).normal(size=(rows, FEATURES))
    y = X.sum(axis=1)
    data = peak_gib()
    model = OnnxMLPRegressor(hidden_layer_sizes=(128,)) if mlp else OnnxSGDRegressor()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # MLP's ConvergenceWarning
        for _ in range(3):
            model.partial_fit(X, y)
    print(f"{type(model).__name__}, block {rows} x {FEATURES} float64 "
          f"({X.nbytes / 2**20:.0f} MiB): after the imports {imports:.2f} GiB, with the "
          f"block {data:.2f} GiB, after 3 partial_fit {peak_gib():.2f} GiB "
          f"(+{(peak_gib() - data) * 1024:.0f} MiB)")


def pickle_size() -> None:
    from sklearn.datasets import load_breast_cancer, load_diabetes
    from sklearn.linear_model import SGDClassifier, SGDRegressor
    from sklearn.neural_network import MLPClassifier

    from skl_ortgrad import OnnxMLPClassifier, OnnxSGDClassifier, OnnxSGDRegressor

    regression = load_diabetes(return_X_y=True)
    classification = load_breast_cancer(return_X_y=True)
    mlp = {"hidden_layer_sizes": (32,), "max_iter": 5, "random_state": 0}
    cases = [
        (OnnxSGDClassifier(random_state=0), SGDClassifier(random_state=0), classification),
        (OnnxSGDRegressor(random_state=0), SGDRegressor(random_state=0), regression),
        (OnnxMLPClassifier(**mlp), MLPClassifier(**mlp), classification),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning
        for ours, theirs, (X, y) in cases:
            ours.fit(X, y)
            theirs.fit(X, y)
            parts = {f"estimator.{name}": len(pickle.dumps(value))
                     for name, value in vars(ours).items() if name != "optimizer_"}
            parts.update({f"optimizer_.{name}": len(pickle.dumps(value))
                          for name, value in ours.optimizer_.__getstate__().items()})
            largest = sorted(parts.items(), key=lambda item: -item[1])[:5]
            print(f"{type(ours).__name__} on {X.shape}, {ours.n_iter_} epochs: "
                  f"{len(pickle.dumps(ours))} bytes; {type(theirs).__name__}: "
                  f"{len(pickle.dumps(theirs))} bytes; to_onnx(): "
                  f"{len(ours.to_onnx().SerializeToString())} bytes")
            print("    largest parts:", ", ".join(f"{name} {size}" for name, size in largest))


if __name__ == "__main__":
    command, arguments = sys.argv[1], sys.argv[2:]
    if command == "parquet-write":
        parquet_write(arguments[0], int(arguments[1]))
    elif command == "parquet-stream":
        parquet_stream(arguments[0], bool(int(arguments[1])))
    elif command == "worker-memory":
        worker_memory(int(arguments[0]), arguments[1:] == ["mlp"])
    elif command == "pickle-size":
        pickle_size()
    else:
        sys.exit(__doc__)
