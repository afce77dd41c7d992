r"""The choice and cache of training programs: objective, gradient backend, update rule,
:math:`k` mini-batches per call, one session built once.

An epoch runs as a training program (:mod:`skl_ortgrad.training.programs`) where the
program computes what the per-batch loop computes (:meth:`ProgramCache.bound` says when);
the program and its session are built once per model structure, loss, update rule and
configuration, shared by every trainer (:data:`PROGRAMS`), and bound to a mini-batch
loader once (:mod:`skl_ortgrad.runtime.program_run`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from onnxruntime import InferenceSession

from skl_ortgrad._cache import BoundedCache
from skl_ortgrad.gradient.forward_backward import OrtGradientForwardBackward
from skl_ortgrad.graph.linear import fixed_intercept, linear_features
from skl_ortgrad.graph.model import initializer_array, initializers_to_inputs
from skl_ortgrad.graph.weights import skeleton_digest
from skl_ortgrad.optim import (
    BaseLearningRate,
    ElasticLearningPenalty,
    EpsilonInsensitiveLearningLoss,
    HingeLearningLoss,
    LearningRateAdam,
    LearningRateSGD,
    LearningRateSGDNesterov,
    NegLogLearningLoss,
    NoLearningPenalty,
    ScaledLearningRate,
    SquareLearningLoss,
)
from skl_ortgrad.optim.passive_aggressive import PassiveAggressiveRate
from skl_ortgrad.runtime.batches import MiniBatchLoader
from skl_ortgrad.runtime.devices import device_providers
from skl_ortgrad.runtime.options import unoptimized_session_options
from skl_ortgrad.runtime.program_run import (
    LinearProgramRun,
    PassiveAggressiveRun,
    ProgramRun,
    SparseLinearProgramRun,
    SparsePassiveAggressiveRun,
)
from skl_ortgrad.runtime.sessions import cached_session
from skl_ortgrad.runtime.step import OrtGradientStep
from skl_ortgrad.runtime.threads import helper_core_free
from skl_ortgrad.training.divergence import UncheckedRows
from skl_ortgrad.training.engines import training_model
from skl_ortgrad.training.programs import (
    LinearProgram,
    PassiveAggressiveProgram,
    SparseLinearProgram,
    SparsePassiveAggressiveProgram,
    StepProgram,
    generic_program,
    linear_program,
)
from skl_ortgrad.training.setup import LOSS_NAME, TrainingSetup
from skl_ortgrad.training.state import TrainingState

#: Mini-batches per onnxruntime call of the training program (see :meth:`ProgramCache.bound`);
#: below 2, every batch is a call of its own. Measured (100k x 100 float32, batch 32,
#: ``partial_fit`` epochs against the per-batch path): 0.74x at 16, 0.73x at 32, 0.71x
#: at 64 and 128 (squared error), 0.85x / 0.83x at 16 / 32-128 (10 classes); 32 keeps
#: a chunk near 0.35 ms (binary) and 0.6 ms (10 classes), so Ctrl-C, honoured between
#: chunks, stays immediate.
PROGRAM_STEPS = 32
#: The linear program's step is a few µs at batch 32, so a chunk of ``PROGRAM_STEPS``
#: spends a tenth of its time on the call and the chunk's Python (losses, checks): it
#: runs up to ``LINEAR_STEPS`` batches per call, as long as a chunk reads at most
#: ``LINEAR_CHUNK_VALUES`` feature values (:func:`linear_steps`), about 0.35 ms of
#: work at 100 features. Measured (``partial_fit`` epochs against scikit-learn, side by
#: side, medians of 21 rounds, twice; steps 32 / 64 / 128): regression 100k x 100
#: 0.428x / 0.412x / 0.416x and 0.432x / 0.411x / 0.408x, binary hinge 50k x 100
#: 0.838x / 0.820x / 0.815x and 0.845x / 0.830x / 0.808x: 128 gains nothing more
#: (``bench/bench_program.py``, last table, on its 100k-row tasks: 0.42x / 0.40x / 0.40x
#: and 0.71x / 0.70x / 0.69x).
LINEAR_STEPS = 64
LINEAR_CHUNK_VALUES = 2**18
#: The passive-aggressive step reads one row: ``LINEAR_STEPS`` of them are a chunk of
#: 0.3 ms, whose Python costs a tenth or more. Up to ``PASSIVE_AGGRESSIVE_STEPS`` a
#: call (a few ms) instead, dense or sparse (``SPARSE_STEPS`` rows would pay the sparse
#: call's passes over all the weights every 128 rows); measured (dense, ``fit`` at
#: ``eta0=0.1``, 20 epochs, µs per row, medians of 7, 64 / 1,024 steps a call; 2-core
#: Intel Xeon, December 2026): breast cancer 4.9 / 3.6-3.8, digits 4.4 / 4.1-4.4,
#: diabetes (epsilon-insensitive) 5.5 / 4.2-4.6 (scikit-learn: 0.20, 0.92, 0.17).
PASSIVE_AGGRESSIVE_STEPS = 1024
#: Batches per call of the sparse program. Every call passes over all the weights a few
#: times besides its steps (the ``Scan``'s first copy of them, the scale folded back
#: into :math:`W`, the squared norm summed for ``tol``, the new weights taken), which 32
#: batches a call repeated often where the weights are many: a default ``fit`` of
#: ``bench/bench_sparse.py``'s 5-class text-like data (5 x 2^18 weights, batch 32)
#: took 8.3-10.3 s of CPU with 32, 7.0-9.7 s with 128 and 6.6-8.3 s with 512 batches a
#: call; its binary fit (2^18 weights, batch 128) 2.1-2.3, 2.0-2.2 and 1.9-2.3 s; an
#: epoch of its case at 100,000 columns (batch 32) 2.35x-2.49x scikit-learn's time
#: with 32, 2.12x-2.20x with 128, 2.44x-2.45x with 1,024 (at 1,000 columns 1.90x-2.05x,
#: 1.81x-1.88x, 2.00x-2.18x; ad hoc, December 2026, 2-core Intel Xeon, each setting in
#: its own process, twice). 128 keeps a call of the text-like fits near 40 ms, the
#: time Ctrl-C may wait. The weights differ by rounding from those of 32 batches a call
#: (the scale is folded into :math:`W` once a call).
SPARSE_STEPS = 128
#: Fewer full batches in an epoch run per batch: writing the epoch's per-step scalars
#: costs tens of µs, more than the calls a short epoch saves (measured, generic program:
#: ``partial_fit`` of 200 rows 1.06x slower with the program, 500 rows even, 2000 rows
#: 0.88x). The linear program runs the whole epoch, the short last batch included, in
#: one call per chunk: it pays from 4 full batches (measured, binary hinge, 30 features:
#: 200 rows even, 500 rows 0.91x, 2000 rows 0.73x).
PROGRAM_MIN_BATCHES = 16
LINEAR_MIN_BATCHES = 4
#: Where the call runs several epochs (they may run several per call:
#: :class:`~skl_ortgrad.training.epochs.EpochGroups`), the linear program pays from one
#: full batch: ``fit`` at the defaults on 40 to 127 rows
#: (8 features) 2.0x to 2.9x faster than per batch (the regressor, 22 to 38 epochs), 1.5x
#: to 2.4x (the classifier, 8 to 16 epochs), measured; a ``partial_fit`` of 32 to 127 rows
#: (one epoch) is up to 10% slower with it.
GROUPED_LINEAR_MIN_BATCHES = 1
#: Beyond this many trained values, an update rule with a state (momentum, Adam) runs per
#: batch: its update is elementwise arithmetic over every value, which numpy does faster
#: than onnxruntime's kernels (and the exact float32 square root of Adam costs two casts
#: in the graph), while the program only saves a fixed cost per batch. Measured per
#: epoch, program / per batch (``bench/bench_program.py``, update-rules table: 20k x 100,
#: batch 32): a linear model (101 values) with Nesterov 0.98x, with Adam 0.88x; MLPs with
#: Adam, 100-16-1 (1,633 values) 0.99x, 100-128-1 (12,929 values) 1.30x (1.09x at batch
#: 200 on 50k rows, ad hoc).
PROGRAM_MAX_STATE = 1024
#: The per-batch pieces the program computes in its graph: the step's run, the updates of
#: the rules whose ``emit_update`` writes what their ``stepper`` does (plain SGD, momentum
#: and Nesterov, Adam; possibly scaled), the passive-aggressive step (the linear
#: program's form) and the elastic penalty's update (its cumulative L1 step after the
#: gradient step too). Captured at import:
#: when any of them is replaced afterwards (a subclass overriding it, an instrumented
#: method), the program would not do what the replacement does, and the per-batch loop
#: runs it.
PROGRAM_PIECES = {
    "run": OrtGradientStep.run,
    "rates": (LearningRateSGD.stepper, LearningRateSGDNesterov.stepper,
              LearningRateAdam.stepper),
    "scaled": ScaledLearningRate.stepper,
    "passive_aggressive": PassiveAggressiveRate.stepper,
    "penalties": (ElasticLearningPenalty.stepper, NoLearningPenalty.stepper),
    "after": ElasticLearningPenalty.after_step,
}


#: Training programs and their sessions, shared by every trainer of the same model
#: structure (weights by shape only), loss, update rule and configuration: a grid search
#: of small MLP fits built one per fit (1.7 ms of a 12 ms digits fit).
PROGRAMS: BoundedCache[tuple[Any, InferenceSession] | None] = BoundedCache(64)


#: The runtime's binding of each kind of program.
BINDINGS: dict[type, type[ProgramRun]] = {
    StepProgram: ProgramRun, LinearProgram: LinearProgramRun,
    SparseLinearProgram: SparseLinearProgramRun,
    PassiveAggressiveProgram: PassiveAggressiveRun,
    SparsePassiveAggressiveProgram: SparsePassiveAggressiveRun,
}


def linear_steps(batch_rows: int, n_features: int, most: int, least: int) -> int:
    """Batches per call of the linear program: the largest power of two up to ``most``
    (``LINEAR_STEPS``) whose chunk reads at most ``LINEAR_CHUNK_VALUES`` feature
    values (``steps * batch_rows * n_features``), and never fewer than ``least`` (the
    other programs' ``PROGRAM_STEPS``) unless ``most`` is."""
    fit = max(1, LINEAR_CHUNK_VALUES // (batch_rows * n_features))
    return max(min(most, 1 << (fit.bit_length() - 1)), min(least, most))


def steps_by_training_loss(rate: PassiveAggressiveRate, loss: Any) -> bool:
    """Whether the passive-aggressive ``rate`` sizes its steps by the training ``loss``
    (the linear program computes both from one loss)."""
    return rate.loss is loss or (rate.loss is None and type(loss) is HingeLearningLoss
                                 and float(loss.threshold) == 1.0)


def penalty_scalars(penalty: Any) -> tuple[float, float, int]:
    """The elastic penalty's ``l1``, ``l2`` and ``rows`` a program's schedule takes (no
    decay, no threshold without it)."""
    if isinstance(penalty, ElasticLearningPenalty):
        return float(penalty.l1), float(penalty.l2), int(penalty.rows)
    return 0.0, 0.0, 1


def frozen_intercept(setup: TrainingSetup, state: TrainingState) -> str | None:
    r"""The intercept :math:`b` of a linear score :math:`s = XW + b` whose :math:`W` alone
    trains (``fit_intercept=False``): the initializer's name
    (:func:`~skl_ortgrad.graph.linear.fixed_intercept`), which the linear program reads
    as a weight it never steps (its step factor 0); None otherwise."""
    if len(state.names) != 1:
        return None
    return fixed_intercept(setup.checked_model(), state.names[0])


def lean_loss(setup: TrainingSetup, state: TrainingState, penalized: tuple[str, ...],
              penalty: bool, passive_aggressive: bool = False,
              intercept: str | None = None) -> str | None:
    r"""The :func:`~skl_ortgrad.training.programs.linear_program` loss computing what the
    engine's gradient graph computes, or None.

    Its model must be the linear score :math:`s = XW + b` with the trained weights
    ``(W, b)``, in that order (:func:`~skl_ortgrad.graph.linear.linear_features`: its one
    input is the features, and the training model's the features, the label and possibly
    the sample weights), the penalty (if any) on :math:`W` alone, the loss exactly
    ``SquareLearningLoss``, ``NegLogLearningLoss(eps=0, probability_function='sigmoid')``
    or ``HingeLearningLoss`` (the perceptron too), whose gradient in :math:`s` is
    :math:`s - y`, :math:`\sigma(s) - y` or :math:`-(2y - 1)` inside the margin, and the
    weights float32 or float64. Several scores (:math:`K` columns of :math:`W`: the
    one-vs-rest classes, each column its own binary loss) with the log and hinge losses.
    ``passive_aggressive``: the kind of the program's passive-aggressive step, the hinge
    loss or exactly ``EpsilonInsensitiveLearningLoss`` (one score). ``intercept``: the
    trained weight is :math:`W` alone, :math:`b` that fixed initializer
    (:func:`frozen_intercept`).
    """
    loss = setup.loss
    if passive_aggressive:
        if type(loss) is EpsilonInsensitiveLearningLoss:
            kind = "epsilon_insensitive"
        elif type(loss) is HingeLearningLoss:
            kind = "hinge"
        else:
            return None
    elif type(loss) is SquareLearningLoss:
        kind = "squared_error"
    elif (type(loss) is NegLogLearningLoss and loss.probability_function == "sigmoid"
          and loss.eps == 0):
        kind = "log"
    elif type(loss) is HingeLearningLoss:
        kind = "hinge"
    else:
        return None
    names, weights = state.names, state.weights
    features = linear_features(setup.checked_model(),
                               names if intercept is None else (*names, intercept),
                               single_output=False)
    if (
        features is None or (penalty and penalized != (names[0],))
        or weights[0].dtype not in (np.float32, np.float64)
        or (weights[0].shape[1] > 1 and kind in ("squared_error", "epsilon_insensitive"))
    ):
        return None
    return kind


#: The sparse program applies the cumulative L1 rule to the whole of :math:`W` (kept
#: where the batch stores the feature) where a batch stores at least this many values
#: per feature on average, at the gathered columns otherwise (the rule's work follows
#: the features, or the stored values: :func:`~skl_ortgrad.training.programs.sparse.
#: sparse_linear_program`'s ``whole``).
WHOLE_RULE_STORED = 0.5


class ProgramCache:
    """The training programs of one trainer, and the binding of the last one used.

    Parameters
    ----------
    engine : callable
        ``engine(weighted)``: the trainer's forward/backward engine of model + loss, whose
        static gradient graph the generic program runs.
    """

    def __init__(self, engine: Callable[[bool], OrtGradientForwardBackward]) -> None:
        self._engine = engine
        # The fixed intercept the linear program reads (_fixed): one buffer, its
        # binding's.
        self._intercept: np.ndarray | None = None
        self._programs: dict[tuple, tuple[Any, InferenceSession] | None] = {}
        self._binding: tuple[MiniBatchLoader, tuple, ProgramRun] | None = None
        self._bindings: dict[bool, tuple[MiniBatchLoader, tuple, ProgramRun]] = {}
        #: Set when :meth:`bound` found no program that reads unchecked rows as given:
        #: the trainer's later calls have them checked and cast first
        #: (:attr:`~skl_ortgrad.training.trainer.Trainer.reads_rows_as_given`).
        self.rows_cast = False

    @property
    def binding(self) -> ProgramRun | None:
        """The program the last :meth:`bound` returned (None: it returned None, or none
        ran yet)."""
        return None if self._binding is None else self._binding[2]

    def bound(self, setup: TrainingSetup, state: TrainingState, penalized: list[np.ndarray],
              loader: MiniBatchLoader, weighted: bool, several: bool = False,
              norms: bool = False, unweighted: bool = False,
              unchecked: bool = False) -> ProgramRun | None:
        """The training program bound to ``loader``, or None where the per-batch path
        must run.

        It applies where it computes what the per-batch loop computes: on the CPU, dense
        data (sparse data: the linear program's sparse form only), at least
        ``LINEAR_MIN_BATCHES`` (linear program; ``GROUPED_LINEAR_MIN_BATCHES`` when the
        call runs ``several`` epochs, with or without validation) or ``PROGRAM_MIN_BATCHES``
        (generic program) full batches (the linear program: :math:`W` and :math:`b`
        trained, or :math:`W` alone beside a fixed :math:`b`, :func:`frozen_intercept`),
        the update of plain SGD, momentum (Nesterov's or
        not) or Adam (possibly in a ``ScaledLearningRate``; the linear program: plain SGD
        only; momentum and Adam up to ``PROGRAM_MAX_STATE`` trained values, with their
        state packed) or the passive-aggressive step (the linear program's form, dense
        or sparse, up to ``PASSIVE_AGGRESSIVE_STEPS`` rows a call: its loss the training
        loss), no penalty or the
        elastic one (its cumulative L1 part too: the program carries its :math:`q` of
        every penalized weight, a buffer of ``state.penalty`` it reads and writes, and
        is fed its total :math:`u` per step; on sparse data the sparse program applies
        it at each step's stored features only, as the per-batch path), no averaging,
        ``verbose < 2`` (no per-batch report), and the stock per-batch pieces
        (:data:`PROGRAM_PIECES`). ``norms``: the program also writes the norms of the
        penalized weights (the ``tol`` rule watches the objective). ``unweighted``: the
        epochs also need the rows' unweighted losses (:attr:`~skl_ortgrad.training.
        stopping.StoppingPolicy.unweighted`): the linear program computes them from its
        per-row values, the generic one runs the model of the unweighted row losses
        beside the gradient graph. The program and its session are built once per model
        structure, loss, update rule and configuration, and shared by every
        trainer (:data:`PROGRAMS`); its feeds are bound once per loader and weight
        buffers (and again when the loader serves other features, but for new dense
        features of the same layout, which change only the features' feed:
        :meth:`~skl_ortgrad.runtime.program_run.ProgramRun.follow`).

        ``unchecked``: the call's features were not checked (dense rows read as given,
        :meth:`~skl_ortgrad.training.trainer.Trainer.cast`, possibly of another type
        than the weights', which the linear program casts batch by batch): only the
        dense linear program (its passive-aggressive form too) runs such a call.

        Raises
        ------
        UncheckedRows
            For unchecked features where the dense linear program does not run the call
            (``permanent``; :attr:`rows_cast` is then set).
        """
        self._binding = None
        bound = self._bound(setup, state, penalized, loader, weighted, several, norms,
                            unweighted)
        if unchecked and type(bound) not in (LinearProgramRun, PassiveAggressiveRun):
            self.rows_cast = True
            raise UncheckedRows(permanent=True)
        return bound

    def _bound(self, setup: TrainingSetup, state: TrainingState,
               penalized: list[np.ndarray], loader: MiniBatchLoader, weighted: bool,
               several: bool, norms: bool, unweighted: bool) -> ProgramRun | None:
        """:meth:`bound`, whatever the features' type."""
        size = int(setup.batch_size)
        least_linear = GROUPED_LINEAR_MIN_BATCHES if several else LINEAR_MIN_BATCHES
        rate, penalty = setup.rate, setup.penalty
        scaled = type(rate).stepper is PROGRAM_PIECES["scaled"]
        inner = rate.learning_rate if scaled else rate
        passive = (not scaled
                   and type(inner).stepper is PROGRAM_PIECES["passive_aggressive"])
        full = loader.rows.count(size)
        if (
            PROGRAM_STEPS < 2 or full < min(PROGRAM_MIN_BATCHES, least_linear)
            or setup.average or setup.verbose >= 2 or not setup.on_cpu
            or OrtGradientStep.run is not PROGRAM_PIECES["run"]
            or not (passive or type(inner).stepper in PROGRAM_PIECES["rates"])
            or (passive and not steps_by_training_loss(inner, setup.loss))
            or type(penalty).stepper not in PROGRAM_PIECES["penalties"]
            or (penalty.applies_after_step()
                and type(penalty).after_step is not PROGRAM_PIECES["after"])
            or (inner.states_per_weight
                and sum(w.size for w in state.weights) > PROGRAM_MAX_STATE)
        ):
            return None
        # In the order of penalized, that of the penalty's state (its q per weight).
        names = tuple(name for p in penalized
                      for name, w in zip(state.names, state.weights, strict=True) if w is p)
        elastic = isinstance(penalty, ElasticLearningPenalty)
        cumulative = penalty.applies_after_step()
        whole = bool(cumulative and loader.sparse and size * loader.n_stored
                     >= WHOLE_RULE_STORED * loader.n_rows * loader.n_features)
        # Dense features of another type than the weights' (float64 rows of a float32
        # model, read as given): only the linear program reads them, casting each batch
        # (or reading them staged: cast by the helper thread).
        features = None if loader.sparse else loader.features.dtype
        # A fixed intercept beside W, trained alone (fit_intercept=False): a weight the
        # linear program reads and never steps.
        intercept = frozen_intercept(setup, state)
        # Where an epoch is several calls of the dense linear program (W and b, trained
        # or fixed: the other programs do not depend on it) and a core is free beside
        # the calls' threads, the helper thread stages their rows, which the program's
        # staged form reads.
        most, sparse_most = ((PASSIVE_AGGRESSIVE_STEPS, PASSIVE_AGGRESSIVE_STEPS) if passive
                             else (LINEAR_STEPS, SPARSE_STEPS))
        staged = (not loader.sparse and (len(state.weights) == 2 or intercept is not None)
                  and LinearProgramRun.stages(
                      len(loader.rows),
                      linear_steps(size, loader.n_features, most, PROGRAM_STEPS),
                      size, loader.n_features)
                  and helper_core_free(int(setup.n_threads)))
        key = (weighted, size, PROGRAM_STEPS, most, sparse_most, loader.sparse,
               features, staged,
               names,
               elastic and penalty.l1 > 0 and not cumulative, elastic and penalty.l2 > 0,
               cumulative, whole, norms, unweighted, intercept, inner.update_key(),
               setup.loss_key(weighted))
        if key not in self._programs:
            shared = (key, skeleton_digest(setup.model, state.names),
                      setup.external_data_dir, setup.weight_name, int(setup.n_threads),
                      setup.severity, str(setup.device))
            self._programs[key] = PROGRAMS.get(
                shared, lambda: self._build(setup, state, *key[:-2], inner))
        built = self._programs[key]
        if built is None or full < (least_linear if isinstance(built[0], LinearProgram)
                                    else PROGRAM_MIN_BATCHES):
            return None
        states = setup.rate.packed_states(state.rate_state, len(state.weights))
        if states is None:
            # An unpickled state is not packed: it trains per batch.
            return None
        arrays = [*state.weights, *states, *state.penalty[1:]]
        if intercept is not None and isinstance(built[0], LinearProgram):
            arrays.insert(1, self._fixed(setup, intercept, state.weights[0].dtype))
        # One binding of the loader per form, staged or not (the free cores may change
        # from call to call).
        self._bindings = {form: bound for form, bound in self._bindings.items()
                          if bound[0] is loader}
        bound = self._bindings.get(staged)
        if bound is None or bound[1] != key or not bound[2].fits(
                loader) or not bound[2].binds(arrays):
            program, session = built
            bound = loader, key, BINDINGS[type(program)](program, session, loader, arrays)
            self._bindings[staged] = bound
        bound[2].follow(loader)
        self._binding = bound
        return bound[2]

    def _fixed(self, setup: TrainingSetup, name: str, dtype: np.dtype) -> np.ndarray:
        """The fixed intercept ``name`` of the model, in ``dtype``, in one buffer that
        calls refill (the binding reads its memory): the program never steps it."""
        value = initializer_array(setup.checked_model(), name).astype(dtype).ravel()
        if (self._intercept is None or self._intercept.shape != value.shape
                or self._intercept.dtype != value.dtype):
            self._intercept = value
        else:
            np.copyto(self._intercept, value)
        return self._intercept

    def _build(
        self, setup: TrainingSetup, state: TrainingState, weighted: bool, size: int,
        steps: int, linear_steps_most: int, sparse_steps: int, sparse: bool,
        features: np.dtype | None,
        staged: bool, penalized: tuple[str, ...],
        l1: bool, l2: bool, cumulative: bool, whole: bool, norms: bool, unweighted: bool,
        intercept: str | None, update: BaseLearningRate,
    ) -> tuple[StepProgram | LinearProgram, InferenceSession] | None:
        """The program of ``steps`` batches of ``size`` rows (the linear program:
        :func:`linear_steps`, up to ``linear_steps_most``; its sparse form for ``sparse``
        features, ``sparse_steps`` batches, its cumulative L1 rule on the ``whole`` of
        :math:`W`) updating with
        ``update`` and its session (the step's options); None
        for a gradient graph the program cannot hold (control flow), for sparse
        features out of the linear program's reach (or of its int32 columns), and for
        dense ``features`` of another type than the weights' out of its reach (it casts
        each batch it gathers, or, ``staged``, reads the rows its binding staged:
        :meth:`~skl_ortgrad.runtime.program_run.LinearProgramRun.stages`).

        The hand-written linear step (:func:`~skl_ortgrad.training.programs.
        linear_program`, 6 to 11 nodes instead of the gradient graph's 30-odd; equal to
        rounding in float32, not bit for bit) where it computes the same function
        (:func:`lean_loss`), else the engine's static gradient graph plus the updates
        (:func:`~skl_ortgrad.training.programs.generic_program`); plain SGD with
        ``step_factors`` only in the linear program, and there only as a factor of the
        intercept's step. With a fixed ``intercept`` (:func:`frozen_intercept`), the
        linear program reads it as its second weight, its step factor 0.
        """
        # The linear program writes plain SGD's update and the passive-aggressive step
        # itself, with a step factor of the intercept (its second weight) if any; the
        # generic program writes neither.
        passive = type(update).stepper is PROGRAM_PIECES["passive_aggressive"]
        factors = (update.step_factors
                   if isinstance(update, LearningRateSGD | PassiveAggressiveRate) else None)
        lean = (lean_loss(setup, state, penalized, l1 or l2 or cumulative, passive, intercept)
                if (type(update).stepper is LearningRateSGD.stepper
                    # The passive-aggressive step reads the fixed intercept too.
                    or (passive and (update.intercept is None) == (intercept is None)))
                and (factors is None or (len(factors) == 2 and float(factors[0]) == 1.0))
                else None)
        dtype = state.weights[0].dtype
        # Not "in (None, dtype)": numpy's dtype equals None where it is float64.
        wide = None if features is None or features == dtype else features
        if lean is None and (passive or factors is not None or wide is not None):
            return None
        # The sparse program's columns are int32.
        if sparse and (lean is None or state.weights[0].shape[0] > np.iinfo(np.int32).max):
            return None
        try:
            if lean is not None:
                n_features, n_outputs = state.weights[0].shape
                program = linear_program(
                    lean, n_features,
                    sparse_steps if sparse
                    else linear_steps(size, n_features, linear_steps_most, steps),
                    size, dtype=dtype, l1=l1, l2=l2,
                    threshold=getattr(setup.loss, "epsilon" if lean == "epsilon_insensitive"
                                      else "threshold", 1.0), sparse=sparse,
                    n_outputs=n_outputs, norms=norms, cumulative=cumulative, whole=whole,
                    intercept_step=(0.0 if intercept is not None
                                    else 1.0 if factors is None else float(factors[1])),
                    features_dtype=None if staged else wide, staged=staged,
                    passive_aggressive=(update.variant, float(update.C)) if passive else None,
                )
            else:
                program = generic_program(
                    self._engine(weighted).step_function(size).model, state.names, steps,
                    size, penalized=penalized, l1=l1, l2=l2, loss=LOSS_NAME, update=update,
                    norms=norms, cumulative=cumulative,
                    unweighted=initializers_to_inputs(training_model(
                        setup, state.weights[0].dtype, False, per_row=True), state.names)
                    if unweighted else None,
                )
        except ValueError:
            return None
        options = setup.session_options()
        if lean is None and self._engine(weighted).gradient_.unoptimized:
            options = unoptimized_session_options(options)
        return program, cached_session(program.model, options,
                                       device_providers(setup.device))
