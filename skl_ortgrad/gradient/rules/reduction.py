r"""Reductions over axes, :math:`Y = R_{k \in \text{axes}} X_k`.

The gradient of the result is first given back the reduced axes (as axes of size 1
when ``keepdims=0``), then expanded to X's shape, :math:`E(\bar Y)`:

=====================  ==========================================================
``ReduceSum``          :math:`\bar X = E(\bar Y)`
``ReduceMean``         :math:`\bar X = E(\bar Y) / n`, :math:`n` elements per group
``ReduceSumSquare``    :math:`\bar X = 2 X E(\bar Y)`
``ReduceL1``           :math:`\bar X = \mathrm{sign}(X) E(\bar Y)`
``ReduceL2``           :math:`\bar X = X E(\bar Y) / E(Y)`
``ReduceLogSumExp``    :math:`\bar X = E(\bar Y) \exp(X - E(Y))`
``ReduceMax``/``Min``  :math:`\bar X = E(\bar Y) [X = E(Y)] / t`, :math:`t` the ties
=====================  ==========================================================

``ReduceMax``/``ReduceMin`` share the gradient equally between the elements that reach
the extremum (the subgradient that averages them), so the result does not depend on the
order of the elements.

``axes`` is an input of ``ReduceSum`` from opset 13 and of the others from opset 18, an
attribute before; no axes means every axis unless ``noop_with_empty_axes``. Then nothing
is reduced but the element-wise part remains: :math:`Y = X^2` for ``ReduceSumSquare``
(:math:`\bar X = 2 X \bar Y`), :math:`Y = |X|` for ``ReduceL1`` and ``ReduceL2``
(:math:`\bar X = \mathrm{sign}(X) \bar Y`), :math:`Y = X` for the others
(:math:`\bar X = \bar Y`). The axes must be constants of the graph.
"""

from __future__ import annotations

import numpy as np
from onnx import NodeProto

from skl_ortgrad.gradient.context import GradientContext
from skl_ortgrad.gradient.rules import register


def _axes(ctx: GradientContext, node: NodeProto) -> list[int] | None:
    """The reduced axes, normalized; None when the node returns X unchanged."""
    atts = ctx.attributes(node)
    rank = ctx.rank(node.input[0])
    if "axes" in atts:
        axes = list(atts["axes"])
    elif len(node.input) > 1 and node.input[1]:
        value = ctx.value(node.input[1])
        if value is None:
            raise NotImplementedError(
                f"{node.op_type} node {node.name!r} reads its axes from {node.input[1]!r}, "
                "which is computed at run time: the gradient needs constant axes."
            )
        axes = [int(v) for v in np.asarray(value).ravel()]
    else:
        axes = []
    if not axes:
        if atts.get("noop_with_empty_axes", 0):
            return None
        return list(range(rank))
    return sorted(axis % rank for axis in axes)


def _expand(ctx: GradientContext, node: NodeProto, value: str, axes: list[int]) -> str:
    """``value`` (shaped like Y) broadcast back to X's shape."""
    x = node.input[0]
    # Expand aligns shapes on the right: reduced leading axes need no Unsqueeze.
    if not ctx.attributes(node).get("keepdims", 1) and axes != list(range(len(axes))):
        value = ctx.unsqueeze(value, axes)
    if ctx.same_shape(ctx.shape(value), ctx.shape(x)):
        return value
    return ctx.op("Expand", [value, ctx.shape_of(x)], like=x)


def _count(ctx: GradientContext, node: NodeProto, axes: list[int]) -> str:
    """The number of elements of each reduced group, in X's element type."""
    x = node.input[0]
    shape = ctx.shape(x)
    dims = [shape[axis] for axis in axes] if shape is not None else [None]
    if all(isinstance(dim, int) for dim in dims):
        return ctx.constant(float(np.prod(dims)), x)
    as_float = {"to": ctx.elem_type(x)}
    return ctx.op("Div", [ctx.op("Cast", [ctx.op("Size", [x])], **as_float),
                          ctx.op("Cast", [ctx.op("Size", [node.output[0]])], **as_float)])


