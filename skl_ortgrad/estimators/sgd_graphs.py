"""The full ONNX graphs of the SGD models, converted by skl2onnx at zero weights:
``OnnxSGDRegressor``'s (scikit-learn's ``LinearRegression``) and ``OnnxSGDClassifier``'s
(``LogisticRegression`` for the softmax losses, ``SGDClassifier`` for the others, its
one-vs-rest probabilities made stable at large scores). skl2onnx writes the linear
operators as ``MatMul`` and ``Add`` with the weights as initializers, which training reads
and updates; the score is the output the hand-built score graphs name
(:func:`~skl_ortgrad.graph.linear.linear_score_model`)."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import helper as onnx_helper
from onnx import numpy_helper
from sklearn.linear_model import LinearRegression, LogisticRegression, SGDClassifier

from skl_ortgrad.estimators.conversion import convert_model


def _convert(model: Any, n_features: int, dtype: np.dtype, black_op: str) -> Any:
    # black_op turns the ai.onnx.ml linear operators (weights in attributes, no gradient)
    # into MatMul + Add with the weights as initializers.
    return convert_model(
        model, n_features, dtype, black_op={black_op},
        options={"zipmap": False} if black_op == "LinearClassifier" else None,
    )


_SENTINEL = 0.5772156649  # a value no skl2onnx constant holds


def _zero_initializer(onx: Any, name: str) -> None:
    """Set initializer ``name`` of ``onx`` to zeros (same shape and type), in place."""
    init = next(init for init in onx.graph.initializer if init.name == name)
    init.CopyFrom(numpy_helper.from_array(np.zeros_like(numpy_helper.to_array(init)), name))


def _score_of(onx: Any) -> str:
    """Name of ``X @ coef + intercept`` in a converted linear graph."""
    return next(node.output[0] for node in onx.graph.node if "intercept" in node.input)


def _stable_one_vs_rest(onx: Any, score: str) -> Any:
    """Make skl2onnx's multiclass SGDClassifier graph safe at large scores (in place).

    skl2onnx writes each sigmoid as ``Reciprocal(Add(Exp(Mul(s, -1)), 1))``: ``Exp``
    overflows for scores below -88 in float32, all probabilities underflow to 0 and the
    label, an ``ArgMax`` over them, no longer follows the scores. The sigmoid becomes the
    ``Sigmoid`` operator and the label an ``ArgMax`` over the raw scores (which also
    breaks the ties of modified Huber's probabilities, clipped at 1).
    """
    graph = onx.graph
    if not any(node.op_type == "Reciprocal" for node in graph.node):
        for node in graph.node:
            if node.op_type == "ArgMax":
                node.input[0] = score
        return onx
    producers = {out: node for node in graph.node for out in node.output}
    reciprocal = next(node for node in graph.node if node.op_type == "Reciprocal")
    chain, name = [reciprocal], reciprocal.input[0]
    while name != score:
        node = producers[name]
        chain.append(node)
        name = next(i for i in node.input if i in producers or i == score)
    removed = {id(node) for node in chain}
    # The sigmoid takes the place of the first removed node: score is computed before
    # it and every consumer of the chain's result comes after it.
    first = min(i for i, node in enumerate(graph.node) if id(node) in removed)
    sigmoid = onnx_helper.make_node(
        "Sigmoid", [score], list(reciprocal.output), name="stable_sigmoid")
    kept = [node for node in graph.node[:first] if id(node) not in removed] + [sigmoid]
    kept += [node for node in graph.node[first:] if id(node) not in removed]
    for node in kept:
        if node.op_type == "ArgMax":
            node.input[0] = score
    del graph.node[:]
    graph.node.extend(kept)
    # The constants of the removed chain ('unity', 'negate'), which onnxruntime would
    # report as unused at every session.
    used = {name for node in kept for name in node.input}
    unused = [init for init in graph.initializer if init.name not in used]
    for init in unused:
        graph.initializer.remove(init)
    return onx


def regressor_graph(n_features: int, dtype: np.dtype) -> Any:
    """``OnnxSGDRegressor``'s full graph: skl2onnx's ``LinearRegression``, zero weights."""
    model = LinearRegression()
    model.coef_ = np.zeros(n_features)
    model.intercept_ = np.zeros(1)
    model.n_features_in_ = n_features
    onx = _convert(model, n_features, dtype, "LinearRegressor")
    _check_score(onx.graph.output[0].name, "variable")
    return onx


def classifier_graph(classes: np.ndarray, n_features: int, dtype: np.dtype, softmax: bool,
                      counterpart_loss: str, score: str) -> Any:
    """``OnnxSGDClassifier``'s full graph, zero weights: skl2onnx's ``LogisticRegression``
    for softmax losses (softmax probabilities), its ``SGDClassifier`` for the others
    (sigmoid or normalized one-vs-rest sigmoids, or modified Huber's clipped scores)."""
    n_scores = 1 if len(classes) == 2 else len(classes)
    model = LogisticRegression() if softmax else SGDClassifier(loss=counterpart_loss)
    model.coef_ = np.zeros((n_scores, n_features))
    # A sentinel, zeroed after conversion: skl2onnx merges initializers holding equal
    # values, so with one feature a zero coef and a zero intercept would become one
    # tensor (and a 1 would merge with the graph's own constant 1).
    model.intercept_ = np.full(n_scores, _SENTINEL)
    model.classes_ = classes
    model.n_features_in_ = n_features
    onx = _convert(model, n_features, dtype, "LinearClassifier")
    _zero_initializer(onx, "intercept")
    _check_score(_score_of(onx), score)
    if len(classes) > 2 and not softmax:
        _stable_one_vs_rest(onx, score)
    return onx


def _check_score(found: str, score: str) -> None:
    """skl2onnx names the score as the hand-built score graph does (``score``), or a
    RuntimeError says so (another skl2onnx version)."""
    if found != score:
        raise RuntimeError(
            f"skl2onnx names the linear score {found!r}, not {score!r}: this skl2onnx "
            "version is not the one skl_ortgrad's hand-built score graphs follow.")
