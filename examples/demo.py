"""End-to-end demo: train on the ONNX graph with onnxruntime, compare with scikit-learn, serve the
ONNX model.

Run with ``make demo``. Uses only datasets that ship with scikit-learn; trains with the
gradient backend ``backend="auto"`` picks (onnxruntime-training up to Python 3.12, else the
standard-ONNX one).
"""

import os
import tempfile
import time

import numpy as np
import onnx
from onnxruntime import InferenceSession
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from sklearn.linear_model import SGDClassifier, SGDRegressor
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import OnnxSGDClassifier, OnnxSGDRegressor


def curve(losses: list[float], width: int = 40) -> str:
    """A one-line text sparkline of a loss curve: one mark per epoch (at most ``width``,
    evenly spaced, the last epoch included), from ' ' for the curve's lowest loss to '@'
    for its highest, on a log scale (the first epochs' losses are often far larger)."""
    marks = " .:-=+*#%@"
    values = np.asarray(losses, dtype=float)
    values = values[np.linspace(0, len(values) - 1, min(width, len(values))).round().astype(int)]
    values = np.log(values) if (values > 0).all() else values
    scaled = (values - values.min()) / (np.ptp(values) or 1)
    return "".join(marks[int(v * (len(marks) - 1))] for v in scaled)


def compare(name, ours, theirs, X_train, X_test, y_train, y_test):
    print(f"\n== {name}")
    for label, model in (("skl_ortgrad", ours), ("scikit-learn", theirs)):
        start = time.perf_counter()
        model.fit(X_train, y_train)
        seconds = time.perf_counter() - start
        print(f"  {label:<13} test score {model.score(X_test, y_test):.4f}  "
              f"epochs {model[-1].n_iter_:>4}  fit {seconds:.2f}s")
    losses = ours[-1].loss_curve_
    print(f"  skl_ortgrad's training loss, epoch 1 -> {len(losses)}: "
          f"{losses[0]:.4g} -> {losses[-1]:.4g}  [{curve(losses)}]")


def main(folder: str) -> None:
    """Train, compare with scikit-learn, and serve the ONNX models saved in ``folder``."""
    print("Test scores on a 75/25 split of scikit-learn's bundled datasets. Loss curves: "
          "one mark per epoch\n(40 at most), from ' ' (the curve's lowest loss) to '@' "
          "(its highest), on a log scale.")
    X, y = load_diabetes(return_X_y=True)
    split = train_test_split(X, y, random_state=0)
    regressor = make_pipeline(StandardScaler(), OnnxSGDRegressor(random_state=0))
    compare("diabetes regression (R²)", regressor,
            make_pipeline(StandardScaler(), SGDRegressor(random_state=0)), *split)

    X, y = load_breast_cancer(return_X_y=True)
    split = train_test_split(X, y, random_state=0)
    compare("breast cancer classification (accuracy)",
            make_pipeline(StandardScaler(), OnnxSGDClassifier(random_state=0)),
            make_pipeline(StandardScaler(), SGDClassifier(random_state=0)), *split)

    X, y = load_iris(return_X_y=True)
    y = np.array(["setosa", "versicolor", "virginica"])[y]
    X_train, X_test, y_train, y_test = train_test_split(X, y, random_state=0)
    scaler = StandardScaler().fit(X_train)
    X_train, X_test = scaler.transform(X_train), scaler.transform(X_test)
    classifier = OnnxSGDClassifier(loss="log_loss", random_state=0)
    compare("iris, string labels (accuracy)", make_pipeline(classifier),
            make_pipeline(SGDClassifier(loss="log_loss", random_state=0)),
            X_train, X_test, y_train, y_test)

    print("\n== the trained graphs are ONNX models ready to serve")
    saved = []
    for name, model in (("diabetes", regressor[-1]), ("iris", classifier)):
        path = os.path.join(folder, f"{name}.onnx")
        onnx.save(model.to_onnx(), path)
        saved.append(f"{name}.onnx ({os.path.getsize(path)} bytes)")
    print(f"  saved {' and '.join(saved)} in the temporary folder\n"
          f"  {folder}, removed when the demo ends. To keep a model:\n"
          "  onnx.save(model.to_onnx(), 'model.onnx') to serve it, or "
          "skl_ortgrad.save(model, 'model.onnx')\n  to serve it and resume its training "
          "later.")
    session = InferenceSession(os.path.join(folder, "iris.onnx"),
                               providers=["CPUExecutionProvider"])
    labels, probabilities = session.run(None, {"X": X_test.astype(np.float32)})
    same_labels = np.array_equal(labels, classifier.predict(X_test))
    gap = np.abs(probabilities - classifier.predict_proba(X_test)).max()
    print(f"  onnxruntime on iris.onnx: labels equal to predict: {same_labels}; "
          f"largest probability gap to predict_proba: {gap:.1e}")
    print(f"  first predictions: {labels[:4].tolist()}")


if __name__ == "__main__":
    # The saved models only show that the files serve: removed when the demo ends.
    with tempfile.TemporaryDirectory(prefix="skl_ortgrad_demo_") as folder:
        main(folder)
