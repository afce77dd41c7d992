"""A linear score :math:`s = XW + b` in a graph: recognising it by its structure, and
building it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import ModelProto, helper, numpy_helper

from skl_ortgrad.graph.dtypes import onnx_dtype
from skl_ortgrad.graph.model import make_model


def linear_features(model: ModelProto, weights: Sequence[str],
                    single_output: bool = True) -> str | None:
    r"""The features input of ``model`` if it computes only the linear score
    :math:`s = XW + b` with ``weights`` = ``(W, b)``; None otherwise.

    The graph must be exactly ``MatMul(X, W)`` then ``Add`` of ``b``, optionally followed
    by a ``Reshape`` to ``[-1, 1]`` (skl2onnx's regressor with ``black_op``; a no-op on
    an ``[n, 1]`` score), one input, one output, :math:`W` of shape ``[n_features, K]``
    and :math:`b` of :math:`K` elements, both initializers; ``single_output`` requires
    :math:`K = 1` (what :func:`~skl_ortgrad.training.programs.linear_program` trains).
    Recognised by structure, not by the estimator that converted it.
    """
    graph = model.graph
    inits = {init.name: init for init in graph.initializer}
    if len(weights) != 2 or len(graph.input) != 1 or len(graph.output) != 1:
        return None
    coef, intercept = weights
    nodes = list(graph.node)
    if any(node.domain not in ("", "ai.onnx") or node.attribute for node in nodes):
        return None
    if nodes and nodes[-1].op_type == "Reshape":
        target = inits.get(nodes[-1].input[1])
        if target is None or numpy_helper.to_array(target).tolist() != [-1, 1]:
            return None
        reshape, nodes = nodes[-1], nodes[:-1]
    else:
        reshape = None
    if [node.op_type for node in nodes] != ["MatMul", "Add"]:
        return None
    matmul, add = nodes
    features = graph.input[0].name
    score = add.output[0] if reshape is None else reshape.output[0]
    if (
        list(matmul.input) != [features, coef]
        or sorted(add.input) != sorted([matmul.output[0], intercept])
        or (reshape is not None and reshape.input[0] != add.output[0])
        or score != graph.output[0].name
        or coef not in inits or intercept not in inits
    ):
        return None
    coef_dims, intercept_dims = list(inits[coef].dims), list(inits[intercept].dims)
    outputs = coef_dims[1] if len(coef_dims) == 2 else 0
    if (len(coef_dims) != 2 or int(np.prod(intercept_dims)) != outputs
            or (single_output and outputs != 1) or (reshape is not None and outputs != 1)):
        return None
    return features


def fixed_intercept(model: ModelProto, coef: str) -> str | None:
    r"""The intercept :math:`b` of ``model``, a linear score :math:`s = XW + b`
    (:func:`linear_features`, any number of outputs) whose :math:`W` is ``coef``: the
    initializer the ``Add`` reads, which a training of :math:`W` alone leaves as it is
    (``fit_intercept=False``); None for another model."""
    adds = [node for node in model.graph.node if node.op_type == "Add"]
    if len(adds) != 1:
        return None
    return next((name for name in adds[0].input
                 if linear_features(model, (coef, name), single_output=False) is not None),
                None)


def linear_score_model(n_features: int, n_scores: int, dtype: Any, score: str = "score",
                       intercept_dims: Sequence[int] | None = None,
                       reshape: bool = False) -> ModelProto:
    r"""The graph of :math:`s = XW + b` with zero weights, as skl2onnx converts a linear
    model with ``black_op`` and :func:`linear_features` recognises it.

    ``MatMul(X, coef)`` then ``Add`` of ``intercept``, with ``reshape`` a ``Reshape`` to
    ``[-1, 1]`` (skl2onnx's regressor); ``X`` of shape ``[None, n_features]``, ``coef``
    of ``[n_features, n_scores]``, ``intercept`` of ``intercept_dims`` (default
    ``[n_scores]``), the output ``score`` of ``[None, n_scores]``, all of ``dtype``.
    Built by hand in microseconds, where skl2onnx's import and first conversion take
    0.4 s: what a fit trains and ``decision_function`` runs.
    """
    elem = onnx_dtype(dtype)
    dims = [n_scores] if intercept_dims is None else list(intercept_dims)
    added = "resh" if reshape else score
    nodes = [helper.make_node("MatMul", ["X", "coef"], ["matmul_result"], name="MatMul"),
             helper.make_node("Add", ["matmul_result", "intercept"], [added], name="Add")]
    initializers = [
        numpy_helper.from_array(np.zeros((n_features, n_scores), dtype=dtype), "coef"),
        numpy_helper.from_array(np.zeros(dims, dtype=dtype), "intercept"),
    ]
    if reshape:
        nodes.append(helper.make_node("Reshape", [added, "shape_tensor"], [score],
                                      name="Reshape"))
        initializers.append(numpy_helper.from_array(np.array([-1, 1], dtype=np.int64),
                                                    "shape_tensor"))
    graph = helper.make_graph(
        nodes, "linear_score",
        [helper.make_tensor_value_info("X", elem, [None, n_features])],
        [helper.make_tensor_value_info(score, elem, [None, n_scores])],
        initializers)
    return make_model(graph)
