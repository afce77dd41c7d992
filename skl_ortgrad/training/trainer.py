"""The trainer: mini-batch training of the weights of an ONNX graph.

:class:`Trainer` is a plain object (the estimators configure it at every call with
:meth:`Trainer.configure`; the seed API's scikit-learn-style
:class:`~skl_ortgrad.training.optimizers_partial.OrtGradientForwardBackwardOptimizer`
wraps it). It appends the loss graph of a learning-loss
object to the model, builds one forward/backward function of the whole thing
(:class:`~skl_ortgrad.gradient.forward_backward.OrtGradientForwardBackward`), then for every
mini-batch :math:`B` of :math:`n_B` rows:

1. forward: :math:`L_B = \\sum_{i \\in B} s_i\\, \\ell(y_i, f(x_i; W))` (sample weights
   :math:`s_i`, 1 by default);
2. backward with output gradient :math:`1/S_B`, :math:`S_B = \\sum_{i \\in B} s_i`:
   :math:`g_j = \\partial (L_B/S_B) / \\partial W_j`, the gradient of the batch's
   weighted mean loss, so the learning rate means the same thing whatever the batch
   size, and integer weights in one batch are exactly repeated rows;
3. update: :math:`W \\leftarrow \\mathrm{penalty.update}(W, \\eta_t)` then
   :math:`W \\leftarrow \\mathrm{rate.update}(W, g, \\eta_t)`, in place, with
   :math:`\\eta_t` the schedule at :math:`t`, then :math:`t \\leftarrow t + n_B`: with
   the L2 penalty, :math:`W \\leftarrow (1 - \\eta_t l_2) W - \\eta_t g`, the gradient
   step of the penalized loss at the weights :math:`g` was computed at, in
   scikit-learn's order (the decay first, then the loss gradient).

:math:`t` counts the samples seen plus one, scikit-learn's ``t_``: with
``batch_size=1`` the schedules are exactly those of ``SGDRegressor``/``SGDClassifier``,
and with larger batches they decay at the same pace per epoch.

Weights are numpy buffers that onnxruntime borrows: updating them in place is seen by
the next forward without rebuilding any feed.

Where it computes exactly the same thing (plain SGD, no penalty or the elastic one, on
the CPU, see :meth:`Trainer._program`), the batches run
``_PROGRAM_STEPS`` per onnxruntime call (the linear program up to ``_LINEAR_STEPS``,
:func:`_linear_steps`), the updates inside the graph
(:mod:`skl_ortgrad.training.program`): one call costs a fixed 5-9 µs, more than a
linear model's step at batch 32.

Failures lose nothing. A non-finite batch loss (or non-finite weights at the end of an
epoch) stops training at once and restores the state of the start of the epoch (weights,
rate state, ``t_``), then raises :class:`~skl_ortgrad.ConvergenceError`. Ctrl-C is held
until the batch (or the chunk of batches of one call) being computed is complete (see
:class:`~skl_ortgrad.training.interrupt.DeferredInterrupt`): the weights are those of the
last completed batch, ``t_`` counts the samples it consumed and
``epochs_completed_``/``n_iter_`` the complete epochs. Any other exception raised
while the weights are being updated (a failing learning-rate object...) restores the
start of the epoch, since the update may be half done.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from onnxruntime import InferenceSession
from onnxruntime.capi._pybind_state import OrtValue
from sklearn.exceptions import ConvergenceWarning

from skl_ortgrad import _version
from skl_ortgrad._cache import BoundedCache
from skl_ortgrad._params import param_names
from skl_ortgrad.exceptions import ConvergenceError, PickleVersionWarning
from skl_ortgrad.gradient.backend import resolve_backend
from skl_ortgrad.gradient.forward_backward import OrtGradientForwardBackward
from skl_ortgrad.graph.dtypes import numpy_dtype
from skl_ortgrad.graph.external import check_external_data
from skl_ortgrad.graph.linear import linear_features
from skl_ortgrad.graph.model import OPSET, initializers_to_inputs
from skl_ortgrad.graph.opset import main_opset
from skl_ortgrad.graph.shapes import typed_output
from skl_ortgrad.graph.weights import get_train_initializer, skeleton_digest
from skl_ortgrad.objective.merge import merge_loss_graph
from skl_ortgrad.runtime.batches import MiniBatchLoader
from skl_ortgrad.runtime.buffers import packed_copies
from skl_ortgrad.runtime.devices import device_providers, log_severity, ort_device, parse_device
from skl_ortgrad.runtime.options import session_options, unoptimized_session_options
from skl_ortgrad.runtime.program_run import (
    LinearProgramRun,
    ProgramRun,
    SparseLinearProgramRun,
)
from skl_ortgrad.runtime.random_state import check_random_state
from skl_ortgrad.runtime.sessions import cached_session
from skl_ortgrad.runtime.step import OrtGradientStep
from skl_ortgrad.training.interrupt import DeferredInterrupt
from skl_ortgrad.training.program import (
    LinearProgram,
    SparseLinearProgram,
    StepProgram,
    generic_program,
    linear_program,
)
from skl_ortgrad.training.progress import (
    CONVERGED,
    DIVERGED,
    EARLY_STOPPING,
    INTERRUPTED,
    MAX_ITER,
    BatchProgress,
    TrainingProgress,
)
from skl_ortgrad.training.scaled_learning_rate import ScaledLearningRate
from skl_ortgrad.training.sgd_learning_loss import (
    BaseLearningLoss,
    HingeLearningLoss,
    NegLogLearningLoss,
    SquareLearningLoss,
)
from skl_ortgrad.training.sgd_learning_penalty import (
    BaseLearningPenalty,
    ElasticLearningPenalty,
    NoLearningPenalty,
)
from skl_ortgrad.training.sgd_learning_rate import (
    BaseLearningRate,
    LearningRateAdam,
    LearningRateSGD,
    LearningRateSGDNesterov,
)

LABEL_NAME = "label"
LOSS_NAME = "loss"


# Format of the pickled state of the trainer; raise it when a change makes old pickles
# unreadable (and teach __setstate__ to convert the formats that can be).
_STATE_FORMAT = 1


class _Diverged(Exception):
    """A batch produced a non-finite loss (or the epoch non-finite weights)."""

    def __init__(
        self, batch: int, loss: float, eta: float, last: float | None,
        what: str = "the loss is",
    ) -> None:
        super().__init__(batch, loss, eta)
        self.batch, self.loss, self.eta, self.last, self.what = batch, loss, eta, last, what


class _TornUpdate(Exception):
    """An exception (its ``__cause__``) interrupted an update half-way."""


def _fmt(loss: float | None) -> str:
    return "none" if loss is None else f"{loss:.6g}"


def _mean(loss: float, total: float) -> float:
    """A mean loss from its weighted sum (0 for rows weighing nothing)."""
    return loss / total if total else 0.0


@dataclass(frozen=True)
class _ChunkStart:
    """Copies of what a program's chunk changes, taken before it ran."""

    weights: list[np.ndarray]
    rate_state: list[np.ndarray]
    t: int


def _first_nonfinite_chunk(losses: np.ndarray,
                           chunks: Sequence[tuple[int, int]]) -> int | None:
    """The index in ``chunks`` (``(first, count)`` of consecutive chunks, the first at
    ``losses[0]``) of the first chunk with a non-finite loss; None if all are finite."""
    finite = np.isfinite(losses)
    if finite.all():
        return None
    step = chunks[0][0] + int(np.argmin(finite))
    return next(index for index, (first, count) in enumerate(chunks)
                if first <= step < first + count)


