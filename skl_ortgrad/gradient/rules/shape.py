r"""Operators that move or select elements without computing with them.

=============================================  ==========================================
``Reshape``, ``Flatten``, ``Squeeze``,         :math:`\bar X = \mathrm{reshape}(\bar Y,
``Unsqueeze``                                  \mathrm{shape}(X))`
``Transpose`` (``perm``)                       :math:`\bar X = \bar Y` transposed by the
                                               inverse permutation
``Expand``                                     :math:`\bar X` = :math:`\bar Y` summed over
                                               the broadcast axes
``Concat`` (``axis``)                          :math:`\bar X_i` = the slice of
                                               :math:`\bar Y` where :math:`X_i` was put
``Split`` (``axis``)                           :math:`\bar X = \mathrm{concat}(\bar Y_j)`,
                                               zeros for an output without gradient
``Slice``                                      :math:`\bar X` = zeros with :math:`\bar Y`
                                               written back where the slice came from
``Gather`` (``axis``)                          :math:`\bar X` = zeros plus :math:`\bar Y`
                                               added at the gathered indices
``GatherElements`` (``axis``)                  the same, element by element
=============================================  ==========================================

Indices repeated in ``Gather`` add their gradients (``ScatterND`` and
``ScatterElements`` with ``reduction="add"``, opset 16 and above).
"""

from __future__ import annotations

import numpy as np
from onnx import NodeProto

from skl_ortgrad.gradient.context import GradientContext
from skl_ortgrad.gradient.rules import register


def _first_only(node: NodeProto, gradient: str) -> list[str | None]:
    return [gradient] + [None] * (len(node.input) - 1)


@register("Reshape", "Flatten", "Squeeze", "Unsqueeze")
def reshape(ctx: GradientContext, node: NodeProto, grads: list[str | None]
            ) -> list[str | None]:
    return _first_only(node, ctx.reshape_like(grads[0], node.input[0]))


@register("Transpose")
def transpose(ctx: GradientContext, node: NodeProto, grads: list[str | None]
              ) -> list[str | None]:
    rank = ctx.rank(node.input[0])
    perm = list(ctx.attributes(node).get("perm", range(rank)[::-1]))
    inverse = [int(i) for i in np.argsort(perm)]
    return [ctx.op("Transpose", [grads[0]], like=node.input[0], perm=inverse)]


@register("Expand")
def expand(ctx: GradientContext, node: NodeProto, grads: list[str | None]
           ) -> list[str | None]:
    return _first_only(node, ctx.unbroadcast(grads[0], node.input[0]))


def _sizes(ctx: GradientContext, names: list[str], axis: int) -> str:
    """The lengths of ``names`` along ``axis`` as an int64 tensor."""
    dims = [(ctx.shape(name) or [None] * (axis + 1))[axis] for name in names]
    if all(isinstance(dim, int) for dim in dims):
        return ctx.int64(dims)
    lengths = [ctx.op("Gather", [ctx.op("Shape", [name]), ctx.int64([axis])], axis=0)
               for name in names]
    return ctx.op("Concat", lengths, axis=0)


@register("Concat")
def concat(ctx: GradientContext, node: NodeProto, grads: list[str | None]
           ) -> list[str | None]:
    axis = int(ctx.attributes(node)["axis"]) % ctx.rank(node.output[0])
    inputs = list(node.input)
    parts = ctx.op_multi("Split", [grads[0], _sizes(ctx, inputs, axis)], len(inputs), axis=axis)
    for part, name in zip(parts, inputs, strict=True):
        ctx.record(part, name)
    return [part if ctx.needs(name) else None for part, name in zip(parts, inputs, strict=True)]


@register("Split")
def split(ctx: GradientContext, node: NodeProto, grads: list[str | None]
          ) -> list[str | None]:
    axis = int(ctx.attributes(node).get("axis", 0)) % ctx.rank(node.input[0])
    pieces = [g if g is not None else ctx.zeros_like(out)
              for g, out in zip(grads, node.output, strict=True)]
    return _first_only(node, ctx.op("Concat", pieces, like=node.input[0], axis=axis))


