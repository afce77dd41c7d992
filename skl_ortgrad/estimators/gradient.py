"""Continue training an already-fitted scikit-learn model or pipeline on new data.

A converted model is usually frozen. :class:`OnnxGradientRegressor` and
:class:`OnnxGradientClassifier` take a fitted estimator (or a ``Pipeline`` ending in
one; an unfitted one is fitted first on the first data), keep every preprocessing step
frozen, convert the final step with skl2onnx, and
train its weights from their fitted values with ``fit``/``partial_fit``. ``estimator_`` is
a copy of the model whose final step carries the trained weights, so it predicts like
the graph, and ``to_onnx()`` converts that whole updated model for serving.

Only final steps whose ONNX graph has weights with a gradient can be trained: linear
models and logistic regressions (weights in ``coef_``/``intercept_``) and MLPs
(``coefs_``/``intercepts_``). Trees, SVMs or nearest neighbours get a clear error naming
the step and the operators that hold their parameters.
"""

from __future__ import annotations

import copy
import numbers
import warnings
from abc import abstractmethod
from typing import Any, ClassVar

import numpy as np
import onnx
from sklearn.base import ClassifierMixin, RegressorMixin, clone, is_classifier
from sklearn.exceptions import ConvergenceWarning, NotFittedError
from sklearn.linear_model import LogisticRegression, SGDClassifier
from sklearn.pipeline import Pipeline
from sklearn.utils._param_validation import Interval
from sklearn.utils.multiclass import unique_labels
from sklearn.utils.validation import check_is_fitted

from skl_ortgrad.estimators.base import BaseOnnxEstimator, numeric_targets
from skl_ortgrad.estimators.classification import ClassifierTargetsMixin
from skl_ortgrad.estimators.conversion import convert_model
from skl_ortgrad.estimators.parameter_docs import GRADIENT, class_docstring, gradient_attributes
from skl_ortgrad.estimators.template import Template
from skl_ortgrad.graph.ml_rewrites import rewrite_no_gradient_ops
from skl_ortgrad.graph.model import TARGET_OPSET
from skl_ortgrad.graph.weights import get_train_initializer
from skl_ortgrad.optim import BaseLearningRate, LearningRateSGD
from skl_ortgrad.optim.losses import (
    BaseLearningLoss,
    NegLogLearningLoss,
    SquareLearningLoss,
)
from skl_ortgrad.optim.penalties import BaseLearningPenalty

_LINEAR_OPS = {"LinearRegressor", "LinearClassifier"}


def _split(estimator: Any) -> tuple[list[tuple[str, Any]], str, Any]:
    """(frozen steps, name of the final step, final step)."""
    if isinstance(estimator, Pipeline):
        *frozen, (name, final) = estimator.steps
        return frozen, name, final
    return [], type(estimator).__name__, estimator


def _convert(model: Any, n_features: int, dtype: np.dtype) -> onnx.ModelProto:
    onx = convert_model(model, n_features, dtype, black_op=_LINEAR_OPS,
                        options={"zipmap": False} if is_classifier(model) else None)
    return rewrite_no_gradient_ops(onx)


def _graph_model(model: Any) -> Any:
    """The model whose graph is trained: ``model``, or one with the same predictions.

    skl2onnx writes a binary ``LogisticRegression`` with two tied scores ``[-s, s]``;
    training them freely would break the tie. ``SGDClassifier(loss='log_loss')`` with
    the same coefficients has one score and the same probabilities ``sigmoid(s)``.
    """
    if isinstance(model, LogisticRegression) and len(model.classes_) == 2:
        surrogate = SGDClassifier(loss="log_loss")
        for name in ("coef_", "intercept_", "classes_", "n_features_in_"):
            setattr(surrogate, name, getattr(model, name))
        return surrogate
    return model


