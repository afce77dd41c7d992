r"""Matrix products.

``MatMul``, :math:`Y = A B` (numpy semantics: batched, 1-D operands promoted):

.. math::

    \bar A = \bar Y B^T, \qquad \bar B = A^T \bar Y,

transposing the last two axes and summing over broadcast batch axes. In float64 the
batched products are written as ``Einsum``: onnxruntime before 1.20 fuses a ``Transpose``
feeding a ``MatMul`` into ``com.microsoft.FusedMatMul``, which has no float64 kernel.

``Gemm``, :math:`Y = \alpha\, A' B' + \beta C` with :math:`A' = A^T` if ``transA``
(likewise :math:`B'`):

.. math::

    \bar A' = \alpha \bar Y B'^T, \qquad \bar B' = \alpha A'^T \bar Y, \qquad
    \bar C = \beta \sum_{\text{broadcast axes}} \bar Y,

each written as one ``Gemm`` whose flags fold the transpositions.
"""

from __future__ import annotations

from onnx import NodeProto, TensorProto

from skl_ortgrad.gradient.context import GradientContext
from skl_ortgrad.gradient.rules import register


def _transpose_last(ctx: GradientContext, name: str, rank: int) -> str:
    perm = [*range(rank - 2), rank - 1, rank - 2]
    return ctx.op("Transpose", [name], perm=perm)


@register("MatMul")
def matmul(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    (g,) = grads
    a, b = node.input
    rank_a, rank_b = ctx.rank(a), ctx.rank(b)
    result: list[str | None] = [None, None]
    if rank_a == 2 and rank_b == 2:
        if ctx.needs(a):
            result[0] = ctx.op("Gemm", [g, b], like=a, transB=1)
        if ctx.needs(b):
            result[1] = ctx.op("Gemm", [a, g], like=b, transA=1)
        return result
    # Promote 1-D operands as MatMul does: A [k] -> [1, k], B [k] -> [k, 1].
    a2, b2, g2 = a, b, g
    if rank_a == 1:
        a2 = ctx.unsqueeze(a, [0])
        g2 = ctx.unsqueeze(g2, [ctx.rank(g2) - 1 if rank_b > 1 else 0])
    if rank_b == 1:
        b2 = ctx.unsqueeze(b, [1])
        g2 = ctx.unsqueeze(g2, [ctx.rank(g2)])
    if ctx.needs(a):
        partial = _product_transposed(ctx, g2, b2, transpose_left=False)
        ctx.shapes[partial] = _batched_shape(ctx, g2, a2)
        result[0] = ctx.reshape_like(ctx.unbroadcast(partial, a2), a)
    if ctx.needs(b):
        partial = _product_transposed(ctx, a2, g2, transpose_left=True)
        ctx.shapes[partial] = _batched_shape(ctx, g2, b2)
        result[1] = ctx.reshape_like(ctx.unbroadcast(partial, b2), b)
    return result


def _product_transposed(ctx: GradientContext, left: str, right: str, transpose_left: bool
                        ) -> str:
    """:math:`L^T R` if ``transpose_left`` else :math:`L R^T`, batched (last two axes)."""
    if ctx.elem_type(left) != TensorProto.DOUBLE:
        if transpose_left:
            return ctx.op("MatMul", [_transpose_last(ctx, left, ctx.rank(left)), right])
        return ctx.op("MatMul", [left, _transpose_last(ctx, right, ctx.rank(right))])
    # Einsum broadcasts "..." only between operands of the same rank: pad with axes of 1.
    rank = max(ctx.rank(left), ctx.rank(right))
    for _ in range(rank - ctx.rank(left)):
        left = ctx.unsqueeze(left, [0])
    for _ in range(rank - ctx.rank(right)):
        right = ctx.unsqueeze(right, [0])
    equation = "...ji,...jk->...ik" if transpose_left else "...ij,...kj->...ik"
    return ctx.op("Einsum", [left, right], equation=equation)


def _batched_shape(ctx: GradientContext, g: str, operand: str) -> list | None:
    """Shape of a partial gradient: the batch axes of the output, the operand's matrix."""
    out, own = ctx.shape(g), ctx.shape(operand)
    if out is None or own is None:
        return None
    return [*out[:-2], *own[-2:]]


@register("Gemm")
def gemm(ctx: GradientContext, node: NodeProto, grads: list[str | None]) -> list[str | None]:
    (g,) = grads
    atts = ctx.attributes(node)
    alpha, beta = float(atts.get("alpha", 1.0)), float(atts.get("beta", 1.0))
    trans_a, trans_b = int(atts.get("transA", 0)), int(atts.get("transB", 0))
    a, b = node.input[0], node.input[1]
    result: list[str | None] = [None] * len(node.input)
    if ctx.needs(a):
        if trans_a:
            result[0] = ctx.op("Gemm", [b, g], like=a, alpha=alpha, transA=trans_b, transB=1)
        else:
            result[0] = ctx.op("Gemm", [g, b], like=a, alpha=alpha, transB=1 - trans_b)
    if ctx.needs(b):
        if trans_b:
            result[1] = ctx.op("Gemm", [g, a], like=b, alpha=alpha, transA=1, transB=trans_a)
        else:
            result[1] = ctx.op("Gemm", [a, g], like=b, alpha=alpha, transA=1 - trans_a)
    if len(node.input) > 2 and ctx.needs(node.input[2]):
        scaled = g if beta == 1.0 else ctx.op("Mul", [g, ctx.constant(beta, g)], like=g)
        result[2] = ctx.unbroadcast(scaled, node.input[2])
    return result
