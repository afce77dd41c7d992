"""ONNX graphs of the losses used to train models with onnxruntime-training.

Every graph built here has the same contract:

* inputs ``label`` and ``prediction``, both of shape ``[N, K]`` and of the requested dtype,
  plus ``weight`` of shape ``[N]`` when the loss is weighted,
* one output ``loss``, a scalar (shape ``[]``),

.. math::

    L = \\sum_{i=1}^{N} w_i \\sum_{k=1}^{K} \\ell(y_{ik}, p_{ik}),

with :math:`w_i = 1` when the loss is not weighted. The per-row sum is computed first and
then weighted, so every sample weight multiplies the whole row it belongs to.

Only operators whose gradient exists in onnxruntime-training 1.19, with float32 and
float64 kernels, appear in these graphs (``Abs``, ``Mul``, ``Sub``, ``Add``, ``Neg``,
``ReduceSum``, ``Sigmoid``, ``Log``, ``Exp``, and ``Softmax``/``LogSoftmax`` in float32
only). ``Softplus``, ``Sign`` and ``ReduceMax`` have no gradient there, ``ReluGrad``,
``SoftmaxGrad_13`` and ``LogSoftmaxGrad_13`` have no float64 kernel, and comparisons stop
the gradient, so every piecewise loss is written with ``Abs``:
:math:`\\mathrm{relu}(x) = (x + |x|)/2`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import numpy as np
from onnx import ModelProto, NodeProto, TensorProto, helper, numpy_helper

from skl_ortgrad.graph.dtypes import onnx_dtype
from skl_ortgrad.graph.model import OPSET, make_model

# ReduceSum takes its axes as an input from opset 13 on, Softmax/LogSoftmax normalise over
# one axis from opset 13 on: the graphs below rely on both.
MIN_OPSET = 13


class _GraphBuilder:
    """Collect nodes and constants of a small graph with unique intermediate names."""

    def __init__(self, dtype: np.dtype, prefix: str = "") -> None:
        self.dtype = np.dtype(dtype)
        self.prefix = prefix
        self.nodes: list[NodeProto] = []
        self.initializers: list[TensorProto] = []
        self._counter = 0
        self._constants: dict[tuple[str, bytes], str] = {}

    def _unique(self, hint: str) -> str:
        self._counter += 1
        return f"{self.prefix}{hint}_{self._counter}"

    def const(
        self, value: float | np.ndarray, dtype: np.dtype | type | None = None,
        scalar: bool = False,
    ) -> str:
        """Return the name of an initializer holding ``value`` (shared when repeated).

        A float number is stored with shape [1, 1], the rank of the [N, K] tensors it
        meets, unless ``scalar`` (operators that require a 0-d input, such as ``Clip``'s
        bounds): onnxruntime 1.19's CPU ``Add``/``Sub``/``Mul``/``Div`` between an
        [N, K] tensor and a 0-d or [1] constant take a slow path, 8 µs per 1000 elements
        against 0.6 µs with [1, 1] (measured, one thread).
        """
        array = np.asarray(value, dtype=self.dtype if dtype is None else dtype)
        if dtype is None and array.ndim == 0 and not scalar:
            array = array.reshape((1, 1))
        key = (array.dtype.str + str(array.shape), array.tobytes())
        if key not in self._constants:
            name = self._unique("cst")
            self.initializers.append(numpy_helper.from_array(array, name))
            self._constants[key] = name
        return self._constants[key]

    def op(self, op_type: str, *inputs: str, output: str | None = None, **attrs) -> str:
        """Add a node with one output and return the output name."""
        out = output or self._unique(op_type.lower())
        self.nodes.append(
            helper.make_node(
                op_type, list(inputs), [out], name=self._unique(f"n{op_type}"), **attrs
            )
        )
        return out


# Each loss builder receives the graph builder, the names of the label and prediction
# tensors ([N, K]) and its own parameters, and returns the name of the elementwise loss
# tensor [N, K]. The registry maps every kind (and alias) to one of these functions.
LossBuilder = Callable[..., str]


def _diff(g: _GraphBuilder, label: str, prediction: str) -> str:
    return g.op("Sub", prediction, label)


def _half_square(g: _GraphBuilder, x: str) -> str:
    return g.op("Mul", g.op("Mul", x, x), g.const(0.5))


def _squared_error(g: _GraphBuilder, label: str, prediction: str, factor: float = 0.5) -> str:
    """:math:`\\ell = c (p - y)^2`, :math:`c` = ``factor``: :math:`\\frac12` for training
    (the gradient is the residual), 1 for the seed's ``add_loss_output``."""
    d = _diff(g, label, prediction)
    return g.op("Mul", g.op("Mul", d, d), g.const(factor))


