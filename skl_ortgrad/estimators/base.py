"""What every skl_ortgrad estimator shares: parameters, validation, one training path for
``fit`` and ``partial_fit``, inference, export and pickling.

A subclass says which scikit-learn model its ONNX graph comes from
(:meth:`BaseOnnxEstimator._template`), how labels are encoded for the loss and how the
graph's outputs become predictions. Everything else is here.
"""

from __future__ import annotations

import math
import numbers
import sys
import warnings
from abc import ABCMeta, abstractmethod
from collections.abc import Hashable
from typing import Any, ClassVar

import numpy as np
import onnx
import scipy.sparse as sp
from sklearn.base import BaseEstimator
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import _check_sample_weight, check_is_fitted

from skl_ortgrad._cache import BoundedCache
from skl_ortgrad._params import MemoizedParamNames, MemoizedParamValidation
from skl_ortgrad.estimators.curvature import curvature
from skl_ortgrad.estimators.dtype_range import check_dtype_range, check_weight_underflow
from skl_ortgrad.estimators.finite_input import cast_csr, validate_finite_data
from skl_ortgrad.estimators.inference import InferenceMixin
from skl_ortgrad.estimators.sgd_parameters import AUTO_BATCH, auto_batch_size
from skl_ortgrad.estimators.stalled import check_weights_moved
from skl_ortgrad.estimators.template import Template
from skl_ortgrad.estimators.validation_split import ValidationSplitMixin
from skl_ortgrad.exceptions import ConvergenceError
from skl_ortgrad.gradient.backend import BACKEND_NAMES, resolve_backend
from skl_ortgrad.graph.model import copied_model
from skl_ortgrad.runtime.devices import device_providers, parse_device
from skl_ortgrad.runtime.threads import training_threads
from skl_ortgrad.training.divergence import UncheckedRows, rolled_back_message
from skl_ortgrad.training.inputs import reads_as_given
from skl_ortgrad.training.interrupt import DeferredInterrupt
from skl_ortgrad.training.snapshot import OptimizerSnapshot


def numeric_targets(y: Any) -> np.ndarray:
    """A regressor's ``y`` as float64 of shape (n_samples, n_outputs).

    Objects and strings are converted as ``SGDRegressor`` converts them (numpy's cast to
    float: ``"1.5"`` and ``b"1.5"`` are 1.5), and must then be finite, as numeric
    targets must be.

    Raises
    ------
    ValueError
        If ``y`` holds anything but numbers or strings of numbers, or a converted value
        is NaN or infinite.
    """
    y = np.asarray(y)
    if y.dtype.kind in "OUS":
        try:
            y = y.astype(np.float64)
        except (TypeError, ValueError) as exc:
            raise ValueError(
                f"y must be numeric for a regressor; its values could not be converted "
                f"to float: {exc}"
            ) from exc
        if not np.isfinite(y).all():
            raise ValueError("y contains NaN or infinity: remove or impute those values.")
    if y.dtype.kind not in "iufb":
        raise ValueError(f"y must be numeric for a regressor, got dtype {y.dtype}.")
    return y.astype(np.float64).reshape((y.shape[0], -1))


#: Templates and their graphs cut at the score, for the estimators whose template is a
#: function of :meth:`BaseOnnxEstimator._template_key` (zero initial weights): building
#: and cutting them was a sixth of a small fit (breast cancer, one epoch).
TEMPLATES: BoundedCache[tuple[Template, onnx.ModelProto]] = BoundedCache(64)


