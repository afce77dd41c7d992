"""skl_ortgrad.plotting: what is drawn is the estimator's data."""

import sys

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pytest
from sklearn.datasets import load_diabetes
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import OnnxMLPRegressor, OnnxSGDRegressor
from skl_ortgrad.plotting import plot_learning_curve

matplotlib.use("Agg")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _data():
    X, y = load_diabetes(return_X_y=True)
    return StandardScaler().fit_transform(X), (y - y.mean()) / y.std()


def test_loss_curve_is_drawn():
    X, y = _data()
    est = OnnxSGDRegressor(max_iter=8, tol=None, random_state=0).fit(X, y)
    ax = plot_learning_curve(est)
    (line,) = ax.get_lines()
    np.testing.assert_array_equal(line.get_xdata(), np.arange(1, 9))
    np.testing.assert_allclose(line.get_ydata(), est.loss_curve_)
    assert not hasattr(ax, "right_ax")
    assert ax.get_xlabel() == "epoch"


def test_an_lbfgs_fit_draws_its_optimizers_losses():
    """scikit-learn's L-BFGS MLPs have no loss_curve_: the loss of every iteration."""
    X, y = _data()
    est = OnnxMLPRegressor(solver="lbfgs", max_iter=12, random_state=0).fit(X, y)
    assert not hasattr(est, "loss_curve_")
    (line,) = plot_learning_curve(est).get_lines()
    losses = est.optimizer_.train_losses_
    assert len(losses) == est.n_iter_ > 1
    np.testing.assert_allclose(line.get_ydata(), losses)


def test_validation_scores_on_twin_axis_and_given_axes():
    X, y = _data()
    est = OnnxSGDRegressor(
        max_iter=6, tol=None, early_stopping=True, random_state=0
    ).fit(X, y)
    assert len(est.validation_scores_) == len(est.loss_curve_)
    _, given = plt.subplots()
    ax = plot_learning_curve(make_pipeline(est), ax=given)
    assert ax is given
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), est.loss_curve_)
    (right,) = ax.right_ax.get_lines()
    np.testing.assert_allclose(right.get_ydata(), est.validation_scores_)
    np.testing.assert_array_equal(right.get_xdata(), np.arange(1, len(est.loss_curve_) + 1))
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "training loss", "validation score"]


def test_legend_hides_no_curve_nor_the_title():
    """With a twin axis, a legend placed "best" inside the axes covered the validation
    curve: it is above the axes, under the title."""
    X, y = _data()
    est = OnnxSGDRegressor(
        max_iter=6, tol=None, early_stopping=True, random_state=0
    ).fit(X, y)
    ax = plot_learning_curve(est)
    ax.figure.tight_layout()
    renderer = ax.figure.canvas.get_renderer()
    legend = ax.get_legend().get_window_extent(renderer)
    title = ax.title.get_window_extent(renderer)
    axes = ax.get_window_extent(renderer)
    assert axes.y1 <= legend.y0 and legend.y1 <= title.y0
    assert axes.x0 <= legend.x0 and legend.x1 <= axes.x1


def test_not_fitted():
    with pytest.raises(NotFittedError, match=r"no loss_curve_.*call fit"):
        plot_learning_curve(OnnxSGDRegressor())


def test_missing_matplotlib(monkeypatch):
    X, y = _data()
    est = OnnxSGDRegressor(max_iter=2, tol=None).fit(X, y)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        plot_learning_curve(est)
