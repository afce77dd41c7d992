"""StepGraph: fresh names, one scalar input per kind and rank, rank-matched constants."""

import numpy as np
import pytest
from onnx import numpy_helper

from skl_ortgrad.graph.step_graph import StepGraph


def test_names_never_clash_with_the_graph_or_each_other():
    graph = StepGraph({"w", "w_move"}, np.float32)
    first = graph.node("Mul", ["w", "g"], "w_move")
    second = graph.node("Mul", ["w", "g"], "w_move")
    assert len({first, second, "w", "w_move"}) == 4
    assert [node.output[0] for node in graph.nodes] == [first, second]
    assert len({node.name for node in graph.nodes}) == 2
    outs = graph.nodes_out("Split", [first], ["a", "a"], axis=0)
    assert len(set(outs)) == 2 and list(graph.nodes[-1].output) == outs


def test_one_scalar_input_per_kind_and_rank():
    graph = StepGraph(set(), np.float64)
    eta2 = graph.scalar("eta", 2)
    assert graph.scalar("eta", 2) == eta2 and graph.scalar("eta", 0) != eta2
    graph.define_scalar("decay", 1, "computed_decay")
    assert graph.scalar("decay", 1) == "computed_decay"
    with pytest.raises(ValueError, match="already defined"):
        graph.define_scalar("eta", 2, "other")
    assert graph.scalar_inputs() == [(eta2, "eta", (1, 1)), ("eta", "eta", ()),
                                     ("computed_decay", "decay", (1,))]


def test_constants_have_the_graph_dtype_and_the_rank_asked():
    graph = StepGraph(set(), np.float32)
    mu = graph.constant(0.9, 2, "mu")
    assert graph.constant(0.9, 2, "again") == mu and graph.constant(0.9, 1, "mu") != mu
    shape = graph.tensor(np.array([-1], dtype=np.int64), "shape")
    values = {init.name: numpy_helper.to_array(init) for init in graph.initializers}
    assert values[mu].dtype == np.float32 and values[mu].shape == (1, 1)
    assert values[mu][0, 0] == np.float32(0.9)
    assert values[shape].dtype == np.int64 and values[shape].tolist() == [-1]