def _absolute_error(g: _GraphBuilder, label: str, prediction: str) -> str:
    """:math:`\\ell = |p - y|`."""
    return g.op("Abs", _diff(g, label, prediction))


def _elastic(
    g: _GraphBuilder, label: str, prediction: str, l1_weight: float = 0.5, l2_weight: float = 0.5
) -> str:
    """:math:`\\ell = a |d| + b \\frac12 d^2`, :math:`a` = ``l1_weight``, :math:`b` = ``l2_weight``.

    Both terms share :math:`d = p - y`.
    """
    d = _diff(g, label, prediction)
    l1 = g.op("Mul", g.op("Abs", d), g.const(l1_weight))
    l2 = g.op("Mul", _half_square(g, d), g.const(l2_weight))
    return g.op("Add", l1, l2)


def _relu(g: _GraphBuilder, x: str) -> str:
    # relu(x) = (x + |x|) / 2, exact in floating point (x + |x| is 2x or 0). ONNX Relu
    # would do in float32, but its gradient (ReluGrad) has no float64 kernel in
    # onnxruntime-training 1.19 while Abs's gradient (Sign, Mul) has one.
    return g.op("Mul", g.op("Add", x, g.op("Abs", x)), g.const(0.5))


def _clipped(g: _GraphBuilder, x: str, threshold: float) -> str:
    # min(x, t) = x - relu(x - t): the gradient is exactly 1 below t and 0 above.
    return g.op("Sub", x, _relu(g, g.op("Sub", x, g.const(threshold))))


def _huber(g: _GraphBuilder, label: str, prediction: str, epsilon: float = 0.1) -> str:
    """:math:`\\ell = \\frac12 d^2` if :math:`|d| \\le \\epsilon` else
    :math:`\\epsilon |d| - \\frac12 \\epsilon^2`.

    Written as :math:`m = |d| - \\mathrm{relu}(|d| - \\epsilon) = \\min(|d|, \\epsilon)`,
    :math:`\\ell = \\frac12 m^2 + \\epsilon (|d| - m)`.
    """
    if epsilon < 0:
        raise ValueError(f"huber needs epsilon >= 0, got {epsilon}.")
    a = g.op("Abs", _diff(g, label, prediction))
    m = _clipped(g, a, epsilon)
    return g.op("Add", _half_square(g, m), g.op("Mul", g.op("Sub", a, m), g.const(epsilon)))


def _epsilon_insensitive(
    g: _GraphBuilder, label: str, prediction: str, epsilon: float = 0.1
) -> str:
    """:math:`\\ell = \\max(0, |d| - \\epsilon)`."""
    if epsilon < 0:
        raise ValueError(f"epsilon_insensitive needs epsilon >= 0, got {epsilon}.")
    a = g.op("Abs", _diff(g, label, prediction))
    return _relu(g, g.op("Sub", a, g.const(epsilon)))


def _squared_epsilon_insensitive(
    g: _GraphBuilder, label: str, prediction: str, epsilon: float = 0.1
) -> str:
    """:math:`\\ell = \\max(0, |d| - \\epsilon)^2` (scikit-learn's, without a factor
    :math:`\\frac12`)."""
    r = _epsilon_insensitive(g, label, prediction, epsilon)
    return g.op("Mul", r, r)


def _poisson(g: _GraphBuilder, label: str, prediction: str) -> str:
    """:math:`\\ell = e^p - y p` on the log of the expected count :math:`p` (half the
    Poisson deviance up to a term of :math:`y` alone)."""
    return g.op("Sub", g.op("Exp", prediction), g.op("Mul", label, prediction))


