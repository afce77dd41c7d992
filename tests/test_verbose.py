"""What training prints and logs at each verbosity level."""

import logging

import numpy as np
from sklearn.datasets import load_iris

from skl_ortgrad import OnnxSGDClassifier
from skl_ortgrad.runtime.devices import log_severity

X, Y = load_iris(return_X_y=True)
X = (X - X.mean(axis=0)) / X.std(axis=0)


def _fit(capfd, **params):
    OnnxSGDClassifier(max_iter=3, tol=None, random_state=0, **params).fit(X, Y)
    return capfd.readouterr()


def test_silent_by_default(capfd):
    out = _fit(capfd)
    assert out.out == "" and out.err == ""


def test_verbose_1_shows_epochs_with_loss_and_validation(capfd):
    err = _fit(capfd, verbose=1, early_stopping=True, n_iter_no_change=3).err
    assert "epoch" in err and "loss=" in err and "validation score=" in err
    assert "batch" not in err


def test_verbose_2_adds_batches(capfd):
    err = _fit(capfd, verbose=2).err
    assert "batch" in err and "eta=" in err


def test_epochs_are_logged_on_the_package_logger(caplog):
    with caplog.at_level(logging.INFO, logger="skl_ortgrad"):
        OnnxSGDClassifier(max_iter=2, tol=None, random_state=0).fit(X, Y)
    messages = [r.getMessage() for r in caplog.records if r.name.startswith("skl_ortgrad")]
    assert [m.split(":")[0] for m in messages] == ["epoch 1", "epoch 2"]
    assert all(np.isfinite(float(m.split("loss=")[1])) for m in messages)


def test_onnxruntime_warnings_only_from_verbose_2():
    assert [log_severity(verbose=v) for v in (0, 1, 2)] == [3, 3, 2]
    assert log_severity(enable_logging=True) == 0
