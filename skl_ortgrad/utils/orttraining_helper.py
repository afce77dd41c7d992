"""The graph helpers' public path (seed API); they live in :mod:`skl_ortgrad.graph`
(weights, cutting, ``ai.onnx.ml`` rewrites) and :mod:`skl_ortgrad.objective` (loss and
penalty graphs)."""

from skl_ortgrad.graph.cut import select_model_output
from skl_ortgrad.graph.ml_rewrites import rewrite_no_gradient_ops
from skl_ortgrad.graph.weights import get_train_initializer
from skl_ortgrad.objective.merge import add_loss_output, merge_loss_graph
from skl_ortgrad.objective.penalty import penalty_loss_onnx

__all__ = [
    "add_loss_output",
    "get_train_initializer",
    "merge_loss_graph",
    "penalty_loss_onnx",
    "rewrite_no_gradient_ops",
    "select_model_output",
]