def _log_probability(g: _GraphBuilder, label: str, prediction: str, eps: float = 1e-5) -> str:
    """Binary log loss of a probability, the seed API's ``add_loss_output(..., 'log')``:
    :math:`p` is the last column of the prediction (the probability of class 1, whether
    the model outputs one column or both), clipped to :math:`[\\epsilon, 1 - \\epsilon]`
    (nothing is clipped when :math:`\\epsilon \\le 0`),
    :math:`\\ell_i = -(y_i \\log p_i + (1 - y_i) \\log(1 - p_i)) / N` over the :math:`N`
    rows: the sum is the mean, scikit-learn's ``log_loss``, as onnxcustom computes it."""
    if not eps < 0.5:
        raise ValueError(f"log_probability needs eps < 0.5 (clipping to [eps, 1 - eps]), got "
                         f"{eps}.")
    # Clipped before the column is taken, as the seed's graph reads: Clip(probabilities).
    clipped = g.op("Clip", prediction, g.const(eps, scalar=True),
                   g.const(1.0 - eps, scalar=True))
    p = g.op("Slice", clipped, g.const([-1], dtype=np.int64),
             g.const([np.iinfo(np.int64).max], dtype=np.int64), g.const([1], dtype=np.int64))
    pos = g.op("Mul", label, g.op("Log", p))
    one = g.const(1.0)
    neg = g.op("Mul", g.op("Sub", one, label), g.op("Log", g.op("Sub", one, p)))
    count = g.op("Gather", g.op("Shape", label), g.const([0], dtype=np.int64))
    rows = g.op("Cast", count, to=onnx_dtype(g.dtype))
    return g.op("Div", g.op("Neg", g.op("Add", pos, neg)), rows)


def _log(g: _GraphBuilder, label: str, prediction: str, eps: float = 1e-5) -> str:
    """Binary (or one-vs-rest) logistic loss on raw scores :math:`s`, labels in {0, 1}.

    With :math:`\\epsilon > 0`: :math:`q = (1 - \\epsilon)\\sigma(s) + \\epsilon / 2`,
    :math:`\\ell = -y \\log q - (1 - y) \\log(1 - q)`, where
    :math:`1 - q = (1 - \\epsilon)\\sigma(-s) + \\epsilon / 2` is computed as such so that it
    does not lose its digits when :math:`\\sigma(s)` rounds to 1.

    With :math:`\\epsilon = 0`:
    :math:`\\ell = \\mathrm{relu}(s) - y s + \\log(1 + e^{-|s|})`, which never overflows.
    """
    if not 0 <= eps < 1:
        raise ValueError(f"log needs 0 <= eps < 1, got {eps}.")
    s, y = prediction, label
    if eps == 0:
        soft = g.op("Log", g.op("Add", g.const(1.0), g.op("Exp", g.op("Neg", g.op("Abs", s)))))
        return g.op("Add", g.op("Sub", _relu(g, s), g.op("Mul", y, s)), soft)
    scale, shift = g.const(1.0 - eps), g.const(eps / 2)
    q = g.op("Add", g.op("Mul", g.op("Sigmoid", s), scale), shift)
    q1 = g.op("Add", g.op("Mul", g.op("Sigmoid", g.op("Neg", s)), scale), shift)
    pos = g.op("Mul", y, g.op("Log", q))
    neg = g.op("Mul", g.op("Sub", g.const(1.0), y), g.op("Log", q1))
    return g.op("Neg", g.op("Add", pos, neg))


def _log_softmax_float64(g: _GraphBuilder, s: str) -> str:
    """:math:`\\log\\mathrm{softmax}(s)_k = c_k - \\log\\sum_j e^{c_j}`, :math:`c = s - m`.

    The gradients of Softmax and LogSoftmax (SoftmaxGrad_13, LogSoftmaxGrad_13) have no
    float64 kernel in onnxruntime-training 1.19 and ReduceMax has no gradient at all, so
    the shift :math:`m` is the row maximum of the scores truncated to int64: the gradient
    builder stops at integer tensors, and the result does not depend on :math:`m` anyway.
    :math:`\\max_k c_k \\in (-1, 1)`, so neither ``Exp`` overflows nor the sum underflows.
    """
    axes = g.const([1], dtype=np.int64)
    limit = g.const(1e15, scalar=True)
    clipped = g.op("Clip", s, g.op("Neg", limit), limit)
    shift = g.op("ReduceMax", g.op("Cast", clipped, to=TensorProto.INT64), axes, keepdims=1)
    c = g.op("Sub", s, g.op("Cast", shift, to=onnx_dtype(g.dtype)))
    lse = g.op("Log", g.op("ReduceSum", g.op("Exp", c), axes, keepdims=1))
    return g.op("Sub", c, lse)


