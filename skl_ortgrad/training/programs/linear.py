r"""The linear program: the step of a linear model written by hand (squared error, log
and hinge losses, one-vs-rest; the passive-aggressive step), on rows of dense features
(see :mod:`skl_ortgrad.training.programs`; its sparse form is
:mod:`~skl_ortgrad.training.programs.sparse`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from onnx import ModelProto, TensorProto, helper, numpy_helper

from skl_ortgrad.graph.dtypes import onnx_dtype
from skl_ortgrad.graph.model import IR_VERSION, OPSET
from skl_ortgrad.graph.step_graph import StepGraph
from skl_ortgrad.optim.passive_aggressive import VARIANTS
from skl_ortgrad.training.programs.scan import scan
from skl_ortgrad.training.programs.steps import (
    PerStep,
    StepTemplate,
    check_steps,
    cumulative_l1,
    proximal,
    step_norms,
    value_info,
    views,
)

#: Loss kinds of :func:`linear_program`.
LINEAR_LOSSES = ("squared_error", "log", "hinge")
#: Loss kinds of the passive-aggressive step (:func:`dense_linear_program`'s
#: ``passive_aggressive``), scikit-learn's: the classifiers' and the regressor's.
PASSIVE_AGGRESSIVE_LOSSES = ("hinge", "epsilon_insensitive")


@dataclass
class LinearProgram(PerStep):
    r"""The linear program (:func:`linear_program`) and how to feed it.

    Per epoch, the caller computes the per-row inputs (arrays of ``n_batches *
    batch_rows`` values, batch after batch, a short last batch padded): the row indices
    ``rows``, the ``target`` (:meth:`targets`) and the step weights (:meth:`step_weights`);
    per call, it feeds them with the whole dataset (:meth:`feeds`) and reads the new
    weights and one value per row (:meth:`fetches`), whose batch losses are
    :meth:`losses`.

    Attributes
    ----------
    model : ModelProto
    loss : str
        One of :data:`LINEAR_LOSSES`.
    threshold : float
        The hinge loss's margin :math:`t` (0 for the perceptron).
    steps, batch_rows, n_features : int
    scalars : list of (str, str, tuple)
        Per-step scalar inputs (decay, thresholds), as :attr:`StepProgram.scalars`.
    dtype : numpy.dtype
    n_outputs : int
        :math:`K`, the scores (one-vs-rest classes); the per-row target, step weights and
        values are ``(n, K)`` arrays when above 1, ``(n,)`` otherwise.
    norms : tuple of str
        The per-step ``NORMS`` outputs (``norms=True``; the scaled sparse form also
        writes the scale :math:`a`, ``"scales"``), one value per step.
    weights, new_weights : tuple of str
        The weight inputs and outputs: :math:`W`, :math:`b`, then (``cumulative``) the
        cumulative L1 penalty's :math:`q` of :math:`W`, shaped as :math:`W`.
    """

    model: ModelProto
    loss: str
    threshold: float
    steps: int
    batch_rows: int
    n_features: int
    scalars: list[tuple[str, str, tuple[int, ...]]]
    dtype: np.dtype
    n_outputs: int = 1
    norms: tuple[str, ...] = ()

    #: Input and output names (fixed: the program is written by hand).
    weights: tuple[str, ...] = ("coef", "intercept")
    new_weights: tuple[str, ...] = ("new_coef", "new_intercept")
    #: The per-row inputs: without the rows' indices where the program reads its rows
    #: in order (``staged``).
    per_row: tuple[str, ...] = ("rows", "target", "step_weight")
    #: Whether the features fed are the call's rows, in order (staged by the caller), or
    #: the whole dataset, which each step reads at its ``rows``.
    staged: bool = False
    #: The per-row inputs of integers, one per row whatever :math:`K`: the row indices
    #: and (the sparse form with the cumulative L1 penalty) the values each row stores.
    index_rows = ("rows", "stored_counts")
    features, values = "X", "values"
    #: Whether the step weights carry the rate :math:`\eta_j \sigma_j` (the
    #: passive-aggressive step sizes its steps itself).
    rated = True

    @property
    def weight_shapes(self) -> list[tuple[int, ...]]:
        """``[1, d]`` and ``[1, 1]``: views of the caller's ``[d, 1]`` and ``[1]``;
        ``[d, K]`` and ``[1, K]`` for :math:`K` outputs; :math:`q` as :math:`W`."""
        if self.n_outputs > 1:
            shapes = [(self.n_features, self.n_outputs), (1, self.n_outputs)]
        else:
            shapes = [(1, self.n_features), (1, 1)]
        return shapes + shapes[:1] * (len(self.weights) - 2)

    def _step_shape(self, count: int) -> tuple[int, ...]:
        """Shape of ``count`` steps of a per-row input or of the values: ``[1, b]`` a
        step, ``[b, K]`` for :math:`K` outputs."""
        b = self.batch_rows
        return (count, b, self.n_outputs) if self.n_outputs > 1 else (count, 1, b)

    def targets(self, labels: np.ndarray, out: np.ndarray) -> None:
        """Write the ``target`` of ``labels`` (the label, or :math:`2y - 1` for the hinge
        loss) into ``out``."""
        if self.loss == "hinge":
            np.multiply(labels, 2, out=out)
            np.subtract(out, 1, out=out)
        else:
            np.copyto(out, labels)

    def step_weights(self, rates: np.ndarray, targets: np.ndarray,
                     out: np.ndarray) -> None:
        r"""Write the step weights into ``out``: ``rates`` (per row,
        :math:`\eta_j \sigma_j s_i`; the same for the :math:`K` outputs of a row), negated
        and times the target :math:`2y - 1` for the hinge loss, whose residual is
        :math:`-(2y - 1)` inside the margin."""
        if out.ndim > rates.ndim:
            rates = rates[..., None]
        if self.loss == "hinge":
            np.multiply(rates, targets, out=out)
            np.negative(out, out=out)
        else:
            np.copyto(out, rates)

    def losses(self, values: np.ndarray, targets: np.ndarray,
               loss_weights: np.ndarray) -> np.ndarray:
        r"""The loss sum of every batch from the program's per-row ``values`` (shape
        ``(count * batch_rows,)``), the rows' ``targets`` and ``loss_weights`` (sample
        weight, 0 for padding), in the program's dtype, so that a loss overflowing it is
        not finite, as in the gradient graph:

        * squared error, values :math:`r = s - y`: :math:`\frac12 r^2`;
        * log loss, values :math:`s`: :math:`\log(1 + e^s) - y s`;
        * hinge, values :math:`z = (2y - 1) s`: :math:`\max(0, t - z)`;
        * epsilon-insensitive (the passive-aggressive regressor's), values :math:`r = s -
          y`: :math:`\max(0, |r| - t)`, :math:`t` the ``threshold`` :math:`\epsilon`.
        """
        v, dtype = values, self.dtype.type
        with np.errstate(over="ignore", invalid="ignore"):
            if self.loss == "squared_error":
                each = dtype(0.5) * v * v
            elif self.loss == "log":
                # log(1 + e^s) = max(s, 0) + log1p(e^{-|s|}): numpy's exp and log1p run
                # on vectors, its logaddexp one value at a time (100k float32 values:
                # 0.13 against 1.4 ms); the two agree to an ulp or two.
                each = np.abs(v)
                np.negative(each, out=each)
                np.exp(each, out=each)
                np.log1p(each, out=each)
                each += np.maximum(v, dtype(0))
                each -= targets * v
            elif self.loss == "epsilon_insensitive":
                each = np.maximum(dtype(0), np.abs(v) - dtype(self.threshold))
            else:
                each = np.maximum(dtype(0), dtype(self.threshold) - v)
            if self.n_outputs > 1:
                # Every output of a row weighs the row's weight.
                return (each * loss_weights[:, None]).reshape(
                    -1, self.batch_rows * self.n_outputs).sum(axis=1)
            return (each * loss_weights).reshape(-1, self.batch_rows).sum(axis=1)

    def feeds(
        self, features: np.ndarray, per_row: dict[str, np.ndarray],
        table: dict[str, np.ndarray], weights: Sequence[np.ndarray], first: int, count: int,
    ) -> dict[str, np.ndarray]:
        """The inputs of the call running batches ``first .. first + count - 1``, as
        views: ``features`` (the whole dataset, C-contiguous; :attr:`staged`: the call's
        rows in order, first), ``per_row`` (the epoch's :attr:`per_row` arrays),
        ``table`` (:func:`scalar_table`), the ``weights``."""
        if self.staged:
            b = self.batch_rows
            features = features[:count * b].reshape(count, b, self.n_features)
        return {self.features: features,
                **self._step_feeds(per_row, table, weights, first, count)}

    def _step_feeds(self, per_row: dict[str, np.ndarray], table: dict[str, np.ndarray],
                    weights: Sequence[np.ndarray], first: int, count: int,
                    ) -> dict[str, np.ndarray]:
        """The weights, and the per-row and per-step inputs of the call, as views."""
        b = self.batch_rows
        result = dict(zip(self.weights, views(weights, self.weight_shapes), strict=True))
        for name in self.per_row:
            shape = (count, b) if name in self.index_rows else self._step_shape(count)
            result[name] = per_row[name][first * b:(first + count) * b].reshape(shape)
        result.update({name: table[name][first:first + count] for name, _, _ in self.scalars})
        return result

    def fetches(self, values: np.ndarray, weights: Sequence[np.ndarray], first: int,
                count: int, norms: dict[str, np.ndarray] | None = None,
                ) -> dict[str, np.ndarray]:
        """The outputs of that call as views of ``values`` (the epoch's, one per row), of
        the buffers of the new ``weights`` and of ``norms`` (the epoch's, one per step,
        by name: :attr:`norms`)."""
        b = self.batch_rows
        result = dict(zip(self.new_weights, views(weights, self.weight_shapes), strict=True))
        result[self.values] = values[first * b:(first + count) * b].reshape(
            self._step_shape(count))
        result.update({name: norms[name][first:first + count] for name in self.norms})
        return result


class PassiveAggressiveForm:
    r"""What the passive-aggressive forms of the linear programs share (dense:
    :class:`PassiveAggressiveProgram`; sparse: :class:`~skl_ortgrad.training.programs.
    sparse.SparsePassiveAggressiveProgram`), scikit-learn's ``learning_rate='pa1'`` and
    ``'pa2'``: one row a step, whose step size :math:`\tau` the graph computes from the
    row's loss and its ``denominator`` (:meth:`denominators`,
    :func:`passive_aggressive_nodes`); the step weights hold no rate (:attr:`rated`):
    the row's sample weight :math:`s`, times :math:`-(2y - 1)` for the hinge loss.

    Attributes
    ----------
    variant : str
        ``'pa1'`` or ``'pa2'``.
    C : float
        :math:`C`.
    """

    variant: str
    C: float
    rated = False

    def denominators(self, squared_norms: np.ndarray, out: np.ndarray) -> None:
        r"""Write the rows' denominators of :math:`\tau` into ``out``, from their
        ``squared_norms`` :math:`\lVert x \rVert^2` (float64): :math:`\lVert x \rVert^2`
        (PA-I; 1 for a row of no norm, which PA-I skips: its step weight is 0, and its
        quotient must stay finite), :math:`\lVert x \rVert^2 + \frac{1}{2C}` (PA-II), as
        scikit-learn sums them, in float64; the same for the :math:`K` outputs of a
        row."""
        total = (np.where(squared_norms > 0, squared_norms, 1.0) if self.variant == "pa1"
                 else squared_norms + 0.5 / self.C)
        out[...] = total.reshape(-1, *(1,) * (out.ndim - 1))


@dataclass
class PassiveAggressiveProgram(PassiveAggressiveForm, LinearProgram):
    """The dense linear program's passive-aggressive form (:func:`dense_linear_program`'s
    ``passive_aggressive``; see :class:`PassiveAggressiveForm`)."""

    variant: str = "pa1"
    C: float = 1.0
    per_row: tuple[str, ...] = ("rows", "target", "step_weight", "denominator")


def check_linear(loss: str, steps: int, n_outputs: int, batch_rows: int = 1,
                 passive_aggressive: tuple[str, float] | None = None) -> int:
    """Check :func:`linear_program`'s arguments (``batch_rows``: one row for the
    ``passive_aggressive`` step, whose losses are :data:`PASSIVE_AGGRESSIVE_LOSSES`);
    return :math:`K`."""
    if passive_aggressive is None:
        if loss not in LINEAR_LOSSES:
            raise ValueError(f"linear_program's loss must be one of {LINEAR_LOSSES}, got "
                             f"{loss!r}.")
    else:
        if loss not in PASSIVE_AGGRESSIVE_LOSSES:
            raise ValueError(f"The passive-aggressive step's loss must be one of "
                             f"{PASSIVE_AGGRESSIVE_LOSSES}, got {loss!r}.")
        variant, C = passive_aggressive
        if variant not in VARIANTS or not np.isfinite(C) or C <= 0:
            raise ValueError(f"passive_aggressive must be (one of {VARIANTS}, C > 0), got "
                             f"{passive_aggressive!r}.")
        if int(batch_rows) != 1:
            raise ValueError(f"The passive-aggressive step reads one row a batch, got "
                             f"batch_rows={batch_rows}.")
    check_steps(steps)
    outputs = int(n_outputs)
    if outputs < 1:
        raise ValueError(f"linear_program's n_outputs must be >= 1, got {n_outputs}.")
    return outputs


def form_fields(passive_aggressive: tuple[str, float] | None) -> dict[str, object]:
    """The fields of a program's passive-aggressive form (:class:`PassiveAggressiveForm`)
    from ``(variant, C)``; none for the gradient step."""
    if passive_aggressive is None:
        return {}
    return {"variant": passive_aggressive[0], "C": float(passive_aggressive[1])}


def residual_nodes(step: StepGraph, loss: str, score: str, threshold: float,
                   dtype: np.dtype | type, row_shape: list[int],
                   constants: dict[str, np.ndarray],
                   passive_aggressive: tuple[str, float] | None = None) -> tuple[str, str]:
    r"""The nodes of :math:`u` from the scores (``score``), the ``target`` and the
    ``step_weight`` inputs, as :func:`linear_program` says per loss (the
    ``passive_aggressive`` step's: :func:`passive_aggressive_nodes`); return the per-row
    values and :math:`u`. ``constants`` receives the initializers they need."""
    if passive_aggressive is not None:
        return passive_aggressive_nodes(step, loss, score, threshold, *passive_aggressive,
                                        dtype, row_shape, constants)
    emit = step.node
    target, step_weight = LinearProgram.per_row[-2:]
    if loss == "squared_error":
        values = emit("Sub", [score, target], "residual")
        return values, emit("Mul", [values, step_weight], "scaled_residual")
    if loss == "log":
        residual = emit("Sub", [emit("Sigmoid", [score], "probability"), target], "residual")
        return score, emit("Mul", [residual, step_weight], "scaled_residual")
    values = emit("Mul", [score, target], "margin")
    exact = exact_step_function(threshold, dtype)
    if exact is not None:
        mask = emit("HardSigmoid", [values], "inside_mask", alpha=exact[0], beta=exact[1])
    else:
        # The margins' shape (rank and shape matched: no broadcasting); a Cast and a Mul
        # of the mask are faster than a Where (measured 0.3 µs per step).
        constants["margin_threshold"] = np.full(row_shape, threshold, dtype=dtype)
        inside = emit("LessOrEqual", [values, "margin_threshold"], "inside")
        mask = emit("Cast", [inside], "inside_mask", to=onnx_dtype(dtype))
    return values, emit("Mul", [mask, step_weight], "scaled_residual")


def passive_aggressive_nodes(step: StepGraph, loss: str, score: str, threshold: float,
                             variant: str, C: float, dtype: np.dtype | type,
                             row_shape: list[int],
                             constants: dict[str, np.ndarray]) -> tuple[str, str]:
    r"""The nodes of the passive-aggressive :math:`u` from the scores (``score``) and the
    ``target``, ``step_weight`` and ``denominator`` inputs
    (:class:`PassiveAggressiveForm`); return the per-row values and :math:`u`.

    With the row's loss :math:`\ell` (hinge: :math:`\max(0, t - z)`, :math:`z = (2y -
    1) s` the values; epsilon-insensitive: :math:`\max(0, |r| - t)`, :math:`r = s - y`
    the values, :math:`t` the ``threshold``) and its denominator :math:`n`, the step
    size is :math:`\tau = \min(C, \ell / n)` (PA-I) or :math:`\ell / n` (PA-II), and
    :math:`u = \tau c` (hinge; :math:`c = -(2y - 1) s`), :math:`u = \tau
    \operatorname{sign}(r) c` (epsilon-insensitive; :math:`c = s`): the update
    :math:`W \leftarrow D_W - u X_B` steps :math:`\tau s (2y - 1) x` or :math:`\tau s
    \operatorname{sign}(y - s) x`, scikit-learn's. ``constants`` receives the
    initializers they need, of the rows' shape (no broadcasting)."""
    emit = step.node
    target, step_weight, denominator = PassiveAggressiveProgram.per_row[1:]
    constants["loss_threshold"] = np.full(row_shape, threshold, dtype=dtype)
    if loss == "hinge":
        values = emit("Mul", [score, target], "margin")
        excess = emit("Sub", ["loss_threshold", values], "margin_gap")
    else:
        values = emit("Sub", [score, target], "residual")
        excess = emit("Sub", [emit("Abs", [values], "distance"), "loss_threshold"],
                      "distance_gap")
    # max(0, g) / n = max(0, g / n) for n > 0, bit for bit, and min(C, max(0, g / n)) is
    # one Clip: a node fewer.
    quotient = emit("Div", [excess, denominator], "loss_quotient")
    if variant == "pa1":
        constants["no_step"] = np.zeros((), dtype=dtype)
        constants["largest_step"] = np.array(C, dtype=dtype)
        size = emit("Clip", [quotient, "no_step", "largest_step"], "step_size")
    else:
        size = emit("Relu", [quotient], "step_size")
    if loss != "hinge":
        size = emit("Mul", [size, emit("Sign", [values], "direction")], "signed_step_size")
    return values, emit("Mul", [size, step_weight], "scaled_residual")


def intercept_update(step: StepGraph, u: str, by_rows: bool) -> str:
    r""":math:`b \leftarrow b - u f` (:math:`u` ``[1, b]``), or :math:`b - f^\top U`
    (``by_rows``: :math:`U` ``[b, K]``), one ``Gemm`` with the ``intercept_steps``
    constant :math:`f`, every entry the intercept's step factor (1 but for plain SGD's
    ``step_factors``): a tensor of the weights' type, where ``Gemm``'s ``alpha``, a
    float32 attribute, would round scikit-learn's 0.01 in float64 programs."""
    intercept = LinearProgram.weights[1]
    if by_rows:
        return step.node("Gemm", ["intercept_steps", u, intercept], "intercept_stepped",
                         alpha=-1.0)
    return step.node("Gemm", [u, "intercept_steps", intercept], "intercept_stepped",
                     alpha=-1.0)


#: The names of the inputs, outputs and constants of both forms, so that no node output
#: takes one.
RESERVED = {"X", "coef", "intercept", "new_coef", "new_intercept", "coef_applied",
            "new_coef_applied", "rows", "target", "step_weight", "stored_counts",
            "stored_columns", "stored_values", "values", "intercept_steps",
            "margin_threshold", "row_axis", "scale", "scaled_coef", "final_scale",
            "squared_norm", "final_squared_norm", "denominator", "loss_threshold",
            "no_step", "largest_step"}


def dense_linear_program(
    loss: str, n_features: int, steps: int, batch_rows: int,
    dtype: np.dtype | type = np.float32, l1: bool = False, l2: bool = False,
    threshold: float = 1.0, n_outputs: int = 1, norms: bool = False,
    cumulative: bool = False, intercept_step: float = 1.0,
    features_dtype: np.dtype | type | None = None, staged: bool = False,
    passive_aggressive: tuple[str, float] | None = None,
) -> LinearProgram:
    r"""The program of ``steps`` steps of a linear model, written by hand, on rows.

    Per step, with the batch's rows :math:`X_B` = ``Gather(X, rows)`` (``[b, d]``; the
    ``X`` of the step itself where ``staged``),
    :math:`W` of shape ``[1, d]``, the scores :math:`s = W X_B^\top + b` (one ``Gemm``,
    ``[1, b]``), the ``target`` :math:`y` (``[1, b]``) and the step weights :math:`c`:

    * ``"squared_error"``: :math:`u = (s - y) \odot c`, values :math:`s - y`;
    * ``"log"`` (labels in {0, 1}, the package's ``NegLogLearningLoss(eps=0)``):
      :math:`u = (\sigma(s) - y) \odot c`, values :math:`s`;
    * ``"hinge"`` (target :math:`a = 2y - 1`, step weights :math:`-a \eta\sigma s_i`):
      :math:`u = c \odot [z \le t]` with the margins :math:`z = a \odot s` and the
      ``threshold`` :math:`t` (the kink included, as scikit-learn); values :math:`z`; the
      mask :math:`[z \le t]` one ``HardSigmoid`` in float32 for :math:`t > 0`
      (:func:`exact_step_function`), a comparison and a ``Cast`` otherwise;

    then :math:`W \leftarrow D_W - u X_B` (:math:`D_W` the penalty's proximal step of
    :math:`W`, as in :func:`generic_program`) and :math:`b \leftarrow b - u f` (one
    ``Gemm`` each; :math:`f` the ``intercept_step``, :func:`intercept_update`), then
    with ``cumulative`` the cumulative L1 penalty's step of :math:`W`
    (:func:`~skl_ortgrad.training.programs.steps.cumulative_l1`), its state :math:`q` a
    third weight. Nodes per step: 6 (squared error), 7 (log loss) or 7
    (hinge; 8 for the perceptron's threshold 0 and in float64), plus 1 for L2, 2 for L1,
    9 for the cumulative L1. Sample weights cost nothing: they are in :math:`c`.

    ``n_outputs`` :math:`K > 1` (one-vs-rest classes, each output its own binary loss):
    :math:`W` is ``[d, K]`` as the caller holds it, the scores :math:`S = X_B W + b` are
    ``[b, K]`` (one ``Gemm``), the per-row inputs and values ``[b, K]``, and :math:`W
    \leftarrow D_W - X_B^\top U`, :math:`b \leftarrow b - 1^\top U` (one ``Gemm``
    each): the same nodes. The sparse form gathers ``[width, b, K]`` rows of :math:`W`,
    its values fed ``[width, b, 1]``, and scatters ``[width, b, K]`` steps.

    Parameters
    ----------
    loss : str
        One of :data:`LINEAR_LOSSES`.
    n_features : int
    steps : int
        :math:`k`, the batches of a full chunk.
    batch_rows : int
    dtype : numpy dtype
    l1, l2 : bool
        Emit the L1 soft threshold / the L2 decay of :math:`W`.
    threshold : float
        The hinge loss's :math:`t`.
    n_outputs : int
        :math:`K`.
    norms : bool
        Also output, per step, the ``NORMS`` of :math:`W` the step starts from (one
        reduction each).
    cumulative : bool
        Emit the cumulative L1 penalty after the step (scikit-learn's; its total
        :math:`u_j` fed per step, ``l1_total``, :math:`q` an input and an output).
    intercept_step : float
        :math:`f`, the factor of the intercept's step (plain SGD's ``step_factors``:
        scikit-learn's ``intercept_decay``, 0.01 on sparse data).
    features_dtype : numpy dtype, optional
        The type of the ``X`` input when it is not ``dtype`` (rows read as given:
        float64 ones of a float32 model, or the reverse): every step casts its gathered
        rows to ``dtype`` (``Cast`` rounds as numpy's cast), so the program computes what
        it computes on ``X`` cast beforehand, bit for bit, without a cast of all of ``X``.
    staged : bool
        Read each step's rows in order, fed ``[steps, b, d]`` as ``X`` (the caller
        gathered them: :mod:`~skl_ortgrad.runtime.staging`), without the ``rows`` input
        and its ``Gather``: the same scores and updates, bit for bit.
    passive_aggressive : (str, float), optional
        ``(variant, C)``: the passive-aggressive step (:class:`PassiveAggressiveProgram`,
        :func:`passive_aggressive_nodes`), batches of one row, the hinge or the
        epsilon-insensitive loss (:data:`PASSIVE_AGGRESSIVE_LOSSES`, ``threshold`` its
        :math:`t` or :math:`\epsilon`), instead of the gradient step: 5 nodes
        (hinge; 8 epsilon-insensitive) instead of 3.

    Returns
    -------
    LinearProgram
        Memoized (64 programs): the same arguments give the same object, which callers
        only read (a grid search of small fits writes each program once).
    """
    outputs = check_linear(loss, steps, n_outputs, batch_rows, passive_aggressive)
    p = LinearProgram if passive_aggressive is None else PassiveAggressiveProgram
    elem, b = onnx_dtype(dtype), int(batch_rows)
    # One step's per-row tensors: [1, b], or [b, K] with K outputs.
    row_shape = [b, outputs] if outputs > 1 else [1, b]
    step = StepGraph(set(RESERVED), dtype)
    emit = step.node
    coef, intercept = p.weights
    rows, *per_row = p.per_row
    constants: dict[str, np.ndarray] = {
        "intercept_steps": np.full((1, b) if outputs > 1 else (b, 1), intercept_step,
                                   dtype=dtype)}
    wide = features_dtype is not None and np.dtype(features_dtype) != np.dtype(dtype)
    if staged and wide:
        raise ValueError("A staged linear program reads rows of its own dtype.")
    batch = p.features if staged else emit("Gather", [p.features, rows], "batch", axis=0)
    if wide:
        batch = emit("Cast", [batch], "batch_cast", to=elem)
    s = (emit("Gemm", [batch, coef, intercept], "score") if outputs > 1
         else emit("Gemm", [coef, batch, intercept], "score", transB=1))
    extra = step_norms(step, [coef], l1 or cumulative, l2) if norms else []
    values, u = residual_nodes(step, loss, s, threshold, dtype, row_shape, constants,
                               passive_aggressive)
    start = proximal(step, coef, 2, l1, l2)
    if outputs > 1:
        # C - A^T B (alpha=-1): X_B^T U for W, then 1^T U for b.
        new_coef = emit("Gemm", [batch, u, start], "coef_stepped", alpha=-1.0, transA=1)
    else:
        # C - A B (alpha=-1): u X_B for W.
        new_coef = emit("Gemm", [u, batch, start], "coef_stepped", alpha=-1.0)
    new_intercept = intercept_update(step, u, outputs > 1)
    coef_shape = [n_features, outputs] if outputs > 1 else [1, n_features]
    weights, new_weights = p.weights, p.new_weights
    if cumulative:
        weights, new_weights = (*weights, "coef_applied"), (*new_weights, "new_coef_applied")
        new_coef, new_applied = cumulative_l1(step, new_coef, weights[2], 2)
    template = StepTemplate(
        nodes=step.nodes,
        initializers=[numpy_helper.from_array(v, name) for name, v in constants.items()],
        data=[value_info(p.features, elem, [b, n_features]) if staged
              else value_info(rows, TensorProto.INT64, [b]),
              *(value_info(name, elem, row_shape) for name in per_row)],
        scalars=step.scalar_inputs(),
        weights=[value_info(coef, elem, coef_shape), value_info(intercept, elem, [1, outputs]),
                 *(value_info(name, elem, coef_shape) for name in weights[2:])],
        new_weights=[new_coef, new_intercept, *([new_applied] if cumulative else [])],
        loss=values, loss_shape=tuple(row_shape), elem=elem, opsets=[("", OPSET)],
        ir_version=IR_VERSION, extra=extra,
    )
    graph = scan(template, list(new_weights), losses=p.values,
                 dataset=[] if staged else [value_info(
                     p.features, onnx_dtype(features_dtype) if wide else elem,
                     [None, n_features])])
    return p(
        model=linear_model(graph), loss=loss, threshold=float(threshold), steps=int(steps),
        batch_rows=b, n_features=int(n_features), scalars=template.scalars,
        dtype=np.dtype(dtype), n_outputs=outputs, norms=tuple(name for name, _, _ in extra),
        weights=weights, new_weights=new_weights,
        per_row=tuple(per_row) if staged else p.per_row, staged=staged,
        **form_fields(passive_aggressive),
    )


def linear_model(graph) -> ModelProto:
    """The model of a linear program's graph (standard opset, the supported IR)."""
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             ir_version=IR_VERSION)


def exact_step_function(threshold: float,
                         dtype: np.dtype | type) -> tuple[float, float] | None:
    r"""``(alpha, beta)`` of a ``HardSigmoid`` equal to :math:`[z \le t]` for every float32
    :math:`z` (the hinge loss's margin mask in one node instead of a comparison and a
    ``Cast``, which cost 2 µs of a 10 µs step, measured), or None where no such pair
    exists (float64: the attributes are float32; :math:`t \le 0`; :math:`t < 2^{-104}`).

    With :math:`t = m 2^e` (:math:`\tfrac12 \le m < 1`) and :math:`K = 2^{24 - e}`, the
    inverse of the spacing of float32 values at :math:`t`, ``HardSigmoid`` computes
    :math:`\operatorname{clip}(-K z + (K t + 1), 0, 1)`: :math:`K z` is exact (a power of
    two; an overflow is an infinity on the correct side), :math:`K t + 1 = m 2^{24} + 1`
    is an integer float32 holds, and near :math:`t` the sum is exact (Sterbenz): it is 1
    at :math:`z = t`, at least 1.5 below (the float32 values there are multiples of half
    the spacing) and at most 0 above.
    """
    t = np.float32(threshold)
    if np.dtype(dtype) != np.float32 or not 0 < t < np.inf:
        return None
    exponent = int(np.frexp(t)[1])
    if exponent < -103:  # K beyond float32
        return None
    scale = 2.0 ** (24 - exponent)
    return -scale, scale * float(t) + 1.0
