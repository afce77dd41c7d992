r"""One reverse-mode rule per ONNX operator, registered by operator type.

A rule receives the :class:`~skl_ortgrad.gradient.context.GradientContext`, the forward
node and the gradients :math:`\bar y_j = \partial L / \partial y_j` of its outputs (None
for an output nobody differentiates), and returns one gradient per node input
:math:`\bar x_i = \sum_j (\partial y_j / \partial x_i)^T \bar y_j`, None where the input
has none (an integer index, a shape, a tensor that does not depend on a trained weight).
Rules live in the modules of this package, grouped by kind of operator, and register
themselves with :func:`register`; :func:`rule_for` finds them.

Operators whose outputs are piecewise constant or not real numbers (``Shape``,
``Sign``, comparisons, ``ArgMax``...) are listed in :data:`NO_GRADIENT`: the walk treats
their outputs as constants. Any other operator without a rule is an error naming it.
"""

from __future__ import annotations

from collections.abc import Callable

from onnx import NodeProto

from skl_ortgrad.gradient.context import GradientContext

Rule = Callable[[GradientContext, NodeProto, list[str | None]], list[str | None]]

#: op_type -> rule, for the default ONNX domain.
GRADIENT_RULES: dict[str, Rule] = {}

#: Operators whose outputs carry no gradient (zero almost everywhere or not real).
NO_GRADIENT = frozenset({
    "And", "ArgMax", "ArgMin", "BitShift", "Ceil", "ConstantOfShape", "Equal", "EyeLike",
    "Floor", "Greater", "GreaterOrEqual", "IsInf", "IsNaN", "Less", "LessOrEqual",
    "NonZero", "Not", "OneHot", "Or", "RandomNormal", "RandomNormalLike", "RandomUniform",
    "RandomUniformLike", "Range", "Round", "Shape", "Sign", "Size", "Xor", "Constant",
})


def register(*op_types: str) -> Callable[[Rule], Rule]:
    """Decorator registering a rule for every operator of ``op_types``."""

    def decorate(rule: Rule) -> Rule:
        for op_type in op_types:
            if op_type in GRADIENT_RULES:
                raise ValueError(f"A gradient rule for {op_type!r} is already registered.")
            GRADIENT_RULES[op_type] = rule
        return rule

    return decorate


def rule_for(node: NodeProto) -> Rule:
    """The rule of ``node``'s operator.

    Raises
    ------
    NotImplementedError
        If the operator belongs to another domain or has no rule: a gradient is never
        silently wrong or missing.
    """
    if node.domain not in ("", "ai.onnx"):
        raise NotImplementedError(
            f"No gradient for operator {node.domain}.{node.op_type} (node {node.name!r}): "
            "the 'onnx' backend differentiates default-domain operators only; rewrite it "
            "into standard operators or cut it away before training."
        )
    rule = GRADIENT_RULES.get(node.op_type)
    if rule is None:
        raise NotImplementedError(
            f"No gradient rule for operator {node.op_type!r} (node {node.name!r}) in the "
            f"'onnx' backend. Operators with a rule: {', '.join(sorted(GRADIENT_RULES))}."
        )
    return rule


def _load_rules() -> None:
    # The rule modules register themselves on import.
    from skl_ortgrad.gradient.rules import (  # noqa: F401
        activation,
        arithmetic,
        linalg,
        reduction,
        shape,
        softmax,
    )


_load_rules()