def _softmax_log(g: _GraphBuilder, label: str, prediction: str, eps: float = 1e-5) -> str:
    """Multiclass cross-entropy on raw scores, one-hot labels :math:`y` of shape [N, K].

    With :math:`\\epsilon > 0`:
    :math:`q = (1 - \\epsilon)\\,\\mathrm{softmax}(s) + \\epsilon / K`,
    :math:`\\ell_k = -y_k \\log q_k`. ONNX ``Softmax`` subtracts the row maximum first, so
    large scores do not overflow. With :math:`\\epsilon = 0`:
    :math:`\\ell_k = -y_k\\,\\mathrm{logsoftmax}(s)_k`. In float64 the log-softmax is
    written with elementary operators (see :func:`_log_softmax_float64`).
    """
    if not 0 <= eps < 1:
        raise ValueError(f"softmax_log needs 0 <= eps < 1, got {eps}.")
    double = g.dtype == np.float64
    if eps == 0:
        if double:
            logq = _log_softmax_float64(g, prediction)
        else:
            logq = g.op("LogSoftmax", prediction, axis=1)
    else:
        # K is only known at run time: eps / K from the shape of the labels (the same as
        # the scores'); Shape(prediction) would be a node the gradient builder reports as
        # unreachable for back propagation.
        shape = g.op("Shape", label)
        k = g.op("Gather", shape, g.const(1, dtype=np.int64), axis=0)
        k = g.op("Cast", k, to=onnx_dtype(g.dtype))
        shift = g.op("Div", g.const(eps), k)
        if double:
            soft = g.op("Exp", _log_softmax_float64(g, prediction))
        else:
            soft = g.op("Softmax", prediction, axis=1)
        logq = g.op("Log", g.op("Add", g.op("Mul", soft, g.const(1.0 - eps)), shift))
    return g.op("Neg", g.op("Mul", label, logq))


def _margin(g: _GraphBuilder, label: str, prediction: str) -> str:
    # z = (2y - 1) s: labels {0, 1} become signs {-1, +1}.
    sign = g.op("Sub", g.op("Mul", label, g.const(2.0)), g.const(1.0))
    return g.op("Mul", sign, prediction)


def _hinge(g: _GraphBuilder, label: str, prediction: str, threshold: float = 1.0) -> str:
    """:math:`z = (2y - 1)s`, :math:`\\ell = \\max(0, t - z)`, :math:`t` = ``threshold``
    (0 gives the perceptron loss), as :math:`(t - z)\\, [z \\le t]`: the indicator has no
    gradient, so at :math:`z = t` the derivative is scikit-learn's :math:`-(2y - 1)`
    (a perceptron started from zero weights has every first margin there)."""
    if threshold < 0:
        raise ValueError(f"hinge losses need threshold >= 0, got {threshold}.")
    z = _margin(g, label, prediction)
    t = g.const(threshold)
    costs = g.op("Cast", g.op("LessOrEqual", z, t), to=onnx_dtype(g.dtype))
    return g.op("Mul", g.op("Sub", t, z), costs)


def _squared_hinge(g: _GraphBuilder, label: str, prediction: str, threshold: float = 1.0) -> str:
    """:math:`z = (2y - 1)s`, :math:`\\ell = \\max(0, t - z)^2`, :math:`t` = ``threshold``."""
    r = _hinge(g, label, prediction, threshold)
    return g.op("Mul", r, r)


