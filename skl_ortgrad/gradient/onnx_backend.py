"""The ``"onnx"`` gradient backend: skl_ortgrad's own differentiator, standard ONNX only.

:func:`~skl_ortgrad.gradient.reverse.differentiate` writes the one-call graph directly;
nothing here needs onnxruntime-training, so it runs on any onnxruntime (Python 3.13+,
``onnxruntime-gpu``). With a static batch (:meth:`OnnxGradient.static`) the model is
differentiated again with the batch dimension fixed: every broadcast is then resolved
while building and the graph has no shape arithmetic left to run.
"""

from __future__ import annotations

from collections.abc import Sequence

from onnx import ModelProto

from skl_ortgrad.gradient.backend import GradientGraph, register_backend
from skl_ortgrad.gradient.reverse import differentiate
from skl_ortgrad.graph.model import copied_model, initializers_to_inputs


class OnnxGradient(GradientGraph):
    """Gradient graph written in standard ONNX, see the module docstring."""

    backend = "onnx"
    # Standard operators only: onnxruntime's optimizer may fuse them freely.
    unoptimized = False

    def __init__(self, model: ModelProto, weights: list[str], inputs: list[str]) -> None:
        self.training_model = model
        self.weights = weights
        self.inputs = inputs
        self.fused, self.differentiable_outputs = differentiate(model, weights, inputs)
        self.forward = initializers_to_inputs(model, weights)

    def static(self, batch_inputs: Sequence[str], batch_rows: int) -> ModelProto:
        fixed = copied_model(self.training_model)
        for info in fixed.graph.input:
            dims = info.type.tensor_type.shape.dim
            if info.name in batch_inputs and dims:
                dims[0].Clear()
                dims[0].dim_value = int(batch_rows)
        return differentiate(fixed, self.weights, self.inputs)[0]


register_backend("onnx")(OnnxGradient)
