"""What training shows and logs at each verbosity level, in a terminal and out of one."""

import logging
import re
import sys

import numpy as np
import pytest
from sklearn.datasets import load_iris

from skl_ortgrad import LearningRateSGD, OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.runtime.devices import log_severity
from skl_ortgrad.training import progress
from skl_ortgrad.training.trainer import Trainer

X, Y = load_iris(return_X_y=True)
X = (X - X.mean(axis=0)) / X.std(axis=0)
EPOCH_LINE = re.compile(r"epoch (\d+): loss=([-+.\de]+)(, validation score=[-+.\de]+)?")


def _fit(capfd, **params):
    OnnxSGDClassifier(max_iter=3, tol=None, random_state=0, **params).fit(X, Y)
    return capfd.readouterr()


def _records(caplog):
    return [r.getMessage() for r in caplog.records if r.name.startswith("skl_ortgrad")]


@pytest.fixture
def bars(monkeypatch):
    """The progress bars drawn, recorded."""
    drawn = []

    class RecordedBar(progress.tqdm):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            drawn.append(self)

    monkeypatch.setattr(progress, "tqdm", RecordedBar)
    return drawn


def _terminal(monkeypatch):
    """The captured stderr says it is a terminal (set in the test: capsys replaces
    sys.stderr after the fixtures ran)."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)


def test_silent_by_default(capfd):
    out = _fit(capfd)
    assert out.out == "" and out.err == ""


def test_verbose_1_out_of_a_terminal_writes_plain_lines(capsys, bars):
    assert not sys.stderr.isatty()
    model = OnnxSGDClassifier(max_iter=50, random_state=0, verbose=1, early_stopping=True,
                              n_iter_no_change=3).fit(X, Y)
    err = capsys.readouterr().err
    assert bars == [] and "\r" not in err and "batch" not in err
    *epochs, summary = err.splitlines()
    assert [EPOCH_LINE.fullmatch(line)[1] for line in epochs] == [
        str(k) for k in range(1, model.n_iter_ + 1)]
    assert all("validation score=" in line for line in epochs)
    assert summary.startswith(f"fit: early stopping (the validation score improved by less "
                              f"than tol=0.001 for 3 epochs) after {model.n_iter_} epoch(s)")
    assert summary.endswith(epochs[-1].split(": ", 1)[1])


def test_verbose_2_out_of_a_terminal_adds_batch_lines(capsys):
    err = _fit(capsys, verbose=2).err
    assert "\r" not in err
    batches = [line for line in err.splitlines() if ", batch " in line]
    # 150 rows in batches of 32: 5 batches per epoch, 3 epochs.
    assert len(batches) == 15
    assert re.fullmatch(r"epoch 3, batch 5: loss=[-+.\de]+, eta=[-+.\de]+", batches[-1])


def test_bar_in_a_terminal_ends_at_the_epochs_run(capsys, monkeypatch, bars):
    _terminal(monkeypatch)
    model = OnnxSGDClassifier(max_iter=1000, random_state=0, verbose=1).fit(X, Y)
    err = capsys.readouterr().err
    (bar,) = bars
    assert 0 < model.n_iter_ < 1000
    assert bar.n == bar.total == model.n_iter_
    assert bar.leave and bar.disable  # left on screen, and closed
    assert bar.postfix == f"loss={model.loss_curve_[-1]:.4g}"
    # The epochs are on the bar, not printed as lines; the summary follows the bar.
    assert not any(EPOCH_LINE.fullmatch(line) for line in err.splitlines())
    assert err.splitlines()[-1].startswith(
        "fit: converged (the training objective improved by less than tol=0.001 for 5 "
        f"epochs) after {model.n_iter_} epoch(s)")


def test_verbose_2_in_a_terminal_adds_a_transient_bar_per_epoch(capsys, monkeypatch, bars):
    _terminal(monkeypatch)
    _fit(capsys, verbose=2)
    epochs, *batches = bars
    assert epochs.unit == "epoch" and epochs.n == 3
    assert [(bar.unit, bar.n, bar.leave) for bar in batches] == [("batch", 5, False)] * 3


def test_partial_fit_draws_no_bar_and_writes_a_line_per_call(capsys, caplog, bars):
    model = OnnxSGDClassifier(random_state=0, verbose=1)
    with caplog.at_level(logging.INFO, logger="skl_ortgrad"):
        for _ in range(3):
            model.partial_fit(X, Y, classes=[0, 1, 2])
    assert bars == []
    lines = _records(caplog)
    assert [line.split(":")[0] for line in lines] == [f"partial_fit, epoch {k}" for k in (1, 2, 3)]
    assert lines[-1].startswith("partial_fit, epoch 3: trained on 150 rows in ")
    assert lines[-1].endswith(f"s, loss={model.loss_curve_[-1]:.4g}")
    # Shown once: the test's log capture does not write to the console.
    assert capsys.readouterr().err.splitlines() == lines


def test_silent_calls_format_no_epoch(monkeypatch, caplog):
    """verbose=0 with the package logger off at INFO: no epoch is formatted or
    reported; verbose=1, or the logger on, reports every epoch."""
    reported = []
    monkeypatch.setattr(progress.TrainingProgress, "epoch",
                        lambda self, number, shown: reported.append(number))
    assert progress.TrainingProgress(0, 3, False, 1, 10).silent
    assert not progress.TrainingProgress(1, 3, False, 1, 10).silent
    OnnxSGDClassifier(max_iter=3, tol=None, random_state=0).fit(X, Y)
    assert reported == []
    with caplog.at_level(logging.INFO, logger="skl_ortgrad"):
        assert not progress.TrainingProgress(0, 3, False, 1, 10).silent
        OnnxSGDClassifier(max_iter=3, tol=None, random_state=0).fit(X, Y)
    assert reported == [1, 2, 3]


def test_epochs_and_summary_are_logged_on_the_package_logger(caplog):
    with caplog.at_level(logging.INFO, logger="skl_ortgrad"):
        model = OnnxSGDClassifier(max_iter=2, tol=None, random_state=0).fit(X, Y)
    *epochs, summary = _records(caplog)
    assert [EPOCH_LINE.fullmatch(m)[1] for m in epochs] == ["1", "2"]
    assert [float(EPOCH_LINE.fullmatch(m)[2]) for m in epochs] == pytest.approx(
        model.loss_curve_, rel=1e-3)
    assert re.fullmatch(r"fit: max_iter reached after 2 epoch\(s\) in [.\de-]+ s, "
                        r"final loss=[-+.\de]+", summary)


def test_summary_of_a_divergence(caplog, monkeypatch):
    monkeypatch.setattr(LearningRateSGD, "schedule", lambda self, ts: np.full(len(ts), 1e38))
    # A rate object is used as given: the default one caps squared-loss steps.
    model = OnnxSGDRegressor(max_iter=5, penalty=None, learning_rate=LearningRateSGD(),
                             random_state=0)
    with caplog.at_level(logging.INFO, logger="skl_ortgrad"), pytest.raises(ValueError):
        model.fit(X, Y)
    assert _records(caplog)[-1].startswith("fit: diverged after 0 epoch(s) in ")
    assert _records(caplog)[-1].endswith("final loss=none")


def test_summary_of_an_interruption(caplog, monkeypatch):
    epoch = Trainer._epoch
    calls = []

    def interrupted(self, *args):
        calls.append(None)
        if len(calls) == 3:
            raise KeyboardInterrupt
        return epoch(self, *args)

    monkeypatch.setattr(Trainer, "_epoch", interrupted)
    model = OnnxSGDClassifier(max_iter=10, random_state=0)
    with caplog.at_level(logging.INFO, logger="skl_ortgrad"), pytest.raises(KeyboardInterrupt):
        model.fit(X, Y)
    assert _records(caplog)[-1].startswith("fit: interrupted after 2 epoch(s) in ")
    assert _records(caplog)[-1].endswith(f"final loss={model.loss_curve_[-1]:.4g}")


def test_lines_that_logging_writes_to_the_console_are_not_repeated(capsys):
    package = logging.getLogger("skl_ortgrad")
    handler = logging.StreamHandler(sys.stderr)
    package.addHandler(handler)
    package.setLevel(logging.INFO)
    try:
        lines = _fit(capsys, verbose=1).err.splitlines()
    finally:
        package.removeHandler(handler)
        package.setLevel(logging.NOTSET)
    assert [line.split(":")[0] for line in lines] == ["epoch 1", "epoch 2", "epoch 3", "fit"]


def test_onnxruntime_warnings_only_from_verbose_2():
    assert [log_severity(verbose=v) for v in (0, 1, 2)] == [3, 3, 2]
    assert log_severity(enable_logging=True) == 0
