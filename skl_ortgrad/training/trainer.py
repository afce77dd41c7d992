r"""The trainer: mini-batch training of the weights of an ONNX model, as a short loop over
parts that each do one thing.

:class:`Trainer` is a plain object (the estimators configure it at every call with
:meth:`Trainer.configure`; the seed API's scikit-learn-style
:class:`~skl_ortgrad.training.optimizers_partial.OrtGradientForwardBackwardOptimizer`
wraps it). A call goes ``fit`` -> :meth:`Trainer.fit_data` (or ``partial_fit`` ->
:meth:`Trainer.partial_fit_data`) -> the epoch loop (``Trainer._run``) -> an epoch runner
per epoch -> the runtime's feeds, each entered once per epoch. The parts, each with
explicit inputs:

* :mod:`~skl_ortgrad.training.setup`: what the call trains with (model, loss, rate,
  penalty, runtime settings), resolved once;
* :mod:`~skl_ortgrad.training.state`: what training changes (weights, the rule's state,
  ``t``, the average), its checkpoints and its pickled form;
* :mod:`~skl_ortgrad.training.engines`: the model with its loss and its gradient engine;
* :mod:`~skl_ortgrad.training.program_choice`: the choice and cache of training programs;
* :mod:`~skl_ortgrad.training.epochs`: the epoch runners (per batch; a program by chunks,
  checked and rewound; several epochs per call);
* :mod:`~skl_ortgrad.training.stopping`: ``max_iter``, the ``tol`` rule, plateaus;
* :mod:`~skl_ortgrad.training.divergence`, :mod:`~skl_ortgrad.training.interrupt`,
  :mod:`~skl_ortgrad.training.progress`: what stops an epoch, Ctrl-C, reports.

The update of every mini-batch, in scikit-learn's order, is in
:mod:`~skl_ortgrad.training.epochs`; :math:`t` counts the samples seen plus one, scikit-learn's
``t_``, so with ``batch_size=1`` the schedules are exactly ``SGDRegressor``'s.

Failures lose nothing. A non-finite batch loss (or non-finite weights at the end of an
epoch) stops training at once and restores the state of the start of the epoch, then
raises :class:`~skl_ortgrad.ConvergenceError`. Ctrl-C is held until the batch (or the
chunk of batches of one call) being computed is complete: the weights are those of the
last completed batch, ``t_`` counts the samples it consumed and
``epochs_completed_``/``n_iter_`` the complete epochs. Any other exception raised while
the weights are being updated restores the start of the epoch.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnxruntime.capi._pybind_state import OrtValue
from sklearn.exceptions import ConvergenceWarning

from skl_ortgrad._params import param_names
from skl_ortgrad.exceptions import ConvergenceError
from skl_ortgrad.gradient.backend import resolve_backend
from skl_ortgrad.gradient.forward_backward import OrtGradientForwardBackward
from skl_ortgrad.graph.dtypes import numpy_dtype
from skl_ortgrad.graph.shapes import typed_output
from skl_ortgrad.optim import (
    BaseLearningLoss,
    BaseLearningPenalty,
    BaseLearningRate,
)
from skl_ortgrad.runtime.batches import MiniBatchLoader
from skl_ortgrad.runtime.devices import ort_device, parse_device
from skl_ortgrad.runtime.program_run import LinearProgramRun
from skl_ortgrad.runtime.random_state import check_random_state
from skl_ortgrad.training.caches import ATTRIBUTE as CACHES
from skl_ortgrad.training.caches import transient
from skl_ortgrad.training.divergence import Diverged, TornUpdate, divergence_message
from skl_ortgrad.training.epochs import (
    EpochGroups,
    EpochInputs,
    EpochResult,
    PerBatchEpoch,
    ProgramEpoch,
)
from skl_ortgrad.training.evaluation import EvaluatesLosses
from skl_ortgrad.training.inputs import as_arrays, checked_arrays
from skl_ortgrad.training.interrupt import DeferredInterrupt
from skl_ortgrad.training.progress import DIVERGED, INTERRUPTED, MAX_ITER, TrainingProgress
from skl_ortgrad.training.setup import TrainingSetup
from skl_ortgrad.training.state import HoldsTrainingState, TrainingState
from skl_ortgrad.training.stopping import StoppingPolicy


@dataclass
class _Call:
    """What the epochs of one training call share (see ``Trainer._call``); ``alone``
    counts the epochs to run one by one after a group that did not end finite."""

    setup: TrainingSetup
    loader: MiniBatchLoader
    weighted: bool
    progress: TrainingProgress
    stopping: StoppingPolicy
    program: Any
    grouped: bool
    objective: bool
    unchecked: bool
    alone: int = 0


class Trainer(HoldsTrainingState, EvaluatesLosses):
    """Train the weights of an ONNX model with mini-batch gradient descent.

    A plain object: epochs, the ``tol`` rule and early stopping, divergence, Ctrl-C and
    checkpoints, over the training programs or the per-batch steps (see the module's
    docstring for the parts it calls).
    The estimators, which validate their own parameters, build one and pass it their
    training objects at every call with :meth:`configure` (no parameter introspection);
    :class:`~skl_ortgrad.training.optimizers_partial.OrtGradientForwardBackwardOptimizer`
    is the seed API's scikit-learn estimator over it (``get_params``, ``set_params``,
    ``clone``).

    Parameters
    ----------
    model_onnx : onnx.ModelProto
        The model; its first output is the prediction the loss compares to the labels.
    weights_to_train : list of str, optional
        Initializers to train (default: those that parameterize linear layers, see
        :func:`~skl_ortgrad.graph.weights.get_train_initializer`).
    max_iter : int
        Number of epochs of :meth:`fit`.
    batch_size : int
        Rows per mini-batch.
    learning_rate : str, float or BaseLearningRate
        Update rule and schedule, see :meth:`BaseLearningRate.select`.
    device : str
        ``'cpu'``, ``'cuda'`` or ``'cuda:<index>'``.
    warm_start : bool
        If True, :meth:`fit` continues from the last fitted weights and ``t_``;
        otherwise it starts from the initializers of ``model_onnx``.
    verbose : int
        0: nothing shown; 1: in a terminal (or a notebook), a progress bar over the epochs
        of :meth:`fit` with the loss (and the validation score or loss), elsewhere one
        plain line per epoch, then a summary line (epochs run, final loss, why training
        stopped, time); 2: also the loss and learning rate of every batch, and
        onnxruntime's warnings. Whatever ``verbose``, every epoch, every
        :meth:`partial_fit` call and the summary are logged at INFO level on the
        ``skl_ortgrad`` logger (``logging.getLogger("skl_ortgrad")``), see
        :mod:`skl_ortgrad.training.progress`.
    validation_every : float or int
        With validation data, compute the validation loss every
        ``max(1, round(validation_every * max_iter))`` epochs if below 1, else every
        ``validation_every`` epochs.
    learning_loss : str or BaseLearningLoss
        The loss, see :meth:`BaseLearningLoss.select`.
    enable_logging : bool
        onnxruntime's verbose logging.
    weight_name : str, optional
        Name of the sample-weight input of the training graph (default
        ``'sample_weight'``); it exists only when ``fit`` receives sample weights.
    learning_penalty : str, float or BaseLearningPenalty, optional
        Penalty applied at each update, before the gradient step, see
        :meth:`BaseLearningPenalty.select`.
    exc : bool
        On divergence, raise :class:`~skl_ortgrad.ConvergenceError` (True) or warn and
        stop (False); the weights of the last finite epoch are kept either way.
    penalized_weights : list of str, optional
        Weights the penalty applies to (default: trained weights of rank >= 2 whose
        first dimension is above 1, i.e. coefficient matrices, not intercepts).
    shuffle : bool
        Permute the rows at every epoch.
    random_state : int, RandomState or None
        Seed of the permutations.
    tol : float or None
        Stop when the monitored loss (validation loss if given, else training loss, or
        objective with ``tol_on_objective``) has not decreased by ``tol`` for
        ``n_iter_no_change`` epochs; None disables it.
    n_iter_no_change : int
        See ``tol``.
    n_threads : int
        onnxruntime intra-op threads (1 is fastest on small graphs).
    backend : str
        Gradient backend: ``"auto"`` (onnxruntime-training where it imports, else
        ``"onnx"``), ``"onnxruntime-training"`` or ``"onnx"``, see
        :func:`skl_ortgrad.gradient.resolve_backend`.
    weighted_mean : bool
        With sample weights :math:`s_i`, train on the gradient of the batch's weighted
        mean loss :math:`\\sum s_i \\ell_i / \\sum s_i` (True), or of
        :math:`\\sum s_i \\ell_i / b` with :math:`b` the batch size, also for a shorter
        last batch (False): a weight then scales its row's step, as in scikit-learn's
        SGD, a batch whose rows share one weight moves that many times further, and every
        row counts as much whatever the batch it falls in.
        The epoch's loss is then the mean over the rows of the batches' weighted mean
        losses (True, scikit-learn's MLP ``loss_``), or the mean loss over the rows'
        weights (False).
    average : bool or int
        Averaged SGD (scikit-learn's ``average``): also keep the running average of the
        weights after every update, counted per sample, from the ``average``-th sample on
        (True: from the first); :meth:`served_weights` (predictions, :meth:`get_trained_onnx`)
        are then the average. With one-row batches it is scikit-learn's average exactly.
    tol_on_objective : bool or 'unweighted'
        Without validation data, let the ``tol`` rule watch the training *objective*
        instead of the loss: the epoch's loss plus the mean over its rows of the
        penalty's value at the weights their batch started from,
        :math:`\\frac1n \\sum_B n_B P(W_B)` (scikit-learn's SGD: the loss plus
        :math:`\\alpha R(w)` at every sample, ``objective_sum``). Only for a penalty taken
        as proximal steps (``ElasticLearningPenalty``); a penalty in the loss
        (``loss_term``) is in it already. ``'unweighted'``: with sample weights, the loss
        it watches is the mean of the rows' unweighted losses (scikit-learn's SGD, the
        weights scaling the steps only). ``train_losses_`` stay the losses.
    external_data_dir : str, optional
        The folder the tensors of ``model_onnx`` stored as external data may be read
        from; None (default) refuses such tensors instead of reading them from the
        current directory (see :func:`~skl_ortgrad.graph.external.check_external_data`).

    Attributes
    ----------
    backend_ : str
        The gradient backend used by the last training call (``"auto"`` resolved).
    weights_ : list of numpy.ndarray
        Current weights, in ``weights_to_train_`` order.
    average_weights_ : list of numpy.ndarray
        With ``average``: the averaged weights (empty otherwise).
    average_count_ : int
        Samples in the average.
    weights_to_train_ : list of str
    t_ : int
        Number of samples seen plus one (the schedule's ``t``, scikit-learn's ``t_``).
    n_iter_ : int
        Epochs run by the last :meth:`fit` (complete epochs when it was interrupted).
    epochs_completed_ : int
        Complete epochs of the last :meth:`fit` or :meth:`partial_fit`, kept up to date
        while training, so it is right after an interruption or a divergence.
    no_improvement_count_ : int
        Epochs in a row that ended without improving by ``tol``, at the end of the last
        call (the ``tol`` rule's count; 0 without the rule).
    train_losses_, validation_losses_ : list of float
        Mean loss per epoch (validation: per evaluation), the terms of a penalty that is
        part of the loss included (``loss_term``); with sample weights, as
        ``weighted_mean`` says.
    validation_scores_ : list of float
        Validation scores when ``fit`` receives a ``val_scorer``.
    """

    _transient = (CACHES,)
    #: Written before every epoch line (see :class:`~skl_ortgrad.training.progress.
    #: TrainingProgress`); the seed's optimizer sets its own.
    _epoch_prefix = ""

    def __init__(
        self,
        model_onnx: onnx.ModelProto,
        weights_to_train: list[str] | None = None,
        max_iter: int = 100,
        batch_size: int = 10,
        learning_rate: Any = "SGD",
        device: str = "cpu",
        warm_start: bool = False,
        verbose: int = 0,
        validation_every: float = 0.1,
        learning_loss: Any = "square_error",
        enable_logging: bool = False,
        weight_name: str | None = None,
        learning_penalty: Any = None,
        exc: bool = True,
        penalized_weights: list[str] | None = None,
        shuffle: bool = True,
        random_state: Any = None,
        tol: float | None = None,
        n_iter_no_change: int = 5,
        n_threads: int = 1,
        backend: str = "auto",
        external_data_dir: str | None = None,
        average: bool | int = False,
        weighted_mean: bool = True,
        tol_on_objective: bool | str = False,
    ) -> None:
        self.model_onnx = model_onnx
        self.weights_to_train = weights_to_train
        self.max_iter = max_iter
        self.batch_size = batch_size
        # The seed API's three attributes are objects from construction on (seed 004), so
        # a bad alias fails here; select returns an object unchanged, which keeps clone's
        # identity check satisfied.
        self.learning_rate = BaseLearningRate.select(learning_rate)
        self.device = device
        self.warm_start = warm_start
        self.verbose = verbose
        self.validation_every = validation_every
        self.learning_loss = BaseLearningLoss.select(learning_loss)
        self.enable_logging = enable_logging
        self.weight_name = weight_name
        self.learning_penalty = BaseLearningPenalty.select(learning_penalty)
        self.exc = exc
        self.penalized_weights = penalized_weights
        self.shuffle = shuffle
        self.random_state = random_state
        self.tol = tol
        self.n_iter_no_change = n_iter_no_change
        self.n_threads = n_threads
        self.backend = backend
        self.external_data_dir = external_data_dir
        self.average = average
        self.weighted_mean = weighted_mean
        self.tol_on_objective = tol_on_objective


    def configure(self, **settings: Any) -> Trainer:
        """Set parameters of the constructor by name, as given (the next :meth:`fit` or
        :meth:`partial_fit` resolves and checks them).

        Raises
        ------
        TypeError
            For a name that is not a parameter of the constructor.
        """
        unknown = sorted(set(settings) - set(param_names(Trainer)))
        if unknown:
            raise TypeError(f"Trainer.configure() got unknown settings {unknown}; the "
                            f"settings are {param_names(Trainer)}.")
        self.__dict__.update(settings)
        return self

    # -- set-up -----------------------------------------------------------------------

    def resolve(self) -> None:
        """Turn the parameters into the call's objects (``learning_rate_``,
        ``learning_loss_``, ``learning_penalty_``) and check them; a rate of another kind
        than the state's (plain SGD -> momentum) gets a state of its own.

        Raises
        ------
        ValueError
            For ``max_iter < 0``, ``batch_size < 1`` or an unknown device.
        """
        self.learning_rate_ = BaseLearningRate.select(self.learning_rate)
        self.learning_loss_ = BaseLearningLoss.select(self.learning_loss)
        self.learning_penalty_ = BaseLearningPenalty.select(self.learning_penalty)
        if "state_" in self.__dict__:
            fresh = self.learning_rate_.init_state(self.weights_)
            if len(fresh) != len(self.lr_state_):
                self.lr_state_ = fresh
        parse_device(self.device)
        if int(self.max_iter) < 0 or int(self.batch_size) < 1:
            raise ValueError(
                f"max_iter must be >= 0 and batch_size >= 1, got {self.max_iter} and "
                f"{self.batch_size}."
            )

    def begin(self, fit: bool) -> None:
        """Start a call: :meth:`resolve`, then start from the model's initializers for a
        ``fit`` that is not warm-started, or when nothing was trained yet."""
        self.resolve()
        if "state_" not in self.__dict__ or (fit and not self.warm_start):
            self._reset()

    def model_dtype(self) -> np.dtype:
        """The element type of the model's first output (the prediction).

        A model cut at an intermediate result may not declare it: shape inference finds it.

        Raises
        ------
        ValueError
            If neither the model nor shape inference tells it.
        """
        return numpy_dtype(typed_output(self.model_onnx, 0).type.tensor_type.elem_type)

    def setup(self) -> TrainingSetup:
        """What the current call trains with (after :meth:`resolve`)."""
        return TrainingSetup(
            model=self.model_onnx, external_data_dir=self.external_data_dir,
            loss=self.learning_loss_, rate=self.learning_rate_,
            penalty=self.learning_penalty_, batch_size=int(self.batch_size),
            device=self.device, n_threads=int(self.n_threads),
            enable_logging=self.enable_logging, verbose=self.verbose,
            weight_name=self.weight_name, backend=resolve_backend(self.backend),
            average=self.average,
        )

    def _reset(self) -> None:
        """Start from the model's initializers (what a non-warm :meth:`fit` does)."""
        self.state_ = TrainingState.initial(self.setup().checked_model(),
                                            self.weights_to_train, self.learning_rate_)
        self.train_losses_: list[float] = []
        self.validation_losses_: list[float] = []
        self.validation_scores_: list[float] = []
        self.n_iter_ = 0
        # The engines and programs read the weights' buffers, replaced here.
        transient(self).clear()

    def penalized(self) -> list[np.ndarray]:
        """The weights the penalty applies to (``penalized_weights``, by default the
        coefficient matrices: rank >= 2 and a first dimension above 1)."""
        if self.penalized_weights is None:
            return [w for w in self.weights_ if w.ndim >= 2 and w.shape[0] > 1]
        index = {name: i for i, name in enumerate(self.weights_to_train_)}
        return [self.weights_[index[name]] for name in self.penalized_weights]

    def engine(self, weighted: bool) -> OrtGradientForwardBackward:
        """The forward/backward engine of model + loss (built once per loss and
        weighting)."""
        setup = self.setup()
        self.backend_ = setup.backend
        return transient(self).engines.engine(setup, self.weights_to_train_,
                                              self.model_dtype(), weighted)

    def cast(self, X: Any, y: Any, sample_weight: Any = None,
             rows_as_given: bool = False) -> tuple[list[Any], bool]:
        """The data cast to the graph's dtype and shapes, not checked (the estimators
        check it the scikit-learn way): what :meth:`fit_data` and
        :meth:`partial_fit_data` take. With ``rows_as_given``, a dense float ``X``
        stays as it is (:func:`~skl_ortgrad.training.inputs.reads_as_given`): the linear
        training program casts the rows it reads if need be."""
        return as_arrays(X, y, sample_weight, self.model_dtype(), rows_as_given)

    @property
    def reads_rows_as_given(self) -> bool:
        """Whether :meth:`cast` with ``rows_as_given`` is worth trying: no call has found
        yet that no training program reads such rows (:meth:`ProgramCache.bound
        <skl_ortgrad.training.program_choice.ProgramCache.bound>`)."""
        return not transient(self).programs.rows_cast

    def cast_rows_first(self) -> None:
        """Make :attr:`reads_rows_as_given` False: what a call that no training program
        runs on rows as given teaches the trainer, told to a new one when the trainer
        that learned it was dropped with its call."""
        transient(self).programs.rows_cast = True

    def generator(self) -> np.random.RandomState:
        """The generator of the permutations, created from ``random_state`` once.

        It is part of the pickled state, so a stream of ``partial_fit`` calls resumed
        from a pickle shuffles exactly as the uninterrupted stream.
        """
        if "_rng" not in self.__dict__:
            self._rng = check_random_state(self.random_state)
        return self._rng

    # -- training ---------------------------------------------------------------------

    def fit(
        self,
        X: Any,
        y: Any,
        sample_weight: Any = None,
        X_val: Any = None,
        y_val: Any = None,
        val_scorer: Any = None,
    ) -> Trainer:
        """Train for up to ``max_iter`` epochs.

        Parameters
        ----------
        X : array-like or scipy sparse matrix, shape (n_samples, n_features)
        y : array-like, shape (n_samples,) or (n_samples, n_outputs)
            Labels in the form the loss expects (floats; one-hot for softmax).
        sample_weight : array-like, shape (n_samples,), optional
        X_val, y_val : optional
            Validation data; its loss is recorded in ``validation_losses_`` and, with
            ``tol``, drives the stopping rule.
        val_scorer : callable, optional
            ``val_scorer()`` returns a validation score (higher is better) recorded in
            ``validation_scores_``; it replaces the validation loss in the stopping
            rule, which becomes scikit-learn's early stopping: stop when the score has
            not improved by ``tol`` for ``n_iter_no_change`` epochs.
        """
        return self.fit_data(checked_arrays(X, y, sample_weight, self.model_dtype()),
                             X_val, y_val, val_scorer)

    def fit_data(
        self, data: tuple[list[Any], bool], X_val: Any = None, y_val: Any = None,
        val_scorer: Any = None,
    ) -> Trainer:
        """:meth:`fit` on data already checked and cast (:meth:`cast`)."""
        # Ctrl-C during the set-up is held until the first batch boundary (the loop's
        # blocks nest in this one): a half-reset trainer is never left behind.
        with DeferredInterrupt():
            self.begin(fit=True)
            try:
                self.n_iter_ = self._run(data, int(self.max_iter), X_val, y_val, val_scorer)
            except BaseException:
                # Divergence, Ctrl-C...: the epochs completed before it are what ran.
                self.n_iter_ = self.__dict__.get("epochs_completed_", 0)
                raise
        return self

    def partial_fit(self, X: Any, y: Any, sample_weight: Any = None) -> Trainer:
        """Run one epoch over ``(X, y)``, continuing from the current weights and ``t_``.

        The current parameters apply: a learning rate, loss or penalty changed since the
        last call (:meth:`configure`) is used from this epoch on.
        """
        return self.partial_fit_data(
            checked_arrays(X, y, sample_weight, self.model_dtype()))

    def partial_fit_data(self, data: tuple[list[Any], bool],
                         unchecked: bool = False) -> Trainer:
        """:meth:`partial_fit` on data already checked and cast (:meth:`cast`), or, with
        ``unchecked``, whose ``X`` was not checked (:meth:`cast`'s ``rows_as_given``):
        only the linear program then runs the call, and a non-finite loss raises
        :class:`~skl_ortgrad.training.divergence.UncheckedRows` (as does a call it
        does not run, before any update) instead of being replayed batch by batch."""
        with DeferredInterrupt():
            self.begin(fit=False)
            self._run(data, 1, None, None, None, partial=True, unchecked=unchecked)
        return self

    def loader(self, arrays: list[Any], weighted: bool, device: Any,
               batch_size: int | None = None, shuffle: bool | None = None) -> MiniBatchLoader:
        """The mini-batch loader of ``arrays`` (``batch_size`` and ``shuffle`` default to
        the parameters): the last one when they fit in it.

        Kept between calls so that a stream of ``partial_fit`` calls reuses its buffers
        and feed vectors (see :meth:`MiniBatchLoader.refill`); it borrows the weight
        buffers, so a reset, which replaces them, drops it.
        """
        size = int(self.batch_size if batch_size is None else batch_size)
        shuffle = bool(self.shuffle if shuffle is None else shuffle)
        key = (size, shuffle, weighted, str(self.device), bool(self.weighted_mean))
        cache = transient(self)
        cached = cache.loader
        if cached is not None and cached[0] == key and cached[1].refill(arrays):
            return cached[1]
        loader = MiniBatchLoader(
            arrays, size, shuffle, self.generator(), device,
            lambda: [OrtValue.ortvalue_from_numpy(w, device) for w in self.weights_],
            weight_index=2 if weighted else None, weighted_mean=bool(self.weighted_mean),
        )
        cache.loader = key, loader
        return loader

    def _run(
        self, data: tuple[list[Any], bool], epochs: int, X_val: Any, y_val: Any,
        val_scorer: Any, partial: bool = False, unchecked: bool = False,
    ) -> int:
        """Run up to ``epochs`` epochs over checked ``data``; return how many ran.

        Every epoch is reported, and the call ends, whatever stops it, with the summary
        line of :class:`~skl_ortgrad.training.progress.TrainingProgress` saying why.
        """
        call = self._call(data, epochs, X_val, val_scorer, partial, unchecked)
        self.epochs_completed_ = epoch = 0
        reason = "stopped by an exception"  # any other exception keeps this reason
        try:
            with DeferredInterrupt() as interrupt:
                try:
                    while epoch < epochs:
                        snapshot = self.state_.checkpoint()
                        for last, result in self._epochs(call, epochs - epoch, snapshot,
                                                         interrupt):
                            self.train_losses_.append(result.loss)
                            self.epochs_completed_ = epoch + 1
                            if interrupt.pending and last:
                                # Ctrl-C during the last batch of the epoch (of a group:
                                # its epochs are complete): the epoch is complete.
                                raise KeyboardInterrupt
                            monitored = result.objective
                            if X_val is not None and call.stopping.validates(epoch, epochs):
                                monitored = self._validation(
                                    X_val, y_val, val_scorer, snapshot,
                                    len(call.loader.rows) - 1, result.loss)
                            self._report(call.progress, result.loss)
                            epoch += 1
                            if call.stopping.update(monitored):
                                if not self._reduce_on_plateau():
                                    reason = call.stopping.reason()
                                    return epoch
                                call.stopping.restart()
                except Diverged as diverged:
                    reason = DIVERGED
                    self._diverged(diverged)
                    return self.epochs_completed_
                reason = MAX_ITER
            return epoch
        except KeyboardInterrupt:
            reason = INTERRUPTED
            raise
        finally:
            call.progress.close(reason, self.epochs_completed_)
            self.no_improvement_count_ = call.stopping.no_improvement

    def _call(self, data: tuple[list[Any], bool], epochs: int, X_val: Any,
              val_scorer: Any, partial: bool, unchecked: bool) -> _Call:
        """What the epochs of a call share: nothing it holds changes between them."""
        arrays, weighted = data
        setup = self.setup()
        self.backend_ = setup.backend
        # The cumulative L1 penalty's totals start at zero at every call, as
        # scikit-learn's (_plain_sgd's u and q).
        self.state_.start_penalty(setup.penalty.after_step_state(self.penalized()))
        # The engine is built on first use: an epoch run by the linear program needs none
        # (a tenth of a small fit).
        device = ort_device("cpu" if setup.on_cpu else self.engine(weighted).cls_type_.device)
        loader = self.loader(arrays, weighted, device)
        progress = TrainingProgress(
            self.verbose, epochs, partial, len(self.train_losses_) + 1, arrays[0].shape[0],
            prefix=self._epoch_prefix)
        stopping = StoppingPolicy.of_call(self, X_val is not None, val_scorer is not None,
                                          weighted)
        objective = stopping.monitored == "training objective"
        groups = EpochGroups.allowed(epochs, X_val is not None, progress.silent, self.tol,
                                     self.n_iter_no_change)
        # The program's threshold does not depend on validation: a fit with early
        # stopping and one without train the same rows alike, bit for bit.
        program = transient(self).programs.bound(
            setup, self.state_, self.penalized(), loader, weighted, several=epochs > 1,
            norms=objective, unweighted=stopping.unweighted, unchecked=unchecked)
        return _Call(setup, loader, weighted, progress, stopping, program,
                     groups and type(program) is LinearProgramRun, objective, unchecked)

    def _epochs(self, call: _Call, remaining: int, snapshot: dict[str, Any],
                interrupt: DeferredInterrupt) -> list[tuple[bool, EpochResult]]:
        """The next epochs' results, each with whether it is the last of the call that
        ran them: a group of epochs in one call where it may run (:class:`EpochGroups`),
        else one epoch (:meth:`_epoch`). A group that does not end finite changes
        nothing, and its epochs run one by one.

        Raises
        ------
        Diverged
            After restoring ``snapshot``, the state at the start of the epoch.
        """
        results: list[EpochResult] = []
        if call.grouped and not call.alone:
            groups = EpochGroups(self._epoch_inputs(call), call.program)
            size = groups.size(remaining, call.stopping.patience)
            if size > 1:
                if interrupt.pending:
                    raise KeyboardInterrupt
                results = groups.run(size)
                call.alone = 0 if results else size
        if not results:
            call.alone = max(0, call.alone - 1)
            try:
                results = [self._epoch(call, interrupt)]
            except Diverged:
                self.state_.restore(snapshot)
                raise
            except TornUpdate as torn:
                # Some weights may have moved, others not: back to the start of the epoch,
                # a consistent state.
                self.state_.restore(snapshot)
                raise torn.__cause__ from None
        return [(index == len(results) - 1, result) for index, result in enumerate(results)]

    def _epoch_inputs(self, call: _Call) -> EpochInputs:
        return EpochInputs(call.setup, self.state_, self.penalized(), call.loader,
                           lambda: self.engine(call.weighted), call.objective,
                           len(self.train_losses_) + 1,
                           self.losses if call.stopping.unweighted else None,
                           call.unchecked)

    def _epoch(self, call: _Call, interrupt: DeferredInterrupt) -> EpochResult:
        """One epoch: by the training program when there is one, else per batch."""
        inputs = self._epoch_inputs(call)
        runner = (PerBatchEpoch(inputs) if call.program is None
                  else ProgramEpoch(inputs, call.program))
        return runner.run(interrupt)

    def _reduce_on_plateau(self) -> bool:
        """Let the learning rate react to a plateau (scikit-learn's 'adaptive' divides
        it by 5); True when training goes on."""
        rate = self.learning_rate_
        eta = rate.eta(self.t_) * rate.eta_factor(self.lr_state_)
        return rate.reduce_on_plateau(self.lr_state_, eta)

    def _report(self, progress: TrainingProgress, loss: float) -> None:
        """Report the epoch that just ended: its loss and the last validation result."""
        if progress.silent:
            return
        shown = {"loss": f"{loss:.4g}"}
        if self.validation_scores_:
            shown["validation score"] = f"{self.validation_scores_[-1]:.4g}"
        elif self.validation_losses_:
            shown["validation loss"] = f"{self.validation_losses_[-1]:.4g}"
        progress.epoch(len(self.train_losses_), shown)

    def _diverged(self, diverged: Diverged) -> None:
        last = self.train_losses_[-1] if self.train_losses_ else None
        message = divergence_message(diverged, len(self.train_losses_) + 1, last)
        if self.exc:
            raise ConvergenceError(message)
        warnings.warn(message, ConvergenceWarning, stacklevel=3)
