"""The ``"onnx"`` backend against onnxruntime-training's gradient builder, case by case.

Both backends differentiate the same model of :mod:`_gradient_cases`; their fused graphs
(same inputs and outputs) must return the same outputs and gradients. The module needs
onnxruntime-training (requirements.txt installs it on Python < 3.13) and is skipped as a
whole where it is not installed by design.

Every case of :mod:`_gradient_cases` is accounted for, and a change of the runtime in
either direction fails a test:

* onnxruntime 1.19 cannot run some forward models like onnx's reference evaluator does
  (:data:`NOT_RUNNABLE`): they are left out, and a test checks that list against what
  fails;
* its float64 kernels are missing or wrong for others (:data:`FLOAT64_FAILS`): those are
  compared on the float32 version of the model;
* its builder cannot differentiate some operators or configurations
  (:data:`BUILDER_FAILS`, :data:`CASE_BUILDER_FAILS`): for those the test checks that it
  still raises, with the listed message;
* where the training backend is wrong (:data:`KNOWN_WRONG`) the comparison is a strict
  ``xfail`` on an assertion: it fails once fixed.
"""

from __future__ import annotations

from typing import NamedTuple

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


class Refusal(NamedTuple):
    """Why onnxruntime-training's builder fails on a case, and how it says so."""

    reason: str
    match: str
    error: type[Exception] = RuntimeError


def _unregistered(op: str, reason: str | None = None) -> Refusal:
    return Refusal(reason or f"no gradient builder registered for {op}",
                   f"The gradient builder has not been registered: {op} for node ")


#: Operators for which onnxruntime-training's builder has no gradient.
BUILDER_FAILS = {
    "Sum": _unregistered("Sum"),
    "Softplus": _unregistered("Softplus"),
    "CastLike": _unregistered("CastLike"),
    "ReduceSumSquare": _unregistered("ReduceSumSquare"),
    "ReduceL1": _unregistered("ReduceL1"),
    "ReduceMax": _unregistered("ReduceMax"),
    "ReduceMin": _unregistered("ReduceMin"),
    "Floor": _unregistered("Floor", "the builder differentiates Floor and has no gradient "
                                    "for it"),
}

_FUSED_MATMUL_SHAPES = r"\(FusedMatMul\) \[ShapeInferenceError\] Incompatible dimensions"
_BAD_UNSQUEEZE = r"Unsqueeze_\d+\) has input size 1 not in range \[min=2, max=2\]"
_UNTYPED = "does not have type information set by parent node"

#: Cases of supported operators on which the builder fails.
CASE_BUILDER_FAILS = {
    "mul-square": Refusal("the same tensor twice in one node: duplicate definition of X_grad",
                          r"Duplicate definition of name \(X_grad\)"),
    "pow-input-exponent": Refusal("no gradient for Pow's exponent",
                                  "GradientBuilder is not implemented for CUDA Pow's input "
                                  "exponent"),
    "pow-int-exponent": Refusal("an int64 exponent: its Sub mixes int64 and double",
                                r"bound to different types \(tensor\(int64\) and "
                                r"tensor\(double\)"),
    "matmul-2d-1d": Refusal("1-D operand: FusedMatMul shape inference fails",
                            _FUSED_MATMUL_SHAPES),
    "matmul-1d-1d": Refusal("1-D operands: FusedMatMul shape inference fails",
                            r"\(FusedMatMul\) \[ShapeInferenceError\] Input tensors of "
                            r"wrong rank \(0\)"),
    "matmul-1d-3d": Refusal("1-D operand: FusedMatMul shape inference fails",
                            _FUSED_MATMUL_SHAPES),
    "matmul-3d-1d": Refusal("1-D operand: FusedMatMul shape inference fails",
                            _FUSED_MATMUL_SHAPES),
    "reducel2-attr-axis2-drop": Refusal("keepdims=0 with an axes attribute: invalid Unsqueeze",
                                        _BAD_UNSQUEEZE),
    "reducelogsumexp-attr-axis2-drop": Refusal(
        "keepdims=0 with an axes attribute: invalid Unsqueeze", _BAD_UNSQUEEZE),
    "reducel2-all-drop": Refusal("keepdims=0 over all axes: untyped intermediate", _UNTYPED),
    "reducel2-all-drop-opset13": Refusal("keepdims=0 over all axes: untyped intermediate",
                                         _UNTYPED),
    "reducelogsumexp-all-drop": Refusal("keepdims=0 over all axes: untyped intermediate",
                                        _UNTYPED),
    "reducelogsumexp-all-drop-opset13": Refusal(
        "keepdims=0 over all axes: untyped intermediate", _UNTYPED),
    "transpose-no-perm": Refusal("Transpose without perm", "^unordered_map::at$", IndexError),
    "clip-bounds-differentiated": Refusal("no gradient for Clip's bounds",
                                          "failed to find NodeArg by name: lo_grad"),
}