def _reduced(factor):
    """Register-ready rule: :math:`\\bar X = ` ``factor(ctx, node, axes, E(gY))``.

    A node that reduces nothing (empty axes and ``noop_with_empty_axes``) has the
    gradient of its element-wise part, :func:`_unreduced`.
    """

    def rule(ctx: GradientContext, node: NodeProto, grads: list[str | None]
             ) -> list[str | None]:
        result: list[str | None] = [None] * len(node.input)
        axes = _axes(ctx, node)
        if axes is None:
            result[0] = _unreduced(ctx, node, grads[0])
        else:
            result[0] = factor(ctx, node, axes, _expand(ctx, node, grads[0], axes))
        return result

    rule.__doc__ = factor.__doc__
    return rule


def _unreduced(ctx: GradientContext, node: NodeProto, g: str) -> str:
    """Gradient of a reduction over no axis: :math:`Y = X^2` (``ReduceSumSquare``),
    :math:`|X|` (``ReduceL1``, ``ReduceL2``), else :math:`X`."""
    x = node.input[0]
    if node.op_type == "ReduceSumSquare":
        return ctx.op("Mul", [g, ctx.op("Add", [x, x])], like=g)
    if node.op_type in ("ReduceL1", "ReduceL2"):
        return ctx.op("Mul", [g, ctx.op("Sign", [x])], like=g)
    return g


@register("ReduceSum")
@_reduced
def reduce_sum(ctx: GradientContext, node: NodeProto, axes: list[int], g: str) -> str:
    """:math:`E(\\bar Y)`."""
    return g


@register("ReduceMean")
@_reduced
def reduce_mean(ctx: GradientContext, node: NodeProto, axes: list[int], g: str) -> str:
    """:math:`E(\\bar Y) / n`."""
    return ctx.op("Div", [g, _count(ctx, node, axes)], like=g)


@register("ReduceSumSquare")
@_reduced
def reduce_sum_square(ctx: GradientContext, node: NodeProto, axes: list[int], g: str) -> str:
    """:math:`2 X E(\\bar Y)`."""
    x = node.input[0]
    return ctx.op("Mul", [g, ctx.op("Add", [x, x])], like=g)


@register("ReduceL1")
@_reduced
def reduce_l1(ctx: GradientContext, node: NodeProto, axes: list[int], g: str) -> str:
    """:math:`\\mathrm{sign}(X) E(\\bar Y)`."""
    return ctx.op("Mul", [g, ctx.op("Sign", [node.input[0]])], like=g)


@register("ReduceL2")
@_reduced
def reduce_l2(ctx: GradientContext, node: NodeProto, axes: list[int], g: str) -> str:
    """:math:`X E(\\bar Y) / E(Y)`."""
    ratio = ctx.op("Div", [node.input[0], _expand(ctx, node, node.output[0], axes)])
    return ctx.op("Mul", [g, ratio], like=g)


@register("ReduceLogSumExp")
@_reduced
def reduce_log_sum_exp(ctx: GradientContext, node: NodeProto, axes: list[int], g: str) -> str:
    """:math:`E(\\bar Y) \\exp(X - E(Y))`."""
    shifted = ctx.op("Sub", [node.input[0], _expand(ctx, node, node.output[0], axes)])
    return ctx.op("Mul", [g, ctx.op("Exp", [shifted])], like=g)


@register("ReduceMax", "ReduceMin")
@_reduced
def reduce_extremum(ctx: GradientContext, node: NodeProto, axes: list[int], g: str) -> str:
    """:math:`E(\\bar Y) [X = E(Y)] / t`, shared between the ``t`` ties."""
    x = node.input[0]
    hit = ctx.op("Cast", [ctx.op("Equal", [x, _expand(ctx, node, node.output[0], axes)])],
                 to=ctx.elem_type(x))
    ties = ctx.op("Expand", [ctx.reduce_sum(hit, axes, keepdims=1), ctx.shape_of(x)])
    return ctx.op("Mul", [g, ctx.op("Div", [hit, ties])], like=g)
