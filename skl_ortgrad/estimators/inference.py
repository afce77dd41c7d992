"""What ``predict`` runs: the trained graph on validated ``X``, read once, in blocks of
rows that stay in cache.

A prediction on float64 input used to cast all of ``X`` to the model's float32 (a new
array, every page of it faulted in), sum the rows of the cast for the finiteness check,
then run onnxruntime on it: three passes over data larger than the caches.
:func:`run_blocks` reads ``X`` once, block by block
(:data:`~skl_ortgrad.runtime.blocks.BLOCK_VALUES` values), each block cast, checked and
run while it is in cache, without a copy of ``X``. Where the score is linear in ``X``
(the SGD models), the outputs do the finiteness check: a NaN or infinite value of a row
makes its score NaN or infinite, whatever the weights (:math:`0 \\times \\infty` is NaN),
and a few thousand outputs are cheaper to check than ``X``; the graph then casts the
block itself (a ``Cast`` first, :meth:`InferenceMixin._session`), which rounds as numpy
does. Otherwise numpy casts each block into a buffer it reuses, whose row sums are checked.

The blocks are shared among threads by the size of the input
(:func:`~skl_ortgrad.runtime.blocks.block_threads`), each taking the next block when it is
free and running it on the same session (onnxruntime allows concurrent ``run`` calls);
small inputs take one thread, which starts nothing. A block's outputs are copied at once
to their rows of the outputs of all of ``X`` (no list of blocks joined at the end).
Measured on 200k x 50 float64 (an idle core missing, the machine
shared): the cast, numpy's or onnxruntime's, takes 5.7 ms of one core, as long as one of
scikit-learn's two passes over ``X`` (the finiteness sum and the product).

Finite input can still overflow the model's float32 (values near :math:`3.4 \\times
10^{38}`: the score is infinite where scikit-learn's float64 one is not): the rows with a
non-finite float output are predicted again by the same graph in float64
(:meth:`InferenceMixin._recompute_in_float64`), and a value that float64 cannot hold
either, or that does not fit the array returned, is refused with an error: never a
silent NaN or infinity.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from sklearn.utils.validation import check_is_fitted

from skl_ortgrad.estimators.finite_input import (
    _block_finite,
    _cast_checked,
    refuse_non_finite,
    validate_unchecked,
)
from skl_ortgrad.graph.cut import select_model_input, select_model_output
from skl_ortgrad.graph.dtypes import onnx_dtype
from skl_ortgrad.graph.linear import fixed_intercept, linear_features
from skl_ortgrad.graph.model import (
    graph_names,
    initializer_array,
    initializers_to_inputs,
    unique_name,
)
from skl_ortgrad.runtime.blocks import block_rows, block_threads, share_blocks
from skl_ortgrad.runtime.devices import device_providers, log_severity
from skl_ortgrad.runtime.options import session_options
from skl_ortgrad.runtime.sessions import cached_session, io_names

if TYPE_CHECKING:
    from onnxruntime import InferenceSession

#: Values densified at once when predicting on a sparse matrix (16 MiB of float32): rows
#: of wide data (text, hashed features) would otherwise take gigabytes per chunk.
_SPARSE_CHUNK_VALUES = 2**22
#: Rows of a block are a multiple of this. onnxruntime's float matrix products (MLAS)
#: sum a row in another order in calls of a few rows, and work through groups of rows
#: (4 to 16 by CPU) whose size divides 192: each row then gets the very value one run on
#: all of ``X`` gives it (checked by the tests).
BLOCK_ROWS = 192


def run_blocks(session: InferenceSession, feeds: dict[str, np.ndarray], input_name: str,
               names: Sequence[str], X: np.ndarray, dtype: np.dtype, check_rows: bool,
               threads: int = 1) -> tuple[list[np.ndarray], bool]:
    """Run ``session`` on ``X`` (2-D) cast to ``dtype``, block by block
    (:mod:`~skl_ortgrad.runtime.blocks`).

    Parameters
    ----------
    session : InferenceSession
        Reads ``input_name`` (``X``) and ``feeds`` (the weights).
    feeds : dict
        The other inputs; not modified.
    input_name : str
        The features input.
    names : sequence of str
        Outputs to fetch.
    X : numpy.ndarray
        Validated features, float32 or float64.
    dtype : numpy.dtype
        The model's float type.
    check_rows : bool
        Whether to check every block's row sums (see
        :mod:`~skl_ortgrad.estimators.finite_input`): False where the outputs tell
        whether ``X`` is finite.
    threads : int
        Threads sharing the blocks.

    Returns
    -------
    outputs : list of numpy.ndarray
        Every output over all the rows, in the order of ``names``; empty when ``finite``
        is False.
    finite : bool
        False when the row sums of some block were not finite: the caller's check then
        raises, or finds finite values whose sums overflow and runs again without
        ``check_rows``.
    """
    rows = block_rows(X.shape[1], BLOCK_ROWS)
    outputs: list[np.ndarray] = []
    allocating = threading.Lock()
    finite = [True]
    cast = X.dtype != dtype or not X.flags.c_contiguous

    def work(index: int, share: Iterator[int]) -> None:
        buffer = np.empty((rows, X.shape[1]), dtype=dtype) if cast else None
        local = dict(feeds)
        for start in share:
            block = X[start:start + rows]
            if buffer is not None:
                block = buffer[:block.shape[0]]
                # Values beyond the dtype become infinite, as astype makes them: the
                # checks find them.
                with np.errstate(over="ignore", invalid="ignore"):
                    np.copyto(block, X[start:start + rows], casting="unsafe")
            if check_rows and not _block_finite(block):
                finite[0] = False
            if not finite[0]:
                return
            local[input_name] = block
            values = session.run(names, local)
            # Copied at their rows at once: a block's outputs are then freed while in
            # cache, and the next block's reuse their memory.
            if not outputs:
                with allocating:
                    if not outputs:
                        outputs.extend(np.empty((X.shape[0], *value.shape[1:]), value.dtype)
                                       for value in values)
            for target, value in zip(outputs, values, strict=True):
                target[start:start + value.shape[0]] = value

    share_blocks(range(0, X.shape[0], rows), threads, work)
    return (outputs, True) if finite[0] else ([], False)


def non_finite_rows(outputs: dict[str, np.ndarray]) -> np.ndarray:
    """Indices of the rows where some float output is NaN or infinite."""
    floats = [values for values in outputs.values() if values.dtype.kind == "f"]
    if all(np.isfinite(values).all() for values in floats):
        return np.empty(0, dtype=np.intp)
    bad = np.zeros(floats[0].shape[0], dtype=bool)
    for values in floats:
        bad |= ~np.isfinite(values.reshape(values.shape[0], -1)).all(axis=1)
    return np.flatnonzero(bad)


class InferenceMixin:
    """``predict``'s engine for :class:`~skl_ortgrad.estimators.base.BaseOnnxEstimator`:
    :meth:`_run` and the sessions it runs.

    Reads the fitted ``_template_`` (graph, weight names, score) and ``optimizer_`` (the
    served weights), and the parameters ``n_threads``, ``verbose`` and ``device``.
    """

    def _inference_threads(self) -> int:
        """Intra-op threads of a prediction session: ``n_threads``, or one for "auto"
        (the blocks of a large ``X`` are shared among Python threads instead,
        :func:`~skl_ortgrad.runtime.blocks.block_threads`)."""
        return 1 if self.n_threads == "auto" else int(self.n_threads)

    def _preprocess(self, X: Any) -> Any:
        """Frozen transformation applied before the trained graph (none by default)."""
        return X

    def _session(self, output: str | None = None, dtype: Any = None,
                 cast_from: Any = None) -> InferenceSession:
        """The inference session of the template's graph with the weights as inputs:
        the whole graph (``output=None``) or the part that computes ``output``, in
        ``dtype`` (float64 for :meth:`_recompute_in_float64`) when it is not the
        model's. Its outputs include the score wherever the graph computes it (the
        linear path checks ``X`` through it). With ``cast_from``, it reads ``X`` in
        that dtype and casts it first (onnxruntime's ``Cast`` rounds as numpy's cast
        does). Built once per template and its copies, which share their
        sessions (:meth:`~skl_ortgrad.estimators.template.Template.copy`), from the
        process-wide cache."""
        template = self._template_
        # Templates pickled by release 0.1.0 hold a single ``session`` instead.
        sessions = template.__dict__.setdefault("sessions", {})
        threads, severity = self._inference_threads(), log_severity(verbose=self.verbose)
        # The estimator's options too: the copies of a template may serve estimators
        # with other threads, verbosity or device.
        key = (output, None if dtype is None else np.dtype(dtype),
               None if cast_from is None else np.dtype(cast_from), threads, severity,
               str(self.device))
        if key not in sessions:
            if dtype is None and output == template.score:
                model = template.score_model  # the full graph is not converted
            else:
                model = template.model if dtype is None else self._template(
                    _n_graph_features(template.score_model), np.dtype(dtype)).model
                if output is not None:
                    model = select_model_output(model, output)
            inference = initializers_to_inputs(model, template.weights)
            graph = inference.graph
            if (template.score not in {o.name for o in graph.output}
                    and template.score in {name for node in graph.node for name in node.output}):
                # decision_function reads the raw scores, an intermediate result.
                graph.output.append(onnx.ValueInfoProto(name=template.score))
            if cast_from is not None:
                _cast_input(graph, np.dtype(cast_from))
            options = session_options(threads, severity, spin=True)
            # The weights are inputs: every estimator with the same graph and options
            # shares the session.
            sessions[key] = cached_session(inference, options, device_providers(self.device))
        return sessions[key]

    def _fitted_template(self) -> Any:
        """``_template_``, after scikit-learn's ``NotFittedError`` for an unfitted
        estimator (callers name one of its outputs before :meth:`_run`)."""
        self._check_fitted()
        return self._template_

    def _check_fitted(self) -> None:
        """scikit-learn's ``NotFittedError`` before the first fit (its check, with its
        tags, costs 5 µs: only when ``optimizer_`` is missing)."""
        if "optimizer_" not in self.__dict__:
            check_is_fitted(self, "optimizer_")

    def _has_frozen_steps(self) -> bool:
        """Whether ``X`` goes through frozen steps before the graph (:meth:`_preprocess`)."""
        return type(self)._preprocess is not InferenceMixin._preprocess

    def _run(self, X: Any, output: str | None = None) -> dict[str, np.ndarray]:
        """Validate ``X`` and run the trained graph on it: every output by name (with the
        score), or only ``output``, and what was computed with it.

        Raises
        ------
        ValueError
            scikit-learn's error for NaN or infinite values (``check_dtype_range``'s for
            values the model's dtype cannot hold), and an overflow error for a
            prediction float64 cannot hold (see the module).
        """
        self._check_fitted()
        optimizer = self.optimizer_
        dtype = optimizer.model_dtype()
        X = validate_unchecked(self, X, reset=False, accept_sparse="csr",
                               dtype=[np.float32, np.float64])
        feeds = dict(zip(optimizer.weights_to_train_, optimizer.served_weights(), strict=True))
        if isinstance(X, np.ndarray) and not self._has_frozen_steps():
            outputs = self._run_dense(X, dtype, feeds, output)
        else:
            outputs = self._run_checked(X, dtype, feeds, output)
        rows = non_finite_rows(outputs)
        if rows.size:
            # X's own NaN or infinity (the linear path checks X by its outputs) first.
            refuse_non_finite(self, X, dtype)
            self._recompute_in_float64(X, rows, outputs, feeds, output)
        return outputs

    def _run_dense(self, X: np.ndarray, dtype: np.dtype, feeds: dict[str, np.ndarray],
                   output: str | None) -> dict[str, np.ndarray]:
        """:meth:`_run` on a dense ``X`` without frozen steps: :func:`run_blocks`."""
        linear = self._linear_score()
        # A linear score checks X through its outputs: onnxruntime can cast the blocks.
        cast_from = X.dtype if linear and X.dtype != dtype else None
        session = self._session(output, cast_from=cast_from)
        inputs, names = io_names(session)
        threads = block_threads(X.size, self._inference_threads())
        results, finite = run_blocks(session, feeds, inputs[0], names, X,
                                     X.dtype if cast_from else dtype,
                                     check_rows=not linear, threads=threads)
        if not finite:
            refuse_non_finite(self, X, dtype)  # raises, unless row sums overflowed
            results, _ = run_blocks(session, feeds, inputs[0], names, X, dtype,
                                    check_rows=False, threads=threads)
        return dict(zip(names, results, strict=True))

    def _run_checked(self, X: Any, dtype: np.dtype, feeds: dict[str, np.ndarray],
                     output: str | None) -> dict[str, np.ndarray]:
        """:meth:`_run` on a sparse ``X``, or through frozen steps: ``X`` checked first,
        then scored by scipy (a linear score, :meth:`_run_from_scores`) or densified
        chunk by chunk, never whole."""
        cast, finite = _cast_checked(X, dtype)
        if not finite:
            refuse_non_finite(self, X, dtype)
        X = self._graph_input(X, dtype, cast)
        if hasattr(X, "toarray") and self._linear_score():
            return self._run_from_scores(X, feeds)
        session = self._session(output)
        inputs, names = io_names(session)
        step = (max(1, _SPARSE_CHUNK_VALUES // max(1, X.shape[1])) if hasattr(X, "toarray")
                else max(1, X.shape[0]))
        chunks = []
        for start in range(0, X.shape[0], step):
            rows = X[start:start + step]
            rows = rows.toarray() if hasattr(rows, "toarray") else rows
            feeds[inputs[0]] = np.ascontiguousarray(rows, dtype=dtype)
            chunks.append(session.run(names, feeds))
        return {name: np.concatenate([chunk[i] for chunk in chunks])
                for i, name in enumerate(names)}

    def _linear_score(self) -> bool:
        """Whether the template's score is linear in ``X`` (:meth:`_linear_weights`)."""
        return self._linear_weights() is not None

    def _linear_weights(self) -> tuple[str, str] | None:
        """``(W, b)`` of the template's score where it is linear in ``X`` (``MatMul``,
        ``Add``, :func:`~skl_ortgrad.graph.linear.linear_features`), :math:`b` trained or
        fixed (``fit_intercept=False``: :func:`~skl_ortgrad.graph.linear.
        fixed_intercept`); None otherwise. Read once per template."""
        template = self._template_
        # Not "linear", the flag of models saved before (a bool).
        if "linear_weights" not in template.__dict__:
            weights = tuple(template.weights)
            if len(weights) == 1:
                weights = (*weights, fixed_intercept(template.score_model, weights[0]) or "")
            template.linear_weights = (weights if linear_features(
                template.score_model, weights, single_output=False) is not None else None)
        return template.linear_weights

    def _after_score(self) -> InferenceSession | None:
        """For a linear score (:meth:`_linear_score`), the session of what follows it in
        the graph (None when the score is the output).

        Sparse ``X`` is then scored by scipy (:meth:`_run_from_scores`), its work in the
        stored values, instead of densified for the whole graph (a 5k x 200k matrix with
        40 values a row: 367 -> 10 ms, measured).
        """
        template = self._template_
        if "after_score" not in template.__dict__:
            found = None
            if [o.name for o in template.model.graph.output] != [template.score]:
                options = session_options(self._inference_threads(),
                                          log_severity(verbose=self.verbose), spin=True)
                found = cached_session(select_model_input(template.model, template.score),
                                       options, device_providers(self.device))
            template.after_score = found
        return template.after_score

    def _run_from_scores(self, X: Any, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """:meth:`_run` on sparse ``X`` for a linear score: :math:`s = XW + b` by scipy,
        summed in float64 and rounded to the model's dtype once, then the rest of the
        graph on ``s``."""
        template = self._template_
        coef_name, intercept_name = self._linear_weights()
        coef = feeds[coef_name]
        # A fixed intercept is a constant of the graph, not a feed.
        intercept = (feeds[intercept_name] if intercept_name in feeds
                     else initializer_array(template.score_model, intercept_name))
        exact = (np.asarray(X.astype(np.float64) @ coef.astype(np.float64))
                 + intercept.astype(np.float64).reshape(1, -1))
        with np.errstate(over="ignore"):  # overflows are predicted again in float64
            scores = exact.astype(coef.dtype)
        outputs = {template.score: scores}
        session = self._after_score()
        if session is not None:
            names = io_names(session)[1]
            outputs.update(zip(names, session.run(names, {template.score: scores}),
                               strict=True))
        return outputs

    def _recompute_in_float64(self, X: Any, rows: np.ndarray, outputs: dict[str, np.ndarray],
                              feeds: dict[str, np.ndarray], output: str | None) -> None:
        """Predict ``rows`` of the validated, finite ``X`` again with the graph in float64,
        in place in ``outputs``: their float outputs become float64 arrays.

        Raises
        ------
        ValueError
            If the model computes in float64 already, or the float64 graph's outputs are
            not finite either.
        """
        dtype = self.optimizer_.model_dtype()
        first = int(rows[0])
        if dtype == np.float64:
            raise _overflow(first, "float64")
        source = self._preprocess(X[rows])
        source = source.toarray() if hasattr(source, "toarray") else np.asarray(source)
        session = self._session(None, np.float64)  # every output the caller may have
        inputs, names = io_names(session)
        wide = {name: np.asarray(value, dtype=np.float64) for name, value in feeds.items()
                if name in inputs}
        wide[inputs[0]] = np.ascontiguousarray(source, dtype=np.float64)
        recomputed = dict(zip(names, session.run(names, wide), strict=True))
        bad = non_finite_rows({name: recomputed[name] for name in outputs})
        if bad.size:
            raise _overflow(int(rows[bad[0]]), "float64")
        for name, values in outputs.items():
            if values.dtype.kind == "f":
                values = outputs[name] = values.astype(np.float64)
            values[rows] = recomputed[name].reshape((len(rows), *values.shape[1:]))


def _cast_input(graph: onnx.GraphProto, dtype: np.dtype) -> None:
    """Make ``graph`` read its first input in ``dtype`` and ``Cast`` it to the type its
    nodes read (in place)."""
    features = graph.input[0]
    wide = unique_name(f"{features.name}_{dtype.name}", graph_names(graph))
    graph.node.insert(0, onnx.helper.make_node(
        "Cast", [wide], [features.name], to=features.type.tensor_type.elem_type,
        name="cast_input"))
    features.name = wide
    features.type.tensor_type.elem_type = onnx_dtype(dtype)


def _n_graph_features(model: onnx.ModelProto) -> int:
    """Columns of the graph's features input, as skl2onnx declares it ``[None, n]``."""
    return model.graph.input[0].type.tensor_type.shape.dim[1].dim_value


def _overflow(row: int, dtype: str) -> ValueError:
    return ValueError(
        f"The prediction of row {row} of X is NaN or infinite in {dtype}, although X is "
        "finite: its values are too large for the model's weights. Scale the data.")
