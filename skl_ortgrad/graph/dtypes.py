"""The one table between numpy dtypes and ONNX element types."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

#: Element types that carry a gradient.
FLOAT_TYPES = frozenset(
    {TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.FLOAT16, TensorProto.BFLOAT16}
)

_NP_TO_ONNX = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.bool_): TensorProto.BOOL,
}
_ONNX_TO_NP = {elem: dtype for dtype, elem in _NP_TO_ONNX.items()}


def onnx_dtype(dtype: np.dtype | type | str) -> int:
    """The ONNX element type of a numpy dtype.

    Raises
    ------
    TypeError
        If the dtype has no ONNX counterpart used by this package.
    """
    try:
        return _NP_TO_ONNX[np.dtype(dtype)]
    except (KeyError, TypeError):
        raise TypeError(f"No ONNX element type for numpy dtype {dtype!r}.") from None


def numpy_dtype(elem_type: int) -> np.dtype:
    """The numpy dtype of an ONNX element type.

    Raises
    ------
    TypeError
        If the element type has no numpy counterpart used by this package.
    """
    try:
        return _ONNX_TO_NP[elem_type]
    except KeyError:
        name = TensorProto.DataType.Name(elem_type) if elem_type else "undefined"
        raise TypeError(f"No numpy dtype for ONNX element type {name}.") from None


def numpy_dtype_of(type_string: str) -> np.dtype:
    """The numpy dtype of an ONNX type string such as ``'tensor(float)'`` (what
    onnxruntime's ``NodeArg.type`` and ``OrtValue.data_type()`` return).

    Raises
    ------
    TypeError
        If it is not a tensor of a type this package uses.
    """
    inner = type_string[len("tensor("):-1] if type_string.startswith("tensor(") else ""
    elem = {"float": TensorProto.FLOAT, "double": TensorProto.DOUBLE,
            "float16": TensorProto.FLOAT16, "int64": TensorProto.INT64,
            "int32": TensorProto.INT32, "bool": TensorProto.BOOL}.get(inner)
    if elem is None:
        raise TypeError(f"Unsupported type {type_string!r}.")
    return _ONNX_TO_NP[elem]
