r"""Element-wise functions of one tensor, :math:`Y = f(X)`, :math:`\bar X = \bar Y f'(X)`.

======================  ==============================================
``Identity``            :math:`\bar X = \bar Y`
``Cast``                :math:`\bar X = \mathrm{cast}(\bar Y)` to X's type
``Relu``                :math:`\bar X = \bar Y\,\mathrm{sign}(Y)` (0 at 0)
``LeakyRelu``           :math:`\bar X = \bar Y (\alpha + (1 - \alpha) [X > 0])`
``Tanh``                :math:`\bar X = \bar Y (1 - Y^2)`
``Sigmoid``             :math:`\bar X = \bar Y\, Y (1 - Y)`
``Softplus``            :math:`\bar X = \bar Y\,\sigma(X)`
``Exp``                 :math:`\bar X = \bar Y\, Y`
``Log``                 :math:`\bar X = \bar Y / X`
``Sqrt``                :math:`\bar X = \bar Y / (2 Y)`
``Reciprocal``          :math:`\bar X = -\bar Y\, Y^2`
``Abs``                 :math:`\bar X = \bar Y\,\mathrm{sign}(X)` (0 at 0)
======================  ==============================================

``Relu``'s mask is :math:`\mathrm{sign}(Y)`, already in X's type: measured faster here
than a comparison and a cast, and than onnxruntime's branching ``ReluGrad`` kernel.
"""

from __future__ import annotations

from onnx import NodeProto

from skl_ortgrad.gradient.context import GradientContext
from skl_ortgrad.gradient.rules import register


@register("Identity")
def identity(ctx: GradientContext, node: NodeProto, grads: list[str | None]
             ) -> list[str | None]:
    return [grads[0]]


@register("Cast", "CastLike")
def cast(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    x = node.input[0]
    result: list[str | None] = [None] * len(node.input)
    if ctx.is_float(x):
        result[0] = ctx.op("Cast", [grads[0]], like=x, to=ctx.elem_type(x))
    return result


def _times(ctx: GradientContext, g: str, factor: str) -> str:
    return ctx.op("Mul", [g, factor], like=g)


@register("Relu")
def relu(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    return [_times(ctx, grads[0], ctx.op("Sign", [node.output[0]]))]


@register("LeakyRelu")
def leaky_relu(ctx: GradientContext, node: NodeProto, grads: list[str | None]
               ) -> list[str | None]:
    x = node.input[0]
    alpha = float(ctx.attributes(node).get("alpha", 0.01))
    positive = ctx.op("Cast", [ctx.op("Greater", [x, ctx.constant(0, x)])], to=ctx.elem_type(x))
    slope = ctx.op("Add", [ctx.op("Mul", [positive, ctx.constant(1 - alpha, x)]),
                           ctx.constant(alpha, x)])
    return [_times(ctx, grads[0], slope)]


@register("Tanh")
def tanh(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    y = node.output[0]
    return [_times(ctx, grads[0],
                   ctx.op("Sub", [ctx.constant(1, y), ctx.op("Mul", [y, y])]))]


@register("Sigmoid")
def sigmoid(ctx: GradientContext, node: NodeProto, grads: list[str | None]
            ) -> list[str | None]:
    y = node.output[0]
    return [_times(ctx, grads[0],
                   ctx.op("Mul", [y, ctx.op("Sub", [ctx.constant(1, y), y])]))]


@register("Softplus")
def softplus(ctx: GradientContext, node: NodeProto, grads: list[str | None]
             ) -> list[str | None]:
    return [_times(ctx, grads[0], ctx.op("Sigmoid", [node.input[0]]))]


@register("Exp")
def exp(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    return [_times(ctx, grads[0], node.output[0])]


@register("Log")
def log(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    return [ctx.op("Div", [grads[0], node.input[0]], like=grads[0])]


@register("Sqrt")
def sqrt(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    y = node.output[0]
    return [ctx.op("Div", [grads[0], ctx.op("Add", [y, y])], like=grads[0])]


@register("Reciprocal")
def reciprocal(ctx: GradientContext, node: NodeProto, grads: list[str | None]
               ) -> list[str | None]:
    y = node.output[0]
    return [ctx.op("Neg", [_times(ctx, grads[0], ctx.op("Mul", [y, y]))], like=grads[0])]


@register("Abs")
def abs_(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    return [_times(ctx, grads[0], ctx.op("Sign", [node.input[0]]))]
