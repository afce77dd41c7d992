"""Linear models trained by mini-batch stochastic gradient descent on their ONNX graph
by onnxruntime: drop-in replacements for scikit-learn's ``SGDRegressor`` and
``SGDClassifier``."""

from __future__ import annotations

import warnings
from collections.abc import Hashable
from functools import partial
from typing import Any, ClassVar

import numpy as np
import scipy.sparse as sp
from onnx import numpy_helper
from sklearn.base import ClassifierMixin, RegressorMixin, is_classifier
from sklearn.linear_model import SGDClassifier, SGDRegressor
from sklearn.utils import compute_class_weight
from sklearn.utils._available_if import available_if
from sklearn.utils._param_validation import StrOptions
from sklearn.utils.validation import check_is_fitted

from skl_ortgrad._cache import freeze
from skl_ortgrad.estimators.base import BaseOnnxEstimator, numeric_targets
from skl_ortgrad.estimators.classification import ClassifierTargetsMixin, onnx_classes
from skl_ortgrad.estimators.parameter_docs import SGD, class_docstring, entry, sgd_attributes
from skl_ortgrad.estimators.sgd_graphs import classifier_graph, regressor_graph
from skl_ortgrad.estimators.sgd_parameters import (
    CLASSIFICATION_LOSSES,
    QUADRATIC_TAILS,
    REGRESSION_LOSSES,
    loss_functions,
    sgd_learning_rate,
    sgd_loss,
    sgd_penalty,
)
from skl_ortgrad.estimators.template import Template
from skl_ortgrad.graph.linear import linear_score_model
from skl_ortgrad.graph.model import initializer_array
from skl_ortgrad.optim import BaseLearningRate
from skl_ortgrad.optim.losses import BaseLearningLoss
from skl_ortgrad.optim.passive_aggressive import VARIANTS as PASSIVE_AGGRESSIVE
from skl_ortgrad.optim.penalties import BaseLearningPenalty

# Where the templates pickled before sgd_graphs existed name the functions that convert
# their graphs (a template converts on first use: functools.partial of them).
_classifier_graph, _regressor_graph = classifier_graph, regressor_graph

_PROJECT_PARAMETERS_DOC = """
    batch_size : int or 'auto', default='auto'
        Rows per mini-batch ('auto': from 32 rows up to 256 as the rows grow, see
        :func:`~skl_ortgrad.estimators.sgd_parameters.auto_batch_size`; one row for
        'pa1' and 'pa2'); scikit-learn's SGD takes one
        sample at a time, which ``batch_size=1`` reproduces step for step. A batch of
        :math:`b` rows takes a step of :math:`b \\eta_t` along its mean gradient, so an
        epoch learns about as much whatever the batch size (see
        :mod:`skl_ortgrad.estimators.sgd_parameters`).
    device : str, default='cpu'
        'cpu', 'cuda' or 'cuda:<index>'.
    n_threads : int, default=1
        onnxruntime intra-op threads.
    dtype : np.float32 or np.float64, default=np.float32
        Float type of the graph: the weights, the training and the exported model.
    backend : {'auto', 'onnxruntime-training', 'onnx'}, default='auto'
        Which gradient backend builds the training graph: onnxruntime-training's
        graph builder, or skl_ortgrad's own differentiator in standard ONNX, which runs
        on any onnxruntime (Python 3.13+, onnxruntime-gpu). 'auto' takes
        onnxruntime-training where it is installed, else 'onnx'. Both give the same
        gradients; the trained model is the same ONNX graph either way.
"""