def _modified_huber(g: _GraphBuilder, label: str, prediction: str) -> str:
    """:math:`z = (2y - 1)s`, :math:`\\ell = \\max(0, 1 - z)^2` if :math:`z \\ge -1`
    else :math:`-4z`.

    With :math:`r = \\mathrm{relu}(1 - z)`, :math:`z \\ge -1 \\iff r \\le 2` and
    :math:`-4z = 4r - 4` when :math:`r > 2`, so with :math:`m = \\min(r, 2)`,
    :math:`\\ell = m^2 + 4(r - m)`.
    """
    r = _hinge(g, label, prediction)
    m = _clipped(g, r, 2.0)
    return g.op("Add", g.op("Mul", m, m), g.op("Mul", g.op("Sub", r, m), g.const(4.0)))


LOSS_BUILDERS: dict[str, LossBuilder] = {
    "squared_error": _squared_error,
    "absolute_error": _absolute_error,
    "elastic": _elastic,
    "huber": _huber,
    "epsilon_insensitive": _epsilon_insensitive,
    "squared_epsilon_insensitive": _squared_epsilon_insensitive,
    "poisson": _poisson,
    "log": _log,
    "log_probability": _log_probability,
    "softmax_log": _softmax_log,
    "hinge": _hinge,
    "squared_hinge": _squared_hinge,
    "modified_huber": _modified_huber,
    # aliases
    "l2": _squared_error,
    "square_error": _squared_error,
    "l1": _absolute_error,
    "log_loss": _log,
    "neg_log": _log,
}


