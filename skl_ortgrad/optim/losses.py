r"""Losses: thin objects over :func:`skl_ortgrad.objective.loss_graphs.build_loss_graph`.

Every loss object names one *kind* of loss graph and its parameters. The graph takes
``label`` :math:`y` and ``prediction`` :math:`p` of shape ``[N, K]`` and an optional
``weight`` :math:`w` of shape ``[N]`` and returns the scalar

.. math::

    \mathrm{loss} = \sum_{i=1}^{N} w_i \sum_{k=1}^{K} \ell(y_{ik}, p_{ik})

(a sum, not a mean: the optimizer divides by the batch size or the sum of the weights).
Each class documents :math:`\ell` and :math:`\partial \ell / \partial p` and computes
both in numpy (:meth:`BaseLearningLoss.elementwise`, behind
:meth:`BaseLearningLoss.loss_gradient`); the gradient of the graph itself comes from a
gradient backend (:mod:`skl_ortgrad.gradient`), through whoever trains.

Classification losses work on raw scores :math:`s = p` with labels in :math:`\{0, 1\}`
(one column per class for one-vs-rest, or a single column for a binary problem), except the
softmax loss, which needs one-hot labels with one column per class.
"""

from __future__ import annotations

import numbers
from abc import abstractmethod
from typing import ClassVar

import numpy as np
import onnx

from skl_ortgrad.objective.loss_graphs import build_loss_graph, loss_arrays
from skl_ortgrad.optim.base import BaseLearningObject

__all__ = [
    "AbsoluteLearningLoss",
    "BaseLearningLoss",
    "ElasticLearningLoss",
    "EpsilonInsensitiveLearningLoss",
    "HingeLearningLoss",
    "HuberLearningLoss",
    "ModifiedHuberLearningLoss",
    "NegLogLearningLoss",
    "PoissonLearningLoss",
    "SquareLearningLoss",
    "SquaredEpsilonInsensitiveLearningLoss",
    "SquaredHingeLearningLoss",
]

