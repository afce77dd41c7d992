"""The ``"onnx"`` backend against onnxruntime-training's gradient builder, case by case.

Both backends differentiate the same model of :mod:`_gradient_cases`; their fused graphs
(same inputs and outputs) must return the same outputs and gradients. The module needs
onnxruntime-training (Python 3.10-3.12) and is skipped as a whole without it.

onnxruntime-training 1.19.2 cannot differentiate some operators or configurations
(:data:`BUILDER_FAILS`, :data:`CASE_BUILDER_FAILS`): for those the test checks that its
builder still raises. Its float64 graphs need
kernels that only exist in float32 for others (:data:`FLOAT64_FAILS`): those are
compared on the float32 version of the model. Where the training backend is wrong
(:data:`KNOWN_WRONG`) the comparison is a strict ``xfail``: it fails once fixed.
"""

from __future__ import annotations

import numpy as np
import pytest
from _backends import TRAINING
from _gradient_cases import CASES
from _gradient_harness import (
    Case,
    as_float32,
    forward_model,
    onnxruntime_agrees,
    output_gradients,
    run_fused,
    session,
)

from skl_ortgrad.gradient import build_gradient

if not TRAINING:
    pytest.skip("requirements.txt installs no onnxruntime-training on this Python (no wheel)",
                allow_module_level=True)

#: Operators for which onnxruntime-training's builder has no gradient (or fails).
BUILDER_FAILS = {
    "Sum": "no gradient builder registered for Sum",
    "Softplus": "no gradient builder registered for Softplus",
    "CastLike": "no gradient builder registered for CastLike",
    "ReduceSumSquare": "no gradient builder registered for ReduceSumSquare",
    "ReduceL1": "no gradient builder registered for ReduceL1",
    "ReduceMax": "no gradient builder registered for ReduceMax",
    "ReduceMin": "no gradient builder registered for ReduceMin",
    "Floor": "the builder differentiates Floor and has no gradient for it",
}

#: Cases of supported operators on which the builder fails.
CASE_BUILDER_FAILS = {
    "mul-square": "the same tensor twice in one node: duplicate definition of X_grad",
    "pow-input-exponent": "no gradient for Pow's exponent",
    "pow-int-exponent": "an int64 exponent: its Sub mixes int64 and double",
    "matmul-2d-1d": "1-D operand: FusedMatMul shape inference fails",
    "matmul-1d-1d": "1-D operand: FusedMatMul shape inference fails",
    "matmul-1d-3d": "1-D operand: FusedMatMul shape inference fails",
    "matmul-3d-1d": "1-D operand: FusedMatMul shape inference fails",
    "reducel2-attr-axis2-drop": "keepdims=0 with an axes attribute: invalid Unsqueeze",
    "reducelogsumexp-attr-axis2-drop": "keepdims=0 with an axes attribute: invalid Unsqueeze",
    "reducel2-all-drop": "keepdims=0 over all axes: untyped intermediate",
    "reducel2-all-drop-opset13": "keepdims=0 over all axes: untyped intermediate",
    "reducelogsumexp-all-drop": "keepdims=0 over all axes: untyped intermediate",
    "reducelogsumexp-all-drop-opset13": "keepdims=0 over all axes: untyped intermediate",
    "transpose-no-perm": "Transpose without perm: unordered_map::at",
    "clip-bounds-differentiated": "no gradient for Clip's bounds",
}

#: Operators or cases whose float64 training graph cannot run: they are compared in
#: float32.
FLOAT64_FAILS = {
    # skl_ortgrad's float64 rewrite of FusedMatMul (an Einsum) needs batch axes of the
    # same rank on both operands, and no 1-D operand.
    "matmul-4d-3d": "the float64 rewrite of FusedMatMul: Einsum batch axes of unequal rank",
    "matmul-1d-2d": "the float64 rewrite of FusedMatMul: no rewrite for a 1-D operand",
    "LeakyRelu": "no float64 LeakyRelu kernel",
    "ReduceL2": "onnxruntime 1.19's float64 ReduceL2 kernel rounds to float32",
}

#: Cases where the training backend returns something else than the contract says; the
#: ``"onnx"`` backend's result is the one checked against finite differences.
KNOWN_WRONG = {
    "where": "onnxruntime-training does not sum Where's gradient over broadcast axes",
    "where-broadcast-condition":
        "onnxruntime-training does not sum Where's gradient over broadcast axes",
    "split-one-used":
        "onnxruntime-training concatenates only the gradients of the used Split outputs",
    "gemm-tA1-tB1-Cscalar": "onnxruntime-training gives a 0-d C a gradient of shape [1]",
}


def _known(table: dict[str, str], case: Case) -> str | None:
    """The reason ``table`` gives for ``case`` (by name, then by operator), or None."""
    name = case.name.removesuffix("-float32")
    if name in table:
        return table[name]
    return next((table[op] for op in sorted(case.op_types) if op in table), None)


def _variant(case: Case) -> Case:
    """The case in float64, or in float32 where the float64 training graph cannot run."""
    return case if _known(FLOAT64_FAILS, case) is None else as_float32(case)


def _param(case: Case):
    reason = _known(KNOWN_WRONG, case)
    marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
    return pytest.param(case, id=case.name, marks=marks)


def _builder_fails(case: Case) -> str | None:
    return _known(BUILDER_FAILS, case) or _known(CASE_BUILDER_FAILS, case)


#: The cases onnxruntime itself runs like onnx's reference evaluator (1.19 fails on
#: reductions with ``noop_with_empty_axes``): both fused graphs hold the forward one.
RUNNABLE = [case for case in map(_variant, CASES) if onnxruntime_agrees(case)]
COMPARED = [_param(case) for case in RUNNABLE if _builder_fails(case) is None]
REFUSED = [pytest.param(case, id=case.name) for case in RUNNABLE if _builder_fails(case)]


@pytest.mark.parametrize("case", REFUSED)
def test_builder_limits_are_still_there(case):
    """The cases listed as failing in onnxruntime-training's builder do fail: a newer
    build that differentiates one makes this fail, and the case moves to the comparison."""
    with pytest.raises((RuntimeError, IndexError)):
        build_gradient(case.model, case.weights, case.inputs, backend="onnxruntime-training")


@pytest.mark.parametrize("case", COMPARED)
def test_same_gradients_as_onnxruntime_training(case):
    training = build_gradient(case.model, case.weights, case.inputs,
                              backend="onnxruntime-training")
    ours = build_gradient(case.model, case.weights, case.inputs, backend="onnx")
    assert training.differentiable_outputs == ours.differentiable_outputs
    assert [i.name for i in training.fused.graph.input] == [
        i.name for i in ours.fused.graph.input]
    assert [o.name for o in training.fused.graph.output] == [
        o.name for o in ours.fused.graph.output]

    grads = output_gradients(case, session(forward_model(case)))
    expected = run_fused(training.fused, case, grads,
                         lambda model: session(model, optimized=not training.unoptimized))
    got = run_fused(ours.fused, case, grads)
    if case.name.endswith("-float32"):
        tolerance = {"rtol": 1e-5, "atol": 1e-6}
    elif "ReduceMean" in case.op_types:
        # onnxruntime-training's float64 ReduceMean gradient rounds 1/count to float32.
        tolerance = {"rtol": 1e-7, "atol": 0}
    else:
        tolerance = {"rtol": 1e-12, "atol": 1e-14}
    assert list(got) == list(expected)
    for name, value in expected.items():
        assert got[name].shape == value.shape, name
        np.testing.assert_allclose(got[name], value, err_msg=name, **tolerance)
