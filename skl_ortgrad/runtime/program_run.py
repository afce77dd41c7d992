r"""Training programs (:mod:`skl_ortgrad.training.programs`) bound to a mini-batch loader.

The programs belong to the training layer; this one only binds them, through their
documented attributes and methods. A binding creates, once, the OrtValues of every call
of an epoch over buffers refilled in place at every epoch; per epoch,
:meth:`ProgramRun.schedule` writes the per-step inputs (the schedule, and for the linear
program the per-row inputs), then every chunk of ``program.steps`` batches is one
:meth:`~ProgramRun.run`. The new weights go to buffers of their own: the caller copies
them into the weights once the chunk's losses (:meth:`~ProgramRun.losses`) are known to be
finite.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnxruntime import InferenceSession, RunOptions
from onnxruntime.capi._pybind_state import OrtDevice, OrtValue, OrtValueVector

from skl_ortgrad.runtime.batches import MiniBatchLoader
from skl_ortgrad.runtime.sessions import io_names
from skl_ortgrad.runtime.staging import StagedRows
from skl_ortgrad.runtime.threads import helper_core_free


class ProgramRun:
    r"""The generic program (:class:`~skl_ortgrad.training.programs.StepProgram`) over a
    loader's permuted buffers: the loader's full batches (all but a shorter last one),
    in chunks of up to ``program.steps`` batches per call.

    Parameters
    ----------
    program : skl_ortgrad.training.programs.StepProgram
    session : InferenceSession
        Its session.
    loader : MiniBatchLoader
        Dense data; its buffers, in the program's :attr:`~StepProgram.data` order.
    weights : list of numpy.ndarray
        The weights, then the update rule's states, in the program's order.

    Attributes
    ----------
    chunks : list of (int, int)
        First batch and batch count of every call.
    n_batches : int
        Batches of an epoch the program runs (the others run one by one).
    needs_features : bool
        Whether the loader's permuted features must be filled before the calls.
    new_weights : list of numpy.ndarray
        Where the calls write the new weights and states.
    """

    needs_features = True
    #: The feeds that follow the arrays the loader serves (:meth:`follow`), made apart
    #: from the call's other feeds.
    _followed: tuple[str, ...] = ()

    def __init__(self, program: Any, session: InferenceSession,
                 loader: MiniBatchLoader, weights: list[np.ndarray]) -> None:
        self._start(program, session, weights, loader.rows.count(program.batch_rows))
        self._losses = np.empty(self.n_batches, dtype=program.dtype)
        self._per_row = dict(zip(program.data, loader.per_row, strict=True))

    def _call(self, first: int, count: int, slot: int | None = None,
              ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        """The feeds and fetches of the call running batches ``first .. first + count -
        1``, by name (``slot``: see :meth:`_vectors`)."""
        return (self.program.feeds(self._per_row, self.table, self.weights, first, count),
                self.program.fetches(self._losses[first:first + count], self.new_weights,
                                     count, {name: norms[first:first + count]
                                             for name, norms in self._norms.items()}))

    def _start(self, program: Any, session: InferenceSession, weights: list[np.ndarray],
               n_batches: int, epochs: int = 1) -> None:
        """The chunks of ``n_batches`` batches, the buffers (the scalar table for
        ``epochs`` epochs), no feeds yet."""
        self.program, self._session, self.n_batches = program, session, n_batches
        self.chunks = [(first, min(program.steps, n_batches - first))
                       for first in range(0, n_batches, program.steps)]
        self.weights = list(weights)
        self.new_weights = [np.empty_like(w) for w in weights]
        # The per-step norms of the weights each step starts from (norms=True), epoch
        # after epoch.
        self._norms = {name: np.empty(epochs * n_batches, dtype=program.dtype)
                       for name in program.norms}
        # Written by every schedule.
        self.table = {name: np.empty((epochs * n_batches, *shape), dtype=program.dtype)
                      for name, _, shape in program.scalars}
        self._inputs, self._outputs = io_names(session)
        self._cpu = OrtDevice(OrtDevice.cpu(), OrtDevice.default_memory(), 0)
        self._devices = [self._cpu] * len(self._outputs)
        # The vectors of each call, bound at its first run (a small fit may run its epochs
        # in groups only), and the arrays they borrow: OrtValue holds no reference. Every
        # call's feeds but the followed ones, as OrtValues (the name stands for a
        # followed one), and its fetch vector are kept apart: new arrays served (follow)
        # change those feeds only.
        self._bound: dict[tuple[int, int], tuple[OrtValueVector, OrtValueVector]] = {}
        self._feed_values: dict[tuple[int, int], tuple[list[Any], OrtValueVector]] = {}
        self._followed_values: dict[str, OrtValue] = {}
        self._views: list[np.ndarray] = []
        self._run_options = RunOptions()

    def _vector(self, arrays: list[np.ndarray]) -> OrtValueVector:
        """OrtValues over ``arrays``, which must outlive the vector's use."""
        vector = OrtValueVector()
        for array in arrays:
            vector.push_back(OrtValue.ortvalue_from_numpy(array, self._cpu))
        return vector

    def _follow(self, arrays: dict[str, np.ndarray]) -> None:
        """Feed ``arrays`` (the followed feeds, by name) to every call from now on; they
        must outlive that use."""
        self._followed_values = {name: OrtValue.ortvalue_from_numpy(array, self._cpu)
                                 for name, array in arrays.items()}
        self._bound.clear()

    def fits(self, loader: MiniBatchLoader) -> bool:
        """Whether the binding still serves ``loader`` (its arrays may have been
        refilled), once it follows it (:meth:`follow`)."""
        return True

    def follow(self, loader: MiniBatchLoader) -> None:
        """Serve ``loader``'s current arrays (it :meth:`fits`): the permuted buffers the
        generic program reads are the same whatever the arrays served."""

    def binds(self, weights: list[np.ndarray]) -> bool:
        """Whether the calls read and write the memory of these arrays (weights and
        states; views made anew, such as packed spans, compare by address)."""
        return len(weights) == len(self.weights) and all(
            a.ctypes.data == b.ctypes.data and a.shape == b.shape and a.dtype == b.dtype
            for a, b in zip(weights, self.weights, strict=True))

    def stepped_rates(self, etas: np.ndarray, loader: MiniBatchLoader) -> np.ndarray:
        """The rates ``etas`` of the batches of the loader's current epoch as the program
        steps them: 0 for a batch it skips (no decay, no step; none here but the
        passive-aggressive I row of no norm, :class:`PassiveAggressiveRun`)."""
        return etas

    def schedule(self, etas: np.ndarray, loader: MiniBatchLoader, l1: float, l2: float,
                 rows: int, extra: dict[str, np.ndarray] | None = None) -> None:
        """Write the epoch's per-step scalars: the learning rates and output gradients
        (the loader's scales) of the program's batches, the penalty's decay and
        threshold (``l1``, ``l2``, ``rows``: the elastic penalty's, zeros without), and
        the update rule's ``extra`` ones (one value per batch of the epoch)."""
        n = self.n_batches
        self._write_table(etas[:n], loader.scales[:n], l1, l2, rows,
                          {kind: column[:n] for kind, column in (extra or {}).items()})

    def _write_table(self, etas: np.ndarray, scales: np.ndarray, l1: float, l2: float,
                     rows: int, extra: dict[str, np.ndarray]) -> None:
        """The scalars of the first ``len(etas)`` steps."""
        table = self.program.scalar_table(etas, scales, l1, l2, rows, extra)
        for name, column in table.items():
            np.copyto(self.table[name][:len(column)], column)

    def run(self, chunk: int) -> None:
        """Run chunk ``chunk``: the weights after its last batch into ``new_weights``."""
        self._execute(*self.chunks[chunk], self._staged(chunk))

    def _staged(self, chunk: int) -> int | None:
        """The buffer of staged rows that chunk ``chunk`` reads (see
        :class:`LinearProgramRun`); None: none."""
        return None

    def _execute(self, first: int, count: int, slot: int | None = None) -> None:
        feeds, fetches = self._vectors(first, count, slot)
        self._session._sess.run_with_ortvaluevector(
            self._run_options, self._inputs, feeds, self._outputs, fetches, self._devices,
        )

    def _vectors(self, first: int, count: int,
                 slot: int | None = None) -> tuple[OrtValueVector, OrtValueVector]:
        """The feeds and fetches of the call running batches ``first .. first + count -
        1`` (bound once; the feed vector again after :meth:`follow`), reading its rows
        from staged buffer ``slot`` where given (:class:`LinearProgramRun`)."""
        key = (first, count, slot)
        if key not in self._bound:
            if key not in self._feed_values:
                feeds, fetches = self._call(first, count, slot)
                # A staged call reads a buffer of its own, not the followed feeds.
                followed = self._followed if slot is None else ()
                # Not the followed feeds: the binding holds the current ones only.
                self._views.extend([value for name, value in feeds.items()
                                    if name not in followed])
                self._views.extend(fetches.values())
                self._feed_values[key] = (
                    [name if name in followed
                     else OrtValue.ortvalue_from_numpy(feeds[name], self._cpu)
                     for name in self._inputs],
                    self._vector([fetches[name] for name in self._outputs]))
            values, fetches = self._feed_values[key]
            feeds = OrtValueVector()
            for value in values:
                feeds.push_back(self._followed_values[value] if isinstance(value, str)
                                else value)
            self._bound[key] = feeds, fetches
        return self._bound[key]

    def step_losses(self, first: int, count: int, unweighted: bool = False) -> np.ndarray:
        """The loss sums of batches ``first .. first + count - 1``, once they ran; with
        ``unweighted``, of their rows' losses without the sample weights (scikit-learn's
        SGD objective: the program's ``unweighted_output``, which it must write)."""
        if unweighted:
            return self._norms[self.program.unweighted_output][first:first + count]
        return self._losses[first:first + count]

    def step_penalties(self, first: int, count: int, l1: float, l2: float) -> np.ndarray:
        r"""The elastic penalty :math:`l_1 \lVert W \rVert_1 + \frac{l_2}{2}
        \lVert W \rVert_2^2` at the weights batches ``first .. first + count - 1``
        started from, once they ran (from the program's per-step norms), in float64."""
        return self.program.penalties(
            {name: norms[first:first + count] for name, norms in self._norms.items()},
            l1, l2, count)