class BaseLearningLoss(BaseLearningObject, family="learning loss"):
    """Base class of losses.

    :meth:`select` maps an estimator parameter to an object (numbers are rejected with a
    TypeError: no number designates a loss):

    =============================================  ============================================
    value                                          object
    =============================================  ============================================
    ``None``                                       ``SquareLearningLoss()``
    ``'squared_error'``, ``'square_error'``,       ``SquareLearningLoss()``
    ``'l2'``
    ``'absolute_error'``, ``'l1'``                 ``AbsoluteLearningLoss()``
    ``'elastic'``                                  ``ElasticLearningLoss()``
    ``'huber'``                                    ``HuberLearningLoss()``
    ``'epsilon_insensitive'``                      ``EpsilonInsensitiveLearningLoss()``
    ``'squared_epsilon_insensitive'``              ``SquaredEpsilonInsensitiveLearningLoss()``
    ``'poisson'``                                  ``PoissonLearningLoss()``
    ``'log'``, ``'log_loss'``, ``'neg_log'``       ``NegLogLearningLoss()`` (sigmoid)
    ``'softmax'``, ``'multinomial'``               ``NegLogLearningLoss(probability_function=``
                                                   ``'softmax')``
    ``'hinge'``                                    ``HingeLearningLoss()``
    ``'perceptron'``                               ``HingeLearningLoss(threshold=0.0)``
    ``'squared_hinge'``                            ``SquaredHingeLearningLoss()``
    ``'modified_huber'``                           ``ModifiedHuberLearningLoss()``
    a ``BaseLearningLoss``                         itself
    =============================================  ============================================

    Attributes
    ----------
    is_classification : bool (class attribute)
        True when the loss expects labels in :math:`\\{0, 1\\}` and raw class scores.
    requires_one_hot : bool
        True when labels must be one-hot encoded with one column per class (softmax);
        False when a single column (binary, or regression target) or one-vs-rest
        indicator columns are expected.
    """

    is_classification: ClassVar[bool] = False
    requires_one_hot: ClassVar[bool] = False

    @abstractmethod
    def _graph_kind(self) -> tuple[str, dict[str, float]]:
        """Return the kind of loss graph and its parameters, after validating them."""

    def _validate(self) -> None:
        self._graph_kind()

    @property
    def kind(self) -> str:
        """Name of the loss graph kind in :mod:`skl_ortgrad.objective.loss_graphs`."""
        return self._graph_kind()[0]

    def build_onnx_function(
        self,
        opset: int,
        device: str,
        weighted: bool = False,
        dtype: type | np.dtype = np.float32,
        per_row: bool = False,
    ) -> onnx.ModelProto:
        """Return the loss graph.

        Parameters
        ----------
        opset : int
            Version of the main ONNX domain (13 to 21).
        device : str
            Device the graph runs on; the graph is the same for every device.
        weighted : bool, default=False
            Add the input ``weight`` of shape ``[N]`` (sample weights).
        dtype : numpy dtype, default=np.float32
            Element type of the inputs and of the output.
        per_row : bool, default=False
            Output the loss of every row (shape [N]) instead of their sum.

        Returns
        -------
        onnx.ModelProto
            Inputs ``label`` [N, K], ``prediction`` [N, K] (and ``weight`` [N]); output the
            scalar ``loss`` (or [N] with ``per_row``).
        """
        kind, params = self._graph_kind()
        return build_loss_graph(kind, dtype=dtype, weighted=weighted, opset=opset,
                                per_row=per_row, **params)

    @abstractmethod
    def elementwise(self, label: np.ndarray, prediction: np.ndarray,
                    ) -> tuple[np.ndarray, np.ndarray]:
        r"""The loss of every element and its derivative, in numpy: :math:`\ell(y_{ik},
        p_{ik})` and :math:`\partial \ell / \partial p_{ik}` for arrays of shape
        ``(N, K)`` and one float dtype, with the one-sided derivatives the loss graph's
        gradient takes at a kink (``Abs``: 0 at 0; :math:`\mathrm{relu}(x) = (x + |x|)/2`:
        :math:`\frac12` at 0; the hinge's indicator: scikit-learn's side)."""

    def loss_gradient(
        self,
        label: np.ndarray,
        prediction: np.ndarray,
        weight: np.ndarray | None = None,
    ) -> tuple[float, np.ndarray]:
        r"""Return the loss and its gradient with respect to ``prediction``, in numpy
        (:meth:`elementwise`, in ``prediction``'s dtype, as the graph computes them).

        :func:`skl_ortgrad.gradient.loss_gradient.graph_loss_gradient` computes the same
        from the graph of :meth:`build_onnx_function` with a gradient backend: the graph
        that training differentiates.

        Parameters
        ----------
        label : array of shape (N, K) or (N,)
            Targets (regression), labels in {0, 1} (classification) or one-hot labels
            (softmax).
        prediction : float32 or float64 array of shape (N, K) or (N,)
            Predictions or raw scores; the gradient has its dtype.
        weight : array of shape (N,), optional
            Sample weights.

        Returns
        -------
        loss : float
            :math:`\sum_i w_i \sum_k \ell(y_{ik}, p_{ik})`.
        gradient : array with the shape and dtype of ``prediction``
            :math:`w_i\, \partial \ell / \partial p_{ik}`.
        """
        label, prediction, weight = loss_arrays(label, prediction, weight)
        self._validate()
        columns = prediction.reshape(len(prediction), -1)
        with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
            each, derivative = self.elementwise(label.reshape(columns.shape), columns)
        if weight is not None:
            derivative = derivative * weight[:, None]
            each = each * weight[:, None]
        return (float(each.sum(dtype=np.float64)),
                derivative.astype(prediction.dtype, copy=False).reshape(prediction.shape))


