"""The k-step training program against the per-batch path of the optimizer.

The reference runs, per batch, the one-call gradient graph (the optimizer's
``OrtGradientStep``) and the numpy updates of ``LearningRateSGD`` and
``ElasticLearningPenalty``, exactly as ``OrtGradientForwardBackwardOptimizer._epoch`` does;
the programs run the same batches ``k`` at a time: the generic one (the gradient graph
plus the updates) and the linear one (written by hand, on rows, its per-row inputs
computed here from their formulas). In float64 both must agree to 1e-10.
"""

from __future__ import annotations

import functools

import numpy as np
import onnx
import pytest
from _backends import AVAILABLE
from onnx import TensorProto, helper, numpy_helper
from onnxruntime import InferenceSession
from onnxruntime.capi._pybind_state import OrtDevice, OrtValue, OrtValueVector

from skl_ortgrad.gradient.backend import build_gradient
from skl_ortgrad.graph.dtypes import onnx_dtype
from skl_ortgrad.objective.merge import merge_loss_graph
from skl_ortgrad.runtime.options import session_options, unoptimized_session_options
from skl_ortgrad.runtime.step import OrtGradientStep
from skl_ortgrad.training.optimizers_partial import OrtGradientForwardBackwardOptimizer
from skl_ortgrad.training.programs import (
    LinearProgram,
    SparseLinearProgram,
    StepProgram,
    generic_program,
    linear_program,
)
from skl_ortgrad.training.programs import sparse as sparse_programs
from skl_ortgrad.training.sgd_learning_loss import (
    HingeLearningLoss,
    NegLogLearningLoss,
    SquareLearningLoss,
)
from skl_ortgrad.training.sgd_learning_penalty import (
    ElasticLearningPenalty,
    NoLearningPenalty,
)
from skl_ortgrad.training.sgd_learning_rate import LearningRateSGD

N_FEATURES, BATCH, N_BATCHES = 5, 4, 11  # 11 batches: a partial last chunk for k = 3, 8
WEIGHTS = ["coef", "intercept"]
LOSSES = {
    "squared_error": SquareLearningLoss(),
    # The exact log loss (log_loss; linear_program's "log").
    "log": NegLogLearningLoss(eps=0.0),
    # The classifiers' default.
    "hinge": HingeLearningLoss(),
}
PENALTIES = {"none": (0.0, 0.0), "l2": (0.0, 0.05), "l1": (0.02, 0.0), "elastic": (0.02, 0.05)}
RATE = LearningRateSGD(eta0=0.2, power_t=0.25, learning_rate="invscaling")
#: The penalty's ``rows``: each decay compounds that many per-sample decays, as the
#: estimators' penalties do (one per row of a batch).
ROWS = BATCH


def _linear(dtype: type, outputs: int = 1) -> onnx.ModelProto:
    """``score = X @ coef + intercept``, what a converted linear model reduces to (with
    ``outputs`` scores: a one-vs-rest classifier)."""
    elem = onnx_dtype(dtype)
    rng = np.random.default_rng(1)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "coef"], ["product"]),
         helper.make_node("Add", ["product", "intercept"], ["score"])],
        "linear",
        [helper.make_tensor_value_info("X", elem, [None, N_FEATURES])],
        [helper.make_tensor_value_info("score", elem, [None, outputs])],
        [numpy_helper.from_array(
            rng.standard_normal((N_FEATURES, outputs)).astype(dtype), "coef"),
         numpy_helper.from_array(np.linspace(0.3, -0.3, outputs).astype(dtype),
                                 "intercept")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                             ir_version=10)


@functools.cache
def _gradient(loss: str, backend: str, dtype: type, weighted: bool = False,
              outputs: int = 1):
    graph = LOSSES[loss].build_onnx_function(21, "cpu", weighted=weighted, dtype=dtype)
    model = merge_loss_graph(_linear(dtype, outputs), graph, label_name="label",
                             loss_name="loss",
                             weight_name="sample_weight" if weighted else None)
    return model, build_gradient(model, WEIGHTS, backend=backend)


def _per_row(weighted: bool) -> list[str]:
    return ["X", "label", "sample_weight"] if weighted else ["X", "label"]


#: The order the rows are visited in (a shuffled epoch).
ORDER = np.random.default_rng(2).permutation(N_BATCHES * BATCH)


@functools.cache
def _data(loss: str, dtype: type, outputs: int = 1) -> dict[str, np.ndarray]:
    """The dataset (with sample weights: integers, some zero), and under ``"rows"`` the
    epoch's order; with several ``outputs``, one-hot labels of as many classes."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N_BATCHES * BATCH, N_FEATURES))
    # Zeros, some rows all zero: what the sparse program skips.
    X[np.random.default_rng(1).random(X.shape) < 0.4] = 0.0
    X[[3, 17]] = 0.0
    score = X @ rng.standard_normal((N_FEATURES, 1)) + 0.5
    if outputs > 1:
        noisy = score[:, 0] + rng.standard_normal(len(score))
        y = np.eye(outputs)[np.digitize(noisy, np.quantile(noisy, [1 / 3, 2 / 3]))]
    elif loss != "squared_error":
        y = (score + rng.standard_normal(score.shape) > 0).astype(float)
    else:
        y = score + 0.1 * rng.standard_normal(score.shape)
    return {"X": X.astype(dtype), "label": y.astype(dtype), "rows": ORDER,
            "sample_weight": rng.integers(0, 4, len(X)).astype(dtype)}


def _feeding(loss: str, dtype: type) -> dict[str, np.ndarray]:
    """The rows of the dataset in the epoch's order (what the generic program reads)."""
    data = _data(loss, dtype)
    return {name: data[name][ORDER] for name in ("X", "label", "sample_weight")}