def build_loss_graph(
    kind: str,
    dtype: np.dtype | type = np.float32,
    weighted: bool = False,
    opset: int = OPSET,
    per_row: bool = False,
    **params: float,
) -> ModelProto:
    """Build the ONNX graph of a loss summed over a batch (or of every row's loss).

    The graph computes, for ``label`` :math:`y` and ``prediction`` :math:`p` of shape
    ``[N, K]`` and optional ``weight`` :math:`w` of shape ``[N]``,

    .. math::

        \\mathrm{loss} = \\sum_{i=1}^{N} w_i \\sum_{k=1}^{K} \\ell(y_{ik}, p_{ik})

    (:math:`w_i = 1` when ``weighted`` is False). With :math:`d = p - y`, the kinds are

    * ``squared_error`` (aliases ``l2``, ``square_error``): :math:`\\ell = \\frac12 d^2`,
    * ``absolute_error`` (alias ``l1``): :math:`\\ell = |d|`,
    * ``elastic`` (``l1_weight=0.5``, ``l2_weight=0.5``):
      :math:`\\ell = a|d| + b\\frac12 d^2`,
    * ``huber`` (``epsilon=0.1``): :math:`\\frac12 d^2` if :math:`|d| \\le \\epsilon`
      else :math:`\\epsilon|d| - \\frac12\\epsilon^2`,
    * ``epsilon_insensitive`` (``epsilon=0.1``): :math:`\\max(0, |d| - \\epsilon)`,
    * ``poisson``: :math:`\\ell = e^p - y p`,
    * ``squared_epsilon_insensitive`` (``epsilon=0.1``):
      :math:`\\max(0, |d| - \\epsilon)^2`,
    * ``log`` (aliases ``log_loss``, ``neg_log``; ``eps=1e-5``): logistic loss on raw
      scores, :math:`q = (1-\\epsilon)\\sigma(p) + \\epsilon/2`,
      :math:`\\ell = -y\\log q - (1-y)\\log(1-q)`; the stable
      :math:`\\mathrm{relu}(p) - yp + \\log(1 + e^{-|p|})` when ``eps=0``,
    * ``softmax_log`` (``eps=1e-5``): cross-entropy on raw scores with one-hot labels,
      :math:`q = (1-\\epsilon)\\,\\mathrm{softmax}(p) + \\epsilon/K`,
      :math:`\\ell_k = -y_k\\log q_k` (``LogSoftmax`` when ``eps=0``),
    * ``hinge`` (``threshold=1.0``): :math:`z = (2y-1)p`, :math:`\\ell = \\max(0, t - z)`
      (``threshold=0``: the perceptron loss),
    * ``squared_hinge`` (``threshold=1.0``): :math:`z = (2y-1)p`,
      :math:`\\ell = \\max(0, t - z)^2`,
    * ``modified_huber``: :math:`z = (2y-1)p`, :math:`\\ell = \\max(0, 1-z)^2` if
      :math:`z \\ge -1` else :math:`-4z`.

    Parameters
    ----------
    kind : str
        Name of the loss (see above).
    dtype : numpy dtype
        Element type of every input and of the output (float32 or float64).
    weighted : bool
        Add the input ``weight`` of shape ``[N]``.
    per_row : bool
        Return the loss of every row, :math:`w_i \\sum_k \\ell(y_{ik}, p_{ik})`, of shape
        ``[N]``, instead of their sum.
    opset : int
        Version of the main ONNX domain, between 13 and :data:`OPSET`.
    **params
        Parameters of the loss (``epsilon``, ``eps``, ``l1_weight``, ``l2_weight``,
        ``threshold``).

    Returns
    -------
    ModelProto
        The loss graph (IR 10).

    Raises
    ------
    ValueError
        If ``kind`` is unknown, a parameter is unknown or out of range, or ``opset`` is
        out of range.
    """
    try:
        builder = LOSS_BUILDERS[kind]
    except (KeyError, TypeError):
        raise ValueError(
            f"Unknown loss kind {kind!r}, valid names are {sorted(LOSS_BUILDERS)}."
        ) from None
    if not MIN_OPSET <= opset <= OPSET:
        raise ValueError(f"The loss graphs need {MIN_OPSET} <= opset <= {OPSET}, got {opset}.")
    accepted = list(inspect.signature(builder).parameters)[3:]
    unknown = sorted(set(params) - set(accepted))
    if unknown:
        raise ValueError(
            f"Loss {kind!r} does not accept parameter(s) {unknown}, it accepts {accepted}."
        )
    dtype = np.dtype(dtype)
    elem = onnx_dtype(dtype)

    g = _GraphBuilder(dtype)
    per_element = builder(g, "label", "prediction", **params)
    # [N, K] -> [N] first, then the weights multiply whole rows.
    row_loss = g.op("ReduceSum", per_element, g.const([1], dtype=np.int64), keepdims=0)
    if weighted:
        row_loss = g.op("Mul", row_loss, "weight")
    if per_row:
        g.op("Identity", row_loss, output="loss")
    else:
        # No axes: ReduceSum reduces every axis, keepdims=0 gives a scalar.
        g.op("ReduceSum", row_loss, output="loss", keepdims=0)

    inputs = [
        helper.make_tensor_value_info("label", elem, [None, None]),
        helper.make_tensor_value_info("prediction", elem, [None, None]),
    ]
    if weighted:
        inputs.append(helper.make_tensor_value_info("weight", elem, [None]))
    graph = helper.make_graph(
        g.nodes,
        f"loss_{kind}",
        inputs,
        [helper.make_tensor_value_info("loss", elem, [None] if per_row else [])],
        g.initializers,
    )
    return make_model(graph, opset=opset)


def loss_arrays(
    label: np.ndarray, prediction: np.ndarray, weight: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """``(label, prediction, weight)`` for a loss graph of ``prediction``'s dtype, checked:
    ``prediction`` a float32 or float64 array of 1 or 2 dimensions, ``label`` of its shape
    (cast to its dtype), ``weight`` one value per row (or None), cast too.

    Raises
    ------
    TypeError
        For a prediction of another dtype.
    ValueError
        For shapes that do not match.
    """
    prediction = np.asarray(prediction)
    if prediction.dtype not in (np.float32, np.float64):
        raise TypeError(f"prediction must be float32 or float64, got {prediction.dtype}.")
    if prediction.ndim not in (1, 2):
        raise ValueError(f"prediction must be 1-D or 2-D, got shape {prediction.shape}.")
    label = np.asarray(label, dtype=prediction.dtype)
    if label.shape != prediction.shape:
        raise ValueError(
            f"label has shape {label.shape}, prediction {prediction.shape}: they must match."
        )
    if weight is not None:
        weight = np.asarray(weight, dtype=prediction.dtype)
        if weight.shape != (len(prediction),):
            raise ValueError(
                f"weight must have shape ({len(prediction)},), got {weight.shape}."
            )
    return label, prediction, weight
