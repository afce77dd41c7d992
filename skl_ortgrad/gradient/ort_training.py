r"""The ``"onnxruntime-training"`` gradient backend: ``OrtModuleGraphBuilder``.

The builder writes one graph holding the forward pass, a ``YieldOp`` node (com.microsoft)
and the backward pass (:attr:`OrtTrainingGradient.yield_model`, which only a
``TrainingAgent`` runs). :func:`~skl_ortgrad.utils.orttraining_helper.fused_gradient_model`
turns it into the backend contract's one-call graph. The builder's training operators
without a float64 kernel are rewritten into standard ones
(:func:`~skl_ortgrad.utils.gradient_rewrite.rewrite_gradient_graph`), and the session that
runs such a graph must keep onnxruntime from fusing them back
(:attr:`OrtTrainingGradient.unoptimized`).

The classes come from ``onnxruntime.capi._pybind_state``, never from
``onnxruntime.training`` (which imports torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import onnx
from onnx import ModelProto, TensorProto

from skl_ortgrad.gradient.backend import GradientGraph, register_backend
from skl_ortgrad.utils.gradient_rewrite import (
    FAST_REWRITES,
    fold_gradient_shapes,
    rewrite_gradient_graph,
)
from skl_ortgrad.utils.orttraining_helper import fused_gradient_model


class OrtTrainingGradient(GradientGraph):
    """Gradient graph built by onnxruntime-training, see the module docstring.

    Attributes
    ----------
    yield_model : ModelProto
        The builder's graph (forward, ``YieldOp``, backward), rewritten.
    config : OrtModuleGraphBuilderConfiguration, optional
        Builder configuration to start from (the names to train are set on it).
    unoptimized : bool
        True when the graph holds rewritten float64 operators that onnxruntime's
        optimizer would fuse back into kernels without a float64 implementation.
    """

    backend = "onnxruntime-training"

    def __init__(self, model: ModelProto, weights: list[str], inputs: list[str],
                 config: Any = None) -> None:
        from onnxruntime.capi._pybind_state import (
            OrtModuleGraphBuilder,
            OrtModuleGraphBuilderConfiguration,
            TrainingGraphTransformerConfiguration,
        )

        config = config or OrtModuleGraphBuilderConfiguration()
        config.initializer_names = weights
        config.initializer_names_to_train = weights
        config.input_names_require_grad = inputs
        config.build_gradient_graph = True
        builder = OrtModuleGraphBuilder()
        builder.initialize(model.SerializeToString(), config)
        builder.build(TrainingGraphTransformerConfiguration())
        gradient = onnx.load_from_string(builder.get_gradient_model())
        types = {init.name: init.data_type for init in model.graph.initializer}
        self.unoptimized = any(types[name] == TensorProto.DOUBLE for name in weights)
        # float64 needs every rewrite (missing double kernels); float32 only ReluGrad's,
        # whose branchy kernel is slow.
        self.yield_model = rewrite_gradient_graph(
            gradient, None if self.unoptimized else FAST_REWRITES
        )
        self.forward = onnx.load_from_string(builder.get_forward_model())
        info = builder.get_graph_info()
        skipped = set(info.output_grad_indices_non_differentiable)
        self.differentiable_outputs = [
            name for i, name in enumerate(info.user_output_names) if i not in skipped
        ]
        self.training_model = model
        self.weights = weights
        self.inputs = inputs
        init_names = {init.name for init in model.graph.initializer}
        self._graph_inputs = [i.name for i in model.graph.input if i.name not in init_names]
        self.fused = fused_gradient_model(self.yield_model, model, self._graph_inputs)

    @property
    def gradient_model(self) -> ModelProto:
        """The builder's graph around ``YieldOp``, what ``TrainingAgent`` runs."""
        return self.yield_model

    def static(self, batch_inputs: Sequence[str], batch_rows: int) -> ModelProto:
        fused = fused_gradient_model(
            self.yield_model, self.training_model, list(batch_inputs), batch_rows
        )
        return fold_gradient_shapes(fused)


register_backend("onnxruntime-training")(OrtTrainingGradient)
