"""Gradient graphs of ONNX models that a plain ``InferenceSession`` runs.

:func:`onnx_derivative` asks a gradient backend (:mod:`skl_ortgrad.gradient.backend`) for
the one-call gradient graph of a model and shapes it as :class:`DerivativeOptions` says.
For weights :math:`W` and the requested inputs :math:`X` it computes

.. math::

    \\frac{\\partial L}{\\partial W} = \\sum_j \\left(\\frac{\\partial y_j}{\\partial W}\\right)^T
    \\frac{\\partial L}{\\partial y_j},

where the output gradients :math:`\\partial L / \\partial y_j` are inputs of the graph, tensors
of ones, or 1 for a scalar loss output (see :class:`DerivativeOptions`).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import ModelProto, NodeProto, ValueInfoProto, helper

from skl_ortgrad.gradient.backend import build_gradient, resolve_backend
from skl_ortgrad.graph.dtypes import numpy_dtype, numpy_dtype_of
from skl_ortgrad.graph.external import check_external_data
from skl_ortgrad.graph.model import graph_names, make_model, unique_name
from skl_ortgrad.graph.opset import main_opset, other_domains
from skl_ortgrad.graph.shapes import declared_shape
from skl_ortgrad.graph.weights import float_initializers, float_inputs


class DerivativeOptions(enum.IntFlag):
    """What :func:`onnx_derivative` returns.

    Zero
        ``YieldOp`` is removed, every output gradient it produced becomes a graph input
        ``<output>_grad``; the graph outputs are the gradients (``<weight>_grad``,
        ``<input>_grad``).
    KeepYieldOp
        The builder's graph as it is (forward, ``YieldOp``, backward); it only runs inside a
        ``TrainingAgent``. Cannot be combined with another flag.
    KeepOutputs
        The original model outputs are graph outputs too, before the gradients.
    FillGrad
        The output gradients are tensors of ones shaped like the outputs instead of inputs:
        the result is the gradient of :math:`\\sum` of all output coefficients. It needs
        ``KeepOutputs``, as in the seed API.
    Loss
        The model ends in a scalar loss output (``loss`` by default, label input ``label``):
        its output gradient is 1, the other outputs get a zero gradient (ones with
        ``FillGrad``); the result is :math:`\\partial \\mathrm{loss} / \\partial W`.
    """

    Zero = 0
    KeepYieldOp = 1
    KeepOutputs = 2
    FillGrad = 4
    Loss = 8


def onnx_derivative(
    onx: ModelProto,
    weights: Sequence[str] | None = None,
    inputs: Sequence[str] | None = None,
    options: DerivativeOptions = DerivativeOptions.Zero,
    loss: str | None = None,
    label: str | None = None,
    path_name: str | None = None,
    verbose: int = 0,
    backend: str = "auto",
    external_data_dir: str | None = None,
) -> ModelProto:
    """Build the gradient graph of ``onx`` with respect to weights and inputs.

    For model outputs :math:`y_j` and output gradients :math:`g_j = \\partial L/\\partial y_j`,
    the graph computes :math:`\\partial L/\\partial W = \\sum_j J_{y_j}(W)^T g_j` for every
    weight :math:`W` in ``weights`` and the same for every input in ``inputs``.
    The weights are graph inputs of the result (after the model inputs), so it runs with
    any weight values.

    Parameters
    ----------
    onx : ModelProto
        The model (IR <= 10, opset <= 21). Operators without a gradient (``ai.onnx.ml``
        ``Scaler``, ``ZipMap``, ...) must be rewritten or cut away first.
    weights : list of str, optional
        Initializers to differentiate with respect to; None means every float
        initializer ("all real weights"), ``[]`` none.
    inputs : list of str, optional
        Graph inputs whose gradient is wanted (``<input>_grad`` outputs); None means every
        float input but the label ("all real inputs"), ``[]`` none.
    options : DerivativeOptions
        What to return, see :class:`DerivativeOptions`; flags combine with ``|``.
    loss : str, optional
        Name of the scalar loss output with ``DerivativeOptions.Loss`` (default ``loss``).
    label : str, optional
        Name of the label input with ``DerivativeOptions.Loss`` (default ``label``); it is
        never differentiated.
    path_name : str, optional
        Save the result to this file.
    verbose : int
        Print the steps when > 0.
    backend : str
        Gradient backend: ``"auto"``, ``"onnxruntime-training"`` or ``"onnx"`` (see
        :func:`skl_ortgrad.gradient.resolve_backend`). ``KeepYieldOp`` needs
        ``"onnxruntime-training"``.
    external_data_dir : str, optional
        The folder tensors stored as external data may be read from; None refuses them
        (:func:`~skl_ortgrad.graph.external.check_external_data`).

    Returns
    -------
    ModelProto
        The gradient graph.

    Raises
    ------
    TypeError
        If ``options`` is not a :class:`DerivativeOptions` (a plain int included, as the
        seed API refuses it).
    ValueError
        If there is nothing to differentiate, a name does not exist, or the options are
        inconsistent.
    """
    onx = check_external_data(onx, external_data_dir)
    if not isinstance(options, DerivativeOptions):
        raise TypeError(
            f"options must be a DerivativeOptions (flags combined with |), got "
            f"{type(options).__name__} {options!r}."
        )
    if DerivativeOptions.KeepYieldOp in options and options != DerivativeOptions.KeepYieldOp:
        raise ValueError(
            "DerivativeOptions.KeepYieldOp returns the builder's graph unchanged, "
            f"it cannot be combined with other flags, got {options!r}."
        )
    if DerivativeOptions.FillGrad in options and DerivativeOptions.KeepOutputs not in options:
        raise ValueError(
            "DerivativeOptions.FillGrad needs DerivativeOptions.KeepOutputs (the outputs "
            f"whose gradients are filled with ones are returned too), got {options!r}."
        )
    graph = onx.graph
    init_names = {i.name for i in graph.initializer}
    input_names = [i.name for i in graph.input]
    output_names = [o.name for o in graph.output]

    if DerivativeOptions.Loss in options:
        label = label or "label"
    weights = float_initializers(onx) if weights is None else list(weights)
    if inputs is None:
        inputs = [name for name in float_inputs(onx) if name != label]
    inputs = list(inputs)
    missing = [w for w in weights if w not in init_names]
    if missing:
        raise ValueError(f"Weights {missing} are not initializers of the model.")
    missing = [i for i in inputs if i not in input_names]
    if missing:
        raise ValueError(f"Inputs {missing} are not inputs of the model {input_names}.")
    if not weights and not inputs:
        # The builder would silently produce a graph computing nothing.
        raise ValueError(
            "Nothing to differentiate: no weights and no inputs (a model converted by "
            "skl2onnx keeps linear coefficients in LinearRegressor/LinearClassifier "
            "attributes unless converted with black_op={'LinearRegressor', "
            "'LinearClassifier'})."
        )

    if DerivativeOptions.Loss in options:
        loss = loss or "loss"
        label = label or "label"
        if loss not in output_names:
            raise ValueError(f"DerivativeOptions.Loss: no output {loss!r} in {output_names}.")
        if label not in input_names:
            raise ValueError(f"DerivativeOptions.Loss: no input {label!r} in {input_names}.")
        if label in inputs:
            raise ValueError(f"The label {label!r} cannot be differentiated.")

    if DerivativeOptions.KeepYieldOp in options and resolve_backend(backend) != (
        "onnxruntime-training"
    ):
        raise ValueError(
            "DerivativeOptions.KeepYieldOp returns onnxruntime-training's graph with its "
            f"YieldOp: it needs backend='onnxruntime-training', got {backend!r}."
        )
    gradient = build_gradient(onx, weights, inputs, backend=backend)
    if verbose > 0:
        print(
            f"[onnx_derivative] backend={gradient.backend} weights={weights} "
            f"inputs={inputs} output gradients={gradient.differentiable_outputs}"
        )
    if options == DerivativeOptions.KeepYieldOp:
        result = gradient.yield_model
    else:
        result = _shape_outputs(onx, gradient.fused, gradient.differentiable_outputs,
                                options, loss, verbose)
    if path_name is not None:
        onnx.save(result, path_name)
    return result


def _shape_outputs(
    onx: ModelProto,
    fused: ModelProto,
    differentiable: list[str],
    options: DerivativeOptions,
    loss: str | None,
    verbose: int,
) -> ModelProto:
    """Turn output gradient inputs into constants and choose the outputs, see
    :func:`onnx_derivative`."""
    graph = fused.graph
    taken = graph_names(graph)
    constants: dict[str, float] = {}
    for out_name in differentiable:
        if DerivativeOptions.Loss in options and out_name == loss:
            constants[out_name] = 1.0
        elif DerivativeOptions.FillGrad in options:
            constants[out_name] = 1.0
        elif DerivativeOptions.Loss in options:
            constants[out_name] = 0.0
    elem = {o.name: o.type.tensor_type.elem_type for o in onx.graph.output}
    new_nodes: list[NodeProto] = []
    for out_name, value in constants.items():
        # An output gradient has the full shape of its output: ConstantOfShape(Shape(y)).
        shape = unique_name(f"{out_name}_shape", taken)
        new_nodes.append(helper.make_node("Shape", [out_name], [shape], name=shape))
        new_nodes.append(helper.make_node(
            "ConstantOfShape", [shape], [f"{out_name}_grad"],
            name=unique_name(f"{out_name}_grad_fill", taken),
            value=helper.make_tensor("value", elem[out_name], [1], [value]),
        ))
        if verbose > 1:
            print(f"[onnx_derivative] {out_name}_grad = {value} like {out_name}")
    filled = {f"{name}_grad" for name in constants}
    n_outputs = len(onx.graph.output)
    outputs = list(graph.output) if DerivativeOptions.KeepOutputs in options else list(
        graph.output
    )[n_outputs:]
    new_graph = helper.make_graph(
        [*new_nodes, *graph.node],
        graph.name,
        [i for i in graph.input if i.name not in filled],
        outputs,
        list(graph.initializer),
        value_info=list(graph.value_info),
    )
    return make_model(new_graph, opset=main_opset(fused), domains=other_domains(fused))


def _describe(inp: Any) -> tuple[str, np.dtype, list[int | str | None]]:
    """Name, numpy dtype and shape of an onnxruntime NodeArg or an onnx ValueInfoProto."""
    if isinstance(inp, ValueInfoProto):
        tensor = inp.type.tensor_type
        try:
            dtype = numpy_dtype(tensor.elem_type)
        except TypeError as exc:
            raise TypeError(f"{exc} ({inp.name!r})") from None
        return inp.name, dtype, declared_shape(inp) or []
    try:
        dtype = numpy_dtype_of(inp.type)
    except TypeError as exc:
        raise TypeError(f"{exc} ({inp.name!r})") from None
    return inp.name, dtype, list(inp.shape)


def random_feed(
    inputs: Iterable[Any],
    batch: int = 10,
    empty_dimension: int = 1,
    random_state: int | None = 0,
) -> dict[str, np.ndarray]:
    """Random arrays matching the inputs of a model.

    Parameters
    ----------
    inputs : list
        ``session.get_inputs()`` (onnxruntime ``NodeArg``) or ``model.graph.input``
        (onnx ``ValueInfoProto``).
    batch : int
        Size of a symbolic or unknown first dimension.
    empty_dimension : int
        Size of any other symbolic or unknown dimension.
    random_state : int, optional
        Seed of the generator.

    Returns
    -------
    dict
        ``{name: array}``: standard normal values for float types, integers in
        ``[0, 10)`` for integer types.
    """
    rng = np.random.default_rng(random_state)
    feeds: dict[str, np.ndarray] = {}
    for inp in inputs:
        name, dtype, shape = _describe(inp)
        dims = [
            d if isinstance(d, int) else (batch if i == 0 else empty_dimension)
            for i, d in enumerate(shape)
        ]
        if np.issubdtype(dtype, np.integer):
            value = rng.integers(0, 10, size=dims).astype(dtype)
        else:
            value = rng.standard_normal(dims).astype(dtype)
        feeds[name] = np.asarray(value)
    return feeds
