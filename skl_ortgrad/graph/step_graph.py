r"""The graph a training step is written into, node by node.

Both the training programs (:mod:`skl_ortgrad.training.programs`) and the update rules
(the learning rates' ``emit_update``, the one ONNX form of each rule, also behind their
``build_onnx_function``) write through a :class:`StepGraph`: fresh result names, the
step's scalar inputs by *kind* (``eta``, ``decay``...: the caller feeds one value per step,
see :func:`~skl_ortgrad.training.programs.scalar_table`) and constants, each at the rank of
the tensor it meets. onnxruntime broadcasts a rank-0 or ``[1]`` operand against an
``[n, 1]`` tensor element by element, far slower than a rank-matched one (DESIGN.md facts),
hence the ranks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from onnx import NodeProto, TensorProto, helper, numpy_helper

from skl_ortgrad.graph.model import unique_name


class StepGraph:
    """Nodes, scalar inputs and constants of a step, named apart from ``taken``.

    Parameters
    ----------
    taken : set of str
        Every name already in use in the graph the step goes into (updated in place).
    dtype : numpy dtype
        The element type of the step's constants.

    Attributes
    ----------
    nodes : list of NodeProto
    initializers : list of TensorProto
        The constants.
    """

    def __init__(self, taken: set[str], dtype: np.dtype) -> None:
        self.taken = taken
        self.dtype = np.dtype(dtype)
        self.nodes: list[NodeProto] = []
        self.initializers: list[TensorProto] = []
        self._scalars: dict[tuple[str, int], str] = {}
        self._constants: dict[tuple[float, int], str] = {}

    def node(self, op: str, inputs: Sequence[str], hint: str, **attrs: object) -> str:
        """Append an ``op`` node of one output, named after ``hint``; return that name."""
        return self.nodes_out(op, inputs, [hint], **attrs)[0]

    def nodes_out(self, op: str, inputs: Sequence[str], hints: Sequence[str],
                  **attrs: object) -> list[str]:
        """Append an ``op`` node of several outputs, named after ``hints``."""
        outs = [unique_name(hint, self.taken) for hint in hints]
        self.nodes.append(helper.make_node(op, list(inputs), outs,
                                           name=unique_name(f"n_{outs[0]}", self.taken),
                                           **attrs))
        return outs

    def scalar(self, kind: str, rank: int) -> str:
        """The step's scalar input of ``kind`` at ``rank`` (shape ``(1,) * rank``),
        created on first use."""
        if (kind, rank) not in self._scalars:
            self._scalars[kind, rank] = unique_name(f"{kind}_r{rank}" if rank else kind,
                                                    self.taken)
        return self._scalars[kind, rank]

    def define_scalar(self, kind: str, rank: int, name: str) -> None:
        """Let ``name``, a result of the graph, stand for the scalar of ``kind`` at
        ``rank``: a graph computing it from other inputs instead of receiving it."""
        if (kind, rank) in self._scalars:
            raise ValueError(f"The scalar {kind!r} of rank {rank} is already defined.")
        self._scalars[kind, rank] = name

    def scalar_inputs(self) -> list[tuple[str, str, tuple[int, ...]]]:
        """``(name, kind, shape)`` of every scalar used."""
        return [(name, kind, (1,) * rank) for (kind, rank), name in self._scalars.items()]

    def tensor(self, array: np.ndarray, hint: str) -> str:
        """A constant holding ``array`` as given (shapes, split sizes)."""
        name = unique_name(hint, self.taken)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def constant(self, value: float, rank: int, hint: str) -> str:
        """A constant ``value`` of the step's dtype and shape ``(1,) * rank`` (one per
        value and rank)."""
        key = (float(value), rank)
        if key not in self._constants:
            name = unique_name(hint, self.taken)
            array = np.full((1,) * rank, value, dtype=self.dtype)
            self.initializers.append(numpy_helper.from_array(array, name))
            self._constants[key] = name
        return self._constants[key]