_NO_DOUBLE_REDUCE_L1 = "onnxruntime 1.19 has no float64 ReduceL1 kernel before opset 18"

#: Operators or cases whose float64 training graph cannot run (or is not float64): they
#: are compared in float32.
FLOAT64_FAILS = {
    # skl_ortgrad's float64 rewrite of FusedMatMul (an Einsum) needs batch axes of the
    # same rank on both operands, and no 1-D operand.
    "matmul-4d-3d": "the float64 rewrite of FusedMatMul: Einsum batch axes of unequal rank",
    "matmul-1d-2d": "the float64 rewrite of FusedMatMul: no rewrite for a 1-D operand",
    "LeakyRelu": "no float64 LeakyRelu kernel",
    "Softplus": "no float64 Softplus kernel",
    "ReduceL2": "onnxruntime 1.19's float64 ReduceL2 kernel rounds to float32",
    "reducel1-attr-axis2-drop": _NO_DOUBLE_REDUCE_L1,
    "reducel1-attr-axes01-keep": _NO_DOUBLE_REDUCE_L1,
    "reducel1-all-drop-opset13": _NO_DOUBLE_REDUCE_L1,
}

_NOOP_FAILS = ("onnxruntime 1.19 fails on noop_with_empty_axes=1 without axes: "
               "'Reduction on all axes, output size should be 1'")

#: Cases (after :data:`FLOAT64_FAILS`) whose forward model onnxruntime 1.19 does not run
#: like onnx's reference evaluator: finite differences and the fused graphs, which hold the
#: forward one, would say nothing about the gradients. They are left out.
NOT_RUNNABLE = {
    **dict.fromkeys(["reducesum-noop", "reducemean-noop", "reducesumsquare-noop",
                     "reducel2-noop-float32", "reducelogsumexp-noop", "reducemax-noop",
                     "reducemin-noop"], _NOOP_FAILS),
    **dict.fromkeys(["reducel1-noop", "reducel1-noop-empty-axes"],
                    "onnxruntime 1.19's ReduceL1 reduces over all axes where "
                    "noop_with_empty_axes=1 leaves the input as is"),
    "reducesumsquare-noop-empty-axes": "noop_with_empty_axes=1 and empty axes: onnxruntime "
                                       "1.19 returns X, the reference evaluator X^2",
    "reducel2-noop-empty-axes-float32": "noop_with_empty_axes=1 and empty axes: onnxruntime "
                                        "1.19 returns X, the reference evaluator |X|",
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


def _known(table: dict, case: Case):
    """The entry ``table`` gives for ``case`` (by name, then by operator), or None."""
    name = case.name.removesuffix("-float32")
    if name in table:
        return table[name]
    return next((table[op] for op in sorted(case.op_types) if op in table), None)


def _variant(case: Case) -> Case:
    """The case in float64, or in float32 where the float64 training graph cannot run."""
    return case if _known(FLOAT64_FAILS, case) is None else as_float32(case)


def _param(case: Case):
    reason = _known(KNOWN_WRONG, case)
    marks = ([pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)]
             if reason else [])
    return pytest.param(case, id=case.name, marks=marks)


def _builder_fails(case: Case) -> Refusal | None:
    return _known(CASE_BUILDER_FAILS, case) or _known(BUILDER_FAILS, case)


VARIANTS = [_variant(case) for case in CASES]
RUNNABLE = [case for case in VARIANTS if case.name not in NOT_RUNNABLE]
COMPARED = [_param(case) for case in RUNNABLE if _builder_fails(case) is None]
REFUSED = [pytest.param(case, id=case.name) for case in RUNNABLE if _builder_fails(case)]


def test_not_runnable_cases_are_exactly_those_listed():
    """A case onnxruntime starts running correctly, or one it stops running, fails here."""
    failing = [case.name for case in VARIANTS if not onnxruntime_agrees(case)]
    assert sorted(failing) == sorted(NOT_RUNNABLE)


def test_every_table_entry_is_used():
    """No stale entry: each name is a case or an operator of one, and each refusal is the
    one some runnable case gets."""
    names = {case.name.removesuffix("-float32") for case in VARIANTS}
    ops = set().union(*(case.op_types for case in VARIANTS))
    for table in (FLOAT64_FAILS, KNOWN_WRONG):
        assert set(table) - names - ops == set()
    used = {id(_builder_fails(case)) for case in RUNNABLE}
    for table in (BUILDER_FAILS, CASE_BUILDER_FAILS):
        assert [key for key, entry in table.items() if id(entry) not in used] == []


@pytest.mark.parametrize("case", REFUSED)
def test_builder_limits_are_still_there(case):
    """The cases listed as failing in onnxruntime-training's builder fail with the listed
    message: a newer build that differentiates one makes this fail, and the case moves to
    the comparison."""
    refusal = _builder_fails(case)
    with pytest.raises(refusal.error, match=refusal.match):
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