_SGD_PARAMETERS_DOC = """
    penalty : {'l2', 'l1', 'elasticnet'}, None or BaseLearningPenalty, default='l2'
        :math:`\\alpha R(w)` as scikit-learn's; an object (e.g.
        ``ElasticLearningPenalty(l1=..., l2=...)``) is used as given, and then ``alpha``
        (except for the 'optimal' schedule) and ``l1_ratio`` are ignored.
    alpha : float, default=0.0001
        Strength of the penalty; also sets the 'optimal' schedule.
    l1_ratio : float, default=0.15
        Share of L1 in 'elasticnet'.
    fit_intercept : bool, default=True
        Train the intercept (else kept at 0 or ``intercept_init``), its step times 0.01 on sparse X.
    max_iter, tol, shuffle, verbose, epsilon, random_state, eta0, power_t, early_stopping,
    validation_fraction, n_iter_no_change, warm_start :
        As in scikit-learn. ``verbose=1`` shows a progress bar over the epochs of ``fit``
        in a terminal or a notebook, one plain line per epoch elsewhere, then a summary
        line; ``partial_fit`` writes one line per call; 2 adds every batch's loss and
        rate. These lines are also logged at INFO on the ``skl_ortgrad`` logger.
    learning_rate : {'optimal', 'invscaling', 'constant', 'adaptive', 'pa1', 'pa2'} or rate
        scikit-learn's schedules (``eta0``, ``power_t``, ``alpha``), rescaled per batch;
        'pa1' and 'pa2' (passive-aggressive, ``eta0`` their C) step per row, as
        scikit-learn's (:class:`~skl_ortgrad.optim.passive_aggressive.
        PassiveAggressiveRate`). An object (``LearningRateSGD(...)``,
        ``LearningRateSGDNesterov(...)``, ``LearningRateAdam(...)``) is used as given:
        its rate applies to the batch's mean gradient, and ``eta0``, ``power_t`` are
        ignored. Nested parameters (``learning_rate__eta0``) reach inside it.
    average : bool or int, default=False
        Averaged SGD as scikit-learn's: ``coef_``, ``intercept_``, predictions and the
        exported graph use the average of the weights after every update, counted per
        sample from the ``average``-th sample on (True: from the first), once reached.
        With ``batch_size=1`` it is scikit-learn's average exactly; a batch's weights
        count once per row.
""" + _PROJECT_PARAMETERS_DOC