def _loss_shares(loader: MiniBatchLoader) -> tuple[list[float], float]:
    r"""How the current epoch's batch loss sums :math:`L_B` make its loss
    :math:`\sum_B c_B L_B / D`: ``([c_B], D)``.

    The mean loss over the rows' weights (:math:`c_B = 1`, :math:`D = \sum_i s_i`), but
    for sample weights with ``weighted_mean``, where each batch trains on its weighted
    mean: then scikit-learn's MLP loss, the mean over the rows of the batches' weighted
    means (:math:`c_B = n_B / \sum_{i \in B} s_i`, 0 for a batch weighing nothing;
    :math:`D = n`).
    """
    if loader.weighted and loader.weighted_mean:
        return ([rows / total if total else 0.0
                 for rows, total in zip(loader.rows, loader.totals.tolist(), strict=True)],
                float(loader.n_rows))
    return [1.0] * len(loader.rows), float(loader.totals.sum())


#: Mini-batches per onnxruntime call of the training program (see :meth:`_program`);
#: below 2, every batch is a call of its own. Measured (100k x 100 float32, batch 32,
#: ``partial_fit`` epochs against the per-batch path): 0.74x at 16, 0.73x at 32, 0.71x
#: at 64 and 128 (squared error), 0.85x / 0.83x at 16 / 32-128 (10 classes); 32 keeps
#: a chunk near 0.35 ms (binary) and 0.6 ms (10 classes), so Ctrl-C, honoured between
#: chunks, stays immediate.
_PROGRAM_STEPS = 32
#: The linear program's step is a few µs at batch 32, so a chunk of ``_PROGRAM_STEPS``
#: spends a tenth of its time on the call and the chunk's Python (losses, checks): it
#: runs up to ``_LINEAR_STEPS`` batches per call, as long as a chunk reads at most
#: ``_LINEAR_CHUNK_VALUES`` feature values (:func:`_linear_steps`), about 0.35 ms of
#: work at 100 features. Measured (``partial_fit`` epochs against scikit-learn, side by
#: side, medians of 21 rounds, twice; steps 32 / 64 / 128): regression 100k x 100
#: 0.428x / 0.412x / 0.416x and 0.432x / 0.411x / 0.408x, binary hinge 50k x 100
#: 0.838x / 0.820x / 0.815x and 0.845x / 0.830x / 0.808x: 128 gains nothing more
#: (``bench/bench_program.py``, last table, on its 100k-row tasks: 0.42x / 0.40x / 0.40x
#: and 0.71x / 0.70x / 0.69x).
_LINEAR_STEPS = 64
_LINEAR_CHUNK_VALUES = 2**18
#: Fewer full batches in an epoch run per batch: writing the epoch's per-step scalars
#: costs tens of µs, more than the calls a short epoch saves (measured, generic program:
#: ``partial_fit`` of 200 rows 1.06x slower with the program, 500 rows even, 2000 rows
#: 0.88x). The linear program runs the whole epoch, the short last batch included, in
#: one call per chunk: it pays from 4 full batches (measured, binary hinge, 30 features:
#: 200 rows even, 500 rows 0.91x, 2000 rows 0.73x).
_PROGRAM_MIN_BATCHES = 16
_LINEAR_MIN_BATCHES = 4
#: Where several epochs may run per call (:meth:`Trainer._group_size`), the linear program
#: pays from one full batch: ``fit`` at the defaults on 40 to 127 rows (8 features) 2.0x
#: to 2.9x faster than per batch (the regressor, 22 to 38 epochs), 1.5x to 2.4x (the
#: classifier, 8 to 16 epochs), measured; a ``partial_fit`` of 32 to 127 rows (one epoch)
#: is up to 10% slower with it.
_GROUPED_LINEAR_MIN_BATCHES = 1
#: Beyond this many trained values, an update rule with a state (momentum, Adam) runs per
#: batch: its update is elementwise arithmetic over every value, which numpy does faster
#: than onnxruntime's kernels (and the exact float32 square root of Adam costs two casts
#: in the graph), while the program only saves a fixed cost per batch. Measured per
#: epoch, program / per batch (``bench/bench_program.py``, update-rules table: 20k x 100,
#: batch 32): a linear model (101 values) with Nesterov 0.98x, with Adam 0.88x; MLPs with
#: Adam, 100-16-1 (1,633 values) 0.99x, 100-128-1 (12,929 values) 1.30x (1.09x at batch
#: 200 on 50k rows, ad hoc).
_PROGRAM_MAX_STATE = 1024
#: The per-batch pieces the program computes in its graph: the step's run, the updates of
#: the rules whose ``emit_update`` writes what their ``stepper`` does (plain SGD, momentum
#: and Nesterov, Adam; possibly scaled) and of the elastic penalty. Captured at import:
#: when any of them is replaced afterwards (a subclass overriding it, an instrumented
#: method), the program would not do what the replacement does, and the per-batch loop
#: runs it.
_PROGRAM_PIECES = {
    "run": OrtGradientStep.run,
    "rates": (LearningRateSGD.stepper, LearningRateSGDNesterov.stepper,
              LearningRateAdam.stepper),
    "scaled": ScaledLearningRate.stepper,
    "penalties": (ElasticLearningPenalty.stepper, NoLearningPenalty.stepper),
}


#: Training programs and their sessions, shared by every trainer of the same model
#: structure (weights by shape only), loss, update rule and configuration: a grid search
#: of small MLP fits built one per fit (1.7 ms of a 12 ms digits fit).
PROGRAMS: BoundedCache[tuple[Any, InferenceSession] | None] = BoundedCache(64)


#: The runtime's binding of each kind of program.
_BINDINGS: dict[type, type[ProgramRun]] = {
    StepProgram: ProgramRun, LinearProgram: LinearProgramRun,
    SparseLinearProgram: SparseLinearProgramRun,
}


