r"""Epoch runners: one pass over a mini-batch loader, per batch or by a training program.

For every mini-batch :math:`B` of :math:`n_B` rows (in the optimizer's order, scikit-learn's):

1. the loss and gradients of the batch, :math:`L_B = \sum_{i \in B} s_i\, \ell(y_i, f(x_i;
   W))` and :math:`g = \partial (\sigma_B L_B) / \partial W` with :math:`\sigma_B` the
   loader's scale (one over the batch's summed weights, the weighted mean's gradient);
2. :math:`W \leftarrow \mathrm{penalty}(W, \eta_t)` then :math:`W \leftarrow
   \mathrm{rate}(W, g, \eta_t)`, then the penalty's part after the step where it has one
   (the cumulative L1 penalty), in place, with :math:`\eta_t` the schedule at :math:`t`,
   then :math:`t \leftarrow t + n_B`.

:class:`PerBatchEpoch` does it with one onnxruntime call per batch (the engine's step) and
numpy updates; :class:`ProgramEpoch` runs the batches ``program.steps`` per call
(:mod:`skl_ortgrad.training.programs`), each chunk's new weights kept as it ends, the
losses of all the chunks checked once after them, the first chunk with a non-finite loss
rewound and replayed batch by batch; :class:`EpochGroups` runs several epochs of the
linear program in one call. Each returns an :class:`EpochResult` per epoch and raises
:class:`~skl_ortgrad.training.divergence.Diverged` (at the exact batch, before its update)
or :class:`~skl_ortgrad.training.divergence.TornUpdate` (an exception in the middle of an
update), after which the trainer restores the start of the epoch. Ctrl-C
(:class:`~skl_ortgrad.training.interrupt.DeferredInterrupt`) is honoured between batches,
or between chunks once the chunks run are checked.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from skl_ortgrad.gradient.forward_backward import OrtGradientForwardBackward
from skl_ortgrad.runtime.batches import MiniBatchLoader
from skl_ortgrad.runtime.program_run import LinearProgramRun, ProgramRun
from skl_ortgrad.runtime.random_state import rewinder
from skl_ortgrad.training.averaging import Averager
from skl_ortgrad.training.divergence import Diverged, TornUpdate, UncheckedRows, mean
from skl_ortgrad.training.interrupt import DeferredInterrupt
from skl_ortgrad.training.program_choice import penalty_scalars
from skl_ortgrad.training.progress import BatchProgress
from skl_ortgrad.training.setup import TrainingSetup
from skl_ortgrad.training.state import TrainingState


@dataclass(frozen=True)
class EpochResult:
    """An epoch's mean loss (as :func:`loss_shares` weighs it) and, when the ``tol`` rule
    watches the objective, the mean over its rows of the penalty at the weights their
    batch started from (0.0 otherwise); ``unweighted``, where the rule watches it
    (:attr:`EpochInputs.row_losses`), the mean over the rows of their unweighted losses
    at the weights their batch started from."""

    loss: float
    penalty: float
    unweighted: float | None = None

    @property
    def objective(self) -> float:
        """What the ``tol`` rule watches without validation data: the loss (the
        unweighted one where computed) plus the penalty."""
        return (self.loss if self.unweighted is None else self.unweighted) + self.penalty


def loss_shares(loader: MiniBatchLoader) -> tuple[list[float], float]:
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


def epoch_rates(rate: Any, state: TrainingState, loader: MiniBatchLoader,
                epochs: int = 1) -> np.ndarray:
    """The learning rate of every batch of ``epochs`` epochs of ``loader`` from the
    state's ``t`` (the adaptive divisor applied); a rate held per epoch (``per_epoch``)
    takes the epoch's first batch's."""
    within = np.zeros_like(loader.starts) if rate.per_epoch else loader.starts
    offsets = (np.arange(epochs)[:, None] * sum(loader.rows) + within).ravel()
    return rate.schedule(state.t + offsets) * rate.eta_factor(state.rate_state)


def step_penalties(program: ProgramRun, penalty: Any, first: int, count: int,
                   rows: Sequence[int]) -> np.ndarray:
    """The elastic penalty at the weights of steps ``first .. first + count - 1`` of a
    program that writes the norms, times each step's ``rows``."""
    l1, l2, _ = penalty_scalars(penalty)
    return program.step_penalties(first, count, l1, l2) * np.asarray(rows)