def _set_weights(model: Any, values: list[np.ndarray]) -> None:
    """Write trained weights into a fitted scikit-learn model (in place)."""
    if hasattr(model, "coefs_"):
        model.coefs_ = [w.astype(np.float64) for w in values[0::2]]
        model.intercepts_ = [b.ravel().astype(np.float64) for b in values[1::2]]
        return
    coef, intercept = values
    model.coef_ = coef.T.astype(np.float64).reshape(np.shape(model.coef_))
    model.intercept_ = intercept.astype(np.float64).reshape(np.shape(model.intercept_))


class _BaseOnnxGradient(BaseOnnxEstimator):
    """Fine-tuning of the final step of a fitted estimator."""

    _parameter_constraints: ClassVar[dict] = {
        **BaseOnnxEstimator._parameter_constraints,
        "estimator": [object],
        "learning_rate": [None, Interval(numbers.Real, 0, None, closed="neither"), str,
                          BaseLearningRate],
        "loss": [None, str, BaseLearningLoss],
        "penalty": [None, Interval(numbers.Real, 0, None, closed="left"), str,
                    BaseLearningPenalty],
        "tol": [None, Interval(numbers.Real, 0, None, closed="left")],
        "validation_fraction": [Interval(numbers.Real, 0, 1, closed="neither")],
    }

    def __init__(
        self,
        estimator: Any,
        learning_rate: Any = None,
        loss: Any = None,
        penalty: Any = None,
        max_iter: int = 100,
        batch_size: int | str = "auto",
        tol: float | None = 1e-4,
        n_iter_no_change: int = 5,
        early_stopping: bool = False,
        validation_fraction: float = 0.1,
        shuffle: bool = True,
        random_state: Any = None,
        warm_start: bool = False,
        verbose: int = 0,
        device: str = "cpu",
        n_threads: int | str = "auto",
        dtype: Any = np.float32,
        backend: str = "auto",
    ) -> None:
        self.estimator = estimator
        self.learning_rate = learning_rate
        self.loss = loss
        self.penalty = penalty
        self.max_iter = max_iter
        self.batch_size = batch_size
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.shuffle = shuffle
        self.random_state = random_state
        self.warm_start = warm_start
        self.verbose = verbose
        self.device = device
        self.n_threads = n_threads
        self.dtype = dtype
        self.backend = backend

    def _training_objects(self, batch_size: int, mean_weight: float,
                          sparse: bool) -> tuple[Any, Any, Any]:
        """``learning_rate``, ``loss`` and ``penalty`` through the training objects'
        ``select`` (None: the defaults of :meth:`_default_rate`, :meth:`_default_loss`
        and no penalty), alike for sparse and dense features."""
        if self.learning_rate is None:
            rate = self._default_rate()
        elif isinstance(self.learning_rate, numbers.Real):
            # A number is a constant step here (the seed API's select reads it as eta0).
            rate = LearningRateSGD(eta0=float(self.learning_rate), learning_rate="constant")
        else:
            rate = BaseLearningRate.select(self.learning_rate)
        loss = self._default_loss() if self.loss is None else BaseLearningLoss.select(self.loss)
        return rate, loss, BaseLearningPenalty.select(self.penalty)

    def _default_rate(self) -> LearningRateSGD:
        """A constant step :math:`\\min(10^{-3}, 1 / E\\|x\\|^2)` on the graph's inputs.

        Small, so training continues from the fitted solution instead of undoing it,
        and below the stable step of a linear layer on unscaled features.
        """
        return LearningRateSGD(eta0=min(1e-3, self._stable_step), learning_rate="constant")

    @abstractmethod
    def _default_loss(self) -> BaseLearningLoss:
        """The loss used when ``loss`` is None."""

    def _start(self, X: Any, y: Any, sample_weight: Any) -> None:
        """``estimator_``: a copy of the fitted estimator, or a fitted clone of it."""
        try:
            check_is_fitted(self.estimator)
            expected = getattr(self.estimator, "n_features_in_", None)
            if expected is not None and expected != X.shape[1]:
                # scikit-learn's words, and why: a fitted model is fine-tuned, not refit.
                raise ValueError(
                    f"X has {X.shape[1]} features, but {type(self.estimator).__name__} is "
                    f"expecting {expected} features as input: fine-tuning starts from its "
                    "fitted weights. Pass an unfitted estimator to fit data of another "
                    "width.")
            self.estimator_ = copy.deepcopy(self.estimator)
        except NotFittedError:
            fit_params = {} if sample_weight is None else {"sample_weight": sample_weight}
            with warnings.catch_warnings():
                # An iterative model stopped early only starts the training done here.
                warnings.simplefilter("ignore", ConvergenceWarning)
                self.estimator_ = self._fit_clone(X, y, fit_params)

    def _fit_clone(self, X: Any, y: Any, fit_params: dict[str, Any]) -> Any:
        """A clone of the unfitted ``estimator`` fitted on the first call's data."""
        return clone(self.estimator).fit(X, y, **fit_params)

    def _preprocess(self, X: Any) -> Any:
        frozen, _, _ = _split(self.estimator_)
        for _, step in frozen:
            if step not in (None, "passthrough"):
                X = step.transform(X)
        return X

    def _template(self, n_features: int, dtype: np.dtype) -> Template:
        _, name, final = _split(self.estimator_)
        onx = _convert(_graph_model(final), n_features, dtype)
        weights = list(get_train_initializer(onx))
        if not weights:
            operators = sorted({node.op_type for node in onx.graph.node})
            raise ValueError(
                f"Step {name!r} ({type(final).__name__}) cannot be trained: its ONNX graph "
                f"has no weight with a gradient (operators: {operators}). Only linear "
                "models, logistic regressions and MLPs can be fine-tuned."
            )
        # The loss compares the output of the node applying the last weight (the bias of
        # the last layer): raw scores for classifiers, the prediction for regressors.
        score = next(node.output[0] for node in onx.graph.node if weights[-1] in node.input)
        self._softmax = any(node.op_type == "Softmax" for node in onx.graph.node)
        outputs = [out.name for out in onx.graph.output]
        return Template(onx, score, weights, outputs, penalized=weights[0::2])

    def _fitted_attributes(self, weights: dict[str, np.ndarray]) -> dict[str, Any]:
        # Shallow copies with the new weights, not the fitted model changed in place:
        # publishing them is one assignment, and a failed call leaves the old one.
        frozen, name, final = _split(self.estimator_)
        final = copy.copy(final)
        _set_weights(final, list(weights.values()))
        if not isinstance(self.estimator_, Pipeline):
            return {"estimator_": final}
        pipeline = copy.copy(self.estimator_)
        pipeline.steps = [*frozen, (name, final)]
        return {"estimator_": pipeline}

    def to_onnx(self) -> onnx.ModelProto:
        """The whole updated model (frozen steps and trained final step) as ONNX."""
        check_is_fitted(self, "optimizer_")
        options = None
        if is_classifier(self.estimator_):
            _, _, final = _split(self.estimator_)
            options = {id(final): {"zipmap": False}}
        # Imported here: ``import skl_ortgrad`` does not load skl2onnx.
        from skl2onnx import to_onnx

        return to_onnx(self.estimator_, np.zeros((1, self.n_features_in_), dtype=self._dtype()),
                       target_opset=TARGET_OPSET, options=options)


