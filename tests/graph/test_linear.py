"""linear_features: a linear score recognised by structure (fixed_intercept: its b where
W alone trains); select_model_input: what a model computes from one of its results."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime import InferenceSession

from skl_ortgrad import OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.graph.cut import select_model_input, select_model_output
from skl_ortgrad.graph.linear import fixed_intercept, linear_features
from skl_ortgrad.graph.model import initializer_array

RNG = np.random.default_rng(0)
X = RNG.standard_normal((60, 4)).astype(np.float32)


def _linear(outputs: int, intercept: int | None = None, reshape: bool = False):
    """MatMul(X, W) + b with W [4, outputs] and b of ``intercept`` (default ``outputs``)
    values, optionally reshaped to [-1, 1]."""
    nodes = [helper.make_node("MatMul", ["X", "W"], ["xw"]),
             helper.make_node("Add", ["xw", "b"], ["s"])]
    inits = [numpy_helper.from_array(np.ones((4, outputs), np.float32), "W"),
             numpy_helper.from_array(np.ones(intercept or outputs, np.float32), "b")]
    out = "s"
    if reshape:
        nodes.append(helper.make_node("Reshape", ["s", "shape"], ["r"]))
        inits.append(numpy_helper.from_array(np.array([-1, 1], np.int64), "shape"))
        out = "r"
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph)


def test_fixed_intercept_is_the_initializer_added_to_xw():
    for model in (_linear(1), _linear(3), _linear(1, reshape=True)):
        assert fixed_intercept(model, "W") == "b"
    assert fixed_intercept(_linear(1), "b") is None
    assert fixed_intercept(_linear(3, intercept=1), "W") is None


def test_the_fixed_intercepts_value():
    np.testing.assert_array_equal(initializer_array(_linear(3), "b"), np.ones(3, np.float32))
    with pytest.raises(StopIteration):
        initializer_array(_linear(3), "nope")


def test_linear_features_one_or_several_outputs():
    assert linear_features(_linear(1), ["W", "b"]) == "X"
    assert linear_features(_linear(1, reshape=True), ["W", "b"]) == "X"
    assert linear_features(_linear(3), ["W", "b"]) is None  # the program trains one
    assert linear_features(_linear(3), ["W", "b"], single_output=False) == "X"
    assert linear_features(_linear(3, intercept=1), ["W", "b"], single_output=False) is None
    assert linear_features(_linear(3, reshape=True), ["W", "b"], single_output=False) is None
    assert linear_features(_linear(1), ["b", "W"]) is None


@pytest.mark.parametrize("params", [{}, {"loss": "log_loss"}, {"loss": "modified_huber"}])
def test_what_follows_the_score_gives_the_model_outputs(params):
    """A multiclass classifier's graph after its score: fed the full model's scores, its
    labels and probabilities are the full model's."""
    y = np.digitize(X[:, 0], [-0.5, 0.5])
    model = OnnxSGDClassifier(max_iter=2, tol=None, random_state=0, **params).fit(X, y)
    template = model._template_
    full = InferenceSession(template.model.SerializeToString(),
                            providers=["CPUExecutionProvider"])
    scores = InferenceSession(
        select_model_output(template.model, template.score).SerializeToString(),
        providers=["CPUExecutionProvider"]).run(None, {"X": X})[0]
    after = select_model_input(template.model, template.score)
    assert [i.name for i in after.graph.input] == [template.score]
    onnx.checker.check_model(after)
    names = [o.name for o in template.model.graph.output]
    got = InferenceSession(after.SerializeToString(), providers=["CPUExecutionProvider"]).run(
        names, {template.score: scores})
    for a, b in zip(got, full.run(names, {"X": X}), strict=True):
        np.testing.assert_array_equal(a, b)


def test_nothing_follows_an_output_and_other_inputs_are_refused():
    regressor = OnnxSGDRegressor(max_iter=2, tol=None).fit(X, X[:, 0])
    template = regressor._template_
    with pytest.raises(ValueError, match="is an output of the model"):
        select_model_input(template.model, template.score)
    # An output that also reads X: the score alone does not give it.
    model = _linear(1)
    model.graph.node.append(helper.make_node("Add", ["s", "X"], ["t"]))
    del model.graph.output[:]
    model.graph.output.append(helper.make_tensor_value_info("t", TensorProto.FLOAT, None))
    with pytest.raises(ValueError, match="also need"):
        select_model_input(model, "s")