def _linear_steps(batch_rows: int, n_features: int, most: int, least: int) -> int:
    """Batches per call of the linear program: the largest power of two up to ``most``
    (``_LINEAR_STEPS``) whose chunk reads at most ``_LINEAR_CHUNK_VALUES`` feature
    values (``steps * batch_rows * n_features``), and never fewer than ``least`` (the
    other programs' ``_PROGRAM_STEPS``) unless ``most`` is."""
    fit = max(1, _LINEAR_CHUNK_VALUES // (batch_rows * n_features))
    return max(min(most, 1 << (fit.bit_length() - 1)), min(least, most))


class Trainer:
    """Train the weights of an ONNX model with mini-batch gradient descent.

    A plain object: epochs, the ``tol`` rule and early stopping, divergence, Ctrl-C and
    checkpoints, over the training programs (:meth:`_program`) or the per-batch steps.
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
    tol_on_objective : bool
        Without validation data, let the ``tol`` rule watch the training *objective*
        instead of the loss: the epoch's loss plus the mean over its rows of the
        penalty's value at the weights their batch started from,
        :math:`\\frac1n \\sum_B n_B P(W_B)` (scikit-learn's SGD: the loss plus
        :math:`\\alpha R(w)` at every sample, ``objective_sum``). Only for a penalty taken
        as proximal steps (``ElasticLearningPenalty``); a penalty in the loss
        (``loss_term``) is in it already. ``train_losses_`` stay the losses.
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
    train_losses_, validation_losses_ : list of float
        Mean loss per epoch (validation: per evaluation), the terms of a penalty that is
        part of the loss included (``loss_term``); with sample weights, as
        ``weighted_mean`` says.
    validation_scores_ : list of float
        Validation scores when ``fit`` receives a ``val_scorer``.
    """

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
        tol_on_objective: bool = False,
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

    def _resolve_objects(self) -> None:
        self.learning_rate_ = BaseLearningRate.select(self.learning_rate)
        self.learning_loss_ = BaseLearningLoss.select(self.learning_loss)
        self.learning_penalty_ = BaseLearningPenalty.select(self.learning_penalty)
        if hasattr(self, "weights_"):
            # A rate of another kind (plain SGD -> momentum) needs a state of its own.
            fresh = self.learning_rate_.init_state(self.weights_)
            if len(fresh) != len(self.lr_state_):
                self.lr_state_ = fresh
        parse_device(self.device)
        if int(self.max_iter) < 0 or int(self.batch_size) < 1:
            raise ValueError(
                f"max_iter must be >= 0 and batch_size >= 1, got {self.max_iter} and "
                f"{self.batch_size}."
            )

    def _model_dtype(self) -> np.dtype:
        """The element type of the model's first output (the prediction).

        A model cut at an intermediate result may not declare it: shape inference finds it.

        Raises
        ------
        ValueError
            If neither the model nor shape inference tells it.
        """
        return numpy_dtype(typed_output(self.model_onnx, 0).type.tensor_type.elem_type)

    def _initial_weights(self) -> tuple[list[str], list[np.ndarray]]:
        model = check_external_data(self.model_onnx, self.external_data_dir)
        if self.weights_to_train is None:
            inits = get_train_initializer(model)
        else:
            available = {i.name: i for i in model.graph.initializer}
            unknown = [name for name in self.weights_to_train if name not in available]
            if unknown:
                raise ValueError(
                    f"Unknown weights {unknown}: the model's initializers are "
                    f"{sorted(available)}."
                )
            inits = {
                name: numpy_helper.to_array(available[name]) for name in self.weights_to_train
            }
        names = list(inits)
        # One buffer for all (runtime.buffers): the rates' updates run once over them.
        return names, packed_copies([inits[name] for name in names])

    def _reset(self) -> None:
        """Start from the model's initializers (what a non-warm :meth:`fit` does)."""
        self.weights_to_train_, self.weights_ = self._initial_weights()
        self.t_ = 1
        self.lr_state_ = self.learning_rate_.init_state(self.weights_)
        self.train_losses_: list[float] = []
        self.validation_losses_: list[float] = []
        self.validation_scores_: list[float] = []
        self.n_iter_ = 0
        self._engines: dict[tuple, OrtGradientForwardBackward] = {}
        self._row_loss_sessions: dict[tuple, InferenceSession] = {}
        self.__dict__.pop("_last_loader", None)
        self._programs: dict[tuple, tuple[StepProgram, InferenceSession] | None] = {}
        self.__dict__.pop("_program_binding", None)
        self.average_weights_: list[np.ndarray] = []
        self.average_count_ = 0

    def _penalized(self) -> list[np.ndarray]:
        if self.penalized_weights is None:
            return [w for w in self.weights_ if w.ndim >= 2 and w.shape[0] > 1]
        index = {name: i for i, name in enumerate(self.weights_to_train_)}
        return [self.weights_[index[name]] for name in self.penalized_weights]

    def _loss_key(self, weighted: bool) -> tuple:
        loss = self.learning_loss_
        return (
            weighted, resolve_backend(self.backend), type(loss).__name__,
            tuple((name, getattr(loss, name)) for name in param_names(type(loss))),
        )

    def _training_model(self, weighted: bool, per_row: bool = False) -> onnx.ModelProto:
        """The model with the loss appended: one scalar ``loss``, or one loss per row."""
        opset = main_opset(self.model_onnx, default=OPSET)
        weight_name = (self.weight_name or "sample_weight") if weighted else None
        loss_graph = self.learning_loss_.build_onnx_function(
            min(opset, OPSET), self.device, weighted=weighted, dtype=self._model_dtype(),
            per_row=per_row,
        )
        return merge_loss_graph(
            check_external_data(self.model_onnx, self.external_data_dir), loss_graph,
            output_index=0, label_name=LABEL_NAME,
            weight_name=weight_name, loss_name=LOSS_NAME,
        )

    def _engine(self, weighted: bool) -> OrtGradientForwardBackward:
        """The forward/backward engine of model + loss (built once per loss and weighting)."""
        engines = self.__dict__.setdefault("_engines", {})
        key = self._loss_key(weighted)
        if key not in engines:
            options = session_options(
                self.n_threads, log_severity(self.enable_logging, self.verbose)
            )
            _, index = parse_device(self.device)
            engines[key] = OrtGradientForwardBackward(
                self._training_model(weighted),
                weights_to_train=self.weights_to_train_,
                sess_options=options,
                providers=device_providers(self.device),
                device_index=index,
                enable_logging=self.enable_logging,
                backend=key[1],
            )
        self.backend_ = key[1]
        return engines[key]

    def _as_arrays(
        self, X: Any, y: Any, sample_weight: Any
    ) -> tuple[list[Any], bool]:
        """Cast the data to the graph's dtype and shapes: (arrays, weighted)."""
        dtype = self._model_dtype()
        if getattr(X, "ndim", None) != 2:
            raise ValueError(
                f"X must be a 2-D array or sparse matrix, got {getattr(X, 'ndim', type(X))} "
                "dimension(s); reshape a single feature with X.reshape(-1, 1)."
            )
        X = X.astype(dtype, copy=False)
        y = np.asarray(y, dtype=dtype)
        if y.ndim == 1:
            y = y.reshape((-1, 1))
        if X.shape[0] != y.shape[0]:
            raise ValueError(f"X has {X.shape[0]} rows but y has {y.shape[0]}.")
        if sample_weight is None:
            return [X, y], False
        sample_weight = np.asarray(sample_weight, dtype=dtype).reshape((-1,))
        if sample_weight.shape[0] != X.shape[0]:
            raise ValueError(
                f"sample_weight has {sample_weight.shape[0]} values for {X.shape[0]} rows."
            )
        return [X, y, sample_weight], True

    def _checked_arrays(
        self, X: Any, y: Any, sample_weight: Any
    ) -> tuple[list[Any], bool]:
        """:meth:`_as_arrays` after checking values, before anything changes.

        The estimators validate their input the scikit-learn way and skip this second
        pass over the data; called directly, the trainer refuses here what would
        otherwise surface later as a divergence.
        """
        arrays, weighted = data = self._as_arrays(X, y, sample_weight)
        X, y = arrays[:2]
        if X.shape[0] == 0:
            raise ValueError("X has 0 rows: there is nothing to train on.")
        if not np.isfinite(X.data if hasattr(X, "toarray") else X).all():
            raise ValueError("X contains NaN or infinity: remove or impute those values.")
        if not np.isfinite(y).all():
            raise ValueError("y contains NaN or infinity: remove or impute those values.")
        if weighted:
            sample_weight = arrays[2]
            if not np.isfinite(sample_weight).all() or (sample_weight < 0).any():
                raise ValueError("sample_weight must be finite and non-negative.")
            if not sample_weight.any():
                raise ValueError(
                    "sample_weight is zero everywhere: no row would be trained on."
                )
        return data

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
        return self._fit_data(self._checked_arrays(X, y, sample_weight), X_val, y_val,
                              val_scorer)

    def _fit_data(
        self, data: tuple[list[Any], bool], X_val: Any, y_val: Any, val_scorer: Any
    ) -> Trainer:
        """:meth:`fit` on data already checked and cast (``_as_arrays``)."""
        self._resolve_objects()
        if not (self.warm_start and hasattr(self, "weights_")):
            self._reset()
        try:
            self.n_iter_ = self._run(data, int(self.max_iter), X_val, y_val, val_scorer)
        except BaseException:
            # Divergence, Ctrl-C...: the epochs completed before it are what ran.
            self.n_iter_ = self.__dict__.get("epochs_completed_", 0)
            raise
        return self

    def partial_fit(
        self, X: Any, y: Any, sample_weight: Any = None
    ) -> Trainer:
        """Run one epoch over ``(X, y)``, continuing from the current weights and ``t_``.

        The current parameters apply: a learning rate, loss or penalty changed since the
        last call (:meth:`configure`) is used from this epoch on.
        """
        return self._partial_fit_data(self._checked_arrays(X, y, sample_weight))

    def _partial_fit_data(
        self, data: tuple[list[Any], bool]
    ) -> Trainer:
        """:meth:`partial_fit` on data already checked and cast (``_as_arrays``)."""
        self._resolve_objects()
        if not hasattr(self, "weights_"):
            self._reset()
        self._run(data, 1, None, None, None, partial=True)
        return self

    def _random_state(self) -> np.random.RandomState:
        """The generator of the permutations, created from ``random_state`` once.

        It is part of the pickled state, so a stream of ``partial_fit`` calls resumed
        from a pickle shuffles exactly as the uninterrupted stream.
        """
        if "_rng" not in self.__dict__:
            self._rng = check_random_state(self.random_state)
        return self._rng

    def _loader(self, arrays: list[Any], weighted: bool, device: Any) -> MiniBatchLoader:
        """The mini-batch loader of ``arrays``: the last one when they fit in it.

        Kept between calls so that a stream of ``partial_fit`` calls reuses its buffers
        and feed vectors (see :meth:`MiniBatchLoader.refill`); it borrows the buffers of
        ``weights_``, so :meth:`_reset`, which replaces them, drops it.
        """
        key = (int(self.batch_size), bool(self.shuffle), weighted, str(self.device),
               bool(self.weighted_mean))
        cached = self.__dict__.get("_last_loader")
        if cached is not None and cached[0] == key and cached[1].refill(arrays):
            return cached[1]
        loader = MiniBatchLoader(
            arrays, int(self.batch_size), bool(self.shuffle),
            self._random_state(),
            device,
            lambda: [OrtValue.ortvalue_from_numpy(w, device) for w in self.weights_],
            weight_index=2 if weighted else None,
            weighted_mean=bool(self.weighted_mean),
        )
        self._last_loader = key, loader
        return loader

    def _validation_period(self) -> int:
        if self.validation_every < 1:
            return max(1, round(self.validation_every * int(self.max_iter)))
        return int(self.validation_every)

    def _run(
        self, data: tuple[list[Any], bool], epochs: int, X_val: Any, y_val: Any,
        val_scorer: Any, partial: bool = False,
    ) -> int:
        """Run up to ``epochs`` epochs over checked ``data``; return how many ran.

        Every epoch is reported, and the call ends, whatever stops it, with the summary
        line of :class:`~skl_ortgrad.training.progress.TrainingProgress` saying why.
        """
        arrays, weighted = data
        # The engine is built on first use: an epoch run by the linear program needs none
        # (a tenth of a small fit).
        self.backend_ = resolve_backend(self.backend)
        device = ort_device("cpu" if parse_device(self.device)[0] == "cpu"
                            else self._engine(weighted).cls_type_.device)
        loader = self._loader(arrays, weighted, device)
        period = self._validation_period()
        best, no_improvement = np.inf, 0
        progress = TrainingProgress(
            self.verbose, epochs, partial, len(self.train_losses_) + 1, arrays[0].shape[0],
            prefix=self._epoch_prefix,
        )
        objective = self._watches_objective(X_val)
        # Nothing it depends on changes between the epochs of a call.
        program = self._program(weighted, loader, grouped=self._groups_allowed(
            epochs, X_val, progress), norms=objective)
        self.epochs_completed_ = epoch = 0
        # Losses and penalties of epochs already run together (_epoch_group), not yet
        # taken into account.
        ran: list[tuple[float, float]] = []
        # Epochs to run one by one after a group that did not end finite.
        alone = 0
        # Any other exception (a failing learning-rate object...) keeps this reason.
        reason = "stopped by an exception"
        try:
            with DeferredInterrupt() as interrupt:
                for epoch in range(epochs):
                    if not ran:
                        snapshot = self.get_checkpoint()
                        group = 1 if alone else self._group_size(
                            program, epochs - epoch, no_improvement, X_val, progress)
                        alone = max(0, alone - 1)
                        if group > 1:
                            if interrupt.pending:
                                raise KeyboardInterrupt
                            ran = self._epoch_group(group, loader, program, objective)
                            alone = 0 if ran else group - 1
                    if ran:
                        loss, penalty = ran.pop(0)
                    else:
                        try:
                            loss, penalty = self._epoch(weighted, loader, interrupt,
                                                        program, objective)
                        except _Diverged as diverged:
                            self.set_checkpoint(snapshot)
                            reason = DIVERGED
                            self._diverged(diverged)
                            return epoch
                        except _TornUpdate as torn:
                            # The exception hit the middle of an update: some weights may
                            # have moved, others not. Back to the start of the epoch, a
                            # consistent state.
                            self.set_checkpoint(snapshot)
                            raise torn.__cause__ from None
                    self.train_losses_.append(loss)
                    self.epochs_completed_ = epoch + 1
                    if interrupt.pending and not ran:
                        # Ctrl-C during the last batch of the epoch (of a group: its epochs
                        # are complete): the epoch is complete.
                        raise KeyboardInterrupt
                    monitored = loss + penalty
                    if X_val is not None and (
                        (epoch + 1) % period == 0 or epoch == epochs - 1
                    ):
                        if val_scorer is None:
                            monitored = self._mean_loss(X_val, y_val)
                            self.validation_losses_.append(monitored)
                        else:
                            score = float(val_scorer())
                            if not math.isfinite(score):
                                # Finite losses, but predictions beyond the dtype's range:
                                # the epoch diverged.
                                eta = self.learning_rate_.eta(self.t_)
                                self.train_losses_.pop()
                                self.epochs_completed_ = epoch
                                self.set_checkpoint(snapshot)
                                reason = DIVERGED
                                self._diverged(_Diverged(
                                    len(loader.rows) - 1, score, eta, loss,
                                    what="the validation score is"))
                                return epoch
                            self.validation_scores_.append(score)
                            monitored = -score
                    self._report(progress, loss)
                    if self.tol is not None:
                        no_improvement = (
                            no_improvement + 1 if monitored > best - self.tol else 0
                        )
                        best = min(best, monitored)
                        if no_improvement >= self.n_iter_no_change:
                            if self._reduce_on_plateau():
                                no_improvement = 0
                                continue
                            reason = self._stop_reason(X_val, val_scorer, objective)
                            return epoch + 1
                reason = MAX_ITER
            return epoch + 1 if epochs else 0
        except KeyboardInterrupt:
            reason = INTERRUPTED
            raise
        finally:
            progress.close(reason, self.epochs_completed_)

    def _watches_objective(self, X_val: Any) -> bool:
        """Whether the ``tol`` rule of this call watches the objective (see
        ``tol_on_objective``): then the epochs also sum the penalty at each batch's
        weights."""
        penalty = self.learning_penalty_
        return (bool(self.tol_on_objective) and self.tol is not None and X_val is None
                and isinstance(penalty, ElasticLearningPenalty)
                and (penalty.l1 > 0 or penalty.l2 > 0))

    def _group_size(self, program: ProgramRun | None, remaining: int, no_improvement: int,
                    X_val: Any, progress: TrainingProgress) -> int:
        """How many of the next epochs run in one call (:meth:`_epoch_group`): 1, unless
        the dense linear program holds several epochs of this data
        (:attr:`~skl_ortgrad.runtime.program_run.LinearProgramRun.epochs_per_call`),
        nothing is reported per epoch (silent, no validation), and then only as many as
        end before the ``tol`` rule could stop (or the rate react to a plateau): it can
        fire at the group's last epoch at the earliest, as after single epochs."""
        if type(program) is not LinearProgramRun or not self._groups_allowed(
                remaining, X_val, progress):
            return 1
        group = min(remaining, program.epochs_per_call)
        if self.tol is not None:
            group = min(group, math.ceil(self.n_iter_no_change - no_improvement))
        return max(1, group)

    def _groups_allowed(self, epochs: int, X_val: Any, progress: TrainingProgress) -> bool:
        """Whether ``epochs`` epochs may run in groups (:meth:`_group_size`): more than
        one, nothing reported or validated per epoch, a ``tol`` rule that cannot stop
        after every epoch."""
        return (epochs > 1 and X_val is None and progress.silent
                and (self.tol is None or self.n_iter_no_change > 1))

    def _epoch_group(self, epochs: int, loader: MiniBatchLoader, program: LinearProgramRun,
                     objective: bool = False) -> list[tuple[float, float]]:
        """Run ``epochs`` epochs in one call of the linear program; return their mean
        losses and penalties (as :meth:`_epoch`), or ``[]`` with nothing changed but the
        loader.

        Each epoch draws its permutation and is laid out as :meth:`_epoch` lays it out,
        and the call computes each step as that epoch's call would: the same weights,
        ``t_`` and losses, bit for bit. The schedule, the losses and the checks are
        computed once for the group (the Python work around an epoch's call costs as
        much as the call on a small dataset). When a loss or the new weights are not
        finite, nothing is kept and the generator goes back to its state before the
        group: the caller runs those epochs one by one, which stop where the per-epoch
        path stops, with its message.
        """
        rate = self.learning_rate_
        generator = loader.random_state.get_state() if loader.shuffle else None
        rows = sum(loader.rows)
        etas = self._rates(loader, epochs)
        shares = []
        for epoch in range(epochs):
            loader.epoch(features=False)
            program.lay_out(loader, epoch)
            shares.append(_loss_shares(loader))
        program.schedule_epochs(etas, *self._penalty_scalars(),
                                rate.step_scalars(etas, self.lr_state_), epochs)
        program.run_epochs(epochs)
        losses = program.epoch_losses(epochs)
        if not (np.isfinite(losses).all()
                and all(np.isfinite(w).all() for w in program.new_weights)):
            if generator is not None:
                loader.random_state.set_state(generator)
            return []
        self._take_steps(program, epochs * program.n_batches, epochs * rows)
        penalties = (self._step_penalties(program, 0, epochs * program.n_batches,
                                          loader.rows * epochs).reshape(epochs, -1)
                     if objective else np.zeros((epochs, 1)))
        means = []
        for batch_losses, (epoch_shares, divisor), epoch_penalties in zip(
                losses.tolist(), shares, penalties, strict=True):
            # Summed in the order _epoch sums them.
            total = 0.0
            for loss, share in zip(batch_losses, epoch_shares, strict=True):
                total += loss * share
            means.append((_mean(total, divisor),
                           float(epoch_penalties.sum()) / loader.n_rows))
        return means

    def _reduce_on_plateau(self) -> bool:
        """Let the learning rate react to a plateau (scikit-learn's 'adaptive' divides
        it by 5); True when training goes on."""
        rate = self.learning_rate_
        eta = rate.eta(self.t_) * rate.eta_factor(self.lr_state_)
        return rate.reduce_on_plateau(self.lr_state_, eta)

    def _stop_reason(self, X_val: Any, val_scorer: Any, objective: bool) -> str:
        """Why the ``tol`` rule stopped training, for the summary line."""
        if X_val is None:
            kind = CONVERGED
            monitored = "training objective" if objective else "training loss"
        else:
            kind = EARLY_STOPPING
            monitored = "validation loss" if val_scorer is None else "validation score"
        return (
            f"{kind} (the {monitored} improved by less than tol={self.tol:g} for "
            f"{self.n_iter_no_change} epochs)"
        )

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

    def _epoch(
        self,
        weighted: bool,
        loader: MiniBatchLoader,
        interrupt: DeferredInterrupt,
        program: ProgramRun | None,
        objective: bool = False,
    ) -> tuple[float, float]:
        """One pass over ``loader`` (with sample weights or not); return the mean
        (sample-weighted) loss and, with ``objective``, the mean over the rows of the
        penalty at the weights of their batch (0.0 otherwise).

        Per batch, Python does one onnxruntime call (loss and gradients into buffers
        allocated once, :class:`~skl_ortgrad.runtime.step.OrtGradientStep`)
        and the in-place updates of steppers validated once per epoch; the schedule is
        computed for the whole epoch at once. Where the training program applies
        (``program``, from :meth:`_program`), the batches run ``_PROGRAM_STEPS`` per call
        instead, computing the same updates (to rounding, see :meth:`_build_program`): each
        chunk's new weights and update states (velocities, moments; the rule's counters
        advance) replace the current ones as it ends (:meth:`_run_chunks`), and the
        losses of all the chunks run are checked at once after them; at the first chunk
        with a non-finite loss, the weights, states and ``t_`` go back to its start
        (:meth:`_rewind`) and the chunk is replayed batch by batch, which stops at the
        exact batch with the per-batch path's state and message (or, finding every loss
        finite, goes on with the next chunks). Ctrl-C is honoured at the next chunk
        boundary, once the chunks run are checked.

        Raises :class:`_Diverged` on a non-finite batch loss (before any update), and
        wraps an exception raised while the weights were being updated in
        :class:`_TornUpdate` (some weights may have moved, others not).
        """
        rows = loader.rows
        weights = self.weights_
        average = self._averager() if self.average else None
        # The schedule at the t of every batch; Python floats keep float32 updates float32.
        eta_array = self._rates(loader)
        etas = eta_array.tolist()
        feed = loader.epoch(features=program is None or program.needs_features)
        totals, scales = loader.totals, loader.scales
        shares, divisor = _loss_shares(loader)
        total, previous = 0.0, None
        # The penalty's value at every batch's weights, times its rows (objective).
        penalized = self._penalized() if objective else []
        penalty_total = 0.0
        updating = False
        # verbose >= 2: the loss and learning rate of every batch.
        detail = BatchProgress(len(rows), len(self.train_losses_) + 1) if (
            self.verbose >= 2) else None

        pieces: list[Any] = []

        def batches(first: int, stop: int) -> None:
            """The per-batch path over batches ``first .. stop - 1``."""
            nonlocal total, previous, updating, penalty_total
            if first >= stop:
                return
            loader.fill_features()
            if not pieces:
                # Built on first use: a program running the whole epoch needs none.
                pieces.extend(self._per_batch_pieces(weighted, rows))
            runs, loss_buffer, step, decay, term = pieces
            for batch in range(first, stop):
                if interrupt.pending:
                    # Ctrl-C arrived during the previous batch: stop at its end.
                    raise KeyboardInterrupt
                runs[batch](feed(batch))
                loss = float(loss_buffer)
                if term is not None:
                    # Gradients are scratch: the weights are still untouched.
                    loss += term(float(scales[batch]))
                eta = etas[batch]
                if not math.isfinite(loss):
                    last = None if previous is None else _mean(previous, totals[batch - 1])
                    raise _Diverged(batch, loss, eta, last)
                if penalized:
                    penalty_total += rows[batch] * self.learning_penalty_.penalty_loss(
                        penalized)
                updating = True
                decay(eta)
                step(eta)
                self.t_ += rows[batch]
                if average is not None:
                    average(self.t_ - rows[batch], rows[batch])
                updating = False
                total += loss * shares[batch]
                previous = loss
                if detail is not None:
                    detail.update(batch, _mean(loss, totals[batch]), eta)

        try:
            if program is None:
                batches(0, len(rows))
            else:
                rate = self.learning_rate_
                program.schedule(eta_array, loader, *self._penalty_scalars(),
                                 rate.step_scalars(eta_array, self.lr_state_))
                chunk = 0
                while chunk < len(program.chunks):
                    if interrupt.pending:
                        raise KeyboardInterrupt
                    # The chunks are kept unchecked as they run: an exception among
                    # them goes back to the start of the epoch (_TornUpdate).
                    updating = True
                    starts = self._run_chunks(program, chunk, rows, interrupt)
                    updating = False
                    first = program.chunks[chunk][0]
                    last, count = program.chunks[chunk + len(starts) - 1]
                    losses = program.step_losses(first, last + count - first)
                    bad = _first_nonfinite_chunk(losses, program.chunks[chunk:])
                    kept = losses[:program.chunks[chunk + bad][0] - first
                                  if bad is not None else len(losses)].tolist()
                    # One by one, as the per-batch path sums them: the same epoch loss.
                    for loss, share in zip(kept, shares[first:first + len(kept)],
                                           strict=True):
                        total += loss * share
                    previous = kept[-1] if kept else previous
                    if penalized and kept:
                        penalty_total += float(self._step_penalties(
                            program, first, len(kept), rows[first:first + len(kept)]).sum())
                    if bad is None:
                        chunk += len(starts)
                        continue
                    # Back to that chunk's start: the per-batch path finds the batch.
                    updating = True
                    self._rewind(program, starts[bad])
                    updating = False
                    chunk += bad
                    first, count = program.chunks[chunk]
                    batches(first, first + count)
                    chunk += 1
                batches(program.n_batches, len(rows))
        except BaseException as exc:
            if updating:
                raise _TornUpdate() from exc
            raise
        finally:
            if detail is not None:
                detail.close()
        if not all(np.isfinite(w).all() for w in weights):
            # Finite losses but an update that overflowed (the next forward would fail).
            last = _mean(previous, totals[-1])
            raise _Diverged(len(rows) - 1, np.inf, etas[-1], last, what="the weights are")
        return _mean(total, divisor), penalty_total / loader.n_rows

    def _rates(self, loader: MiniBatchLoader, epochs: int = 1) -> np.ndarray:
        """The learning rate of every batch of ``epochs`` epochs of ``loader`` from
        ``t_`` (the adaptive divisor applied); a rate held per epoch (``per_epoch``)
        takes the epoch's first batch's."""
        rate = self.learning_rate_
        within = np.zeros_like(loader.starts) if rate.per_epoch else loader.starts
        offsets = (np.arange(epochs)[:, None] * sum(loader.rows) + within).ravel()
        return rate.schedule(self.t_ + offsets) * rate.eta_factor(self.lr_state_)

    def _run_chunks(self, program: ProgramRun, chunk: int, rows: list[int],
                    interrupt: DeferredInterrupt) -> list[_ChunkStart]:
        """Run the program's chunks from ``chunk`` on, each one's new weights and states
        made the current ones at once, until the last chunk or a pending Ctrl-C; return
        the start of each chunk run (for :meth:`_rewind`).

        Their losses are checked after all of them (:meth:`_epoch`): computing them in
        numpy cost about a tenth of a chunk's call at the defaults (1.3 ms of a 26 ms
        epoch of 100k x 100, measured), for all of them at once 0.3 ms.
        """
        starts = []
        for index in range(chunk, len(program.chunks)):
            if starts and interrupt.pending:
                break
            first, count = program.chunks[index]
            starts.append(_ChunkStart([w.copy() for w in program.weights],
                                      [s.copy() for s in self.lr_state_], self.t_))
            program.run(index)
            self._take_steps(program, count, sum(rows[first:first + count]))
        return starts

    def _rewind(self, program: ProgramRun, start: _ChunkStart) -> None:
        """Make the weights, states and ``t_`` those at the start of a chunk."""
        for array, saved in zip(program.weights, start.weights, strict=True):
            np.copyto(array, saved)
        for array, saved in zip(self.lr_state_, start.rate_state, strict=True):
            np.copyto(array, saved)
        self.t_ = start.t

    def _step_penalties(self, program: ProgramRun, first: int, count: int,
                        rows: list[int]) -> np.ndarray:
        """The elastic penalty at the weights of steps ``first .. first + count - 1``
        of a program that writes the norms, times each step's ``rows``."""
        l1, l2, _ = self._penalty_scalars()
        return program.step_penalties(first, count, l1, l2) * np.asarray(rows)

    def _take_steps(self, program: ProgramRun, steps: int, samples: int) -> None:
        """Make a program call's new weights and states the current ones: ``steps``
        batches of ``samples`` rows in all ran."""
        for array, new in zip(program.weights, program.new_weights, strict=True):
            np.copyto(array, new)
        self.learning_rate_.advance_state(self.lr_state_, steps)
        self.t_ += samples

    def _penalty_scalars(self) -> tuple[float, float, int]:
        """The elastic penalty's ``l1``, ``l2`` and ``rows`` a program's schedule takes
        (no decay, no threshold without it)."""
        penalty = self.learning_penalty_
        if isinstance(penalty, ElasticLearningPenalty):
            return float(penalty.l1), float(penalty.l2), int(penalty.rows)
        return 0.0, 0.0, 1

    def _per_batch_pieces(self, weighted: bool,
                          rows: list[int]) -> tuple[list[Any], np.ndarray, Any, Any, Any]:
        """What the per-batch path runs: the engine's step ``run`` of every batch, the
        loss buffer, the rate's and the penalty's steppers (validated here), and the
        penalty's term of the loss (``loss_term``: None for a proximal penalty)."""
        engine = self._engine(weighted)
        # A static step for batch_size rows, the general one for any other count (the
        # last batch, calls with fewer rows): two sessions at most, whatever the stream.
        size = int(self.batch_size)
        steps = {n: engine.step_function(size if n == size else None) for n in set(rows)}
        # All the steps of an engine write into the same buffers.
        loss_buffer, *gradients = steps[rows[0]].outputs
        penalized = self._penalized()
        penalty = self.learning_penalty_
        return ([steps[n].run for n in rows], loss_buffer,
                self.learning_rate_.stepper(self.weights_, gradients, self.lr_state_),
                penalty.stepper(penalized),
                penalty.loss_term(penalized, [
                    next(g for w, g in zip(self.weights_, gradients, strict=True) if w is p)
                    for p in penalized]))

    def _program(self, weighted: bool, loader: MiniBatchLoader,
                 grouped: bool = False, norms: bool = False) -> ProgramRun | None:
        """The training program bound to ``loader``, or None where the per-batch path
        must run.

        It applies where it computes what the per-batch loop computes: on the CPU, dense
        data (sparse data: the linear program's sparse form only), at least
        ``_LINEAR_MIN_BATCHES`` (linear program; ``_GROUPED_LINEAR_MIN_BATCHES`` when the
        epochs of the call may run in groups, ``grouped``) or
        ``_PROGRAM_MIN_BATCHES`` (generic program) full batches, the update of plain SGD,
        momentum (Nesterov's or not) or Adam (possibly in a ``ScaledLearningRate``; the
        linear program: plain SGD only; momentum and Adam up to ``_PROGRAM_MAX_STATE``
        trained values, with their state packed), no penalty or the elastic one, no
        averaging, ``verbose < 2`` (no per-batch report), and the stock per-batch pieces
        (:data:`_PROGRAM_PIECES`). The program (:meth:`_build_program`) and its session
        are built once per model structure, loss, update rule and configuration, and
        shared by every trainer (:data:`PROGRAMS`); its feeds are bound once per loader
        and weight buffers (and again when the loader serves other features).
        """
        size = int(self.batch_size)
        least_linear = _GROUPED_LINEAR_MIN_BATCHES if grouped else _LINEAR_MIN_BATCHES
        rate, penalty = self.learning_rate_, self.learning_penalty_
        scaled = type(rate).stepper is _PROGRAM_PIECES["scaled"]
        inner = rate.learning_rate if scaled else rate
        full = loader.rows.count(size)
        if (
            _PROGRAM_STEPS < 2 or full < min(_PROGRAM_MIN_BATCHES, least_linear)
            or self.average or self.verbose >= 2
            or parse_device(self.device)[0] != "cpu"
            or OrtGradientStep.run is not _PROGRAM_PIECES["run"]
            or type(inner).stepper not in _PROGRAM_PIECES["rates"]
            or type(penalty).stepper not in _PROGRAM_PIECES["penalties"]
            or (inner.states_per_weight
                and sum(w.size for w in self.weights_) > _PROGRAM_MAX_STATE)
        ):
            return None
        penalized = self._penalized()
        names = tuple(name for name, w in zip(self.weights_to_train_, self.weights_,
                                              strict=True)
                      if any(w is p for p in penalized))
        elastic = isinstance(penalty, ElasticLearningPenalty)
        key = (weighted, size, _PROGRAM_STEPS, _LINEAR_STEPS, loader.sparse, names,
               elastic and penalty.l1 > 0, elastic and penalty.l2 > 0, norms,
               inner.update_key(), self._loss_key(weighted))
        programs = self.__dict__.setdefault("_programs", {})
        if key not in programs:
            shared = (key, skeleton_digest(self.model_onnx, self.weights_to_train_),
                      self.external_data_dir, self.weight_name, int(self.n_threads),
                      log_severity(self.enable_logging, self.verbose), str(self.device))
            programs[key] = PROGRAMS.get(
                shared, lambda: self._build_program(*key[:-2], inner))
        if programs[key] is None or full < (
                least_linear if isinstance(programs[key][0], LinearProgram)
                else _PROGRAM_MIN_BATCHES):
            return None
        arrays = self._program_arrays()
        if arrays is None:
            return None
        bound = self.__dict__.get("_program_binding")
        if bound is None or bound[0] is not loader or bound[1] != key or not bound[2].fits(
                loader) or not bound[2].binds(arrays):
            program, session = programs[key]
            bound = loader, key, _BINDINGS[type(program)](program, session, loader, arrays)
            self._program_binding = bound
        return bound[2]

    def _program_arrays(self) -> list[np.ndarray] | None:
        """What a program call reads and replaces: the weights, then the update rule's
        packed state (``packed_states``); None when the state is not packed."""
        states = self.learning_rate_.packed_states(self.lr_state_, len(self.weights_))
        return None if states is None else [*self.weights_, *states]

    def _build_program(
        self, weighted: bool, size: int, steps: int, linear_steps: int, sparse: bool,
        penalized: tuple[str, ...], l1: bool, l2: bool, norms: bool,
        update: BaseLearningRate,
    ) -> tuple[StepProgram | LinearProgram, InferenceSession] | None:
        """The program of ``steps`` batches of ``size`` rows (the linear program:
        :func:`_linear_steps`, up to ``linear_steps``; its sparse form for ``sparse``
        features) updating with ``update`` and its session (the step's options); None
        for a gradient graph the program cannot hold (control flow), and for sparse
        features out of the linear program's reach.

        The hand-written linear step (:func:`~skl_ortgrad.training.program.linear_program`,
        6 to 11 nodes instead of the gradient graph's 30-odd; equal to rounding in float32,
        not bit for bit) where it computes the same function (:meth:`_lean_loss`), else
        the engine's static gradient graph plus the updates
        (:func:`~skl_ortgrad.training.program.generic_program`).
        """
        # The linear program writes plain SGD's update itself.
        lean = (self._lean_loss(penalized, l1 or l2)
                if type(update).stepper is LearningRateSGD.stepper else None)
        if sparse and lean is None:
            return None
        try:
            if lean is not None:
                n_features, n_outputs = self.weights_[0].shape
                program = linear_program(
                    lean, n_features, _linear_steps(size, n_features, linear_steps, steps),
                    size,
                    dtype=self.weights_[0].dtype, l1=l1, l2=l2,
                    threshold=getattr(self.learning_loss_, "threshold", 1.0), sparse=sparse,
                    n_outputs=n_outputs, norms=norms,
                )
            else:
                engine = self._engine(weighted)
                program = generic_program(
                    engine.step_function(size).model, self.weights_to_train_, steps, size,
                    penalized=penalized, l1=l1, l2=l2, loss=LOSS_NAME, update=update,
                    norms=norms,
                )
        except ValueError:
            return None
        options = session_options(self.n_threads, log_severity(self.enable_logging,
                                                               self.verbose))
        if lean is None and self._engine(weighted).gradient_.unoptimized:
            options = unoptimized_session_options(options)
        return program, cached_session(program.model, options,
                                       device_providers(self.device))

    def _lean_loss(self, penalized: tuple[str, ...], penalty: bool) -> str | None:
        r"""The :func:`~skl_ortgrad.training.program.linear_program` loss computing what
        the engine's gradient graph computes, or None.

        Its model must be the linear score :math:`s = XW + b` with the trained weights
        ``(W, b)``, in that order (:func:`~skl_ortgrad.graph.linear.linear_features`:
        its one input is the features, and the training model's the features, the label
        and possibly the sample weights), the penalty (if any) on :math:`W` alone, the
        loss exactly ``SquareLearningLoss``,
        ``NegLogLearningLoss(eps=0, probability_function='sigmoid')`` or
        ``HingeLearningLoss`` (the perceptron too), whose gradient in :math:`s` is
        :math:`s - y`, :math:`\sigma(s) - y` or :math:`-(2y - 1)` inside the margin, and
        the weights float32 or float64. Several scores (:math:`K` columns of :math:`W`:
        the one-vs-rest classes, each column its own binary loss) with the log and hinge
        losses.
        """
        loss = self.learning_loss_
        if type(loss) is SquareLearningLoss:
            kind = "squared_error"
        elif (type(loss) is NegLogLearningLoss and loss.probability_function == "sigmoid"
              and loss.eps == 0):
            kind = "log"
        elif type(loss) is HingeLearningLoss:
            kind = "hinge"
        else:
            return None
        names = self.weights_to_train_
        features = linear_features(
            check_external_data(self.model_onnx, self.external_data_dir), names,
            single_output=False)
        if (
            features is None or (penalty and penalized != (names[0],))
            or self.weights_[0].dtype not in (np.float32, np.float64)
            or (self.weights_[0].shape[1] > 1 and kind == "squared_error")
        ):
            return None
        return kind

    def _averager(self) -> Any:
        r"""``average(t, n)``: fold the weights after a batch of ``n`` rows starting at
        sample ``t`` into the running average, in place.

        The rows :math:`t .. t + n - 1` at or beyond the first averaged sample :math:`a`
        count: :math:`k = \min(n, \max(0, t + n - a))`, :math:`c \leftarrow c + k`,
        :math:`\bar w \leftarrow \bar w + (w - \bar w)\, k / c`.
        """
        start = 1 if self.average is True else int(self.average)
        if len(self.__dict__.get("average_weights_", [])) != len(self.weights_):
            # Averaging switched on after training started: it starts here.
            self.average_weights_ = [w.copy() for w in self.weights_]
            self.average_count_ = 0
        triples = [(a, w, np.empty_like(w)) for a, w in
                   zip(self.average_weights_, self.weights_, strict=True)]

        def average(t: int, n: int) -> None:
            k = min(n, max(0, t + n - start))
            if not k:
                return
            self.average_count_ += k
            share = k / self.average_count_
            for a, w, tmp in triples:
                np.subtract(w, a, out=tmp)
                np.multiply(tmp, share, out=tmp)
                np.add(a, tmp, out=a)

        return average

    def _diverged(self, diverged: _Diverged) -> None:
        last = self.train_losses_[-1] if self.train_losses_ else None
        message = (
            f"Training diverged at epoch {len(self.train_losses_) + 1}, batch "
            f"{diverged.batch}: {diverged.what} {diverged.loss} with learning rate "
            f"eta={diverged.eta:.4g}. Last finite loss: "
            f"{_fmt(diverged.last)} (mean of the previous batch), "
            f"{_fmt(last)} (mean of the last complete epoch). The weights of the last "
            "epoch that ended with a finite loss were kept; use a smaller learning rate."
        )
        if self.exc:
            raise ConvergenceError(message)
        warnings.warn(message, ConvergenceWarning, stacklevel=3)

    # -- state and evaluation ---------------------------------------------------------

    def get_state(self) -> list[np.ndarray]:
        """Return a copy of the trained weights, in the order of ``weights_to_train_``
        (the seed API's ``state_tensors = train_session.get_state()``)."""
        return [w.copy() for w in self.weights_]

    def set_state(self, state: list[np.ndarray]) -> None:
        """Set the weights from a list like :meth:`get_state`'s (copied into the buffers
        onnxruntime reads, cast to their dtype).

        Raises
        ------
        ValueError
            If the number of tensors or a shape differs from the trained weights'.
        """
        state = list(state)
        if len(state) != len(self.weights_):
            raise ValueError(
                f"set_state expects {len(self.weights_)} tensors "
                f"({self.weights_to_train_}), got {len(state)}."
            )
        for name, target, source in zip(self.weights_to_train_, self.weights_, state,
                                        strict=True):
            if np.shape(source) != target.shape:
                raise ValueError(
                    f"Weight {name!r} has shape {target.shape}, got {np.shape(source)}."
                )
        for target, source in zip(self.weights_, state, strict=True):
            np.copyto(target, source, casting="same_kind")

    def served_weights(self) -> list[np.ndarray]:
        """The weights predictions use: the average once averaging started (``average``),
        else ``weights_`` (scikit-learn's ``coef_`` rule)."""
        if self.average and self.__dict__.get("average_count_", 0) > 0:
            return self.average_weights_
        return self.weights_

    def get_checkpoint(self) -> dict[str, Any]:
        """Return a copy of the whole training state: the weights, ``t_`` and the learning
        rate's state (momentum velocities, Adam's moments)."""
        return {
            "weights": self.get_state(),
            "t": self.t_,
            "lr_state": [s.copy() for s in self.lr_state_],
            "average": [a.copy() for a in self.__dict__.get("average_weights_", [])],
            "average_count": self.__dict__.get("average_count_", 0),
        }

    def set_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        """Restore a state from :meth:`get_checkpoint` (copied into the existing buffers)."""
        self.set_state(checkpoint["weights"])
        for target, source in zip(self.lr_state_, checkpoint["lr_state"], strict=True):
            np.copyto(target, source)
        self.t_ = checkpoint["t"]
        average = checkpoint.get("average", [])
        if len(average) == len(self.__dict__.get("average_weights_", [])):
            for target, source in zip(self.average_weights_, average, strict=True):
                np.copyto(target, source)
        else:
            self.average_weights_ = [a.copy() for a in average]
        self.average_count_ = checkpoint.get("average_count", 0)

    def get_trained_onnx(self, model: onnx.ModelProto | None = None) -> onnx.ModelProto:
        """Return a copy of ``model`` (default ``model_onnx``) with the trained weights."""
        result = onnx.ModelProto()
        result.CopyFrom(self.model_onnx if model is None else model)
        trained = dict(zip(self.weights_to_train_, self.served_weights(), strict=True))
        for init in result.graph.initializer:
            if init.name in trained:
                init.CopyFrom(numpy_helper.from_array(trained[init.name], init.name))
        return result

    def losses(self, X: Any, y: Any, sample_weight: Any = None) -> np.ndarray:
        r"""The loss of every row, :math:`s_i \ell_i` (:math:`s_i = 1` without sample
        weights), with the current weights: an array of shape ``(n_samples,)``."""
        arrays, weighted = self._as_arrays(X, y, sample_weight)
        if not isinstance(arrays[0], np.ndarray):
            arrays[0] = arrays[0].toarray()
        sessions = self.__dict__.setdefault("_row_loss_sessions", {})
        key = self._loss_key(weighted)
        if key not in sessions:
            model = initializers_to_inputs(
                self._training_model(weighted, per_row=True), self.weights_to_train_
            )
            sessions[key] = cached_session(
                model,
                session_options(self.n_threads, log_severity(self.enable_logging, self.verbose)),
                device_providers(self.device),
            )
        session = sessions[key]
        names = [feed.name for feed in session.get_inputs()]
        feeds = dict(zip(names, [np.ascontiguousarray(a) for a in arrays] + self.weights_,
                         strict=True))
        return session.run(None, feeds)[0]

    def _mean_loss(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        r"""Weighted mean loss :math:`\sum_i s_i \ell_i / \sum_i s_i` on ``(X, y)``."""
        per_row = self.losses(X, y, sample_weight)
        total = float(np.sum(sample_weight)) if sample_weight is not None else len(per_row)
        return float(np.sum(per_row, dtype=np.float64)) / total if total else 0.0

    def score(self, X: Any, y: Any, sample_weight: Any = None) -> float:
        """The opposite of the weighted mean of :meth:`losses` (higher is better,
        scikit-learn's convention)."""
        return -self._mean_loss(X, y, sample_weight)

    def __getstate__(self) -> dict[str, Any]:
        # onnxruntime objects do not pickle: drop the engines, rebuilt on demand.
        state = self.__dict__.copy()
        state.pop("_engines", None)
        state.pop("_row_loss_sessions", None)
        state.pop("_last_loader", None)
        state.pop("_programs", None)
        state.pop("_program_binding", None)
        state["_skl_ortgrad_version"] = _version.__version__
        state["_state_format"] = _STATE_FORMAT
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        """Restore a pickled trainer, checking the version that pickled it.

        Raises
        ------
        ValueError
            If the state was written in a format this version cannot read (a newer
            one, or an older one with no conversion).

        Warns
        -----
        PickleVersionWarning
            If another version of skl_ortgrad wrote a state in the same format.
        """
        state = dict(state)
        # Pickles older than the parameter read no external data, as its default.
        state.setdefault("external_data_dir", None)
        state.setdefault("average", False)
        state.setdefault("weighted_mean", True)
        state.setdefault("tol_on_objective", False)
        version = state.pop("_skl_ortgrad_version", None)
        state_format = state.pop("_state_format", 1)  # pickles older than the field: 1
        current = _version.__version__
        if state_format != _STATE_FORMAT:
            raise ValueError(
                f"This model was pickled by skl_ortgrad {version} (training state format "
                f"{state_format}); skl_ortgrad {current} reads format {_STATE_FORMAT} "
                "only. Load it with skl_ortgrad "
                f"{version}, then either keep using that version or export the trained "
                "graph with to_onnx(), the portable format."
            )
        if version is not None and version != current:
            warnings.warn(
                f"This model was pickled by skl_ortgrad {version} and is loaded by "
                f"skl_ortgrad {current}; the state format is the same, but results may "
                "differ. to_onnx() is the format meant to move a model between versions.",
                PickleVersionWarning,
                stacklevel=2,
            )
        self.__dict__.update(state)
