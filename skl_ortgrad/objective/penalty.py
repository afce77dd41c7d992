"""The elastic penalty of a tensor as ONNX nodes."""

from __future__ import annotations

import numpy as np
from onnx import NodeProto, helper

from skl_ortgrad.graph.dtypes import onnx_dtype
from skl_ortgrad.graph.model import unique_name


def penalty_loss_onnx(
    name: str,
    dtype: np.dtype | type | int,
    l1: float | None = None,
    l2: float | None = None,
    existing_names: set[str] | None = None,
) -> list[NodeProto]:
    """Nodes computing the elastic penalty of a tensor ``W`` named ``name``.

    .. math::

        \\mathrm{<name>\\_penalty} = l_1 \\sum |W| + l_2 \\sum W^2

    a scalar of type ``dtype``. Its gradient is
    :math:`l_1\\,\\mathrm{sign}(W) + 2 l_2 W` (the seed API's definition, seed 003).

    Parameters
    ----------
    name : str
        The tensor (an initializer or an input).
    dtype : numpy dtype or ONNX element type
        Its element type.
    l1, l2 : float, optional
        Coefficients; None means 0. With both zero the output is a constant 0.
    existing_names : set of str, optional
        Names already used in the graph: intermediate results and nodes avoid them.

    Returns
    -------
    list of NodeProto
        Nodes (with ``Constant`` nodes for the coefficients) ending in ``<name>_penalty``.

    Raises
    ------
    ValueError
        If ``<name>_penalty`` is in ``existing_names``.
    """
    elem = dtype if isinstance(dtype, int) else onnx_dtype(dtype)
    taken = set(existing_names or ())
    output = f"{name}_penalty"
    if output in taken:
        raise ValueError(f"{output!r} already exists in the graph.")
    taken.add(output)
    l1 = float(l1 or 0.0)
    l2 = float(l2 or 0.0)
    nodes: list[NodeProto] = []

    def const(value: float, hint: str) -> str:
        out = unique_name(f"{name}_{hint}", taken)
        tensor = helper.make_tensor(out, elem, [], [value])
        nodes.append(helper.make_node("Constant", [], [out], name=out, value=tensor))
        return out

    def op(op_type: str, inputs: list[str], hint: str, out: str | None = None, **kw) -> str:
        out = out or unique_name(f"{name}_{hint}", taken)
        nodes.append(
            helper.make_node(op_type, inputs, [out], name=unique_name(f"n_{out}", taken), **kw)
        )
        return out

    terms = []
    if l1 != 0:
        abs_sum = op("ReduceSum", [op("Abs", [name], "abs")], "l1sum", keepdims=0)
        terms.append(op("Mul", [abs_sum, const(l1, "l1")], "l1pen"))
    if l2 != 0:
        sq_sum = op("ReduceSum", [op("Mul", [name, name], "sq")], "l2sum", keepdims=0)
        terms.append(op("Mul", [sq_sum, const(l2, "l2")], "l2pen"))
    if not terms:
        nodes.append(
            helper.make_node(
                "Constant",
                [],
                [output],
                name=unique_name(f"n_{output}", taken),
                value=helper.make_tensor(output, elem, [], [0.0]),
            )
        )
    elif len(terms) == 1:
        op("Identity", terms, "", out=output)
    else:
        op("Add", terms, "", out=output)
    return nodes