def _relu(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`\mathrm{relu}(x) = (x + |x|)/2` and its derivative :math:`(1 + \mathrm{sign}
    (x))/2`, as the loss graphs write it."""
    return (x + np.abs(x)) * 0.5, (1.0 + np.sign(x)) * 0.5


def _clipped(x: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`\min(x, t) = x - \mathrm{relu}(x - t)` and its derivative in :math:`x`."""
    excess, slope = _relu(x - threshold)
    return x - excess, 1.0 - slope


def _hinge(label: np.ndarray, score: np.ndarray,
           threshold: float) -> tuple[np.ndarray, np.ndarray]:
    r""":math:`(t - z) [z \le t]`, :math:`z = (2y - 1) s`, and its derivative in :math:`s`."""
    sign = 2.0 * label - 1.0
    z = sign * score
    inside = (z <= threshold).astype(np.float64)
    return (threshold - z) * inside, -sign * inside


def _sigmoid(s: np.ndarray) -> np.ndarray:
    return 0.5 * (1.0 + np.tanh(0.5 * s))


def _check_nonnegative(owner: object, name: str) -> float:
    value = getattr(owner, name)
    if (
        not isinstance(value, numbers.Real)
        or isinstance(value, bool)
        or not np.isfinite(value)
        or value < 0
    ):
        raise ValueError(
            f"{type(owner).__name__}: {name} must be a finite number >= 0, got {value!r}."
        )
    return float(value)


class SquareLearningLoss(BaseLearningLoss):
    r"""Squared error.

    .. math::

        \ell(y, p) = \frac12 (p - y)^2, \qquad \frac{\partial \ell}{\partial p} = p - y
    """

    def __init__(self) -> None:
        pass

    def _graph_kind(self) -> tuple[str, dict[str, float]]:
        return "squared_error", {}

    def elementwise(self, label: np.ndarray, prediction: np.ndarray,
                    ) -> tuple[np.ndarray, np.ndarray]:
        d = prediction - label
        return 0.5 * d * d, d


class AbsoluteLearningLoss(BaseLearningLoss):
    r"""Absolute error.

    .. math::

        \ell(y, p) = |p - y|, \qquad
        \frac{\partial \ell}{\partial p} = \operatorname{sign}(p - y)

    (0 at :math:`p = y`, the subgradient onnxruntime's ``Abs`` gradient uses).
    """

    def __init__(self) -> None:
        pass

    def _graph_kind(self) -> tuple[str, dict[str, float]]:
        return "absolute_error", {}

    def elementwise(self, label: np.ndarray, prediction: np.ndarray,
                    ) -> tuple[np.ndarray, np.ndarray]:
        d = prediction - label
        return np.abs(d), np.sign(d)


class ElasticLearningLoss(BaseLearningLoss):
    r"""Mix of absolute and squared errors, with :math:`d = p - y`.

    .. math::

        \ell(y, p) = a |d| + b \frac{d^2}{2}, \qquad
        \frac{\partial \ell}{\partial p} = a \operatorname{sign}(d) + b d

    Parameters
    ----------
    l1_weight : float, default=0.5
        :math:`a \ge 0`.
    l2_weight : float, default=0.5
        :math:`b \ge 0`.
    """

    def __init__(self, l1_weight: float = 0.5, l2_weight: float = 0.5) -> None:
        self.l1_weight = l1_weight
        self.l2_weight = l2_weight

    def _graph_kind(self) -> tuple[str, dict[str, float]]:
        return "elastic", {
            "l1_weight": _check_nonnegative(self, "l1_weight"),
            "l2_weight": _check_nonnegative(self, "l2_weight"),
        }

    def elementwise(self, label: np.ndarray, prediction: np.ndarray,
                    ) -> tuple[np.ndarray, np.ndarray]:
        a, b = float(self.l1_weight), float(self.l2_weight)
        d = prediction - label
        return a * np.abs(d) + b * 0.5 * d * d, a * np.sign(d) + b * d


class _EpsilonLoss(BaseLearningLoss):
    """A loss of the error :math:`d = p - y` with one parameter, scikit-learn's
    ``epsilon`` (the loss graph kind ``_kind``)."""

    _kind: ClassVar[str]

    def __init__(self, epsilon: float = 0.1) -> None:
        self.epsilon = epsilon

    def _graph_kind(self) -> tuple[str, dict[str, float]]:
        return self._kind, {"epsilon": _check_nonnegative(self, "epsilon")}

    def elementwise(self, label: np.ndarray, prediction: np.ndarray,
                    ) -> tuple[np.ndarray, np.ndarray]:
        d = prediction - label
        each, derivative = self._of_distance(np.abs(d), float(self.epsilon))
        return each, derivative * np.sign(d)

    @staticmethod
    @abstractmethod
    def _of_distance(distance: np.ndarray, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
        """The loss of ``distance`` :math:`|d|` and its derivative in :math:`|d|`."""


class HuberLearningLoss(_EpsilonLoss):
    r"""Huber loss (scikit-learn's ``loss='huber'``), with :math:`d = p - y`.

    .. math::

        \ell(y, p) = \begin{cases} \frac12 d^2 & |d| \le \epsilon \\
        \epsilon |d| - \frac12 \epsilon^2 & |d| > \epsilon \end{cases}, \qquad
        \frac{\partial \ell}{\partial p} = \begin{cases} d & |d| \le \epsilon \\
        \epsilon \operatorname{sign}(d) & |d| > \epsilon \end{cases}

    Parameters
    ----------
    epsilon : float, default=0.1
        :math:`\epsilon \ge 0`, where the loss turns from quadratic to linear.
    """

    _kind = "huber"

    @staticmethod
    def _of_distance(distance: np.ndarray, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
        # m = min(|d|, eps): l = m^2 / 2 + eps (|d| - m).
        m, slope = _clipped(distance, epsilon)
        return 0.5 * m * m + epsilon * (distance - m), m * slope + epsilon * (1.0 - slope)


class EpsilonInsensitiveLearningLoss(_EpsilonLoss):
    r"""Epsilon-insensitive loss (linear SVR), with :math:`d = p - y`.

    .. math::

        \ell(y, p) = \max(0, |d| - \epsilon), \qquad
        \frac{\partial \ell}{\partial p} = \begin{cases} \operatorname{sign}(d) &
        |d| > \epsilon \\ 0 & |d| < \epsilon \end{cases}

    Parameters
    ----------
    epsilon : float, default=0.1
        :math:`\epsilon \ge 0`, half width of the band where errors cost nothing.
    """

    _kind = "epsilon_insensitive"

    @staticmethod
    def _of_distance(distance: np.ndarray, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
        return _relu(distance - epsilon)


class SquaredEpsilonInsensitiveLearningLoss(_EpsilonLoss):
    r"""Squared epsilon-insensitive loss (scikit-learn's
    ``loss='squared_epsilon_insensitive'``), with :math:`d = p - y`.

    .. math::

        \ell(y, p) = \max(0, |d| - \epsilon)^2, \qquad
        \frac{\partial \ell}{\partial p} = 2 \operatorname{sign}(d) \max(0, |d| - \epsilon)

    There is no factor :math:`\frac12`, as in scikit-learn: the gradient is twice the
    excess of the error over the band.

    Parameters
    ----------
    epsilon : float, default=0.1
        :math:`\epsilon \ge 0`, half width of the band where errors cost nothing.
    """

    _kind = "squared_epsilon_insensitive"

    @staticmethod
    def _of_distance(distance: np.ndarray, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
        r, slope = _relu(distance - epsilon)
        return r * r, 2.0 * r * slope


class PoissonLearningLoss(BaseLearningLoss):
    r"""Poisson loss on the log of the expected count :math:`p`, targets :math:`y \ge 0`
    (scikit-learn's MLP ``loss='poisson'``, whose output is :math:`e^p`).

    .. math::

        \ell(y, p) = e^p - y p, \qquad \frac{\partial \ell}{\partial p} = e^p - y

    Half the Poisson deviance :math:`y \log(y / e^p) - y + e^p` up to
    :math:`y \log y - y`, a term of the target alone: same gradient, a loss offset by a
    constant.
    """

    def __init__(self) -> None:
        pass

    def _graph_kind(self) -> tuple[str, dict[str, float]]:
        return "poisson", {}

    def elementwise(self, label: np.ndarray, prediction: np.ndarray,
                    ) -> tuple[np.ndarray, np.ndarray]:
        rate = np.exp(prediction)
        return rate - label * prediction, rate - label


_PROBABILITY_KINDS = {"sigmoid": "log", "softmax": "softmax_log"}


class NegLogLearningLoss(BaseLearningLoss):
    r"""Negative log-likelihood on raw scores :math:`s = p` (logistic regression).

    ``probability_function='sigmoid'`` (binary or one-vs-rest, labels :math:`y \in \{0,1\}`,
    :math:`\sigma(s) = 1 / (1 + e^{-s})`):

    .. math::

        q &= (1 - \epsilon) \sigma(s) + \frac{\epsilon}{2} \\
        \ell(y, s) &= -y \log q - (1 - y) \log (1 - q) \\
        \frac{\partial \ell}{\partial s} &= (1 - \epsilon)\, \sigma(s) (1 - \sigma(s))
        \left( \frac{1 - y}{1 - q} - \frac{y}{q} \right)

    which is :math:`\sigma(s) - y` when :math:`\epsilon = 0`.

    ``probability_function='softmax'`` (multiclass, one-hot labels over :math:`K` columns,
    :math:`\pi = \mathrm{softmax}(s)`):

    .. math::

        q_k &= (1 - \epsilon) \pi_k + \frac{\epsilon}{K} \\
        \ell(y, s) &= -\sum_k y_k \log q_k \\
        \frac{\partial \ell}{\partial s_j} &= -(1 - \epsilon) \sum_k \frac{y_k}{q_k}
        \pi_k (\delta_{kj} - \pi_j)

    which is :math:`\pi_j - y_j` when :math:`\epsilon = 0`.

    :math:`\epsilon` keeps :math:`q` away from 0 and 1, so the loss and its gradient stay
    finite at any score (the graph also uses numerically stable sigmoid and softmax). The
    price: the loss of one element is bounded by :math:`-\log(\epsilon / 2)` (about 12.2
    for the default) and its gradient vanishes for scores far on the wrong side
    (:math:`|s| \gg \log(2/\epsilon)`), where the exact log loss (``eps=0``, gradient
    :math:`\sigma(s) - y`, computed in a form that never overflows) keeps a gradient of
    magnitude 1. Use ``eps=0`` when badly misclassified samples must still pull the
    weights.

    Parameters
    ----------
    eps : float, default=1e-5
        :math:`\epsilon \in [0, 1)`.
    probability_function : {'sigmoid', 'softmax'}, default='sigmoid'
        How scores become probabilities; ``'softmax'`` needs one-hot labels
        (:attr:`requires_one_hot` is then True).
    """

    is_classification: ClassVar[bool] = True

    def __init__(self, eps: float = 1e-5, probability_function: str = "sigmoid") -> None:
        self.eps = eps
        self.probability_function = probability_function

    @property  # type: ignore[override]
    def requires_one_hot(self) -> bool:
        """True with ``probability_function='softmax'``."""
        return self.probability_function == "softmax"

    def _graph_kind(self) -> tuple[str, dict[str, float]]:
        if self.probability_function not in _PROBABILITY_KINDS:
            raise ValueError(
                f"probability_function must be one of {sorted(_PROBABILITY_KINDS)}, got "
                f"{self.probability_function!r}."
            )
        eps = _check_nonnegative(self, "eps")
        if eps >= 1:
            raise ValueError(f"eps must be in [0, 1), got {self.eps!r}.")
        return _PROBABILITY_KINDS[self.probability_function], {"eps": eps}

    def elementwise(self, label: np.ndarray, prediction: np.ndarray,
                    ) -> tuple[np.ndarray, np.ndarray]:
        eps, y, s = float(self.eps), label, prediction
        if self.probability_function == "softmax":
            shifted = s - s.max(axis=1, keepdims=True)
            log_pi = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
            pi = np.exp(log_pi)
            if eps == 0:
                return -y * log_pi, pi * y.sum(axis=1, keepdims=True) - y
            q = (1.0 - eps) * pi + eps / s.shape[1]
            ratio = y * pi / q
            return (-y * np.log(q),
                    -(1.0 - eps) * (ratio - pi * ratio.sum(axis=1, keepdims=True)))
        if eps == 0:
            # relu(s) - y s + log(1 + exp(-|s|)), which never overflows.
            return (np.maximum(s, 0.0) - y * s + np.log1p(np.exp(-np.abs(s))),
                    _sigmoid(s) - y)
        up, down = _sigmoid(s), _sigmoid(-s)
        q, q1 = (1.0 - eps) * up + eps / 2, (1.0 - eps) * down + eps / 2
        slope = (1.0 - eps) * up * down
        return -(y * np.log(q) + (1.0 - y) * np.log(q1)), slope * ((1.0 - y) / q1 - y / q)


class HingeLearningLoss(BaseLearningLoss):
    r"""Hinge loss (linear SVM, scikit-learn's ``loss='hinge'``) on raw scores, labels
    :math:`y \in \{0, 1\}`; the perceptron loss (``loss='perceptron'``) with ``threshold=0``.

    With the margin :math:`z = (2y - 1) s` and the threshold :math:`t`:

    .. math::

        \ell(y, s) = \max(0, t - z), \qquad
        \frac{\partial \ell}{\partial s} = \begin{cases} -(2y - 1) & z \le t \\ 0 & z > t
        \end{cases}

    as scikit-learn's, the kink :math:`z = t` included (it matters for the perceptron
    started from zero weights, whose first scores are exactly 0).

    Parameters
    ----------
    threshold : float, default=1.0
        :math:`t \ge 0`, the margin below which a sample costs.
    """

    is_classification: ClassVar[bool] = True

    def __init__(self, threshold: float = 1.0) -> None:
        self.threshold = threshold

    def _graph_kind(self) -> tuple[str, dict[str, float]]:
        return "hinge", {"threshold": _check_nonnegative(self, "threshold")}

    def elementwise(self, label: np.ndarray, prediction: np.ndarray,
                    ) -> tuple[np.ndarray, np.ndarray]:
        return _hinge(label, prediction, float(self.threshold))


class SquaredHingeLearningLoss(BaseLearningLoss):
    r"""Squared hinge loss (scikit-learn's ``loss='squared_hinge'``) on raw scores, labels
    :math:`y \in \{0, 1\}`.

    With the margin :math:`z = (2y - 1) s` and the threshold :math:`t`:

    .. math::

        \ell(y, s) = \max(0, t - z)^2, \qquad
        \frac{\partial \ell}{\partial s} = -2 (2y - 1) \max(0, t - z)

    There is no factor :math:`\frac12`, as in scikit-learn.

    Parameters
    ----------
    threshold : float, default=1.0
        :math:`t \ge 0`, the margin below which a sample costs.
    """

    is_classification: ClassVar[bool] = True

    def __init__(self, threshold: float = 1.0) -> None:
        self.threshold = threshold

    def _graph_kind(self) -> tuple[str, dict[str, float]]:
        return "squared_hinge", {"threshold": _check_nonnegative(self, "threshold")}

    def elementwise(self, label: np.ndarray, prediction: np.ndarray,
                    ) -> tuple[np.ndarray, np.ndarray]:
        r, slope = _hinge(label, prediction, float(self.threshold))
        return r * r, 2.0 * r * slope


class ModifiedHuberLearningLoss(BaseLearningLoss):
    r"""Modified Huber loss (scikit-learn's ``loss='modified_huber'``), labels in {0, 1}.

    With the margin :math:`z = (2y - 1) s`:

    .. math::

        \ell(y, s) = \begin{cases} \max(0, 1 - z)^2 & z \ge -1 \\ -4 z & z < -1
        \end{cases}, \qquad
        \frac{\partial \ell}{\partial s} = \begin{cases} -2 (2y - 1) \max(0, 1 - z) &
        z \ge -1 \\ -4 (2y - 1) & z < -1 \end{cases}
    """

    is_classification: ClassVar[bool] = True

    def __init__(self) -> None:
        pass

    def _graph_kind(self) -> tuple[str, dict[str, float]]:
        return "modified_huber", {}

    def elementwise(self, label: np.ndarray, prediction: np.ndarray,
                    ) -> tuple[np.ndarray, np.ndarray]:
        # r = max(0, 1 - z), m = min(r, 2): l = m^2 + 4 (r - m).
        r, slope = _hinge(label, prediction, 1.0)
        m, clipped = _clipped(r, 2.0)
        return m * m + 4.0 * (r - m), (2.0 * m * clipped + 4.0 * (1.0 - clipped)) * slope