class _BaseOnnxSGD(BaseOnnxEstimator):
    """What both SGD estimators share: scikit-learn's parameters and their objects."""

    _regression_only = True
    _zero_weights_to_split = True
    _linear_scores = True
    # scikit-learn's SGD scales each sample's step by its weight; its tol rule watches the
    # unweighted loss plus alpha * R(w) at every sample (objective_sum in _sgd_fast).
    _weighted_mean = False
    #: The loss of the passive-aggressive schedules (scikit-learn's only one).
    _pa_loss = "epsilon_insensitive"
    #: The constraints both estimators put over scikit-learn's: its strings, or an
    #: object of the package (None: no penalty).
    _objects_allowed: ClassVar[dict] = {
        "penalty": [StrOptions({"l2", "l1", "elasticnet"}), None, BaseLearningPenalty],
        "learning_rate": [
            StrOptions({"constant", "optimal", "invscaling", "adaptive", "pa1", "pa2"}),
            BaseLearningRate,
        ],
    }

    def _penalty(self, batch_size: int) -> BaseLearningPenalty:
        return sgd_penalty(self.penalty, self.alpha, self.l1_ratio, batch_size)

    def _loss(self) -> BaseLearningLoss:
        return sgd_loss(self.loss, self.epsilon)

    def _training_objects(self, batch_size: int, mean_weight: float,
                          sparse: bool) -> tuple[Any, Any, Any]:
        loss = self._loss()
        self._check_loss(loss)
        if self._passive_aggressive and (
                self.loss if isinstance(self.loss, str) else loss.kind) != self._pa_loss:
            raise ValueError(f"Learning rate '{self.learning_rate}' only works with loss "
                             f"'{self._pa_loss}'.")
        rate = sgd_learning_rate(
            {**{name: getattr(self, name)
                for name in ("learning_rate", "eta0", "power_t", "alpha", "fit_intercept")},
             # What the passive-aggressive step adds to the scores where no intercept
             # is trained.
             "intercept": (self._intercept({}) if self._passive_aggressive
                           and not self.fit_intercept else None)},
            loss, batch_size, self._stable_step, mean_weight, sparse,
            # A model fitted by release 0.1.0 resumes with its own rate: no spread
            # measured, a cap that stays.
            self.__dict__.get("_row_spread", 1.0), self.__dict__.get("_cap_decays", False))
        return rate, loss, self._penalty(batch_size)

    def _start(self, X: Any, y: Any, sample_weight: Any) -> None:
        # A fresh fit: the mini-batch cap decays with the schedule (sgd_learning_rate).
        self._cap_decays = True

    def _count_samples(self, start: int, before: int, rows: int) -> None:
        # scikit-learn's SGD: t_ += n_iter_ * n_samples after a call, the validation rows
        # of early stopping and the rows passive-aggressive I skips included, and the
        # next call's schedule starts there.
        epochs = len(self.optimizer_.train_losses_) - before
        self.optimizer_.t_ = start + epochs * rows

    @property
    def _tol_on_objective(self) -> bool | str:
        """scikit-learn's ``tol`` rule: the unweighted losses plus the penalty, the losses
        alone for the passive-aggressive schedules."""
        return "unweighted loss" if self._passive_aggressive else "unweighted"

    @property
    def _passive_aggressive(self) -> bool:
        """``learning_rate`` is 'pa1' or 'pa2': one row a step (:meth:`_resolved_batch_size`),
        the tol rule on the loss alone, as scikit-learn's."""
        return isinstance(self.learning_rate, str) and self.learning_rate in PASSIVE_AGGRESSIVE

    def _resolved_batch_size(self, n_samples: int) -> int:
        # A rate reading every batch's rows (the passive-aggressive step, as a string or
        # an object) steps one row at a time.
        if self.batch_size == "auto" and (
                self._passive_aggressive or getattr(self.learning_rate, "reads_batch", False)):
            return 1
        return super()._resolved_batch_size(n_samples)

    def _reads_row_spread(self) -> bool:
        return self._loss().kind in QUADRATIC_TAILS

    def _check_loss(self, loss: BaseLearningLoss) -> None:
        """Refuse a loss object of the wrong kind for this estimator."""
        if self._regression_only and loss.is_classification:
            raise ValueError(
                f"loss={self.loss!r} is a classification loss; {type(self).__name__} "
                f"takes one of {list(REGRESSION_LOSSES)} or a regression loss object."
            )

    def _average(self) -> bool | int:
        return self.average

    def _restart_schedule(self) -> None:
        """scikit-learn's ``fit`` restarts the schedule (``t_ = 1``) and the average even
        when it continues from the weights of ``warm_start``."""
        optimizer = self.optimizer_
        optimizer.t_ = 1
        optimizer.average_weights_ = []
        optimizer.average_count_ = 0

    def _fit(self, X: Any, y: Any, sample_weight: Any, init: dict[str, Any]) -> Any:
        super()._fit(X, y, sample_weight, init)
        if self.power_t < 0:
            warnings.warn(
                "Negative values for `power_t` are deprecated in version 1.8 and will raise "
                "an error in 1.10. Use values in the range [0.0, inf) instead.",
                FutureWarning, stacklevel=3,
            )
        return self

    def _template_weights(self) -> list[str]:
        return ["coef", "intercept"] if self.fit_intercept else ["coef"]

    def _template_key(self, n_features: int, dtype: np.dtype) -> Hashable:
        # Zero initial weights: the shape, the dtype and the trained weights decide.
        return n_features, np.dtype(dtype).str, tuple(self._template_weights())

    def _initialize(self, template: Template, init: dict[str, Any]) -> None:
        """``coef_init`` / ``intercept_init`` in the template's initializers, checked as
        scikit-learn checks them."""
        graph = {i.name: i for i in template.model.graph.initializer}
        for name, value in init.items():
            if value is None:
                continue
            current = numpy_helper.to_array(graph[name])
            given = np.asarray(value, dtype=current.dtype)
            if given.size != current.size or (
                name == "coef" and given.ndim == 2 and given.T.shape != current.shape
            ):
                raise ValueError(f"Provided {name}_init does not match dataset.")
            array = given.T if given.ndim == 2 else given
            graph[name].CopyFrom(numpy_helper.from_array(
                np.ascontiguousarray(array).reshape(current.shape), name))

    def _intercept(self, weights: dict[str, np.ndarray]) -> np.ndarray:
        """The trained intercept, or the fixed one when ``fit_intercept=False``."""
        if "intercept" in weights:
            return weights["intercept"]
        return initializer_array(self._template_.model, "intercept")

    def _sync(self, before: int) -> None:
        if not self.average:
            for name in self._AVERAGE_ATTRIBUTES:
                self.__dict__.pop(name, None)
        super()._sync(before)

    def _published(self, before: int) -> dict[str, Any]:
        published = super()._published(before)
        # scikit-learn's t_ counts samples from 1, as the optimizer does.
        published["t_"] = float(self.optimizer_.t_)
        if self.average:
            published.update(self._average_attributes())
        return published

    def sparsify(self) -> _BaseOnnxSGD:
        """Store ``coef_`` as a ``scipy.sparse`` CSR matrix, as scikit-learn's
        ``sparsify`` does: less memory for mostly-zero coefficients (an L1 penalty).

        Predictions read the trained graph and are unchanged; :meth:`densify` goes back,
        and the next fit sets a dense ``coef_``.
        """
        # scikit-learn's words.
        check_is_fitted(self, "optimizer_",
                        msg="Estimator, %(name)s, must be fitted before sparsifying.")
        self.coef_ = sp.csr_matrix(self.coef_)
        return self

    def densify(self) -> _BaseOnnxSGD:
        """Store ``coef_`` as a dense array again (after :meth:`sparsify`)."""
        check_is_fitted(self, "optimizer_",
                        msg="Estimator, %(name)s, must be fitted before densifying.")
        self.coef_ = self._dense_coef()
        return self

    def _dense_coef(self) -> np.ndarray:
        """``coef_`` dense, of its fitted shape (after :meth:`sparsify` too)."""
        if not sp.issparse(self.coef_):
            return self.coef_
        dense = self.coef_.toarray()
        return dense if is_classifier(self) else dense.ravel()

    #: scikit-learn's attributes of averaged SGD: the weights of the last step and their
    #: average, present with ``average`` only (its tests read them).
    _AVERAGE_ATTRIBUTES = ("_standard_coef", "_standard_intercept", "_average_coef",
                           "_average_intercept")

    def _average_attributes(self) -> dict[str, np.ndarray]:
        """With ``average``: ``_standard_coef`` / ``_standard_intercept`` (the weights of
        the last step) and ``_average_coef`` / ``_average_intercept`` (their average,
        the weights of ``coef_`` once averaging started), shaped as ``coef_`` and
        ``intercept_``."""
        optimizer, attributes = self.optimizer_, {}
        for kind, weights in (("_standard", optimizer.weights_),
                              ("_average", optimizer.state_.served(True))):
            fitted = self._fitted_attributes(
                dict(zip(optimizer.weights_to_train_, weights, strict=True)))
            attributes[f"{kind}_coef"] = fitted["coef_"]
            attributes[f"{kind}_intercept"] = fitted["intercept_"]
        return attributes


