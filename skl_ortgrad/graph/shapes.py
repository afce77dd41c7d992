"""What a model declares, or shape inference finds, about a tensor's type and shape."""

from __future__ import annotations

import onnx
from onnx import ModelProto, ValueInfoProto


def declared_shape(info: ValueInfoProto) -> list[int | str | None] | None:
    """The dimensions ``info`` declares: numbers, symbolic names, None for an unnamed
    unknown dimension; None when it declares no shape at all."""
    tensor = info.type.tensor_type
    if not tensor.HasField("shape"):
        return None
    return [
        dim.dim_value if dim.HasField("dim_value") else (dim.dim_param or None)
        for dim in tensor.shape.dim
    ]


def typed_output(model: ModelProto, index: int) -> ValueInfoProto:
    """Output ``index`` of ``model`` with its element type: as declared, or, for a model
    cut at an intermediate result that declares it untyped, as ONNX shape inference finds
    it (with the inferred shape).

    Raises
    ------
    ValueError
        If neither the model nor shape inference tells the element type.
    """
    output = model.graph.output[index]
    if output.type.tensor_type.elem_type:
        return output
    inferred = onnx.shape_inference.infer_shapes(model).graph
    found = next((info for info in [*inferred.output, *inferred.value_info]
                  if info.name == output.name and info.type.tensor_type.elem_type), None)
    if found is None:
        raise ValueError(
            f"The model's output {output.name!r} has no element type and ONNX shape "
            "inference cannot find it: declare the output's type (float or double)."
        )
    return found
