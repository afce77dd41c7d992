"""Which initializers of a model are trainable weights."""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from onnx import ModelProto, numpy_helper

from skl_ortgrad._cache import digest
from skl_ortgrad.graph.dtypes import FLOAT_TYPES
from skl_ortgrad.graph.external import check_external_data
from skl_ortgrad.graph.model import copied_model

# (op_type, input index) pairs that hold the parameters of a linear layer.
_WEIGHT_SLOTS = {("MatMul", 1), ("Gemm", 1), ("Gemm", 2), ("Conv", 1), ("Conv", 2)}
_LINEAR_OPS = {"MatMul", "Gemm", "Conv"}


def float_initializers(onx: ModelProto) -> list[str]:
    """Every initializer of a float type, in graph order: the seed API's default weights
    ("all initializers with float type"), constants such as skl2onnx's ``unity`` included."""
    return [init.name for init in onx.graph.initializer if init.data_type in FLOAT_TYPES]


def float_inputs(onx: ModelProto) -> list[str]:
    """Every graph input of a float type that is not an initializer, in graph order."""
    initialized = {init.name for init in onx.graph.initializer}
    return [info.name for info in onx.graph.input
            if info.name not in initialized and info.type.tensor_type.elem_type in FLOAT_TYPES]


def get_train_initializer(
    onx: ModelProto, external_data_dir: str | None = None
) -> dict[str, np.ndarray]:
    """Return the float initializers of ``onx`` that are trainable weights, in graph order.

    skl2onnx graphs also carry float constants as initializers (``unity``, ``negate``,
    scaler offsets) next to int64 shape tensors, so "every float initializer" is wrong.
    The rule: a float initializer is a weight when it parameterizes a linear layer,

    * it is the second input of ``MatMul``, ``Gemm`` or ``Conv`` (the matrix / kernel),
    * it is the third input of ``Gemm`` or ``Conv`` (the bias),
    * or it is an operand of an ``Add`` whose other operand is produced by a
      ``MatMul``, ``Gemm`` or ``Conv`` node (the bias of ``X @ W + b``).

    Parameters
    ----------
    onx : ModelProto
        The model.
    external_data_dir : str, optional
        The folder tensors stored as external data may be read from; None refuses them
        (see :func:`~skl_ortgrad.graph.external.check_external_data`).

    Returns
    -------
    dict
        ``{name: numpy array}`` for every weight, in the order of ``graph.initializer``.

    Raises
    ------
    ValueError
        If the model stores a tensor as external data that may not be read.
    """
    graph = check_external_data(onx, external_data_dir).graph
    floats = {init.name for init in graph.initializer if init.data_type in FLOAT_TYPES}
    producer = {out: node.op_type for node in graph.node for out in node.output}
    selected: set[str] = set()
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name not in floats:
                continue
            if (node.op_type, index) in _WEIGHT_SLOTS:
                selected.add(name)
            elif node.op_type == "Add":
                others = [other for other in node.input if other != name]
                if any(producer.get(other) in _LINEAR_OPS for other in others):
                    selected.add(name)
    return {
        init.name: numpy_helper.to_array(init)
        for init in graph.initializer
        if init.name in selected
    }


def skeleton_digest(model: ModelProto, weights: Sequence[str]) -> Hashable:
    """A key of ``model`` with the values of ``weights`` left out (their names, types and
    shapes kept): equal for two models that differ only by those values, such as the
    fits of a model whose initial weights are random or zero."""
    skeleton = copied_model(model)
    trained = set(weights)
    for init in skeleton.graph.initializer:
        if init.name in trained:
            for field in ("raw_data", "float_data", "double_data", "int32_data"):
                init.ClearField(field)
    return digest(skeleton.SerializeToString()), tuple(weights)