class OnnxSGDRegressor(RegressorMixin, _BaseOnnxSGD):
    #: The string losses (scikit-learn's table of the same name).
    loss_functions: ClassVar[dict] = loss_functions(REGRESSION_LOSSES)

    _parameter_constraints: ClassVar[dict] = {
        **BaseOnnxEstimator._parameter_constraints,
        **SGDRegressor._parameter_constraints,
        "loss": [StrOptions(set(REGRESSION_LOSSES)), BaseLearningLoss],
        **_BaseOnnxSGD._objects_allowed,
    }

    def __init__(
        self,
        loss: Any = "squared_error",
        *,
        penalty: Any = "l2",
        alpha: float = 0.0001,
        l1_ratio: float = 0.15,
        fit_intercept: bool = True,
        max_iter: int = 1000,
        tol: float | None = 1e-3,
        shuffle: bool = True,
        verbose: int = 0,
        epsilon: float = 0.1,
        random_state: Any = None,
        learning_rate: Any = "invscaling",
        eta0: float = 0.01,
        power_t: float = 0.25,
        early_stopping: bool = False,
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 5,
        warm_start: bool = False,
        average: bool | int = False,
        batch_size: int | str = "auto",
        device: str = "cpu",
        n_threads: int | str = "auto",
        dtype: Any = np.float32,
        backend: str = "auto",
    ) -> None:
        self.loss = loss
        self.penalty = penalty
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.shuffle = shuffle
        self.verbose = verbose
        self.epsilon = epsilon
        self.random_state = random_state
        self.learning_rate = learning_rate
        self.eta0 = eta0
        self.power_t = power_t
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.warm_start = warm_start
        self.average = average
        self.batch_size = batch_size
        self.device = device
        self.n_threads = n_threads
        self.dtype = dtype
        self.backend = backend

    def fit(
        self, X: Any, y: Any, coef_init: Any = None, intercept_init: Any = None,
        sample_weight: Any = None,
    ) -> OnnxSGDRegressor:
        """Train for up to ``max_iter`` epochs (from scratch unless ``warm_start``).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        coef_init : array of shape (n_features,), optional
            Initial coefficients (a fresh fit starts from them, even with ``warm_start``).
        intercept_init : array of shape (1,), optional
            Initial intercept.
        sample_weight : array-like of shape (n_samples,), optional
        """
        return self._fit(X, y, sample_weight, _init(coef_init, intercept_init))

    def _prepare_targets(self, y: Any, first_call: bool, classes: Any) -> np.ndarray:
        return numeric_targets(y)

    def _template(self, n_features: int, dtype: np.dtype) -> Template:
        # The score is the prediction: the hand-built graph serves predict as well.
        return Template(partial(regressor_graph, n_features, np.dtype(dtype)), "variable",
                        self._template_weights(), ["variable"],
                        score_model=linear_score_model(n_features, 1, dtype, "variable",
                                                       intercept_dims=[1], reshape=True))

    def _fitted_attributes(self, weights: dict[str, np.ndarray]) -> dict[str, Any]:
        return {"coef_": weights["coef"].ravel().astype(self._data_dtype()),
                "intercept_": self._intercept(weights).ravel().astype(self._data_dtype())}

    def predict(self, X: Any) -> np.ndarray:
        """Predicted values, shape (n_samples,)."""
        score = self._fitted_template().score
        return self._in_data_dtype(self._run(X, score)[score].ravel())


