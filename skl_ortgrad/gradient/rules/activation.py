r"""Element-wise functions of one tensor, :math:`Y = f(X)`, :math:`\bar X = \bar Y f'(X)`.

======================  ==============================================
``Identity``            :math:`\bar X = \bar Y`
``Cast``                :math:`\bar X = \mathrm{cast}(\bar Y)` to X's type
``Relu``                :math:`\bar X = \bar Y\,[Y > 0]` (0 at 0)
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

``Relu``'s mask :math:`[Y > 0]` is :func:`positive_mask`: in float32 a
``HardSigmoid`` of :math:`Y` scaled far up (measured 16 µs against 37 µs for
:math:`\mathrm{sign}(Y)` on ``[200, 128]`` float32, whose kernel is slow here; a
comparison and a cast, or onnxruntime's branching ``ReluGrad`` kernel, are slower still),
:math:`\mathrm{sign}(Y)` in other types.
"""

from __future__ import annotations

from onnx import NodeProto, TensorProto

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


#: :func:`positive_mask`'s scale :math:`S` per element type (a power of two: exact) and
#: the ``HardSigmoid`` slope :math:`K` (a float32 attribute). float32 only: onnxruntime's
#: CPU ``HardSigmoid`` has no double kernel at most opsets (13 and 21 refuse it, 1.19.2).
POSITIVE_MASK_SCALES = {TensorProto.FLOAT: 2.0**127}
POSITIVE_MASK_SLOPE = 2.0**127


def positive_mask(ctx: GradientContext, x: str) -> str:
    r""":math:`[x > 0]` in the type of ``x``: in float32
    :math:`\operatorname{clip}(K (S x), 0, 1)`, one ``Mul`` and one ``HardSigmoid``
    (:data:`POSITIVE_MASK_SCALES`), exact for every value: 0 for :math:`x \le 0`, and the
    smallest positive float32, the subnormal :math:`2^{-149}`, times :math:`KS = 2^{254}`
    is :math:`2^{105}`, clipped to 1, as an overflow to infinity is;
    :math:`\mathrm{sign}(\mathrm{Relu}(x))` in the other types."""
    scale = POSITIVE_MASK_SCALES.get(ctx.elem_type(x))
    if scale is None:
        return ctx.op("Sign", [ctx.op("Relu", [x], like=x)], like=x)
    scaled = ctx.op("Mul", [x, ctx.constant(scale, x)], like=x)
    return ctx.op("HardSigmoid", [scaled], like=x, alpha=POSITIVE_MASK_SLOPE, beta=0.0)


@register("Relu")
def relu(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    return [_times(ctx, grads[0], positive_mask(ctx, node.output[0]))]


@register("LeakyRelu")
def leaky_relu(ctx: GradientContext, node: NodeProto, grads: list[str | None]
               ) -> list[str | None]:
    x = node.input[0]
    alpha = float(ctx.attributes(node).get("alpha", 0.01))
    positive = positive_mask(ctx, x)
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
