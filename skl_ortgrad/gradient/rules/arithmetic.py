r"""Element-wise arithmetic with numpy broadcasting.

Every partial gradient has the result's shape and is reduced to its operand's shape by
:meth:`~skl_ortgrad.gradient.context.GradientContext.unbroadcast`.

==================================  ============================================================
:math:`Y = A + B`                   :math:`\bar A = \bar Y,\ \bar B = \bar Y`
:math:`Y = A - B`                   :math:`\bar A = \bar Y,\ \bar B = -\bar Y`
:math:`Y = A B`                     :math:`\bar A = \bar Y B,\ \bar B = \bar Y A`
:math:`Y = A / B`                   :math:`\bar A = \bar Y / B,\ \bar B = -\bar Y Y / B`
:math:`Y = -X`                      :math:`\bar X = -\bar Y`
:math:`Y = \sum_i X_i`              :math:`\bar X_i = \bar Y`
:math:`Y = A^P`                     :math:`\bar A = \bar Y P A^{P-1},\ \bar P = \bar Y Y \log A`
:math:`Y = \max(A, B)`              :math:`\bar A = \bar Y [A \ge B],\ \bar B = \bar Y [A < B]`
:math:`Y = \min(A, B)`              :math:`\bar A = \bar Y [A \le B],\ \bar B = \bar Y [A > B]`
:math:`Y = C ? A : B`               :math:`\bar A = C ? \bar Y : 0,\ \bar B = C ? 0 : \bar Y`
:math:`Y = \mathrm{clip}(X, l, h)`  :math:`\bar X = \bar Y [l \le X \le h]`, bounds: below
==================================  ============================================================

A differentiated bound of ``Clip`` takes the gradient of the elements it replaced,
:math:`\bar l = \sum \bar Y [X < l]` and :math:`\bar h = \sum \bar Y [X > h]`.
For ``Max``/``Min`` of more than two operands, the first operand reaching the extremum
takes the whole gradient (ties go to the earliest operand).
"""

from __future__ import annotations

from collections.abc import Callable

from onnx import NodeProto

from skl_ortgrad.gradient.context import GradientContext
from skl_ortgrad.gradient.rules import register


def _gradients(ctx: GradientContext, node: NodeProto, partials: dict[int, Callable[[], str]]
               ) -> list[str | None]:
    """Apply ``partials[i]()`` for every input ``i`` whose gradient is needed, unbroadcast."""
    result: list[str | None] = [None] * len(node.input)
    for index, partial in partials.items():
        name = node.input[index]
        if ctx.needs(name):
            result[index] = ctx.unbroadcast(partial(), name)
    return result


@register("Add")
def add(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    (g,) = grads
    return _gradients(ctx, node, {0: lambda: g, 1: lambda: g})


@register("Sub")
def sub(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    (g,) = grads
    return _gradients(ctx, node, {0: lambda: g, 1: lambda: ctx.op("Neg", [g], like=g)})


@register("Mul")
def mul(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    (g,) = grads
    a, b = node.input
    if a == b:
        # A square: one term 2 A gY instead of two partial gradients to add.
        return [ctx.op("Mul", [g, ctx.op("Add", [a, a])], like=g), None]
    return _gradients(ctx, node, {
        0: lambda: ctx.op("Mul", [g, b], like=g),
        1: lambda: ctx.op("Mul", [g, a], like=g),
    })


@register("Div")
def div(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    (g,) = grads
    _, b = node.input
    y = node.output[0]
    return _gradients(ctx, node, {
        0: lambda: ctx.op("Div", [g, b], like=g),
        1: lambda: ctx.op("Neg", [ctx.op("Div", [ctx.op("Mul", [g, y], like=g), b], like=g)],
                          like=g),
    })


@register("Neg")
def neg(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    return [ctx.op("Neg", [grads[0]], like=grads[0])]


@register("Sum")
def sum_(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    (g,) = grads
    return _gradients(ctx, node, {i: (lambda: g) for i in range(len(node.input))})


@register("Pow")
def pow_(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    (g,) = grads
    a, p = node.input
    y = node.output[0]

    def grad_base() -> str:
        # P * A^(P-1), P cast to A's type (Pow allows an exponent of another type).
        exponent = p
        if ctx.elem_type(p) != ctx.elem_type(a):
            exponent = ctx.op("Cast", [p], to=ctx.elem_type(a))
        minus_one = ctx.op("Sub", [exponent, ctx.constant(1, a, rank=ctx.rank(p))])
        slope = ctx.op("Mul", [exponent, ctx.op("Pow", [a, minus_one])])
        return ctx.op("Mul", [g, slope], like=g)

    def grad_exponent() -> str:
        return ctx.op("Mul", [g, ctx.op("Mul", [y, ctx.op("Log", [a])])], like=g)

    return _gradients(ctx, node, {0: grad_base, 1: grad_exponent})


def _mask(ctx: GradientContext, condition: str, like: str) -> str:
    """A boolean tensor as 0/1 in the element type of ``like``."""
    return ctx.op("Cast", [condition], to=ctx.elem_type(like))


@register("Max", "Min")
def extremum(ctx: GradientContext, node: NodeProto, grads: list[str | None]
             ) -> list[str | None]:
    """``Max``/``Min``: each operand gets the gradient where it is the first to equal Y."""
    (g,) = grads
    y = node.output[0]
    result: list[str | None] = [None] * len(node.input)
    taken: str | None = None  # where an earlier operand already took the gradient
    for index, name in enumerate(node.input):
        hit = ctx.op("Equal", [name, y])
        if taken is not None:
            hit = ctx.op("And", [hit, ctx.op("Not", [taken])])
        if index < len(node.input) - 1:
            taken = hit if taken is None else ctx.op("Or", [taken, hit])
        if ctx.needs(name):
            masked = ctx.op("Mul", [g, _mask(ctx, hit, g)], like=g)
            result[index] = ctx.unbroadcast(masked, name)
    return result


@register("Where")
def where(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    (g,) = grads
    condition = node.input[0]
    zero = ctx.constant(0, g)
    return _gradients(ctx, node, {
        1: lambda: ctx.op("Where", [condition, g, zero], like=g),
        2: lambda: ctx.op("Where", [condition, zero, g], like=g),
    })


@register("Clip")
def clip(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    (g,) = grads
    x = node.input[0]
    inside: str | None = None
    for index, compare in ((1, "GreaterOrEqual"), (2, "LessOrEqual")):
        if len(node.input) > index and node.input[index]:
            test = ctx.op(compare, [x, node.input[index]])
            inside = test if inside is None else ctx.op("And", [inside, test])
    result: list[str | None] = [None] * len(node.input)
    result[0] = g if inside is None else ctx.op("Mul", [g, _mask(ctx, inside, g)], like=g)
    # A bound takes the gradient of the elements it replaced.
    for index, outside in ((1, "Less"), (2, "Greater")):
        bound = node.input[index] if len(node.input) > index else ""
        if ctx.needs(bound):
            replaced = _mask(ctx, ctx.op(outside, [x, bound]), g)
            result[index] = ctx.unbroadcast(ctx.op("Mul", [g, replaced], like=g), bound)
    return result