OnnxSGDRegressor.__doc__ = class_docstring(
    OnnxSGDRegressor,
    """Linear regression trained by mini-batch SGD on its ONNX graph: a drop-in
    replacement of ``SGDRegressor``.

    The model is :math:`f(x) = x^\\top w + b`; training minimizes scikit-learn's
    objective (see :mod:`skl_ortgrad.estimators.sgd_parameters`) with mini-batches of
    ``batch_size`` rows, each one onnxruntime call, with either gradient backend.
    """,
    {**SGD, "loss": entry("str or BaseLearningLoss", """
        'squared_error', 'huber', 'epsilon_insensitive' or 'squared_epsilon_insensitive',
        as in ``SGDRegressor`` (``epsilon`` sets the last three); an object (a regression
        loss such as ``AbsoluteLearningLoss()``) is used as given.
    """)},
    sgd_attributes(classifier=False),
)


def _init(coef_init: Any, intercept_init: Any) -> dict[str, Any]:
    return {
        name: value for name, value in (("coef", coef_init), ("intercept", intercept_init))
        if value is not None
    }


# Losses whose scores scikit-learn turns into probabilities.
_PROBABILISTIC = {"log_loss", "modified_huber"}


class OnnxSGDClassifier(ClassifierTargetsMixin, ClassifierMixin, _BaseOnnxSGD):
    _regression_only = False
    _pa_loss = "hinge"
    #: The string losses (scikit-learn's table of the same name).
    loss_functions: ClassVar[dict] = loss_functions(CLASSIFICATION_LOSSES)

    _parameter_constraints: ClassVar[dict] = {
        **BaseOnnxEstimator._parameter_constraints,
        **SGDClassifier._parameter_constraints,
        "loss": [StrOptions(set(CLASSIFICATION_LOSSES)), BaseLearningLoss],
        **_BaseOnnxSGD._objects_allowed,
    }

    def __init__(
        self,
        loss: Any = "hinge",
        *,
        penalty: Any = "l2",
        alpha: float = 0.0001,
        l1_ratio: float = 0.15,
        fit_intercept: bool = True,
        max_iter: int = 1000,
        tol: float | None = 1e-3,
        shuffle: bool = True,
        verbose: int = 0,
        epsilon: float = 0.1,
        n_jobs: int | None = None,
        random_state: Any = None,
        learning_rate: Any = "optimal",
        eta0: float = 0.01,
        power_t: float = 0.5,
        early_stopping: bool = False,
        validation_fraction: float = 0.1,
        n_iter_no_change: int = 5,
        class_weight: Any = None,
        warm_start: bool = False,
        average: bool | int = False,
        batch_size: int | str = "auto",
        device: str = "cpu",
        n_threads: int | str = "auto",
        dtype: Any = np.float32,
        backend: str = "auto",
    ) -> None:
        self.loss = loss
        self.penalty = penalty
        self.alpha = alpha
        self.l1_ratio = l1_ratio
        self.fit_intercept = fit_intercept
        self.max_iter = max_iter
        self.tol = tol
        self.shuffle = shuffle
        self.verbose = verbose
        self.epsilon = epsilon
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.learning_rate = learning_rate
        self.eta0 = eta0
        self.power_t = power_t
        self.early_stopping = early_stopping
        self.validation_fraction = validation_fraction
        self.n_iter_no_change = n_iter_no_change
        self.class_weight = class_weight
        self.warm_start = warm_start
        self.average = average
        self.batch_size = batch_size
        self.device = device
        self.n_threads = n_threads
        self.dtype = dtype
        self.backend = backend

    @property
    def _tol_on_objective(self) -> bool | str:
        """The unweighted losses as scikit-learn's, but the weighted ones with
        ``class_weight``: at mini-batches, the unweighted losses (mostly of rows weighing
        1e-4) stopped a fit before it learnt the class weighing 1000 (64% of the rows
        predicted, 87% asked by scikit-learn's ``check_class_weight_classifiers``, whose
        per-sample steps never stop improving its unweighted objective). The
        passive-aggressive schedules step per row: scikit-learn's rule."""
        if self.class_weight is None or self._passive_aggressive:
            return super()._tol_on_objective
        return True

    def fit(
        self, X: Any, y: Any, coef_init: Any = None, intercept_init: Any = None,
        sample_weight: Any = None,
    ) -> OnnxSGDClassifier:
        """Train for up to ``max_iter`` epochs (from scratch unless ``warm_start``).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        coef_init : array of shape (n_classes, n_features), optional
            Initial coefficients, ``(1, n_features)`` or ``(n_features,)`` for two
            classes (a fresh fit starts from them, even with ``warm_start``).
        intercept_init : array of shape (n_classes,), optional
            Initial intercepts.
        sample_weight : array-like of shape (n_samples,), optional
            Multiplied by the weights of ``class_weight``.
        """
        return self._fit(X, y, sample_weight, _init(coef_init, intercept_init))

    def _check_loss(self, loss: BaseLearningLoss) -> None:
        if loss.requires_one_hot and len(self.classes_) < 3:
            raise ValueError(
                f"loss={self.loss!r} trains a softmax over the classes and needs 3 classes "
                f"or more, got {len(self.classes_)}; use 'log_loss' for two classes."
            )

    def _class_sample_weight(self, y: Any, sample_weight: Any, partial: bool) -> Any:
        """``sample_weight`` times ``class_weight`` of every row's class."""
        if self.class_weight is None:
            return sample_weight
        if partial and self.class_weight == "balanced":
            raise ValueError(
                "class_weight 'balanced' is not supported for partial_fit. In order to use "
                "'balanced' weights, use compute_class_weight('balanced', classes=classes, "
                "y=y). In place of y you can use a large enough sample of the full training "
                "set target to properly estimate the class frequency distributions. Pass "
                "the resulting weights as the class_weight parameter."
            )
        per_class = compute_class_weight(self.class_weight, classes=self.classes_, y=y)
        bad = ~(np.isfinite(per_class) & (per_class >= 0))
        if bad.any():
            label = np.asarray(self.classes_)[bad][0].tolist()
            raise ValueError(
                f"class_weight must give every class a finite weight >= 0, got "
                f"{float(per_class[bad][0])!r} for class {label!r}.")
        weights = per_class[self._class_index(y)]
        return weights if sample_weight is None else weights * sample_weight

    def _training_objects(self, batch_size: int, mean_weight: float,
                          sparse: bool) -> tuple[Any, Any, Any]:
        if self.n_jobs == 0 and len(self.classes_) > 2:
            # scikit-learn trains its one-vs-rest classes with joblib, which refuses 0.
            raise ValueError("n_jobs == 0 in Parallel has no meaning")
        return super()._training_objects(batch_size, mean_weight, sparse)

    def _prepare_targets(self, y: Any, first_call: bool, classes: Any) -> np.ndarray:
        targets = super()._prepare_targets(y, first_call, classes)
        # scikit-learn's regression losses on a classifier fit the labels -1 / +1.
        return targets if self._loss().is_classification else 2 * targets - 1

    def _counterpart_loss(self) -> str:
        """The ``SGDClassifier`` loss whose skl2onnx graph computes the probabilities."""
        return "modified_huber" if self._loss().kind == "modified_huber" else "log_loss"

    def _template_key(self, n_features: int, dtype: np.dtype) -> Hashable:
        return (*super()._template_key(n_features, dtype), freeze(onnx_classes(self.classes_)),
                self._softmax_loss(), self._counterpart_loss())

    def _template(self, n_features: int, dtype: np.dtype) -> Template:
        n_classes = len(self.classes_)
        n_scores = 1 if n_classes == 2 else n_classes
        softmax = n_classes > 2 and self._softmax_loss()
        score = "raw_scores" if softmax else "score"
        # Training and decision_function run the hand-built score; skl2onnx converts the
        # whole graph (labels, probabilities) when predict_proba or an export needs it.
        build = partial(classifier_graph, onnx_classes(self.classes_), n_features,
                        np.dtype(dtype), softmax, self._counterpart_loss(), score)
        return Template(build, score, self._template_weights(), ["label", "probabilities"],
                        score_model=linear_score_model(
                            n_features, n_scores, dtype, score,
                            intercept_dims=[1, n_scores] if softmax else [n_scores]))

    def _softmax_loss(self) -> bool:
        """Whether the loss trains a softmax over the scores."""
        return getattr(self._loss(), "probability_function", None) == "softmax"

    def _has_proba(self) -> bool:
        loss = self.loss
        if isinstance(loss, BaseLearningLoss):
            if loss.kind in ("log", "softmax_log", "modified_huber"):
                return True
        elif loss in _PROBABILISTIC:
            return True
        raise AttributeError(f"probability estimates are not available for loss={loss!r}")

    @available_if(_has_proba)
    def predict_proba(self, X: Any) -> np.ndarray:
        """Class probabilities, shape (n, n_classes), rows summing to 1 ('log_loss' and
        'modified_huber' only, as in scikit-learn)."""
        return super().predict_proba(X)

    @available_if(_has_proba)
    def predict_log_proba(self, X: Any) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`."""
        return super().predict_log_proba(X)

    def _fitted_attributes(self, weights: dict[str, np.ndarray]) -> dict[str, Any]:
        return {"coef_": weights["coef"].T.astype(self._data_dtype()),
                "intercept_": self._intercept(weights).ravel().astype(self._data_dtype())}


OnnxSGDClassifier.__doc__ = class_docstring(
    OnnxSGDClassifier,
    """Linear classifier trained by mini-batch SGD on its ONNX graph: a drop-in
    replacement of ``SGDClassifier``.

    Binary problems train one score :math:`s = x^\\top w + b`; multiclass problems one
    score per class, one-vs-rest, as scikit-learn. ``predict_proba`` exists for
    'log_loss' (sigmoid of the score, normalized over the classes one-vs-rest) and
    'modified_huber' (:math:`(\\mathrm{clip}(s, -1, 1) + 1) / 2`, normalized), as in
    scikit-learn, and for a log-loss object; a softmax cross-entropy over the classes is
    the object ``NegLogLearningLoss(eps=0, probability_function='softmax')`` (3 classes
    or more).
    """,
    {**SGD, "loss": entry("str or BaseLearningLoss", """
        'hinge', 'log_loss', 'modified_huber', 'squared_hinge', 'perceptron', or a
        regression loss ('squared_error', 'huber', 'epsilon_insensitive',
        'squared_epsilon_insensitive') on the labels coded -1 / +1, as in
        ``SGDClassifier``; or an object (a classification loss such as
        ``HingeLearningLoss(threshold=0.5)``), used as given.
    """)},
    sgd_attributes(classifier=True),
)