class OnnxGradientRegressor(RegressorMixin, _BaseOnnxGradient):
    def _default_loss(self) -> SquareLearningLoss:
        return SquareLearningLoss()

    def _prepare_targets(self, y: Any, first_call: bool, classes: Any) -> np.ndarray:
        return numeric_targets(y)

    def predict(self, X: Any) -> np.ndarray:
        """Predictions of the trained graph, shape (n_samples,)."""
        return self._run(X)[self._template_.outputs[0]].ravel().astype(np.float64)


OnnxGradientRegressor.__doc__ = class_docstring(
    OnnxGradientRegressor,
    """Continue training a fitted regressor (or a pipeline ending in one) on new data.

    The final step (a linear model or an ``MLPRegressor``) is converted with skl2onnx and
    its weights are trained from their fitted values by onnxruntime, with either gradient
    backend; the preprocessing steps stay frozen.
    """,
    GRADIENT, gradient_attributes(classifier=False),
)


class OnnxGradientClassifier(ClassifierTargetsMixin, ClassifierMixin, _BaseOnnxGradient):
    def _default_loss(self) -> BaseLearningLoss:
        if self._softmax:
            return NegLogLearningLoss(eps=0.0, probability_function="softmax")
        return NegLogLearningLoss(eps=0.0)

    def partial_fit(
        self, X: Any, y: Any, classes: Any = None, sample_weight: Any = None
    ) -> OnnxGradientClassifier:
        """One epoch over ``(X, y)``; ``classes`` is needed on the first call only when
        the wrapped estimator is not fitted (a fitted one keeps its own classes, which
        ``classes`` must then equal). A superset of the labels of ``y`` is valid, as in
        scikit-learn's ``partial_fit``."""
        if classes is None and not hasattr(self, "optimizer_"):
            classes = getattr(_split(self.estimator)[2], "classes_", None)
        return super().partial_fit(X, y, classes=classes, sample_weight=sample_weight)

    def _prepare_targets(self, y: Any, first_call: bool, classes: Any) -> np.ndarray:
        """Labels encoded for the loss; on the first call, ``classes_`` is the fitted
        model's classes, or ``classes`` (else the labels of ``y``) for an unfitted one.

        Raises
        ------
        ValueError
            If ``classes`` differs from the classes of the fitted model (scikit-learn's
            ``partial_fit`` wording).
        """
        if first_call:
            _, name, final = _split(self.estimator)
            fitted_classes = getattr(final, "classes_", None)
            if fitted_classes is not None:
                if classes is not None and not np.array_equal(
                    unique_labels(np.asarray(classes)), fitted_classes
                ):
                    raise ValueError(
                        f"`classes={classes!r}` is not the same as the classes of the "
                        f"fitted {name}, was: {fitted_classes!r}"
                    )
                classes = fitted_classes
        return super()._prepare_targets(y, first_call, classes)

    def _fit_clone(self, X: Any, y: Any, fit_params: dict[str, Any]) -> Any:
        """A clone of the unfitted ``estimator`` fitted on the first call's data, knowing
        every class of ``classes_``.

        ``fit`` learns the labels of ``y`` only; when ``classes=`` named more, the clone
        learns them all through its ``partial_fit(X, y, classes=...)``, scikit-learn's
        way to declare classes absent from the data.

        Raises
        ------
        ValueError
            If ``y`` lacks some classes and the estimator has no ``partial_fit``.
        """
        absent = np.setdiff1d(self.classes_, y)
        if not absent.size:
            return super()._fit_clone(X, y, fit_params)
        if not hasattr(self.estimator, "partial_fit"):
            raise ValueError(
                f"classes={self.classes_.tolist()} names labels absent from y "
                f"({absent.tolist()}), but {type(self.estimator).__name__} is not fitted and "
                "has no partial_fit: its fit learns only the labels of y. Fit it beforehand "
                "on data holding every class, or start with such data."
            )
        return clone(self.estimator).partial_fit(X, y, classes=self.classes_, **fit_params)


OnnxGradientClassifier.__doc__ = class_docstring(
    OnnxGradientClassifier,
    """Continue training a fitted classifier (or a pipeline ending in one) on new data.

    The final step (``LogisticRegression``, ``SGDClassifier``, ``MLPClassifier``...) keeps
    its classes; new data may only use them. The default loss matches the graph's
    probabilities: softmax cross-entropy when the graph ends in a softmax, the logistic
    loss per score otherwise.
    """,
    GRADIENT, gradient_attributes(classifier=True),
)