class BaseOnnxEstimator(InferenceMixin, ValidationSplitMixin, MemoizedParamNames,
                        MemoizedParamValidation, BaseEstimator, metaclass=ABCMeta):
    """Base of the estimators trained through onnxruntime.

    Every estimator takes its scikit-learn counterpart's parameters (a family turns them
    into the training objects, :meth:`_training_objects`) plus the project's own:
    ``batch_size``, ``device``, ``n_threads``, ``dtype`` and ``backend``, which every
    family's ``__init__`` stores as scikit-learn's estimators do.
    """

    # What every estimator validates the same way; a family adds its own parameters.
    _parameter_constraints: ClassVar[dict] = {
        "max_iter": [Interval(numbers.Integral, 1, None, closed="left")],
        "batch_size": [StrOptions({"auto"}), Interval(numbers.Integral, 1, None, closed="left")],
        "n_iter_no_change": [Interval(numbers.Integral, 1, None, closed="left")],
        "early_stopping": ["boolean"],
        "shuffle": ["boolean"],
        "random_state": ["random_state"],
        "warm_start": ["boolean"],
        "verbose": ["verbose"],
        "device": [str],
        "n_threads": [Interval(numbers.Integral, 1, None, closed="left"),
                      StrOptions({"auto"})],
        # np.float32, np.float64 or their names; checked by _dtype().
        "dtype": "no_validation",
        "backend": [StrOptions(set(BACKEND_NAMES))],
    }

    # -- what subclasses define -------------------------------------------------------

    # Whether y may have several columns (validate_data's multi_output).
    _multi_output = False
    # Sample weights: the weighted mean loss of a batch (scikit-learn's MLPs), or a
    # weight scaling its row's step (scikit-learn's SGD), see the optimizer.
    _weighted_mean = True
    # Whether tol watches the objective, the loss plus the penalty (scikit-learn's SGD),
    # or the loss (its MLPs, whose L2 term is part of the loss).
    _tol_on_objective = False
    # Whether every graph of the class scores linearly in X (the SGD models): a first
    # partial_fit may then read its rows as given, as later ones (_reads_as_given).
    _linear_scores = False
    # scikit-learn's error for partial_fit with early_stopping=True.
    _partial_fit_early_stopping = "early_stopping should be False with partial_fit"
    # Whether a fit records the loss curve (loss_curve_, best_loss_, and the validation
    # scores): not scikit-learn's L-BFGS MLPs.
    _records_curves = True

    @abstractmethod
    def _training_objects(self, batch_size: int, mean_weight: float,
                          sparse: bool) -> tuple[Any, Any, Any]:
        """(learning rate, loss, penalty) of the parameters, for mini-batches of
        ``batch_size`` rows whose sample weights average ``mean_weight``, of sparse
        features or not (``sparse``)."""

    @abstractmethod
    def _prepare_targets(self, y: Any, first_call: bool, classes: Any) -> np.ndarray:
        """Validate ``y`` (setting ``classes_`` on a first call) and encode it for the loss."""

    @abstractmethod
    def _template(self, n_features: int, dtype: np.dtype) -> Template:
        """Build the initial model of the right shape and convert it to ONNX."""

    def _template_key(self, n_features: int, dtype: np.dtype) -> Hashable | None:
        """Everything :meth:`_template` depends on, when that is all it depends on (its
        result is then cached, :data:`TEMPLATES`); None (the default): built every time
        (random initial weights...)."""
        return None

    def _trained_template(self, n_features: int, dtype: np.dtype) -> tuple[Template,
                                                                          onnx.ModelProto]:
        """:meth:`_template` and its graph cut at the score (what the optimizer trains),
        both of their own."""
        def build() -> tuple[Template, onnx.ModelProto]:
            template = self._template(n_features, dtype)
            return template, template.score_model

        key = self._template_key(n_features, dtype)
        if key is None:
            template, cut = build()
        else:
            template, cut = TEMPLATES.get((type(self).__qualname__, key), build)
            template = template.copy()
        return template, copied_model(cut)

    @abstractmethod
    def _fitted_attributes(self, weights: dict[str, np.ndarray]) -> dict[str, Any]:
        """The scikit-learn attributes (``coef_``...) of the trained ``weights``, by name
        (:meth:`_sync` publishes them with the others at once)."""

    @abstractmethod
    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """R² or accuracy (from the scikit-learn mixin)."""

    # -- training ---------------------------------------------------------------------

    def _resolved_batch_size(self, n_samples: int) -> int:
        # "auto": fixed by the first training call's rows (auto_batch_size), so that a
        # stream of partial_fit calls keeps one batch, one schedule and two sessions; 32
        # for a model fitted before the rule (a pickle of release 0.1.0).
        # At most the rows there are: the rate's scale is then the loader's batch size,
        # the one the SGD estimators' batch gradient is divided by (weighted_mean=False).
        size = (self.__dict__.get("_auto_batch", AUTO_BATCH) if self.batch_size == "auto"
                else int(self.batch_size))
        return min(size, n_samples)

    def _max_iter_warning(self) -> str | None:
        """The ConvergenceWarning of a fit that ran ``max_iter`` epochs (None: no warning),
        in scikit-learn's words for the counterpart."""
        if self.tol is None:
            return None
        return (
            "Maximum number of iteration reached before convergence. Consider increasing "
            "max_iter to improve the fit."
        )

    def _data_dtype(self) -> str:
        """The type of the data of the first fit: that of the fitted weights and of the
        predictions, as scikit-learn's (float64 for models saved before it was kept)."""
        return self.__dict__.get("_weights_dtype", "float64")

    def _in_data_dtype(self, predictions: np.ndarray) -> np.ndarray:
        """``predictions`` as :meth:`_data_dtype`, as scikit-learn returns them.

        Raises
        ------
        ValueError
            If a prediction (computed in float64 where float32 overflowed, see
            :mod:`~skl_ortgrad.estimators.inference`) is too large for that dtype: never
            a silent infinity.
        """
        dtype = np.dtype(self._data_dtype())
        with np.errstate(over="ignore"):
            result = predictions.astype(dtype)
        if predictions.dtype.itemsize > dtype.itemsize and not np.isfinite(result).all():
            row = int(np.flatnonzero(~np.isfinite(result.reshape(len(result), -1)).all(
                axis=1))[0])
            raise ValueError(
                f"The prediction of row {row} of X is too large for dtype('{dtype.name}'), "
                "the type of the data the model was fitted on: fit it on float64 data.")
        return result

    def _average(self) -> bool | int:
        """Averaged SGD from which sample (False: none), see the optimizer's ``average``."""
        return False

    def _patience(self) -> float:
        """Epochs without improvement by ``tol`` after which training stops."""
        return self.n_iter_no_change

    def _reads_row_spread(self) -> bool:
        """Whether the rate reads the rows' spread besides their stable step
        (:func:`~skl_ortgrad.estimators.curvature.curvature`; no by default)."""
        return False

    def _start(self, X: Any, y: Any, sample_weight: Any) -> None:
        """Called with the validated data before a fresh fit (nothing to do here)."""

    def _initialize(self, template: Template, init: dict[str, Any]) -> None:
        """Set initial weights given to ``fit`` (``coef_init``...) in ``template``."""

    def _check_warm_start_targets(self, y: Any) -> None:
        """Refuse targets a warm-started ``fit`` cannot continue on (none by default)."""

    def _restart_schedule(self) -> None:
        """What a warm-started ``fit`` restarts (nothing by default: the optimizer goes on
        from its ``t_`` and learning-rate state)."""

    def _class_sample_weight(self, y: Any, sample_weight: Any, partial: bool) -> Any:
        """``sample_weight`` times the weights of the classes (none by default)."""
        return sample_weight

    def _dtype(self) -> np.dtype:
        """The float type the graph computes in (``dtype`` parameter, validated)."""
        try:
            dtype = np.dtype(self.dtype)
        except TypeError:
            dtype = None
        if dtype not in (np.dtype(np.float32), np.dtype(np.float64)):
            raise ValueError(f"dtype must be np.float32 or np.float64, got {self.dtype!r}.")
        return dtype

    def fit(self, X: Any, y: Any, sample_weight: Any = None) -> BaseOnnxEstimator:
        """Train for up to ``max_iter`` epochs (from scratch unless ``warm_start``).

        Parameters
        ----------
        X : array-like or sparse matrix of shape (n_samples, n_features)
        y : array-like of shape (n_samples,)
        sample_weight : array-like of shape (n_samples,), optional
        """
        return self._fit(X, y, sample_weight, {})

    def _fit(self, X: Any, y: Any, sample_weight: Any, init: dict[str, Any]) -> BaseOnnxEstimator:
        """``fit``, starting from the initial weights ``init`` (name -> value) if given."""
        self._validate_params()
        restart = not (self.warm_start and hasattr(self, "optimizer_")) or bool(init)
        self._train(X, y, sample_weight, restart=restart, partial=False, classes=None,
                    init=init)
        message = self._max_iter_warning()
        if self.n_iter_ == self.max_iter and message is not None:
            warnings.warn(message, ConvergenceWarning, stacklevel=3)
        return self

    def partial_fit(self, X: Any, y: Any, sample_weight: Any = None) -> BaseOnnxEstimator:
        """One epoch over ``(X, y)``, continuing from the current weights and ``t_``."""
        return self._partial_fit(X, y, sample_weight, classes=None)

    def _partial_fit(self, X: Any, y: Any, sample_weight: Any, classes: Any) -> BaseOnnxEstimator:
        first = not hasattr(self, "optimizer_")
        # scikit-learn's SGD estimators validate their parameters at every call.
        self._validate_params()
        if self.early_stopping:
            raise ValueError(self._partial_fit_early_stopping)
        if first and classes is None and getattr(self, "_needs_classes", False):
            raise ValueError("classes must be passed on the first call to partial_fit.")
        return self._train(X, y, sample_weight, restart=first, partial=True, classes=classes)

    def _train(
        self, X: Any, y: Any, sample_weight: Any, restart: bool, partial: bool, classes: Any,
        init: dict[str, Any] | None = None,
    ) -> BaseOnnxEstimator:
        """The one training path of ``fit`` and ``partial_fit``: one transaction
        (:meth:`_transaction`). A ``partial_fit`` of a linear model (nothing shown) first
        tries it on dense rows as given, unchecked (the linear program casts each batch it
        reads if need be: a 100k x 50 float64 block skips a cast and check of 8-11 ms,
        measured); where it does not end finite, or no such program runs it
        (:class:`~skl_ortgrad.training.divergence.UncheckedRows`, everything put back),
        the call runs again on ``X`` checked and cast: the same result, bit for bit, or
        scikit-learn's error for a NaN or infinite value."""
        # Ctrl-C held over both tries (they nest in this block), delivered at its end.
        with DeferredInterrupt():
            learned = False
            if partial and not self.verbose and self._reads_as_given(X, restart):
                try:
                    return self._transaction(X, y, sample_weight, restart, partial,
                                             classes, init, rows_as_given=True)
                except UncheckedRows as unchecked:
                    # A first call's try drops the optimizer that learned it: the one
                    # the checked call builds is told.
                    learned = unchecked.permanent and restart
            self._transaction(X, y, sample_weight, restart, partial, classes, init)
            if learned:
                self.optimizer_.cast_rows_first()
            return self

    def _reads_as_given(self, X: Any, first: bool) -> bool:
        """Whether a ``partial_fit`` (the ``first`` call or not) may try ``X``'s rows as
        given (:meth:`_train`): a linear model without frozen steps, a dense ``X`` its
        program reads (:func:`~skl_ortgrad.training.inputs.reads_as_given`), and, after
        the first call, no call of the optimizer that no linear program ran."""
        if self._has_frozen_steps():
            return False
        if first:
            return self._linear_scores and reads_as_given(X, self._dtype())
        return (self._linear_score() and reads_as_given(X, self.optimizer_.model_dtype())
                and self.optimizer_.reads_rows_as_given)

    def _transaction(
        self, X: Any, y: Any, sample_weight: Any, restart: bool, partial: bool, classes: Any,
        init: dict[str, Any] | None, rows_as_given: bool = False,
    ) -> BaseOnnxEstimator:
        """One call of :meth:`_train`, with ``X`` cast and checked first, or read as
        given (``rows_as_given``, see :meth:`_train`): one transaction.

        Everything is validated before anything changes, and every piece of state the
        call may change (``classes_``, feature names, the optimizer and its weights,
        ``t_``, losses, shuffling generator, fitted attributes) is either committed at
        the end, all at once (:meth:`_sync`), or put back as it was before the call,
        divergence included (the :class:`~skl_ortgrad.ConvergenceError` carries the last
        finite weights). Only Ctrl-C keeps progress, as documented: the completed
        batches.
        """
        # Ctrl-C is held over the whole call (training included: the trainer's blocks
        # nest in this one) and delivered at a safe point: a batch boundary (the completed
        # batches are published), the end of the set-up (nothing trained: the estimator
        # is put back) or the end of the publication.
        with DeferredInterrupt() as interrupt:
            # Validation writes on the estimator (validate_data resets n_features_in_ and
            # feature_names_in_, _prepare_targets sets classes_, a restart builds a new
            # optimizer), and training on the optimizer, in place.
            saved = dict(self.__dict__)
            snapshot = OptimizerSnapshot(self.optimizer_) if "optimizer_" in saved else None
            start = None
            try:
                X, targets, sample_weight, X_val, y_val, scorer = self._set_up(
                    X, y, sample_weight, restart, partial, classes, init, rows_as_given)
                if interrupt.pending:
                    raise KeyboardInterrupt
                optimizer = self.optimizer_
                # The samples seen before training (a new optimizer starts at t = 1).
                start = 1 if restart else optimizer.t_
                before = 0 if restart else len(optimizer.train_losses_)
                # validate_data checked the values (but rows as given): the optimizer only
                # casts them.
                data = optimizer.cast(X, targets, sample_weight, rows_as_given)
                if partial:
                    optimizer.partial_fit_data(data, unchecked=rows_as_given)
                else:
                    self._solve(data, X_val, y_val, scorer)
                check_weights_moved(optimizer, start,
                                    None if restart else snapshot.weights, X)
                self._count_samples(start, before, X.shape[0] + (
                    0 if X_val is None else X_val.shape[0]))
            except KeyboardInterrupt:
                if (start is None or "state_" not in vars(optimizer) or optimizer.t_ == start
                        or (rows_as_given and not all(
                            np.isfinite(w).all() for w in optimizer.weights_))):
                    # Nothing trained (or, from rows unchecked, nothing finite): the
                    # estimator of before the call.
                    self._rollback(saved, snapshot)
                else:
                    # The batches completed stay: publish them before re-raising.
                    self._sync(before)
                raise
            except ConvergenceError as error:
                if rows_as_given:
                    # Perhaps X's own NaN: the call on X checked tells.
                    self._rollback(saved, snapshot)
                    raise UncheckedRows(permanent=False) from None
                # One transaction, divergence included: the model of before the call; what
                # the call reached goes with the error.
                reached = dict(zip(optimizer.weights_to_train_,
                                   [np.array(w) for w in optimizer.served_weights()],
                                   strict=True))
                self._rollback(saved, snapshot)
                raise ConvergenceError(rolled_back_message(str(error)), reached) from None
            except BaseException:
                self._rollback(saved, snapshot)
                raise
            self._sync(before)
        return self

    def _set_up(
        self, X: Any, y: Any, sample_weight: Any, restart: bool, partial: bool, classes: Any,
        init: dict[str, Any] | None, rows_as_given: bool = False,
    ) -> tuple[Any, np.ndarray, Any, Any, Any, Any]:
        """Validate the data and configure the optimizer (a new one for a restart) for a
        call of :meth:`_transaction`; return what it trains on: ``(X, targets,
        sample_weight, X_val, y_val, scorer)``, the last three None without early
        stopping; ``rows_as_given``: dense rows neither cast nor checked."""
        dtype = self._dtype() if restart else self.optimizer_.model_dtype()
        # float64 first, as scikit-learn: integer data gives float64 fitted weights.
        (X, y), cast = validate_finite_data(
            self, X, y, graph_dtype=dtype, rows_as_given=rows_as_given, reset=restart,
            accept_sparse="csr",
            dtype=[np.float64, np.float32], y_numeric=False,
            multi_output=self._multi_output, ensure_min_samples=1,
        )
        if sample_weight is not None:
            # With early stopping, the SGD estimators leave all-zero weights to the
            # split, whose message names the validation rows (scikit-learn's).
            sample_weight = _check_sample_weight(
                sample_weight, X, dtype=np.float64, ensure_non_negative=True,
                allow_all_zero_weights=bool(self._zero_weights_to_split
                                            and self.early_stopping and not partial),
            )
            check_dtype_range(sample_weight, dtype, "sample_weight")
        if not (restart or partial):
            self._check_warm_start_targets(y)
        targets = self._prepare_targets(y, restart, classes)
        sample_weight = self._class_sample_weight(y, sample_weight, partial)
        if sample_weight is not None:
            # Checked before the cast, in float64: a weight that rounds to 0 is refused.
            sample_weight = np.asarray(sample_weight, dtype=np.float64)
            check_dtype_range(sample_weight, dtype, "sample_weight")
            check_weight_underflow(sample_weight, dtype, "sample_weight")
            sample_weight = sample_weight.astype(dtype)
        check_dtype_range(targets[:, 0] if targets.shape[1] == 1 else targets, dtype, "y")
        targets = targets.astype(dtype, copy=False)
        if restart:
            self._start(X, y, sample_weight)
        # scikit-learn's fitted weights have the type of the data they were fit on.
        data_dtype = X.dtype.name
        X = self._graph_input(X, dtype, cast)
        X_val = y_val = scorer = None
        if self.early_stopping and not partial:
            # Split first: the validation rows take no part in training, not even in
            # the default rate's measure of the data.
            X, X_val, targets, y_val, sample_weight, y_val_raw, w_val = (
                self._validation_split(X, targets, sample_weight, y, restart)
            )
            scorer = lambda *_: self._validation_score(X_val, y_val_raw, w_val)  # noqa: E731
        if restart:
            parse_device(self.device)
            device_providers(self.device)
            self.backend_ = resolve_backend(self.backend)
            # What the default rates need of the data, fixed at the first call so
            # that a stream of partial_fit calls keeps one schedule.
            self._stable_step, self._row_spread = curvature(
                X, dtype, spread=self._reads_row_spread())
            self._auto_batch = auto_batch_size(X.shape[0])
            self._weights_dtype = data_dtype
            self._build_optimizer(X.shape[1], init or {})
        optimizer = self.optimizer_
        if not (restart or partial):
            self._restart_schedule()
        batch_size = self._resolved_batch_size(X.shape[0])
        mean_weight = 1.0 if sample_weight is None else float(np.mean(sample_weight))
        rate, loss, penalty = self._training_objects(batch_size, mean_weight,
                                                      sp.issparse(X))
        optimizer.configure(
            learning_rate=rate,
            learning_loss=loss,
            learning_penalty=penalty,
            max_iter=1 if partial else self.max_iter,
            # Full batches of batch_size rows, even when this call has fewer: the
            # optimizer then keeps two training sessions (full batches, any other
            # size) whatever the sizes of a stream of partial_fit calls.
            batch_size=self._resolved_batch_size(sys.maxsize),
            tol=None if partial else self.tol,
            # At every call: an optimizer pickled before the setting existed too.
            tol_on_objective=self._tol_on_objective,
            n_iter_no_change=self._patience(),
            average=self._average(),
            warm_start=not restart or partial,
            verbose=self.verbose,
        )
        return X, targets, sample_weight, X_val, y_val, scorer

    def _solve(self, data: tuple[list[Any], bool], X_val: Any, y_val: Any, scorer: Any) -> None:
        """Train ``optimizer_`` on checked ``data`` for ``fit`` (mini-batch epochs)."""
        self.optimizer_.fit_data(data, X_val, y_val, scorer)

    def _count_samples(self, start: int, before: int, rows: int) -> None:
        """After a completed call that started at ``t_ = start`` on ``rows`` rows (the
        validation rows included), with the optimizer's losses of ``before`` epochs
        before it: the ``t_`` the next call starts from (the optimizer's own count of the
        samples it stepped on, here)."""

    def _rollback(self, saved: dict[str, Any], snapshot: OptimizerSnapshot | None) -> None:
        """Put the estimator (attributes ``saved``) and its optimizer back."""
        self.__dict__.clear()
        self.__dict__.update(saved)
        if snapshot is not None:
            snapshot.restore()

    def _graph_input(self, X: Any, dtype: np.dtype, cast: Any) -> Any:
        """``X`` through the frozen steps (:meth:`_preprocess`), checked against the
        range of ``dtype`` and cast to it: what the trained graph reads. ``cast`` is
        ``X`` as ``dtype`` when validation made it (:func:`validate_finite_data`)."""
        transformed = self._preprocess(X)
        if transformed is not X:
            check_dtype_range(transformed, dtype, "X transformed by the frozen steps")
        elif cast is not None:
            return cast
        if isinstance(transformed, sp.csr_matrix | sp.csr_array):
            return cast_csr(transformed, dtype)
        return transformed.astype(dtype, copy=False)

    def _build_optimizer(self, n_features: int, init: dict[str, Any]) -> None:
        """A new ``optimizer_`` (the plain :class:`~skl_ortgrad.training.trainer.Trainer`)
        for ``n_features`` columns; :meth:`_train` gives it the training objects of every
        call (:meth:`~skl_ortgrad.training.trainer.Trainer.configure`)."""
        # Imported at the first fit: the trainer loads onnxruntime, which
        # ``import skl_ortgrad`` leaves out (skl_ortgrad._import_hooks).
        from skl_ortgrad.training.trainer import Trainer

        template, train_model = self._trained_template(n_features, self._dtype())
        if any(value is not None for value in init.values()):
            self._initialize(template, init)
            template.changed()
            train_model = copied_model(template.score_model)
        self._template_ = template
        self.optimizer_ = Trainer(
            train_model,
            weights_to_train=template.weights,
            device=self.device,
            shuffle=self.shuffle,
            random_state=self.random_state,
            n_iter_no_change=self._patience(),
            n_threads=self._training_threads(train_model, template.weights),
            validation_every=1,
            penalized_weights=template.penalized,
            backend=self.backend,
            average=self._average(),
            weighted_mean=self._weighted_mean,
        )
        if self._records_curves:
            self.loss_curve_ = []
        self.n_iter_ = 0

    def _training_threads(self, model: onnx.ModelProto, weights: list[str]) -> int:
        """``n_threads``, "auto" resolved by the step's work on the trained ``model``
        (:func:`~skl_ortgrad.runtime.threads.training_threads`): three multiply-adds per
        trained value (``weights``) and row of a full batch."""
        if self.n_threads != "auto":
            return int(self.n_threads)
        # math.prod of the dims: numpy's prod on a protobuf field costs 10 µs an
        # initializer, a few percent of a small fit.
        sizes = {i.name: math.prod(i.dims) for i in model.graph.initializer}
        values = sum(sizes.get(name, 0) for name in weights)
        return training_threads(3.0 * values * self._resolved_batch_size(sys.maxsize))

    def _sync(self, before: int) -> None:
        """Publish the optimizer's state as the scikit-learn attributes, all at once (one
        ``__dict__`` update): what predicts and what the attributes say never differ."""
        self.__dict__.update(self._published(before))

    def _published(self, before: int) -> dict[str, Any]:
        """The scikit-learn attributes of the optimizer's state (``before``: the epochs in
        its loss curve before this call), computed without changing the estimator."""
        optimizer = self.optimizer_
        new_losses = optimizer.train_losses_[before:]
        published = {
            "loss_curve_": list(optimizer.train_losses_),
            # The epochs of this call, partial_fit's one included, as scikit-learn counts.
            "n_iter_": len(new_losses),
            "t_": optimizer.t_,
            **self._fitted_attributes(dict(zip(
                optimizer.weights_to_train_, optimizer.served_weights(), strict=True))),
        }
        if new_losses:
            # Incremental: np.min over the whole curve made a stream of n calls O(n^2).
            best = float(min(new_losses))
            previous = getattr(self, "best_loss_", None) if before else None
            published["best_loss_"] = best if previous is None else min(previous, best)
        if getattr(optimizer, "validation_scores_", None):
            published["validation_scores_"] = list(optimizer.validation_scores_)
            published["best_validation_score_"] = float(np.max(optimizer.validation_scores_))
        return published

    # -- export -------------------------------------------------------------------------

    def to_onnx(self) -> onnx.ModelProto:
        """Return the trained ONNX model, ready for onnxruntime inference.

        Its outputs match :meth:`predict` (and ``predict_proba`` for classifiers).
        """
        check_is_fitted(self, "optimizer_")
        return self.optimizer_.get_trained_onnx(self._template_.model)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = True
        return tags