def _scales(loss: str, dtype: type, weighted: bool) -> np.ndarray:
    """The output gradient of every batch, the loader's: 1 / (rows or summed weights),
    0 for a batch weighing nothing."""
    if not weighted:
        return np.full(N_BATCHES, 1.0 / BATCH)
    totals = _data(loss, dtype)["sample_weight"][ORDER].reshape(N_BATCHES, BATCH).sum(axis=1)
    return np.divide(1.0, totals, out=np.zeros(N_BATCHES), where=totals > 0)


def _session(model: onnx.ModelProto, unoptimized: bool = False) -> InferenceSession:
    options = session_options(1)
    if unoptimized:
        options = unoptimized_session_options(options)
    return InferenceSession(model.SerializeToString(), options,
                            providers=["CPUExecutionProvider"])


def _initial(dtype: type, outputs: int = 1) -> list[np.ndarray]:
    inits = {i.name: numpy_helper.to_array(i)
             for i in _linear(dtype, outputs).graph.initializer}
    return [inits[name].copy() for name in WEIGHTS]


def _etas(t: int = 1) -> np.ndarray:
    return RATE.schedule(t + BATCH * np.arange(N_BATCHES))


def _penalty(l1: float, l2: float):
    return ElasticLearningPenalty(l1=l1, l2=l2, rows=ROWS) if l1 or l2 else NoLearningPenalty()


def _reference(loss: str, backend: str, dtype: type, l1: float, l2: float,
               weighted: bool = False, outputs: int = 1, batches: int | None = None):
    """Weights and batch losses of the per-batch path: one fused call per batch, then the
    numpy steppers, as ``_epoch`` runs them: the penalty's step, then the gradient's
    (the first ``batches`` only, if given)."""
    _, gradient = _gradient(loss, backend, dtype, weighted, outputs)
    step = OrtGradientStep(
        gradient.static(_per_row(weighted), BATCH),
        unoptimized_session_options(session_options(1)) if gradient.unoptimized
        else session_options(1),
        ["CPUExecutionProvider"],
    )
    weights = _initial(dtype, outputs)
    loss_buffer, *gradients = step.outputs
    update = RATE.stepper(weights, gradients, [])
    decay = _penalty(l1, l2).stepper([weights[0]])
    data = _data(loss, dtype, outputs)
    losses = []
    cpu = OrtDevice(OrtDevice.cpu(), OrtDevice.default_memory(), 0)
    scales = _scales(loss, dtype, weighted).astype(dtype)
    for batch, eta in enumerate(_etas().tolist()[:batches]):
        rows = ORDER[batch * BATCH:(batch + 1) * BATCH]
        feeds = {name: data[name][rows] for name in _per_row(weighted)}
        feeds.update(coef=weights[0], intercept=weights[1], loss_grad=scales[batch:batch + 1]
                     .reshape(()))
        vector = OrtValueVector()
        for name in step.feed_names:
            vector.push_back(OrtValue.ortvalue_from_numpy(feeds[name], cpu))
        step.run(vector)
        losses.append(float(loss_buffer))
        decay(eta)
        update(eta)
    return weights, np.array(losses)


def _run_program(program: StepProgram, loss: str, dtype: type, l1: float, l2: float,
                 unoptimized: bool = False, weighted: bool = False, norms=None):
    """Every batch of the epoch, ``program.steps`` per call, the last call with the rest;
    the programs' per-step norms into ``norms`` (arrays by name)."""
    data = _feeding(loss, dtype)
    session = _session(program.model, unoptimized)
    table = program.scalar_table(_etas(), _scales(loss, dtype, weighted), l1, l2, ROWS)
    weights = _initial(dtype)
    losses = np.empty(N_BATCHES, dtype=dtype)
    for first in range(0, N_BATCHES, program.steps):
        count = min(program.steps, N_BATCHES - first)
        feeds = program.feeds(data, table, weights, first, count)
        new = [np.empty_like(w) for w in weights]
        fetches = program.fetches(
            losses[first:first + count], new, count,
            {name: values[first:first + count] for name, values in (norms or {}).items()})
        names = list(fetches)
        for name, value in zip(names, session.run(names, feeds), strict=True):
            fetches[name][...] = value
        weights = new
    return weights, losses


