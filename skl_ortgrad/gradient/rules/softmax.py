r"""Normalized exponentials along one axis (opset 13 semantics).

.. math::

    Y = \mathrm{softmax}(X):\quad \bar X = Y \odot (\bar Y - \textstyle\sum_a \bar Y Y)

    Y = \log\mathrm{softmax}(X):\quad \bar X = \bar Y - e^{Y} \textstyle\sum_a \bar Y

where :math:`\sum_a` sums along ``axis`` keeping it (Jacobians
:math:`\mathrm{diag}(y) - y y^T` and :math:`I - \mathbf 1 \mathrm{softmax}(x)^T`).
"""

from __future__ import annotations

from onnx import NodeProto

from skl_ortgrad.gradient.context import GradientContext
from skl_ortgrad.gradient.rules import register


def _axis(ctx: GradientContext, node: NodeProto) -> int:
    if ctx.opset < 13:
        raise NotImplementedError(
            f"{node.op_type} node {node.name!r}: before opset 13 it flattens its input "
            f"around axis; the 'onnx' backend supports opset 13 and above, got {ctx.opset}."
        )
    return int(ctx.attributes(node).get("axis", -1)) % ctx.rank(node.input[0])


@register("Softmax")
def softmax(ctx: GradientContext, node: NodeProto, grads: list[str | None]
            ) -> list[str | None]:
    (g,) = grads
    y = node.output[0]
    dot = ctx.reduce_sum(ctx.op("Mul", [g, y]), [_axis(ctx, node)], keepdims=1)
    return [ctx.op("Mul", [y, ctx.op("Sub", [g, dot])], like=y)]


@register("LogSoftmax")
def log_softmax(ctx: GradientContext, node: NodeProto, grads: list[str | None]
                ) -> list[str | None]:
    (g,) = grads
    y = node.output[0]
    total = ctx.reduce_sum(g, [_axis(ctx, node)], keepdims=1)
    return [ctx.op("Sub", [g, ctx.op("Mul", [ctx.op("Exp", [y]), total])], like=y)]
