"""Plots of a training run (matplotlib is an optional dependency)."""

from __future__ import annotations

from typing import Any

from sklearn.exceptions import NotFittedError

__all__ = ["plot_learning_curve"]

# Points above the axes kept for the legend's one row, under the title.
_LEGEND_HEIGHT = 26


def plot_learning_curve(est: Any, ax: Any = None) -> Any:
    """Draw the training loss per epoch and, when present, the validation scores.

    Parameters
    ----------
    est : estimator
        A fitted skl_ortgrad estimator (or any object with ``loss_curve_``), or a
        :class:`~sklearn.pipeline.Pipeline` ending in one. An L-BFGS MLP, which has no
        ``loss_curve_`` (as scikit-learn's), draws its optimizer's loss of every
        iteration (``optimizer_.train_losses_``).
    ax : matplotlib.axes.Axes, optional
        Axes to draw on; a new figure is created when None.

    Returns
    -------
    matplotlib.axes.Axes
        The axes holding the loss curve (``loss_curve_`` against the epoch, 1-based).
        ``validation_scores_`` (recorded with ``early_stopping=True``) is drawn on a
        twin axis sharing the epochs, reachable as ``ax.right_ax``. The legend is
        drawn above the axes, under the title, where it hides no curve.

    Raises
    ------
    ImportError
        If matplotlib is not installed.
    sklearn.exceptions.NotFittedError
        If the estimator has no losses (it was never trained).
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise ImportError(
            "plot_learning_curve needs matplotlib, an optional dependency of skl_ortgrad: "
            "pip install matplotlib"
        ) from exc

    model = est[-1] if hasattr(est, "steps") else est
    losses = getattr(model, "loss_curve_", None)
    if losses is None and hasattr(model, "optimizer_"):
        losses = model.optimizer_.train_losses_
    if not losses:
        raise NotFittedError(
            f"This {type(model).__name__} instance has no loss_curve_: call fit or "
            "partial_fit before plot_learning_curve."
        )
    if ax is None:
        _, ax = plt.subplots()
    epochs = range(1, len(losses) + 1)
    lines = ax.plot(epochs, losses, color="C0", label="training loss")
    ax.set_xlabel("epoch")
    ax.set_ylabel("training loss")
    # The legend sits between the title and the axes, where it hides no curve: "best"
    # places it inside the axes, and only away from the lines of its own axes, not from
    # those of the twin axis.
    ax.set_title(f"{type(model).__name__} learning curve", pad=_LEGEND_HEIGHT)
    scores = getattr(model, "validation_scores_", None)
    if scores:
        right = ax.twinx()
        lines += right.plot(
            range(1, len(scores) + 1), scores, color="C1", linestyle="--",
            label="validation score",
        )
        right.set_ylabel("validation score")
        ax.right_ax = right
    ax.legend(lines, [line.get_label() for line in lines], loc="lower center",
              bbox_to_anchor=(0.5, 1.0), ncols=len(lines), frameon=False, borderaxespad=0.2)
    return ax