@register("Slice")
def slice_(ctx: GradientContext, node: NodeProto, grads: list[str | None]
           ) -> list[str | None]:
    x = node.input[0]
    rank = ctx.rank(x)
    params = [ctx.value(name) if i < len(node.input) and node.input[i] else None
              for i, name in enumerate(list(node.input[1:5]) + [""] * 4, start=1)][:4]
    starts, ends, axes, steps = params
    if starts is None or ends is None or any(
        i < len(node.input) and node.input[i] and params[i - 1] is None for i in (3, 4)
    ):
        raise NotImplementedError(
            f"Slice node {node.name!r}: the gradient needs constant starts, ends, axes "
            "and steps."
        )
    axes = list(range(len(starts))) if axes is None else [int(a) % rank for a in axes]
    steps = [1] * len(starts) if steps is None else [int(s) for s in steps]
    shape = ctx.shape(x)
    bounds = {}
    for axis, start, end, step in zip(axes, starts, ends, steps, strict=True):
        dim = shape[axis] if shape is not None else None
        if not isinstance(dim, int):
            raise NotImplementedError(
                f"Slice node {node.name!r}: the sliced axis {axis} of {x!r} has no static "
                "length, which the gradient needs."
            )
        bounds[axis] = range(*slice(int(start), int(end), step).indices(dim))
    if all(r.step == 1 for r in bounds.values()):
        # Pad the gradient with zeros around the slice.
        before = [bounds[a].start if a in bounds else 0 for a in range(rank)]
        after = [shape[a] - bounds[a].stop if a in bounds else 0 for a in range(rank)]
        after = [max(0, v) for v in after]
        padded = ctx.op("Pad", [grads[0], ctx.int64(before + after)], like=x)
        return _first_only(node, padded)
    static = ctx.static_shape(x)
    if static is None:
        raise NotImplementedError(
            f"Slice node {node.name!r}: steps other than 1 need a static shape of {x!r}."
        )
    selection = tuple(slice(r.start, r.stop if r.stop >= 0 else None, r.step)
                      if a in bounds else slice(None) for a, r in
                      ((a, bounds.get(a, range(0))) for a in range(rank)))
    flat = np.arange(int(np.prod(static)), dtype=np.int64).reshape(static)[selection]
    zeros = ctx.op("Reshape", [ctx.zeros_like(x), ctx.int64([-1])])
    updates = ctx.op("Reshape", [grads[0], ctx.int64([-1])])
    scattered = ctx.op("ScatterElements", [zeros, ctx.int64(flat.ravel()), updates], axis=0)
    return _first_only(node, ctx.op("Reshape", [scattered, ctx.int64(static)], like=x))


def _positive_indices(ctx: GradientContext, indices: str, x: str, axis: int) -> str:
    """Indices with negative values turned into ``index + length`` (Gather accepts both)."""
    value = ctx.value(indices)
    dim = (ctx.shape(x) or [None] * (axis + 1))[axis]
    if value is not None and isinstance(dim, int):
        return ctx.int64(np.where(value < 0, value + dim, value))
    as_int64 = ctx.op("Cast", [indices], to=7)
    length = ctx.op("Gather", [ctx.op("Shape", [x]), ctx.int64(axis)], axis=0)
    negative = ctx.op("Less", [as_int64, ctx.int64(0)])
    return ctx.op("Where", [negative, ctx.op("Add", [as_int64, length]), as_int64])


@register("Gather")
def gather(ctx: GradientContext, node: NodeProto, grads: list[str | None]
           ) -> list[str | None]:
    x, indices = node.input
    rank = ctx.rank(x)
    index_rank = ctx.rank(indices)
    axis = int(ctx.attributes(node).get("axis", 0)) % rank
    _check_scatter_opset(ctx, node)
    positions = ctx.op("Unsqueeze", [_positive_indices(ctx, indices, x, axis), ctx.int64([-1])])
    # ScatterND writes along the first axis: move the gathered axis first.
    x_perm = [axis, *range(axis), *range(axis + 1, rank)]
    g_perm = [*range(axis, axis + index_rank), *range(axis),
              *range(axis + index_rank, rank + index_rank - 1)]
    zeros = ctx.op("Transpose", [ctx.zeros_like(x)], perm=x_perm)
    updates = ctx.op("Transpose", [grads[0]], perm=g_perm)
    scattered = ctx.op("ScatterND", [zeros, positions, updates], reduction="add")
    back = [int(i) for i in np.argsort(x_perm)]
    return [ctx.op("Transpose", [scattered], like=x, perm=back), None]


@register("GatherElements")
def gather_elements(ctx: GradientContext, node: NodeProto, grads: list[str | None]
                    ) -> list[str | None]:
    x, indices = node.input
    axis = int(ctx.attributes(node).get("axis", 0)) % ctx.rank(x)
    _check_scatter_opset(ctx, node)
    positions = _positive_indices(ctx, indices, x, axis)
    scattered = ctx.op("ScatterElements", [ctx.zeros_like(x), positions, grads[0]], like=x,
                       axis=axis, reduction="add")
    return [scattered, None]


def _check_scatter_opset(ctx: GradientContext, node: NodeProto) -> None:
    if ctx.opset < 16:
        raise NotImplementedError(
            f"{node.op_type} node {node.name!r}: its gradient adds repeated indices with "
            f"reduction='add', available from opset 16; the model has opset {ctx.opset}."
        )