class LinearProgramRun(ProgramRun):
    r"""The linear program (:class:`~skl_ortgrad.training.programs.LinearProgram`) over a
    loader: every batch of the epoch, the shorter last one padded with rows of step
    weight 0 and loss weight 0.

    The program reads its rows from the features as given (:attr:`MiniBatchLoader.order`
    indexes them), so the loader need not copy them, or, where an epoch is several calls
    and a core is free (:meth:`stages`), the rows of each call gathered in order and
    cast before it runs (:mod:`~skl_ortgrad.runtime.staging`); per epoch,
    :meth:`schedule` writes the
    per-row inputs: the rows, the targets and the step weights
    :math:`c_i = \eta_j \sigma_j s_i` (the schedule's rate times the batch's output
    gradient, times the row's sample weight).

    An epoch of a small dataset is a few dozen steps, and the Python work around its call
    (schedule, losses, checks) costs as much as the call: up to :attr:`epochs_per_call`
    epochs (as many as fit in :attr:`GROUP_STEPS` steps reading at most
    :attr:`GROUP_VALUES` feature values) also run as one call, laid out
    one after the other (:meth:`lay_out` each, then :meth:`schedule_epochs`,
    :meth:`run_epochs`, :meth:`epoch_losses`).
    """

    needs_features = False
    #: Steps of one call running several epochs, and feature values they read at most:
    #: about 0.6 ms at 30 features (4.7 µs a step, measured on breast cancer) and at 128
    #: features, fewer steps on wider data, so Ctrl-C, honoured between calls, stays
    #: immediate.
    GROUP_STEPS = 128
    GROUP_VALUES = 2**19
    #: Values of a call's staged rows at most (:meth:`stages`): every call of the
    #: defaults on up to 256 features.
    STAGED_VALUES = 2**21

    def __init__(self, program: Any, session: InferenceSession,
                 loader: MiniBatchLoader, weights: list[np.ndarray]) -> None:
        self._start_rows(program, session, loader, weights, self.grouped_epochs(
            len(loader.rows), program.batch_rows, program.n_features))
        self._source, self._generation = loader.features, loader.generation
        # Gather needs C order; a loader's features are usually already (no copy).
        self._features = np.ascontiguousarray(self._source)
        self._threads = session.get_session_options().intra_op_num_threads
        if program.staged:
            self._staging = StagedRows(program.steps * program.batch_rows,
                                       program.n_features, program.dtype,
                                       self._features.dtype)
        else:
            # A new array of the same layout (the next block of a stream) changes only
            # the features' feed of every call (follow).
            self._followed = (program.features,)
            self._follow({program.features: self._features})

    @classmethod
    def grouped_epochs(cls, n_batches: int, batch_rows: int, n_features: int) -> int:
        """:attr:`epochs_per_call` of epochs of ``n_batches`` batches of ``batch_rows``
        rows of ``n_features`` features."""
        steps = min(cls.GROUP_STEPS, cls.GROUP_VALUES // (batch_rows * n_features))
        return max(1, steps // n_batches)

    @classmethod
    def stages(cls, n_batches: int, steps: int, batch_rows: int, n_features: int) -> bool:
        """Whether the calls of epochs of ``n_batches`` batches (``steps`` a call) may
        run the program's ``staged`` form, on rows gathered in order and cast by the
        helper thread where a core is free (:mod:`~skl_ortgrad.runtime.staging`; the
        program's choice, ``ProgramCache``): where an epoch is several calls, epochs are
        not grouped (:meth:`grouped_epochs`) and a call reads at most
        :attr:`STAGED_VALUES` values (its two buffers at most 16 MiB of float32).
        Without a free core, each call reads the features as given, at the rows'
        indices, casting them batch by batch where their type is not the program's:
        staging them in the calling thread first was not faster (ad hoc, one epoch
        against scikit-learn's: 100k x 100 float32, binary hinge, 0.48x by index, 0.57x
        staged by the calling thread, 0.45x with the helper; float64, squared error,
        0.40x, 0.45x and 0.34x)."""
        return (n_batches > steps and steps * batch_rows * n_features <= cls.STAGED_VALUES
                and cls.grouped_epochs(n_batches, batch_rows, n_features) == 1)

    def _call(self, first: int, count: int, slot: int | None = None,
              ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        # Steps of the laid-out epochs, one after the other; a staged call reads its
        # buffer.
        features = self._features if slot is None else self._staging.buffers[slot]
        return (self.program.feeds(features, self.per_row, self.table, self.weights,
                                   first, count),
                self._fetches(first, count))

    def _fetches(self, first: int, count: int) -> dict[str, np.ndarray]:
        """Where the call running batches ``first .. first + count - 1`` writes, by name:
        the per-row values, the new weights and the per-step norms."""
        return self.program.fetches(self._values, self.new_weights, first, count,
                                    self._norms)

    def _start_rows(self, program: Any, session: InferenceSession, loader: MiniBatchLoader,
                    weights: list[np.ndarray], epochs: int = 1) -> None:
        """:meth:`_start` over every batch of the epoch, and the per-row buffers of the
        program's :attr:`~skl_ortgrad.training.programs.LinearProgram.per_row` inputs, the
        loss weights and the values, for ``epochs`` epochs one after the other. Padding
        rows: index 0, target 0, step weight 0, loss weight 0 (and 0 stored values)."""
        self._start(program, session, weights, len(loader.rows), epochs)
        self.epochs_per_call = epochs
        self._epoch_rows, self._n_rows = self.n_batches * program.batch_rows, loader.n_rows
        size = epochs * self._epoch_rows
        # One value per row, or per row and output.
        outputs = (size, program.n_outputs) if program.n_outputs > 1 else (size,)
        self.per_row = {name: np.zeros(size, dtype=np.int64) if name in program.index_rows
                        else np.zeros(outputs, dtype=program.dtype)
                        for name in program.per_row}
        # The epochs' rows: an input, or (staged) what the calls' rows are gathered from.
        self._rows = (self.per_row["rows"] if "rows" in self.per_row
                      else np.zeros(size, dtype=np.int64))
        # 1 for every row, 0 for padding; the loss weights are the sample weights.
        self._row_mask = np.zeros(size, dtype=program.dtype)
        self._by_epoch(self._row_mask, epochs)[:, :self._n_rows] = 1.0
        self._loss_weights = self._row_mask.copy()
        self._values = np.empty(outputs, dtype=program.dtype)
        self._scales = np.empty(epochs * self.n_batches, dtype=loader.scales.dtype)
        self._weighted = False
        # Staged rows (stages), whether the helper stages this epoch's (schedule), and
        # how many epochs were laid out (which one staged rows belong to).
        self._staging: StagedRows | None = None
        self._helped, self._laid_out = False, 0

    def _by_epoch(self, array: np.ndarray, epochs: int) -> np.ndarray:
        """The rows of the first ``epochs`` laid-out epochs of a per-row ``array``, one
        epoch a row (a view)."""
        return array[:epochs * self._epoch_rows].reshape(
            epochs, self._epoch_rows, *array.shape[1:])

    def fits(self, loader: MiniBatchLoader) -> bool:
        # The same features: read in place, or copied for this call (arrays refilled in
        # place between two calls would leave a copy stale); or others of the same
        # layout, where these are read in place.
        features = loader.features
        if features is self._source:
            return self._features is self._source or loader.generation == self._generation
        return (self._features is self._source and features.flags.c_contiguous
                and features.shape == self._source.shape
                and features.dtype == self._source.dtype)

    def follow(self, loader: MiniBatchLoader) -> None:
        if loader.features is not self._source:
            self._drain()
            self._source = self._features = loader.features
            self._generation = loader.generation
            if not self.program.staged:
                self._follow({self.program.features: self._features})

    def schedule(self, etas: np.ndarray, loader: MiniBatchLoader, l1: float, l2: float,
                 rows: int, extra: dict[str, np.ndarray] | None = None) -> None:
        self.lay_out(loader)
        if self._staging is not None:
            # Where a core is free beside the call's threads, the helper stages the next
            # call's rows, else the caller does.
            self._helped = helper_core_free(self._threads)
            if self._helped:
                self._staging.start((self._laid_out, 0), 0, self._features,
                                    self._chunk_rows(0))
        self.schedule_epochs(etas, l1, l2, rows, extra, epochs=1)

    def _staged(self, chunk: int) -> int | None:
        """Staged (see :meth:`stages`): the buffer of the rows the helper staged for this
        chunk of this epoch, else of rows staged now; the helper (where a core is free,
        see :meth:`schedule`) then stages the next chunk's while this one runs."""
        if self._staging is None:
            return None
        slot = chunk % 2
        if self._staging.wait() != (self._laid_out, chunk):
            self._staging.fill(slot, self._features, self._chunk_rows(chunk))
        if self._helped and chunk + 1 < len(self.chunks):
            self._staging.start((self._laid_out, chunk + 1), (chunk + 1) % 2,
                                self._features, self._chunk_rows(chunk + 1))
        return slot

    def _chunk_rows(self, chunk: int) -> np.ndarray:
        """The row indices of chunk ``chunk``'s batches (a view)."""
        first, count = self.chunks[chunk]
        b = self.program.batch_rows
        return self._rows[first * b:(first + count) * b]

    def _drain(self) -> None:
        """Leave the helper's pending gather, if any (before the rows or the features it
        reads change)."""
        if self._staging is not None:
            self._staging.wait(discard=True)

    def lay_out(self, loader: MiniBatchLoader, epoch: int = 0) -> None:
        """Write the loader's current epoch (its order, labels, sample weights and batch
        scales) as laid-out epoch ``epoch``: the per-row inputs but the step weights."""
        self._drain()
        self._laid_out += 1
        n, offset = loader.n_rows, epoch * self._epoch_rows
        self._rows[offset:offset + n] = loader.order
        if "stored_counts" in self.per_row:
            # Padding rows store nothing.
            self.per_row["stored_counts"][offset:offset + n] = loader.row_spans[1]
        # Dense features come first; sparse ones are not among the buffers.
        labels, *weights = loader.per_row[0 if loader.sparse else 1:]
        target = self.per_row["target"]
        self.program.targets(labels.reshape(n, *target.shape[1:]), target[offset:offset + n])
        self._weighted = bool(weights)
        if weights:
            self._loss_weights[offset:offset + n] = weights[0]
        self._scales[epoch * self.n_batches:(epoch + 1) * self.n_batches] = loader.scales

    def schedule_epochs(self, etas: np.ndarray, l1: float, l2: float, rows: int,
                        extra: dict[str, np.ndarray] | None = None, epochs: int = 1) -> None:
        """Write the per-step scalars and the step weights of the first ``epochs``
        laid-out epochs: ``etas`` (and the ``extra`` scalars) hold one value per batch of
        each, epoch after epoch; ``l1``, ``l2``, ``rows`` as :meth:`ProgramRun.schedule`."""
        program, n = self.program, self._n_rows
        scales = self._scales[:epochs * self.n_batches]
        self._write_table(etas, scales, l1, l2, rows, extra or {})
        # Without a rate in the step weights, 1 for a step taken, 0 for one skipped.
        per_step = etas * scales if program.rated else np.not_equal(etas, 0.0) * 1.0
        rates = self._by_epoch(np.repeat(per_step, program.batch_rows), epochs)[:, :n]
        target = self._by_epoch(self.per_row["target"], epochs)[:, :n]
        if self._weighted:
            np.multiply(rates, self._by_epoch(self._loss_weights, epochs)[:, :n], out=rates)
        program.step_weights(rates, target,
                             self._by_epoch(self.per_row["step_weight"], epochs)[:, :n])

    def run_epochs(self, epochs: int) -> None:
        """Run the first ``epochs`` laid-out epochs in one call: the weights after the
        last one into ``new_weights``."""
        self._execute(0, epochs * self.n_batches)

    def epoch_losses(self, epochs: int, unweighted: bool = False) -> np.ndarray:
        """The loss sums of the batches of the first ``epochs`` laid-out epochs, once
        they ran: shape ``(epochs, n_batches)`` (``unweighted``: as :meth:`step_losses`)."""
        return self.step_losses(0, epochs * self.n_batches, unweighted).reshape(
            epochs, self.n_batches)

    def step_losses(self, first: int, count: int, unweighted: bool = False) -> np.ndarray:
        # Computed from the per-row values, with the loss weights or without.
        rows = slice(first * self.program.batch_rows, (first + count) * self.program.batch_rows)
        weights = self._row_mask if unweighted else self._loss_weights
        return self.program.losses(self._values[rows], self.per_row["target"][rows],
                                   weights[rows])


class PassiveAggressiveRun(LinearProgramRun):
    r"""The linear program's passive-aggressive form (:class:`~skl_ortgrad.training.
    programs.PassiveAggressiveProgram`) over a loader: the rows' squared norms
    :math:`\lVert x \rVert^2` (:meth:`MiniBatchLoader.squared_norms`, once per features
    served) give every epoch's per-row denominators (:meth:`lay_out`); the step weights
    hold no rate. PA-I skips a row of no norm (no decay, no step): its rate is 0
    (:meth:`stepped_rates`), so are its decay's, its L1 threshold's and its step
    weight."""

    def __init__(self, program: Any, session: InferenceSession,
                 loader: MiniBatchLoader, weights: list[np.ndarray]) -> None:
        super().__init__(program, session, loader, weights)
        # Rows a batch is one, so no padding rows; 1 keeps their quotient finite anyway.
        self.per_row["denominator"].fill(1.0)
        self._squared: np.ndarray | None = None
        self._measure(loader)

    def _measure(self, loader: MiniBatchLoader) -> None:
        """The squared norms of the rows ``loader`` serves, and whether PA-I skips any."""
        squared = loader.squared_norms(self.program.dtype)
        if squared is not self._squared:
            self._squared = squared
            self._skips = self.program.variant == "pa1" and not np.all(squared)

    def stepped_rates(self, etas: np.ndarray, loader: MiniBatchLoader) -> np.ndarray:
        # One row a batch.
        return np.where(self._squared[loader.order] > 0, etas, 0.0) if self._skips else etas

    def follow(self, loader: MiniBatchLoader) -> None:
        super().follow(loader)
        self._measure(loader)

    def lay_out(self, loader: MiniBatchLoader, epoch: int = 0) -> None:
        super().lay_out(loader, epoch)
        offset = epoch * self._epoch_rows
        self.program.denominators(self._squared[loader.order],
                                  self.per_row["denominator"][offset:offset + loader.n_rows])


class SparseLinearProgramRun(LinearProgramRun):
    r"""The sparse linear program
    (:class:`~skl_ortgrad.training.programs.SparseLinearProgram`) over a loader of sparse
    features: the per-row inputs as :class:`LinearProgramRun`'s, the program reading its
    rows by index from the stored values laid out one row a row, once per matrix served
    (:meth:`MiniBatchLoader.stored_rows`). Where that layout would be mostly padding (a
    few long rows), each call lays out its own batches' rows instead, as wide as its
    longest row, and reads them in order.
    """

    def __init__(self, program: Any, session: InferenceSession,
                 loader: MiniBatchLoader, weights: list[np.ndarray]) -> None:
        self._start_rows(program, session, loader, weights)
        self._loader = loader
        # A call's rows in its own layout: calls start at multiples of program.steps.
        self._call_rows = np.arange(self._epoch_rows) % (program.steps * program.batch_rows)
        # The loader's layout the calls are bound to (followed feeds, see _vectors).
        self._followed = program.stored
        self._stored_rows: tuple[np.ndarray, np.ndarray] | None = None

    def fits(self, loader: MiniBatchLoader) -> bool:
        return loader is self._loader

    def follow(self, loader: MiniBatchLoader) -> None:
        """Nothing to change: each call reads its rows from the loader's current layout
        (:meth:`fits` only the one it was bound to)."""

    def _call(self, first: int, count: int, slot: int | None = None,
              ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
        return (self.program.feeds(*self._stored_rows, self.per_row, self.table,
                                   self.weights, first, count),
                self._fetches(first, count))

    def _vectors(self, first: int, count: int,
                 slot: int | None = None) -> tuple[OrtValueVector, OrtValueVector]:
        """The calls over the loader's layout are bound once, as the dense program's,
        the layout a followed feed: a ``partial_fit`` call on a new matrix (a new layout)
        makes its two OrtValues, where every call made its eleven (1.4 of 22 ms an epoch
        of 20,000 rows at batch 32, measured by cProfile). Calls over layouts of their
        own (:meth:`_stored`) are bound anew."""
        stored = self._loader.stored_rows(self.program.dtype)
        if stored is not None:
            if stored is not self._stored_rows:
                self._stored_rows = stored
                self._follow(dict(zip(self.program.stored, stored, strict=True)))
            return super()._vectors(first, count, slot)
        per_row = {**self.per_row, "rows": self._call_rows}
        feeds = self.program.feeds(*self._stored(first, count), per_row, self.table,
                                   self.weights, first, count)
        fetches = self._fetches(first, count)
        # OrtValues borrow the arrays' memory: they live until the next call.
        self._call_arrays = feeds, fetches
        return (self._vector([feeds[name] for name in self._inputs]),
                self._vector([fetches[name] for name in self._outputs]))

    def _stored(self, first: int, count: int) -> tuple[np.ndarray, np.ndarray]:
        r"""Columns and values of the rows of batches ``first .. first + count - 1``,
        ``[count * b, w]``: row after row, zeros after each one's last value, :math:`w`
        the most values one of them stores.

        Gathered from the matrix served (:meth:`MiniBatchLoader.padded_stored`) at the
        positions :math:`p_{ir} = o_i + r` for :math:`r < \ell_i`, the padding
        position 0 otherwise (:attr:`MiniBatchLoader.row_spans` give the start :math:`o`
        and length :math:`\ell` of every row): no permuted copy of the stored values.
        """
        b = self.program.batch_rows
        row_starts, lengths = self._loader.row_spans
        columns, values = self._loader.padded_stored(self.program.dtype)
        start, stop = first * b, min((first + count) * b, self._loader.n_rows)
        # Rows past the last one (a short last call) store nothing.
        origin = np.zeros((count * b, 1), dtype=np.int64)
        length = np.zeros((count * b, 1), dtype=np.int64)
        origin[:stop - start, 0] = row_starts[start:stop]
        length[:stop - start, 0] = lengths[start:stop]
        rank = np.arange(max(1, int(length.max())), dtype=np.int64)
        positions = np.where(rank < length, origin + rank, 0)
        return columns.take(positions), values.take(positions)


class SparsePassiveAggressiveRun(PassiveAggressiveRun, SparseLinearProgramRun):
    """The sparse linear program's passive-aggressive form (:class:`~skl_ortgrad.training.
    programs.SparsePassiveAggressiveProgram`): :class:`PassiveAggressiveRun`'s
    denominators, over :class:`SparseLinearProgramRun`'s stored values."""
