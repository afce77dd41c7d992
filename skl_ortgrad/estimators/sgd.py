"""Linear models trained by stochastic gradient descent through onnxruntime-training:
drop-in replacements for scikit-learn's ``SGDRegressor`` and ``SGDClassifier``."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import helper as onnx_helper
from onnx import numpy_helper
from skl2onnx import to_onnx
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.linear_model import LinearRegression, LogisticRegression, SGDClassifier

from skl_ortgrad.estimators.base import (
    BaseOnnxEstimator,
    Template,
    numeric_targets,
    stable_step,
)
from skl_ortgrad.estimators.classification import ClassifierTargetsMixin, onnx_classes
from skl_ortgrad.graph.model import TARGET_OPSET
from skl_ortgrad.training.sgd_learning_loss import SquareLearningLoss
from skl_ortgrad.training.sgd_learning_rate import LearningRateSGD

_LINEAR_WEIGHTS = ["coef", "intercept"]


def _convert(model: Any, n_features: int, dtype: np.dtype, black_op: str) -> Any:
    # black_op turns the ai.onnx.ml linear operators (weights in attributes, no gradient)
    # into MatMul + Add with the weights as initializers.
    return to_onnx(
        model, np.zeros((1, n_features), dtype=dtype), target_opset=TARGET_OPSET,
        black_op={black_op}, options={"zipmap": False} if black_op == "LinearClassifier" else None,
    )


_SENTINEL = 0.5772156649  # a value no skl2onnx constant holds


def _zero_initializer(onx: Any, name: str) -> None:
    """Set initializer ``name`` of ``onx`` to zeros (same shape and type), in place."""
    init = next(init for init in onx.graph.initializer if init.name == name)
    init.CopyFrom(numpy_helper.from_array(np.zeros_like(numpy_helper.to_array(init)), name))


def _score_of(onx: Any) -> str:
    """Name of ``X @ coef + intercept`` in a converted linear graph."""
    return next(node.output[0] for node in onx.graph.node if "intercept" in node.input)


def _stable_one_vs_rest(onx: Any, score: str) -> Any:
    """Make skl2onnx's multiclass SGDClassifier graph safe at large scores (in place).

    skl2onnx writes each sigmoid as ``Reciprocal(Add(Exp(Mul(s, -1)), 1))``: ``Exp``
    overflows for scores below -88 in float32, all probabilities underflow to 0 and the
    label, an ``ArgMax`` over them, no longer follows the scores. The sigmoid becomes the
    ``Sigmoid`` operator and the label an ``ArgMax`` over the raw scores.
    """
    graph = onx.graph
    producers = {out: node for node in graph.node for out in node.output}
    reciprocal = next(node for node in graph.node if node.op_type == "Reciprocal")
    chain, name = [reciprocal], reciprocal.input[0]
    while name != score:
        node = producers[name]
        chain.append(node)
        name = next(i for i in node.input if i in producers or i == score)
    removed = {id(node) for node in chain}
    # The sigmoid takes the place of the first removed node: score is computed before
    # it and every consumer of the chain's result comes after it.
    first = min(i for i, node in enumerate(graph.node) if id(node) in removed)
    sigmoid = onnx_helper.make_node(
        "Sigmoid", [score], list(reciprocal.output), name="stable_sigmoid")
    kept = [node for node in graph.node[:first] if id(node) not in removed] + [sigmoid]
    kept += [node for node in graph.node[first:] if id(node) not in removed]
    for node in kept:
        if node.op_type == "ArgMax":
            node.input[0] = score
    del graph.node[:]
    graph.node.extend(kept)
    return onx


class OnnxSGDRegressor(RegressorMixin, BaseOnnxEstimator):
    """Linear regression trained by mini-batch SGD on its ONNX graph.

    The model is :math:`f(x) = x^\\top w + b`; training minimizes the mean of the
    ``learning_loss`` (squared error by default) plus the ``learning_penalty`` (L2 with
    :math:`\\alpha = 10^{-4}` by default, as ``SGDRegressor``), with mini-batches of
    ``batch_size`` rows ('auto': min(32, n_samples)).

    Parameters
    ----------
    learning_rate : None, float, str or BaseLearningRate
        None: invscaling (``power_t=0.25``) with
        :math:`\\eta_0 = \\min(0.01\\, b, 1 / E\\|x\\|^2)` for batches of :math:`b` rows,
        fixed at the first call (see ``default_learning_rate_``); a float:
        a constant rate; a string alias ('invscaling', 'optimal', 'constant',
        'nesterov'...); or an object (its parameters are reachable as
        ``learning_rate__eta0`` in a grid search).
    learning_loss : None, str or BaseLearningLoss
        'squared_error' (default), 'absolute_error', 'elastic', 'huber',
        'epsilon_insensitive', or an object.
    learning_penalty : None, float, str or BaseLearningPenalty
        None: 'l2' (:math:`\\alpha = 10^{-4}`); a float: L2 with that alpha; 'l1',
        'elasticnet', 'none', or an object.
    max_iter, tol, n_iter_no_change, early_stopping, validation_fraction :
        As in ``SGDRegressor``.
    shuffle, random_state, warm_start :
        As in ``SGDRegressor``.
    verbose : int
        0: nothing shown. 1: a progress bar over the epochs of ``fit`` in a terminal or a
        notebook, one plain line per epoch elsewhere, then a summary line (why training
        stopped, epochs, time, final loss); ``partial_fit`` writes one line per call.
        2: also every batch's loss and learning rate. Whatever ``verbose``, these lines
        are logged at INFO on the ``skl_ortgrad`` logger (see the user guide).
    batch_size : int or 'auto'
        Rows per mini-batch.
    device : str
        'cpu', 'cuda' or 'cuda:<index>'.
    n_threads : int
        onnxruntime intra-op threads.
    dtype : np.float32 or np.float64
        Float type of the graph: the weights, the training and the exported model.
    backend : {'auto', 'onnxruntime-training', 'onnx'}
        Which gradient backend builds the training graph: onnxruntime-training's
        graph builder, or skl_ortgrad's own differentiator in standard ONNX, which runs
        on any onnxruntime (Python 3.13+, onnxruntime-gpu). 'auto' takes
        onnxruntime-training where it is installed, else 'onnx'. Both give the same
        gradients; the trained model is the same ONNX graph either way.

    Attributes
    ----------
    backend_ : str
        The gradient backend used ('auto' resolved).
    coef_ : ndarray of shape (n_features,)
    intercept_ : ndarray of shape (1,)
    n_iter_, t_, loss_curve_, best_loss_, n_features_in_, feature_names_in_ :
        As in scikit-learn.
    default_learning_rate_ : BaseLearningRate
        The rate used when ``learning_rate`` is None.
    optimizer_ : OrtGradientForwardBackwardOptimizer
        The training loop and its state.
    """

    def _default_loss(self) -> SquareLearningLoss:
        return SquareLearningLoss()

    def _default_rate(self, X: Any) -> LearningRateSGD:
        """scikit-learn's invscaling schedule with a step suited to mini-batches.

        ``SGDRegressor`` takes one step of :math:`\\eta_0 = 0.01` per sample; an update
        here averages a batch of :math:`b` rows, so the same progress per epoch needs
        :math:`\\eta_0 = 0.01\\, b` (linear scaling). The mean-gradient step of the
        squared loss is stable while :math:`\\eta < 2 / \\lambda_{max}(E[x x^\\top])`,
        and :math:`E\\|x\\|^2` bounds that eigenvalue, hence
        :math:`\\eta_0 = \\min(0.01\\, b,\\ 1 / E\\|x\\|^2)`: on unscaled features the
        rate shrinks instead of diverging.
        """
        batch = self._resolved_batch_size(X.shape[0])
        eta0 = min(0.01 * batch, stable_step(X))
        return LearningRateSGD(eta0=eta0, learning_rate="invscaling")

    def _prepare_targets(self, y: Any, first_call: bool, classes: Any) -> np.ndarray:
        return numeric_targets(y)

    def _template(self, n_features: int, dtype: np.dtype) -> Template:
        model = LinearRegression()
        model.coef_ = np.zeros(n_features)
        model.intercept_ = np.zeros(1)
        model.n_features_in_ = n_features
        onx = _convert(model, n_features, dtype, "LinearRegressor")
        output = onx.graph.output[0].name
        return Template(onx, output, _LINEAR_WEIGHTS, [output])

    def _set_fitted_attributes(self, weights: dict[str, np.ndarray]) -> None:
        self.coef_ = weights["coef"].ravel().astype(np.float64)
        self.intercept_ = weights["intercept"].ravel().astype(np.float64)

    def predict(self, X: Any) -> np.ndarray:
        """Predicted values, shape (n_samples,)."""
        return self._run(X)[self._template_.score].ravel().astype(np.float64)


class OnnxSGDClassifier(ClassifierTargetsMixin, ClassifierMixin, BaseOnnxEstimator):
    """Linear classifier trained by mini-batch SGD on its ONNX graph.

    Binary problems train one score :math:`s = x^\\top w + b` with the logistic loss
    (default), hinge or modified Huber. Multiclass problems train one score per class:
    the default loss is the softmax cross-entropy
    :math:`-\\log \\mathrm{softmax}(s)_y` (computed stably), and 'log', 'hinge' or
    'modified_huber' train one-vs-rest. ``predict_proba`` is the sigmoid (binary),
    the softmax (multinomial) or the normalized one-vs-rest sigmoids of the scores.

    Parameters are those of :class:`OnnxSGDRegressor`, except that ``learning_rate=None``
    means scikit-learn's 'optimal' schedule (as ``SGDClassifier``); ``learning_loss``
    accepts 'log' ('log_loss'), 'softmax', 'hinge', 'modified_huber' or a loss object.

    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
    coef_ : ndarray of shape (1, n_features) or (n_classes, n_features)
    intercept_ : ndarray of shape (1,) or (n_classes,)
    n_iter_, t_, loss_curve_, n_features_in_, feature_names_in_ :
        As in scikit-learn.
    """

    # scikit-learn's SGDClassifier default schedule: eta = 1 / (alpha (t0 + t - 1)).
    _default_learning_rate = "optimal"

    def _template(self, n_features: int, dtype: np.dtype) -> Template:
        n_classes = len(self.classes_)
        n_scores = 1 if n_classes == 2 else n_classes
        softmax = n_classes > 2 and self._softmax_loss()
        # Softmax losses serve LogisticRegression's graph (softmax probabilities); the
        # others serve SGDClassifier's (sigmoid or normalized one-vs-rest sigmoids).
        model = LogisticRegression() if softmax else SGDClassifier(loss="log_loss")
        model.coef_ = np.zeros((n_scores, n_features))
        # A sentinel, zeroed after conversion: skl2onnx merges initializers holding equal
        # values, so with one feature a zero coef and a zero intercept would become one
        # tensor (and a 1 would merge with the graph's own constant 1).
        model.intercept_ = np.full(n_scores, _SENTINEL)
        model.classes_ = onnx_classes(self.classes_)
        model.n_features_in_ = n_features
        onx = _convert(model, n_features, dtype, "LinearClassifier")
        _zero_initializer(onx, "intercept")
        score = _score_of(onx)
        if n_classes > 2 and not softmax:
            _stable_one_vs_rest(onx, score)
        return Template(onx, score, _LINEAR_WEIGHTS, ["label", "probabilities"])

    def _softmax_loss(self) -> bool:
        """Whether the loss trains a softmax over the scores."""
        return getattr(self._loss(), "probability_function", None) == "softmax"

    def _set_fitted_attributes(self, weights: dict[str, np.ndarray]) -> None:
        self.coef_ = weights["coef"].T.astype(np.float64).copy()
        self.intercept_ = weights["intercept"].ravel().astype(np.float64)