def program_scalars(setup: TrainingSetup, state: TrainingState,
                    etas: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """The per-step scalars a program reads besides the schedule's, for the steps of rates
    ``etas`` from ``state``: the update rule's and, with the cumulative L1 penalty, its
    totals :math:`u_j` (kind ``l1_total``); and those totals (None without)."""
    extra = dict(setup.rate.step_scalars(etas, state.rate_state))
    totals = setup.penalty.after_step_totals(state.penalty, etas)
    if totals is not None:
        extra["l1_total"] = totals
    return extra, totals


def take_steps(program: ProgramRun, state: TrainingState, rate: Any, steps: int,
               samples: int, total: float | None = None) -> None:
    """Make a program call's new weights and states (the cumulative L1 penalty's
    :math:`q` among them) the current ones: ``steps`` batches of ``samples`` rows in
    all ran, after which the penalty's total :math:`u` is ``total`` (None: no such
    penalty)."""
    for array, new in zip(program.weights, program.new_weights, strict=True):
        np.copyto(array, new)
    rate.advance_state(state.rate_state, steps)
    state.t += samples
    if total is not None:
        state.penalty[0][...] = total


@dataclass
class EpochInputs:
    """What an epoch runner reads and updates.

    Attributes
    ----------
    setup : TrainingSetup
    state : TrainingState
        Updated in place.
    penalized : list of numpy.ndarray
        The weights (of ``state``) the penalty applies to.
    loader : MiniBatchLoader
    engine : callable
        ``engine()``: the forward/backward engine of the per-batch path, built on first
        use (an epoch the program runs whole needs none).
    objective : bool
        Also sum the penalty's value at every batch's weights (the ``tol`` rule watches
        the objective).
    epoch_number : int
        The 1-based number of the epoch in the trainer's history (``verbose >= 2``
        reports).
    row_losses : callable, optional
        ``row_losses(features, labels)``: the unweighted loss of every row at the current
        weights, given where the ``tol`` rule watches the rows' unweighted losses
        (:attr:`~skl_ortgrad.training.stopping.StoppingPolicy.unweighted`: scikit-learn's
        SGD objective with sample weights); the per-batch path calls it at every batch,
        before its update; a program computes them itself (the linear one from its
        per-row values, the generic one in its step: ``ProgramCache.bound``'s
        ``unweighted``).
    unchecked : bool
        The features were not checked (rows read as given, ``ProgramCache.bound``'s
        ``unchecked``): a program's non-finite loss raises
        :class:`~skl_ortgrad.training.divergence.UncheckedRows` instead of being
        replayed batch by batch.
    """

    setup: TrainingSetup
    state: TrainingState
    penalized: list[np.ndarray]
    loader: MiniBatchLoader
    engine: Callable[[], OrtGradientForwardBackward]
    objective: bool = False
    epoch_number: int = 1
    row_losses: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None
    unchecked: bool = False


class PerBatchEpoch:
    """One epoch, one onnxruntime call per batch (the engine's step, loss and gradients
    into buffers allocated once) and the in-place updates of steppers validated once;
    the schedule is computed for the whole epoch at once."""

    def __init__(self, inputs: EpochInputs) -> None:
        self.inputs = inputs
        setup, self._state, loader = inputs.setup, inputs.state, inputs.loader
        self._rate, self._penalty = setup.rate, setup.penalty
        self._rows = loader.rows
        # The schedule at the t of every batch; Python floats keep float32 updates
        # float32.
        self._eta_array = epoch_rates(self._rate, self._state, loader)
        self._etas = self._eta_array.tolist()
        self._averager = Averager(self._state, setup.average) if setup.average else None
        self._shares: list[float] = []
        self._divisor = 0.0
        self._total, self._previous, self._penalty_total = 0.0, None, 0.0
        self._unweighted_total = 0.0
        self._updating = False
        # verbose >= 2: the loss and learning rate of every batch.
        self._detail = (BatchProgress(len(self._rows), inputs.epoch_number)
                        if setup.verbose >= 2 else None)
        self._pieces: tuple | None = None
        self._feed: Callable[[int], Any] | None = None

    def run(self, interrupt: DeferredInterrupt) -> EpochResult:
        """Run the epoch; see the module's docstring for what it raises."""
        self._feed = self.inputs.loader.epoch(features=self._needs_features())
        # After the draw: the batches' summed weights follow the permutation.
        self._shares, self._divisor = loss_shares(self.inputs.loader)
        try:
            self._body(interrupt)
        except BaseException as exc:
            if self._updating:
                raise TornUpdate() from exc
            raise
        finally:
            if self._detail is not None:
                self._detail.close()
        if not all(np.isfinite(w).all() for w in self._state.weights):
            # Finite losses but an update that overflowed (the next forward would fail).
            last = mean(self._previous, self.inputs.loader.totals[-1])
            raise Diverged(len(self._rows) - 1, np.inf, self._etas[-1], last,
                           what="the weights are")
        n_rows = self.inputs.loader.n_rows
        return EpochResult(mean(self._total, self._divisor), self._penalty_total / n_rows,
                           None if self.inputs.row_losses is None
                           else self._unweighted_total / n_rows)

    def _needs_features(self) -> bool:
        return True

    def _body(self, interrupt: DeferredInterrupt) -> None:
        self._batches(0, len(self._rows), interrupt)

    def _built_pieces(self) -> tuple:
        """What the per-batch path runs: the engine's step ``run`` of every batch, the
        loss buffer, the rate's and the penalty's steppers (validated here), and the
        penalty's term of the loss (``loss_term``: None for a proximal penalty), and its
        step after the gradient step (``after_step``: None for most) with the weights
        the features index (:meth:`_indexed_by_features`)."""
        if self._pieces is None:
            engine, state = self.inputs.engine(), self._state
            # A static step for batch_size rows, the general one for any other count
            # (the last batch, calls with fewer rows): two sessions at most.
            size = int(self.inputs.setup.batch_size)
            steps = {n: engine.step_function(size if n == size else None)
                     for n in set(self._rows)}
            # All the steps of an engine write into the same buffers.
            loss_buffer, *gradients = steps[self._rows[0]].outputs
            penalized = self.inputs.penalized
            self._pieces = (
                [steps[n].run for n in self._rows], loss_buffer,
                self._rate.stepper(state.weights, gradients, state.rate_state),
                self._penalty.stepper(penalized),
                self._penalty.loss_term(penalized, [
                    next(g for w, g in zip(state.weights, gradients, strict=True) if w is p)
                    for p in penalized]),
                self._penalty.after_step(penalized, state.penalty),
                self._indexed_by_features(penalized))
        return self._pieces

    def _indexed_by_features(self, penalized: list[np.ndarray]) -> list[bool] | None:
        """Sparse features: which of the ``penalized`` weights the features index along
        their first axis (the first trained weight, the linear models' ``[d, K]``
        coefficients, when penalized and that long), whose cumulative L1 step touches the
        features a batch stores only, as scikit-learn's per sample; None for dense
        features (every feature present)."""
        loader = self.inputs.loader
        if not loader.sparse:
            return None
        first = self._state.weights[0]
        return [w is first and w.shape[0] == loader.n_features for w in penalized]

    def _batches(self, first: int, stop: int, interrupt: DeferredInterrupt) -> None:
        """The per-batch path over batches ``first .. stop - 1``."""
        if first >= stop:
            return
        loader, state, rows = self.inputs.loader, self._state, self._rows
        loader.fill_features()
        runs, loss_buffer, step, decay, term, after, indexed = self._built_pieces()
        totals, scales, etas = loader.totals, loader.scales, self._etas
        penalized = self.inputs.penalized if self.inputs.objective else []
        row_losses = self.inputs.row_losses
        take = step.take if self._rate.reads_batch else None
        for batch in range(first, stop):
            if interrupt.pending:
                # Ctrl-C arrived during the previous batch: stop at its end.
                raise KeyboardInterrupt
            runs[batch](self._feed(batch))
            loss = float(loss_buffer)
            if term is not None:
                # Gradients are scratch: the weights are still untouched.
                loss += term(float(scales[batch]))
            eta = etas[batch]
            if not math.isfinite(loss):
                last = (None if self._previous is None
                        else mean(self._previous, totals[batch - 1]))
                raise Diverged(batch, loss, eta, last)
            if penalized:
                self._penalty_total += rows[batch] * self._penalty.penalty_loss(penalized)
            if row_losses is not None:
                self._unweighted_total += float(np.sum(
                    row_losses(*loader.batch_arrays(batch)), dtype=np.float64))
            if take is not None and not take(*loader.batch_arrays(batch)):
                # A skipped batch (a passive-aggressive row of no norm) counts its loss
                # only, as scikit-learn's.
                self._total += loss * self._shares[batch]
                self._previous = loss
                continue
            self._updating = True
            decay(eta)
            step(eta)
            state.t += rows[batch]
            if self._averager is not None:
                self._averager(state.t - rows[batch], rows[batch])
            if after is not None:
                # After the average, scikit-learn's order; on sparse features, the
                # batch's stored features only.
                after(eta, None if indexed is None else [
                    loader.stored_columns(batch) if by_features else None
                    for by_features in indexed])
            self._updating = False
            self._total += loss * self._shares[batch]
            self._previous = loss
            if self._detail is not None:
                self._detail.update(batch, mean(loss, totals[batch]), eta)


#: The most bytes of state (weights, update states) a program's epoch copies at every
#: chunk's start, to go back there; beyond, each chunk's losses are checked as it ends
#: (:class:`ProgramEpoch`). Measured (2-core Intel Xeon, December 2026): a chunk's check
#: took 8 µs (1,024 rows), a copy of 256 KiB 9 µs, of 1 MiB 58 µs, and in an epoch that
#: keeps them all, as it must, a copy of 5 MiB (a 5-class model of 2^18 hashed columns)
#: 2.7 ms on new pages, a quarter of its chunk's call.
CHECKPOINT_MAX_BYTES = 2**18


class ProgramEpoch(PerBatchEpoch):
    """One epoch by a training program, ``program.steps`` batches per call, computing the
    same updates (to rounding): each chunk's new weights and update states (velocities,
    moments; the rule's counters advance) replace the current ones as it ends, and the
    losses of all the chunks run are checked at once after them; at the first chunk with
    a non-finite loss, the weights, states and ``t`` go back to its start and the chunk is
    replayed batch by batch, which stops at the exact batch with the per-batch path's
    state and message (or, finding every loss finite, goes on with the next chunks). The
    batches the program does not run (a short last one of the generic program) run per
    batch.

    Going back needs a copy of the state at every chunk's start. Where the state holds
    more than ``CHECKPOINT_MAX_BYTES``, each chunk's losses are checked as it ends
    instead, before its new weights replace the current ones: a chunk with a non-finite
    loss is not taken, and the replay starts from the state as it is.

    Parameters
    ----------
    inputs : EpochInputs
    program : ProgramRun
        The program bound to the loader (:meth:`~skl_ortgrad.training.program_choice.
        ProgramCache.bound`).
    """

    def __init__(self, inputs: EpochInputs, program: ProgramRun) -> None:
        super().__init__(inputs)
        self.program = program
        self._checkpoints = self._state.nbytes <= CHECKPOINT_MAX_BYTES
        # The cumulative L1 penalty's total after every step (program_scalars).
        self._totals: np.ndarray | None = None

    def _needs_features(self) -> bool:
        return self.program.needs_features

    def _body(self, interrupt: DeferredInterrupt) -> None:
        program, rows = self.program, self._rows
        etas = program.stepped_rates(self._eta_array, self.inputs.loader)
        extra, self._totals = program_scalars(self.inputs.setup, self._state, etas)
        program.schedule(etas, self.inputs.loader,
                         *penalty_scalars(self._penalty), extra)
        chunk = 0
        while chunk < len(program.chunks):
            if interrupt.pending:
                raise KeyboardInterrupt
            # The chunks are kept unchecked as they run: an exception among them goes
            # back to the start of the epoch (TornUpdate).
            self._updating = True
            ran, starts, losses = self._run_chunks(chunk, interrupt)
            self._updating = False
            first = program.chunks[chunk][0]
            bad = first_nonfinite_chunk(losses, program.chunks[chunk:])
            kept = losses[:program.chunks[chunk + bad][0] - first
                          if bad is not None else len(losses)].tolist()
            # One by one, as the per-batch path sums them: the same epoch loss.
            for loss, share in zip(kept, self._shares[first:first + len(kept)], strict=True):
                self._total += loss * share
            self._previous = kept[-1] if kept else self._previous
            if self.inputs.objective and kept:
                self._penalty_total += float(step_penalties(
                    program, self._penalty, first, len(kept), rows[first:first + len(kept)]
                ).sum())
            if self.inputs.row_losses is not None and kept:
                # The program's own (bound with unweighted=True).
                self._unweighted_total += float(program.step_losses(
                    first, len(kept), unweighted=True).sum(dtype=np.float64))
            if bad is None:
                chunk += ran
                continue
            if self.inputs.unchecked:
                # Perhaps X's own NaN, which the per-batch replay would take for a
                # divergence (and may not read these rows): the caller checks X and
                # runs the call again.
                raise UncheckedRows(permanent=False)
            if starts is not None:
                self._rewind(starts[bad])
            chunk += bad
            first, count = program.chunks[chunk]
            self._batches(first, first + count, interrupt)
            chunk += 1
        self._batches(program.n_batches, len(rows), interrupt)

    def _rewind(self, start: dict[str, Any]) -> None:
        """Back to a chunk's start (a checkpoint of :meth:`_run_chunks`): the per-batch
        path replays it and finds the batch."""
        self._updating = True
        self._state.restore(start)
        self._updating = False

    def _run_chunks(self, chunk: int, interrupt: DeferredInterrupt
                    ) -> tuple[int, list[dict[str, Any]] | None, np.ndarray]:
        """Run the program's chunks from ``chunk`` on, each one's new weights and states
        made the current ones at once, until the last chunk or a pending Ctrl-C; return
        how many ran, the state at the start of each (checkpoints, to rewind to) and
        the batch losses of all.

        Their losses are checked after all of them: computing them in numpy cost about a
        tenth of a chunk's call at the defaults (1.3 ms of a 26 ms epoch of 100k x 100,
        measured), for all of them at once 0.3 ms. Without checkpoints (a state of more
        than ``CHECKPOINT_MAX_BYTES``: None), each chunk's losses are checked as it ends,
        and the first chunk with a non-finite loss, not taken, is the last to run.
        """
        program, state, rows = self.program, self._state, self._rows
        starts: list[dict[str, Any]] | None = [] if self._checkpoints else None
        checked: list[np.ndarray] = []
        ran = 0
        for index in range(chunk, len(program.chunks)):
            if ran and interrupt.pending:
                break
            first, count = program.chunks[index]
            if starts is not None:
                starts.append(state.checkpoint())
            program.run(index)
            ran += 1
            if starts is None:
                checked.append(program.step_losses(first, count))
                if not np.isfinite(checked[-1]).all():
                    break
            take_steps(program, state, self._rate, count, sum(rows[first:first + count]),
                       None if self._totals is None else self._totals[first + count - 1])
        if starts is None:
            return ran, starts, np.concatenate(checked)
        first = program.chunks[chunk][0]
        last, count = program.chunks[chunk + ran - 1]
        return ran, starts, program.step_losses(first, last + count - first)


def first_nonfinite_chunk(losses: np.ndarray,
                          chunks: Sequence[tuple[int, int]]) -> int | None:
    """The index in ``chunks`` (``(first, count)`` of consecutive chunks, the first at
    ``losses[0]``) of the first chunk with a non-finite loss; None if all are finite."""
    finite = np.isfinite(losses)
    if finite.all():
        return None
    step = chunks[0][0] + int(np.argmin(finite))
    return next(index for index, (first, count) in enumerate(chunks)
                if first <= step < first + count)


class EpochGroups:
    """Several epochs in one call of the dense linear program
    (:attr:`~skl_ortgrad.runtime.program_run.LinearProgramRun.epochs_per_call`).

    Each epoch draws its permutation and is laid out as a :class:`ProgramEpoch` lays it
    out, and the call computes each step as that epoch's call would: the same weights,
    ``t`` and losses, bit for bit. The schedule, the losses and the checks are computed
    once for the group (the Python work around an epoch's call costs as much as the call
    on a small dataset).
    """

    def __init__(self, inputs: EpochInputs, program: LinearProgramRun) -> None:
        self.inputs, self.program = inputs, program

    @staticmethod
    def allowed(epochs: int, validation: bool, silent: bool, tol: float | None,
                n_iter_no_change: int) -> bool:
        """Whether ``epochs`` epochs may run in groups: more than one, nothing reported or
        validated per epoch, a ``tol`` rule that cannot stop after every epoch."""
        return (epochs > 1 and not validation and silent
                and (tol is None or n_iter_no_change > 1))

    def size(self, remaining: int, patience: float | None) -> int:
        """How many of the next ``remaining`` epochs run in one call: as many as the
        program holds, and only as many as end before the ``tol`` rule could stop (or the
        rate react to a plateau), ``patience`` epochs from now at the earliest (None:
        no rule)."""
        group = min(remaining, self.program.epochs_per_call)
        if patience is not None:
            group = min(group, math.ceil(patience))
        return max(1, group)

    def run(self, epochs: int) -> list[EpochResult]:
        """Run ``epochs`` epochs in one call; return their results (as
        :class:`ProgramEpoch`'s), or ``[]`` with nothing changed but the loader's draws,
        undone too: when a loss or the new weights are not finite the caller runs those
        epochs one by one, which stop where the per-epoch path stops, with its message."""
        inputs, program = self.inputs, self.program
        loader, state, rate = inputs.loader, inputs.state, inputs.setup.rate
        rewind = rewinder(loader.random_state) if loader.shuffle else None
        rows = sum(loader.rows)
        etas = epoch_rates(rate, state, loader, epochs)
        shares = []
        n = program.n_batches
        for epoch in range(epochs):
            loader.epoch(features=False)
            program.lay_out(loader, epoch)
            part = slice(epoch * n, (epoch + 1) * n)
            etas[part] = program.stepped_rates(etas[part], loader)
            shares.append(loss_shares(loader))
        extra, totals = program_scalars(inputs.setup, state, etas)
        program.schedule_epochs(etas, *penalty_scalars(inputs.setup.penalty), extra, epochs)
        program.run_epochs(epochs)
        losses = program.epoch_losses(epochs)
        if not (np.isfinite(losses).all()
                and all(np.isfinite(w).all() for w in program.new_weights)):
            if rewind is not None:
                rewind()
            return []
        take_steps(program, state, rate, epochs * program.n_batches, epochs * rows,
                   None if totals is None else totals[-1])
        penalties = (step_penalties(program, inputs.setup.penalty, 0,
                                    epochs * program.n_batches,
                                    loader.rows * epochs).reshape(epochs, -1)
                     if inputs.objective else np.zeros((epochs, 1)))
        unweighted = (program.epoch_losses(epochs, unweighted=True).sum(
            axis=1, dtype=np.float64) / loader.n_rows if inputs.row_losses is not None
            else [None] * epochs)
        results = []
        for batch_losses, (epoch_shares, divisor), epoch_penalties, epoch_unweighted in zip(
                losses.tolist(), shares, penalties, unweighted, strict=True):
            # Summed in the order an epoch sums them.
            total = 0.0
            for loss, share in zip(batch_losses, epoch_shares, strict=True):
                total += loss * share
            results.append(EpochResult(mean(total, divisor),
                                       float(epoch_penalties.sum()) / loader.n_rows,
                                       None if epoch_unweighted is None
                                       else float(epoch_unweighted)))
        return results