def _stored_layout(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sparse program's layout of X: row i's non-zero values in row i, one
    zero-padded slot more than the longest row needs."""
    width = int((X != 0).sum(axis=1).max()) + 1
    columns = np.zeros((len(X), width), dtype=np.int32)
    values = np.zeros((len(X), width), dtype=X.dtype)
    for i, row in enumerate(X):
        stored = np.flatnonzero(row)[::-1]  # any order
        columns[i, :len(stored)] = stored
        values[i, :len(stored)] = row[stored]
    return columns, values


def _run_linear(program: LinearProgram, loss: str, dtype: type, l1: float, l2: float,
                weighted: bool = False, outputs: int = 1, norms=None, features=None):
    """The linear program over the epoch, its per-row inputs from their formulas: the
    rows' indices, the target (2y - 1 for the hinge loss) and the step weight
    eta_j sigma_j s_i (negated and times the target for the hinge loss); the batch
    losses from the per-row values. The sparse program reads the rows' non-zero values
    (:func:`_stored_layout`) instead. ``features``: the rows it reads instead of the
    dataset's ``X`` (another type)."""
    data = _data(loss, dtype, outputs)
    if features is not None:
        data = {**data, "X": features}
    session = _session(program.model)
    scales = _scales(loss, dtype, weighted)
    table = program.scalar_table(_etas(), scales, l1, l2, ROWS)
    label = data["label"][ORDER].astype(np.float64)
    label = label[:, 0] if outputs == 1 else label
    row_weight = data["sample_weight"][ORDER] if weighted else np.ones(len(ORDER))
    target = 2 * label - 1 if loss == "hinge" else label
    step_weight = np.repeat(_etas() * scales, BATCH) * row_weight
    if outputs > 1:
        step_weight = np.repeat(step_weight[:, None], outputs, axis=1)
    if loss == "hinge":
        step_weight = -target * step_weight
    per_row = {"rows": ORDER.astype(np.int64), "target": target.astype(dtype),
               "step_weight": step_weight.astype(dtype)}
    weights = _initial(dtype, outputs)
    values = np.empty(target.shape, dtype=dtype)
    for first in range(0, N_BATCHES, program.steps):
        count = min(program.steps, N_BATCHES - first)
        if isinstance(program, SparseLinearProgram):
            feeds = program.feeds(*_stored_layout(data["X"]), per_row, table, weights,
                                  first, count)
        elif program.staged:
            # The call's rows, in order.
            rows = ORDER[first * BATCH:(first + count) * BATCH]
            feeds = program.feeds(data["X"][rows], per_row, table, weights, first, count)
        else:
            feeds = program.feeds(data["X"], per_row, table, weights, first, count)
        new = [np.empty_like(w) for w in weights]
        fetches = program.fetches(values, new, first, count, norms)
        names = list(fetches)
        for name, value in zip(names, session.run(names, feeds), strict=True):
            fetches[name][...] = value
        weights = new
    return weights, program.losses(values, per_row["target"], row_weight.astype(dtype))


def _check(weights, losses, expected_weights, expected_losses):
    for got, want in zip(weights, expected_weights, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("penalty", ["none", "l2", "l1", "elastic"])
@pytest.mark.parametrize("loss", list(LOSSES))
@pytest.mark.parametrize("backend", AVAILABLE)
def test_generic_program_matches_per_batch_steps(backend, loss, penalty):
    l1, l2 = PENALTIES[penalty]
    expected = _reference(loss, backend, np.float64, l1, l2)
    _, gradient = _gradient(loss, backend, np.float64)
    fused = gradient.static(["X", "label"], BATCH)
    for steps in (1, 3, 8):
        program = generic_program(fused, WEIGHTS, steps, BATCH, penalized=["coef"],
                                  l1=l1 > 0, l2=l2 > 0)
        got = _run_program(program, loss, np.float64, l1, l2, gradient.unoptimized)
        _check(*got, *expected)


@pytest.mark.parametrize("sparse", [False, True], ids=["rows", "stored values"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("penalty", ["none", "l2", "l1", "elastic"])
@pytest.mark.parametrize("loss", list(LOSSES))
def test_linear_program_matches_per_batch_steps(loss, penalty, weighted, sparse):
    """Every loss and penalty, sample weights or not (some zero), 1, 3 and 8 steps per
    call, on rows or on their stored values (the sparse form): the gradient graph's
    weights and batch losses to 1e-10."""
    l1, l2 = PENALTIES[penalty]
    expected = _reference(loss, "onnx", np.float64, l1, l2, weighted=weighted)
    for steps in (1, 3, 8):
        program = linear_program(loss, N_FEATURES, steps, BATCH, np.float64,
                                 l1=l1 > 0, l2=l2 > 0, sparse=sparse)
        got = _run_linear(program, loss, np.float64, l1, l2, weighted=weighted)
        _check(*got, *expected)


@pytest.mark.parametrize("sparse", [False, True], ids=["rows", "stored values"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("penalty", ["none", "l2", "l1", "elastic"])
@pytest.mark.parametrize("loss", ["log", "hinge"])
def test_linear_program_with_several_outputs_matches_per_batch_steps(loss, penalty,
                                                                    weighted, sparse):
    """Three one-vs-rest classes (one-hot labels, each score its own binary loss), 1, 3
    and 8 steps per call, on rows or on their stored values: the gradient graph's weights
    and batch losses to 1e-10."""
    l1, l2 = PENALTIES[penalty]
    expected = _reference(loss, "onnx", np.float64, l1, l2, weighted=weighted, outputs=3)
    for steps in (1, 3, 8):
        program = linear_program(loss, N_FEATURES, steps, BATCH, np.float64,
                                 l1=l1 > 0, l2=l2 > 0, n_outputs=3, sparse=sparse)
        got = _run_linear(program, loss, np.float64, l1, l2, weighted=weighted, outputs=3)
        _check(*got, *expected)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("penalty", ["none", "l2", "elastic"])
@pytest.mark.parametrize(("loss", "outputs"), [
    ("squared_error", 1), ("log", 1), ("hinge", 1), ("log", 3), ("hinge", 3)])
def test_linear_program_on_float64_rows_computes_what_it_computes_on_them_cast(
        loss, outputs, penalty, weighted):
    """A float32 program reading float64 rows (``features_dtype``; an estimator's rows
    as given): its ``X`` input is float64, and its weights and batch losses are, bit for
    bit, those of the float32 program on the rows cast by numpy, 1, 3 and 8 steps per
    call."""
    l1, l2 = PENALTIES[penalty]
    rows = _data(loss, np.float64, outputs)["X"]
    for steps in (1, 3, 8):
        arguments = dict(l1=l1 > 0, l2=l2 > 0, n_outputs=outputs)
        narrow = linear_program(loss, N_FEATURES, steps, BATCH, np.float32, **arguments)
        wide = linear_program(loss, N_FEATURES, steps, BATCH, np.float32,
                              features_dtype=np.float64, **arguments)
        inputs = {i.name: i.type.tensor_type.elem_type for i in wide.model.graph.input}
        assert inputs["X"] == TensorProto.DOUBLE and inputs["coef"] == TensorProto.FLOAT
        expected = _run_linear(narrow, loss, np.float32, l1, l2, weighted, outputs,
                               features=rows.astype(np.float32))
        got = _run_linear(wide, loss, np.float32, l1, l2, weighted, outputs, features=rows)
        for value, want in zip([*got[0], got[1]], [*expected[0], expected[1]], strict=True):
            np.testing.assert_array_equal(value, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("penalty", ["none", "l2", "elastic"])
@pytest.mark.parametrize(("loss", "outputs"), [
    ("squared_error", 1), ("log", 1), ("hinge", 1), ("log", 3), ("hinge", 3)])
def test_staged_linear_program_computes_what_it_computes_on_rows_by_index(
        loss, outputs, penalty, weighted, dtype):
    """``staged=True``: fed each call's rows in order (those the other form gathers at
    their indices), without the ``rows`` input and its ``Gather``: the same weights and
    batch losses, bit for bit, 1, 3 and 8 steps per call."""
    l1, l2 = PENALTIES[penalty]
    arguments = dict(l1=l1 > 0, l2=l2 > 0, n_outputs=outputs)
    for steps in (1, 3, 8):
        by_index = linear_program(loss, N_FEATURES, steps, BATCH, dtype, **arguments)
        staged = linear_program(loss, N_FEATURES, steps, BATCH, dtype, staged=True,
                                **arguments)
        assert staged.staged and "rows" not in {i.name for i in staged.model.graph.input}
        body = next(a.g for a in staged.model.graph.node[0].attribute if a.name == "body")
        assert "Gather" not in {node.op_type for node in body.node}
        expected = _run_linear(by_index, loss, dtype, l1, l2, weighted, outputs)
        got = _run_linear(staged, loss, dtype, l1, l2, weighted, outputs)
        for value, want in zip([*got[0], got[1]], [*expected[0], expected[1]], strict=True):
            np.testing.assert_array_equal(value, want)


def test_a_staged_linear_program_reads_rows_of_its_own_type():
    with pytest.raises(ValueError, match="staged linear program reads rows of its own"):
        linear_program("squared_error", N_FEATURES, 2, BATCH, np.float32, staged=True,
                       features_dtype=np.float64)


@pytest.mark.parametrize("penalty", ["l2", "l1", "elastic"])
@pytest.mark.parametrize(("form", "outputs"), [
    ("rows", 1), ("rows", 3), ("stored values", 1), ("stored values", 3), ("generic", 1)])
def test_programs_write_the_norms_of_the_weights_every_step_starts_from(form, outputs,
                                                                        penalty):
    """``norms=True``: per step, the squared L2 norm (with L2) and the L1 norm (with L1)
    of the W it starts from (the scaled sparse form, W = aV: V's norm and a), in float64:
    with one step per call, numpy's norms of the W fed to each call; with 3 and 8 steps
    per call, the same values; and the weights and losses of the program without them."""
    l1, l2 = PENALTIES[penalty]
    loss = "hinge" if form != "generic" else "squared_error"

    def run(steps, norms):
        if form == "generic":
            _, gradient = _gradient(loss, "onnx", np.float64)
            program = generic_program(gradient.static(["X", "label"], BATCH), WEIGHTS, steps,
                                      BATCH, penalized=["coef"], l1=l1 > 0, l2=l2 > 0,
                                      norms=norms)
            values = {name: np.empty(N_BATCHES) for name in program.norms}
            result = _run_program(program, loss, np.float64, l1, l2, gradient.unoptimized,
                                  norms=values)
        else:
            program = linear_program(loss, N_FEATURES, steps, BATCH, np.float64, l1=l1 > 0,
                                     l2=l2 > 0, sparse=form != "rows", n_outputs=outputs,
                                     norms=norms)
            values = {name: np.empty(N_BATCHES) for name in program.norms}
            result = _run_linear(program, loss, np.float64, l1, l2, outputs=outputs,
                                 norms=values)
        if "scales" in values:
            values["squared_norms"] *= np.square(values.pop("scales"))
        return result, values

    expected = {"squared_norms": [], "l1_norms": []}
    for first in range(N_BATCHES):
        # The weights after the first batches: what the step at ``first`` starts from.
        coef = _reference(loss, "onnx", np.float64, l1, l2, outputs=outputs,
                          batches=first)[0][0]
        expected["squared_norms"].append(float(np.square(coef).sum()))
        expected["l1_norms"].append(float(np.abs(coef).sum()))
    plain, _ = run(3, False)
    for steps in (1, 3, 8):
        result, values = run(steps, True)
        assert set(values) == {name for name, wanted in
                               (("squared_norms", l2 > 0), ("l1_norms", l1 > 0)) if wanted}
        for name, got in values.items():
            np.testing.assert_allclose(got, expected[name], rtol=1e-10, atol=1e-12)
        _check(*result, *plain)


@pytest.mark.parametrize("outputs", [1, 3])
@pytest.mark.parametrize("penalty", ["none", "l2", "elastic"])
@pytest.mark.parametrize("loss", ["squared_error", "log", "hinge"])
def test_sparse_program_of_several_steps_an_iteration_computes_the_same_bit_for_bit(
        monkeypatch, loss, penalty, outputs):
    """2, 3 and 4 steps a ``Scan`` iteration, over calls of 8 and 3 steps (grouped steps
    and the rest, grouped steps alone, the rest alone): the weights, batch losses and
    norms of one step an iteration, bit for bit (float32)."""
    l1, l2 = PENALTIES[penalty]
    monkeypatch.setattr(sparse_programs, "UNROLL_FROM_WEIGHTS", 1)
    monkeypatch.setattr(sparse_programs, "UNROLL_WEIGHTS_PER_ROW", 0)

    def run(unroll):
        monkeypatch.setattr(sparse_programs, "UNROLL_STEPS", unroll)
        program = sparse_programs.sparse_linear_program(
            loss, N_FEATURES, 8, BATCH, np.float32, l1=l1 > 0, l2=l2 > 0, norms=True,
            n_outputs=outputs)
        norms = {name: np.empty(N_BATCHES, dtype=np.float32) for name in program.norms}
        weights, losses = _run_linear(program, loss, np.float32, l1, l2, outputs=outputs,
                                      norms=norms)
        return {node.name for node in program.model.graph.node}, (weights, losses, norms)

    nodes, expected = run(1)
    assert "grouped_steps_if" not in nodes
    for unroll in (2, 3, 4):
        nodes, (weights, losses, norms) = run(unroll)
        assert {"grouped_steps_if", "rest_steps_if"} <= nodes
        for got, want in zip(weights, expected[0], strict=True):
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(losses, expected[1])
        assert norms.keys() == expected[2].keys()
        for name, values in norms.items():
            np.testing.assert_array_equal(values, expected[2][name])


def test_unrolled_steps_follow_the_weights_and_the_batch():
    """Several steps an iteration where the weights (all the outputs') are many, and
    many for each batch row; more of them where the weights are more, or the steps one
    row each."""
    rule = sparse_programs.unrolled_steps
    assert (rule(2**18, 32) == rule(2**18, 128) == rule(2**20, 128)
            == sparse_programs.UNROLL_STEPS)
    assert (rule(2**21, 32) == rule(2**20 * 20, 128) == rule(2**17, 1)
            == sparse_programs.UNROLL_WIDE_STEPS)
    assert sparse_programs.UNROLL_WIDE_STEPS > sparse_programs.UNROLL_STEPS > 1
    assert rule(100_000, 32) == rule(2**18, 256) == rule(2**18 - 1, 128) == rule(2**16, 1) == 1

    def nodes(n_features, **params):
        program = linear_program("hinge", n_features, 32, 32, sparse=True, **params)
        return {node.name for node in program.model.graph.node}

    assert "grouped_steps_if" in nodes(2**18)
    assert "grouped_steps_if" in nodes(2**15, n_outputs=5)
    assert "grouped_steps_if" not in nodes(2**15, n_outputs=3)


def test_linear_program_perceptron():
    """The hinge loss at threshold 0 from zero weights: every first score is exactly at
    the kink, where the step is taken (scikit-learn's perceptron)."""
    loss = HingeLearningLoss(threshold=0.0)
    graph = loss.build_onnx_function(21, "cpu", dtype=np.float64)
    model = merge_loss_graph(_linear(np.float64), graph, label_name="label",
                             loss_name="loss")
    gradient = build_gradient(model, WEIGHTS, backend="onnx")
    step = OrtGradientStep(gradient.static(["X", "label"], BATCH), session_options(1),
                           ["CPUExecutionProvider"])
    data = _data("hinge", np.float64)
    rows = ORDER[:BATCH]
    zeros = [np.zeros((N_FEATURES, 1)), np.zeros(1)]
    feeds = {"X": data["X"][rows], "label": data["label"][rows], "coef": zeros[0],
             "intercept": zeros[1], "loss_grad": np.array(1.0)}
    cpu = OrtDevice(OrtDevice.cpu(), OrtDevice.default_memory(), 0)
    vector = OrtValueVector()
    for name in step.feed_names:
        vector.push_back(OrtValue.ortvalue_from_numpy(feeds[name], cpu))
    step.run(vector)
    _, coef_grad, intercept_grad = step.outputs
    program = linear_program("hinge", N_FEATURES, 1, BATCH, np.float64, threshold=0.0)
    target = 2 * data["label"][rows, 0] - 1
    per_row = {"rows": rows.astype(np.int64), "target": target, "step_weight": -target}
    table = program.scalar_table(np.ones(1), np.ones(1))
    new = [np.empty_like(w) for w in zeros]
    fetches = program.fetches(np.empty(BATCH), new, 0, 1)
    names = list(fetches)
    outputs = _session(program.model).run(
        names, program.feeds(data["X"], per_row, table, zeros, 0, 1))
    for name, value in zip(names, outputs, strict=True):
        fetches[name][...] = value
    assert np.abs(coef_grad).sum() > 0
    np.testing.assert_allclose(new[0], -coef_grad, rtol=1e-12)
    np.testing.assert_allclose(new[1], -intercept_grad, rtol=1e-12)


@pytest.mark.parametrize("loss", list(LOSSES))
@pytest.mark.parametrize("backend", AVAILABLE)
def test_generic_program_with_sample_weights(backend, loss):
    """Sample weights need nothing new: the weighted gradient graph's ``sample_weight``
    is one more per-row input, and each batch's scale is 1 / its summed weights."""
    l1, l2 = PENALTIES["elastic"]
    expected = _reference(loss, backend, np.float64, l1, l2, weighted=True)
    _, gradient = _gradient(loss, backend, np.float64, weighted=True)
    fused = gradient.static(_per_row(True), BATCH)
    program = generic_program(fused, WEIGHTS, 3, BATCH, penalized=["coef"], l1=True,
                              l2=True)
    assert "sample_weight" in program.data
    got = _run_program(program, loss, np.float64, l1, l2, gradient.unoptimized,
                       weighted=True)
    _check(*got, *expected)


def test_penalties_are_active():
    """The penalized runs differ from the plain one, and a strong L1 shrinks the
    weights: the comparisons above would not notice a penalty that does nothing. (The
    gradient step follows the soft threshold, so the thresholded zeros do not last.)"""
    plain, _ = _reference("squared_error", "onnx", np.float64, 0.0, 0.0)
    decayed, _ = _reference("squared_error", "onnx", np.float64, 0.0, 0.05)
    sparse, _ = _reference("squared_error", "onnx", np.float64, 2.0, 0.0)
    assert np.abs(plain[0] - decayed[0]).max() > 1e-3
    assert np.abs(sparse[0]).sum() < 0.5 * np.abs(plain[0]).sum()
    program = linear_program("squared_error", N_FEATURES, 3, BATCH, np.float64, l1=True)
    got, _ = _run_linear(program, "squared_error", np.float64, 2.0, 0.0)
    np.testing.assert_allclose(got[0], sparse[0], rtol=1e-10, atol=1e-12)


def test_reference_is_the_optimizer():
    """The reference loop is what the optimizer does: one partial_fit epoch over the
    permuted rows, without shuffling, gives the same weights and the mean of the same
    batch losses."""
    l1, l2 = PENALTIES["elastic"]
    weights, losses = _reference("squared_error", "onnx", np.float64, l1, l2)
    optimizer = OrtGradientForwardBackwardOptimizer(
        _linear(np.float64), weights_to_train=WEIGHTS, batch_size=BATCH, shuffle=False,
        learning_rate=RATE, learning_penalty=ElasticLearningPenalty(l1=l1, l2=l2, rows=ROWS),
        learning_loss=LOSSES["squared_error"], backend="onnx",
    )
    data = _data("squared_error", np.float64)
    optimizer.partial_fit(data["X"][ORDER], data["label"][ORDER])
    for got, want in zip(optimizer.weights_, weights, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert optimizer.train_losses_[-1] == pytest.approx(losses.sum() / len(data["X"]),
                                                       rel=1e-12)


@pytest.mark.parametrize("backend", AVAILABLE)
@pytest.mark.parametrize("loss", list(LOSSES))
def test_float32_program(loss, backend):
    """float32: the generic program does the per-batch arithmetic exactly (same graph,
    same casts of eta, decay and threshold), bit for bit; the linear one regroups it
    (eta sigma s_i per row first, the loss from the values), rounding only."""
    l1, l2 = PENALTIES["elastic"]
    expected_weights, expected_losses = _reference(loss, backend, np.float32, l1, l2)
    _, gradient = _gradient(loss, backend, np.float32)
    fused = gradient.static(["X", "label"], BATCH)
    generic = generic_program(fused, WEIGHTS, 3, BATCH, penalized=["coef"], l1=True,
                              l2=True)
    weights, losses = _run_program(generic, loss, np.float32, l1, l2, gradient.unoptimized)
    for got, want in zip(weights, expected_weights, strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(losses, expected_losses)
    linear = linear_program(loss, N_FEATURES, 3, BATCH, np.float32, l1=True, l2=True)
    weights, losses = _run_linear(linear, loss, np.float32, l1, l2)
    assert weights[0].dtype == np.float32
    for got, want in zip(weights, expected_weights, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(losses, expected_losses, rtol=1e-5)


@pytest.mark.parametrize("threshold", [1.0, 0.5, 3.0, 1e-3, 2.0**-103, 2.0**-104, 0.0,
                                       1e30])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_hinge_mask_is_exact_at_the_threshold(threshold, dtype):
    """The hinge program's step is taken for exactly the rows whose margin is at most the
    threshold t, the kink included, whatever the form of the mask (float32's HardSigmoid
    for t > 0, a comparison elsewhere): one step from W = (1, 0, ...), b = 0 on rows
    whose first feature is a margin around +-t (target +-1), step weights 1, so the new
    intercept is minus the count of rows inside the margin."""
    t = dtype(threshold)
    ulps = np.arange(-40, 41, dtype=dtype)
    near = np.concatenate([
        t + ulps * np.spacing(t) / 2, np.nextafter(t, dtype([-np.inf, np.inf])),
        dtype([0.0, -0.0, 1e-45, -1e-45, 2.0**104, -(2.0**104), 1e30, -1e30]),
        t * dtype([0.5, 0.999, 1.001, 2.0, -1.0])]).astype(dtype)
    rng = np.random.default_rng(0)
    margins = np.concatenate([near, rng.standard_normal(200).astype(dtype) * max(t, 1)])
    margins = margins[:len(margins) // 32 * 32]
    program = linear_program("hinge", 2, 1, 32, dtype, threshold=threshold)
    session = _session(program.model)
    for batch in margins.reshape(-1, 32):
        target = np.where(rng.random(32) < 0.5, 1, -1).astype(dtype)
        # Score s with target a: margin a s.
        X = np.stack([batch * target, np.zeros(32, dtype=dtype)], axis=1)
        per_row = {"rows": np.arange(32), "target": target,
                   "step_weight": np.ones(32, dtype=dtype)}
        table = program.scalar_table(np.ones(1), np.ones(1))
        weights = [np.array([[1.0], [0.0]], dtype=dtype), np.zeros(1, dtype=dtype)]
        new, values = [np.empty_like(w) for w in weights], np.empty(32, dtype=dtype)
        fetches = program.fetches(values, new, 0, 1)
        names = list(fetches)
        outputs = session.run(names, program.feeds(X, per_row, table, weights, 0, 1))
        for name, value in zip(names, outputs, strict=True):
            fetches[name][...] = value
        np.testing.assert_array_equal(values, batch)
        assert new[1][0] == -np.count_nonzero(batch <= t), batch


@pytest.mark.parametrize("loss", ["squared_error", "hinge"])
def test_sparse_program_adds_the_steps_of_a_column_several_rows_store(loss):
    """One step of the sparse program on a batch whose rows all store column 1 (and whose
    padding slots all read column 0): the scatter adds every row's step at the column
    (``ScatterElements`` with ``reduction="add"``), as numpy's :math:`W - u X_B`; for the
    hinge loss, one row past the margin steps by 0."""
    X = np.zeros((BATCH, N_FEATURES))
    X[:, 1] = np.arange(1.0, BATCH + 1)
    X[0, 3], X[2, 4] = -0.5, 2.0
    y = np.array([0.0, 1.0, 1.0, 0.0])
    w, b, c = np.array([0.1, 0.2, -0.3, 0.4, 0.5]), 0.25, np.full(BATCH, 0.05)
    s = X @ w + b
    if loss == "hinge":
        target = 2 * y - 1
        step_weight = -target * c
        u = step_weight * (target * s <= 1.0)
        assert (target * s > 1.0).sum() == 1  # one row steps by 0
    else:
        target, step_weight = y, c
        u = (s - y) * step_weight
    program = linear_program(loss, N_FEATURES, 1, BATCH, dtype=np.float64, sparse=True)
    per_row = {"rows": np.arange(BATCH), "target": target, "step_weight": step_weight}
    table = program.scalar_table(np.ones(1), np.ones(1))
    weights = [w.reshape(-1, 1).copy(), np.array([b])]
    feeds = program.feeds(*_stored_layout(X), per_row, table, weights, 0, 1)
    new = [np.empty_like(weight) for weight in weights]
    fetches = program.fetches(np.empty(BATCH), new, 0, 1)
    names = list(fetches)
    for name, value in zip(names, _session(program.model).run(names, feeds), strict=True):
        fetches[name][...] = value
    np.testing.assert_allclose(new[0][:, 0], w - u @ X, rtol=1e-12)
    np.testing.assert_allclose(new[1], [b - u.sum()], rtol=1e-12)


def _step_body(program):
    """The nodes of one step: the body of the ``Scan`` of one step an iteration (in the
    ``If`` of the steps left where the program runs several an iteration)."""
    def scans(nodes):
        for node in nodes:
            if node.op_type == "Scan" and node.name == "steps":
                yield node.attribute[0].g
            for attribute in node.attribute:
                if attribute.type == onnx.AttributeProto.GRAPH:
                    yield from scans(attribute.g.node)

    return next(scans(program.model.graph.node)).node


def test_program_graphs():
    """Standard operators only, one Scan node, and the node counts the design promises
    (per step: squared error 6, log loss 7, hinge 7 in float32, its mask one HardSigmoid,
    8 in float64 and for the perceptron; the sparse form nine more, nine with several
    outputs, and six more for the hinge loss's choice of the rows that step; L2 one
    more, L1 two more)."""
    def body(program):
        return [node.op_type for node in program.model.graph.node[0].attribute[0].g.node]

    for sparse in (False, True):
        for loss, count in (("squared_error", 6), ("log", 7), ("hinge", 7)):
            count += (9 + 6 * (loss == "hinge")) * sparse
            program = linear_program(loss, N_FEATURES, 8, BATCH, sparse=sparse)
            onnx.checker.check_model(program.model, full_check=True)
            assert {op.domain for op in program.model.opset_import} == {""}
            assert [node.op_type for node in program.model.graph.node] == ["Scan"]
            assert len(body(program)) == count
            assert len(body(linear_program(loss, N_FEATURES, 8, BATCH, l1=True, l2=True,
                                           sparse=sparse))) == count + 3
    assert body(linear_program("hinge", N_FEATURES, 8, BATCH)).count("Gemm") == 3
    assert "HardSigmoid" in body(linear_program("hinge", N_FEATURES, 8, BATCH))
    for compared in (linear_program("hinge", N_FEATURES, 8, BATCH, np.float64),
                     linear_program("hinge", N_FEATURES, 8, BATCH, threshold=0.0)):
        assert len(body(compared)) == 8
        assert "LessOrEqual" in body(compared) and "HardSigmoid" not in body(compared)
    # Several outputs: the same nodes densely; the sparse form the nodes of one output
    # on the flat W (ScatterElements, no ScatterND), five more (the indices j K + k:
    # Mul, Add; the outputs' axis first, and back: two Transposes and a Reshape), and
    # for the hinge loss two more (the rows of each output that step: Reshape, Tile).
    for loss in ("log", "hinge"):
        for sparse in (False, True):
            outputs = linear_program(loss, N_FEATURES, 8, BATCH, l2=True, n_outputs=3,
                                     sparse=sparse)
            onnx.checker.check_model(outputs.model, full_check=True)
            one = body(linear_program(loss, N_FEATURES, 8, BATCH, l2=True, sparse=sparse))
            if sparse:
                assert len(body(outputs)) == len(one) + 5 + 2 * (loss == "hinge")
                assert "ScatterND" not in body(outputs)
                assert body(outputs).count("ScatterElements") == 1
                assert body(outputs).count("Compress") == 3 * (loss == "hinge")
                assert outputs.weight_shapes == [(N_FEATURES * 3,), (1, 3)]
            else:
                assert body(outputs) == one
                assert outputs.weight_shapes == [(N_FEATURES, 3), (1, 3)]
    # Indices j K + k past int32's range: the columns cast to int64 first.
    casts = [node for node in _step_body(linear_program(
        "hinge", 2**30, 8, 128, sparse=True, n_outputs=3)) if node.op_type == "Cast"]
    assert [helper.get_attribute_value(node.attribute[0]) for node in casts] == [
        onnx.TensorProto.INT64, onnx.TensorProto.BOOL]
    sparse_body = body(linear_program("hinge", N_FEATURES, 8, BATCH, sparse=True))
    assert sparse_body.count("Gemm") == 1 and sparse_body.count("ScatterElements") == 1
    assert sparse_body.count("Compress") == 3
    # Sparse with L2 alone: W = a V, the decay on the scale a (two scalar nodes and a
    # division by it; no Mul of the whole of W per step), a V once after the steps.
    scaled = linear_program("squared_error", N_FEATURES, 8, BATCH, l2=True, sparse=True)
    onnx.checker.check_model(scaled.model, full_check=True)
    assert len(body(scaled)) == 15 + 3 and "Div" in body(scaled)
    assert [node.op_type for node in scaled.model.graph.node] == ["Scan", "Mul"]
    assert "scale" in {i.name for i in scaled.model.graph.initializer}
    assert [i.name for i in scaled.model.graph.input][:2] == ["coef", "intercept"]
    assert [o.name for o in scaled.model.graph.output] == ["new_coef", "new_intercept",
                                                           "values"]
    # Its norms: V's squared norm summed once a call (outer graph), then a state each
    # step updates from its own values, with no sum over all of V a step.
    for outputs in (1, 3):
        tracked = linear_program("hinge", N_FEATURES, 8, BATCH, l2=True, sparse=True,
                                 norms=True, n_outputs=outputs)
        onnx.checker.check_model(tracked.model, full_check=True)
        assert "ReduceSumSquare" not in body(tracked)
        assert [node.op_type for node in tracked.model.graph.node] == [
            "ReduceSumSquare", "Scan", "Mul"]
        assert "squared_norm" not in {i.name for i in tracked.model.graph.input}
        assert tracked.norms == ("squared_norms", "scales")
    program = linear_program("squared_error", N_FEATURES, 8, BATCH, l2=True)
    decay = {name: shape for name, kind, shape in program.scalars}
    assert list(decay.values()) == [(1, 1)]  # rank-matched with the [1, d] weights
    _, gradient = _gradient("squared_error", "onnx", np.float64)
    generic = generic_program(gradient.static(["X", "label"], BATCH), WEIGHTS, 8, BATCH)
    onnx.checker.check_model(generic.model)
    assert [node.op_type for node in generic.model.graph.node] == ["Scan"]


def test_bad_arguments():
    _, gradient = _gradient("squared_error", "onnx", np.float64)
    fused = gradient.static(["X", "label"], BATCH)
    with pytest.raises(ValueError, match="not inputs or outputs"):
        generic_program(fused, ["coef", "nope"], 2, BATCH)
    with pytest.raises(ValueError, match="not a batch of 5 rows"):
        generic_program(fused, WEIGHTS, 2, 5)
    with pytest.raises(ValueError, match="not trained weights"):
        generic_program(fused, ["coef"], 2, BATCH, penalized=["intercept"])
    with pytest.raises(ValueError, match="steps must be >= 1"):
        generic_program(fused, WEIGHTS, 0, BATCH)
    with pytest.raises(ValueError, match="loss must be one of"):
        linear_program("huber", N_FEATURES, 2, BATCH)
    for sparse in (False, True):
        with pytest.raises(ValueError, match="n_outputs must be >= 1"):
            linear_program("hinge", N_FEATURES, 2, BATCH, n_outputs=0, sparse=sparse)
    program = linear_program("squared_error", N_FEATURES, 2, BATCH)
    table = program.scalar_table(np.ones(2), np.ones(2))
    weights = _initial(np.float32)
    per_row = {"rows": ORDER.astype(np.int64), "target": np.zeros(len(ORDER), np.float32),
               "step_weight": np.zeros(len(ORDER), np.float32)}
    with pytest.raises(ValueError, match="C-contiguous"):
        program.feeds(_data("squared_error", np.float32)["X"], per_row, table,
                      [np.ones((2 * N_FEATURES, 1), np.float32)[::2], weights[1]], 0, 2)
    assert TensorProto.FLOAT == onnx_dtype(program.dtype)
