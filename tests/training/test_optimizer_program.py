"""Epochs through the training program (k batches per onnxruntime call) against the
optimizer's per-batch path (``_PROGRAM_STEPS = 1``).

The program applies to the SGD estimators at their defaults; the guarantees of the
per-batch path hold: the same weights, ``t_``, ``n_iter_`` and ``loss_curve_`` (float32:
bit for bit; float64: to 1e-10), a divergence reported at its exact batch with the
weights of the last finite epoch, Ctrl-C honoured at the next chunk boundary with
consistent state, and pickles that resume identically.
"""

from __future__ import annotations

import os
import pickle
import re
import signal

import numpy as np
import pytest
from _calls import called_with, record_calls
from onnx import helper, numpy_helper
from onnxruntime.capi._pybind_state import OrtValue
from scipy import sparse as sp

from skl_ortgrad import (
    ConvergenceError,
    ElasticLearningPenalty,
    HingeLearningLoss,
    LearningRateAdam,
    LearningRateSGD,
    LearningRateSGDNesterov,
    NegLogLearningLoss,
    OnnxMLPRegressor,
    OnnxSGDClassifier,
    OnnxSGDRegressor,
    SquareLearningLoss,
)
from skl_ortgrad.estimators.sgd import _BaseOnnxSGD
from skl_ortgrad.optim.scaled import ScaledLearningRate
from skl_ortgrad.runtime import batches, program_run
from skl_ortgrad.runtime.program_run import (
    LinearProgramRun,
    ProgramRun,
    SparseLinearProgramRun,
)
from skl_ortgrad.runtime.step import OrtGradientStep
from skl_ortgrad.training import epochs, program_choice
from skl_ortgrad.training.caches import transient
from skl_ortgrad.training.epochs import ProgramEpoch
from skl_ortgrad.training.optimizers_partial import OrtGradientForwardBackwardOptimizer
from skl_ortgrad.training.programs import linear_program
from skl_ortgrad.training.programs import sparse as sparse_programs
from skl_ortgrad.training.state import TrainingState

#: 1000 rows at batch 32: 31 full batches (chunks of 8, 8, 8, 7) and one of 8 rows.
N_ROWS, N_FEATURES, STEPS = 1000, 6, 8
BATCHES = 32
RNG = np.random.default_rng(0)
X = RNG.standard_normal((N_ROWS, N_FEATURES)).astype(np.float32)
SCORE = X @ RNG.standard_normal(N_FEATURES).astype(np.float32) + 0.3
Y = {
    "regression": SCORE + 0.1 * RNG.standard_normal(N_ROWS).astype(np.float32),
    "binary": (SCORE > 0).astype(np.int64),
    "multiclass": np.digitize(SCORE, [-1.0, 0.0, 1.0]),
}
LOSSES = {"squared_error": SquareLearningLoss(), "log": NegLogLearningLoss(eps=0.0),
          "hinge": HingeLearningLoss()}
ESTIMATORS = {"regression": OnnxSGDRegressor, "binary": OnnxSGDClassifier,
              "multiclass": OnnxSGDClassifier}


@pytest.fixture(autouse=True)
def fresh_programs():
    """Every test builds its programs, and leaves none built under its patches (they are
    shared process-wide otherwise)."""
    program_choice.PROGRAMS.clear()
    yield
    program_choice.PROGRAMS.clear()


@pytest.fixture
def chunks(monkeypatch):
    """Programs of ``STEPS`` batches (several chunks per epoch, a shorter last one), one
    epoch per call, and the list of their calls."""
    monkeypatch.setattr(program_choice, "PROGRAM_STEPS", STEPS)
    monkeypatch.setattr(program_choice, "LINEAR_STEPS", STEPS)
    monkeypatch.setattr(program_choice, "SPARSE_STEPS", STEPS)
    monkeypatch.setattr(LinearProgramRun, "GROUP_STEPS", 0)
    return record_calls(monkeypatch, ProgramRun, "run")


@pytest.fixture(params=["checkpoints", "each chunk checked"])
def chunk_checks(request, monkeypatch):
    """Both ways of a program's epoch to go back from a chunk with a non-finite loss: a
    checkpoint at every chunk's start (the state is small) or each chunk checked as it
    ends (the state is large; here, any state)."""
    if request.param == "each chunk checked":
        monkeypatch.setattr(epochs, "CHECKPOINT_MAX_BYTES", -1)
    return request.param


def _per_batch(monkeypatch, call):
    """``call()`` with the program off."""
    return called_with(monkeypatch, program_choice, "PROGRAM_STEPS", 1, call)


def _state(model):
    return ([w.copy() for w in model.optimizer_.weights_], model.t_, model.n_iter_,
            list(model.loss_curve_))


def _assert_same(got, expected, rtol=0.0):
    """Equal states; with ``rtol``, weights and losses to that relative tolerance."""
    weights, t, n_iter, losses = got
    expected_weights, expected_t, expected_n_iter, expected_losses = expected
    for a, b in zip(weights, expected_weights, strict=True):
        if rtol:
            np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol)
        else:
            np.testing.assert_array_equal(a, b)
    assert (t, n_iter) == (expected_t, expected_n_iter)
    if rtol:
        np.testing.assert_allclose(losses, expected_losses, rtol=rtol)
    else:
        assert losses == expected_losses


def _generic_only(monkeypatch):
    """The generic program wherever the linear one would run."""
    monkeypatch.setattr(program_choice, "lean_loss", lambda *args: None)


@pytest.fixture
def generic(monkeypatch):
    """The generic program only (the lean one off): float32 bit for bit."""
    _generic_only(monkeypatch)


@pytest.fixture
def programs(monkeypatch):
    """The loss kind of every program built (None: generic)."""
    kinds = []
    original = program_choice.lean_loss

    def lean_loss(*args):
        kinds.append(original(*args))
        return kinds[-1]

    monkeypatch.setattr(program_choice, "lean_loss", lean_loss)
    return kinds


#: The programs' L1 soft threshold before the step (the estimators' string penalties
#: 'l1' and 'elasticnet' apply scikit-learn's cumulative L1 penalty after the step:
#: CUMULATIVE).
PROXIMAL_L1 = ElasticLearningPenalty(l1=0.01, l2=0.0)
PROXIMAL_ELASTIC = ElasticLearningPenalty(l1=1.5e-4, l2=8.5e-4)


#: The lean loss of the estimators' losses.
LEAN_KINDS = {"squared_error": "squared_error", "log_loss": "log", "hinge": "hinge",
              "perceptron": "hinge"}


def _fit(task, **params):
    model = ESTIMATORS[task](max_iter=3, tol=None, random_state=0, **params)
    return model.fit(X, Y[task])


@pytest.mark.parametrize("params", [
    {}, {"penalty": None}, {"penalty": PROXIMAL_L1, "alpha": 0.01},
    {"penalty": PROXIMAL_ELASTIC, "alpha": 0.001}, {"learning_rate": "constant", "eta0": 0.001},
    {"shuffle": False},
    {"learning_rate": LearningRateSGDNesterov(eta0=0.001, learning_rate="constant")},
    {"learning_rate": LearningRateAdam(eta0=0.01), "penalty": PROXIMAL_ELASTIC},
], ids=["default", "no penalty", "l1", "elasticnet", "constant", "no shuffle", "nesterov",
        "adam"])
@pytest.mark.parametrize("task", list(ESTIMATORS))
def test_estimators_train_bit_for_bit_as_per_batch(monkeypatch, chunks, generic, task,
                                                   params):
    """float32: the generic program does the per-batch arithmetic exactly (same
    gradient graph, same casts of eta, decay and threshold, the same momentum and Adam
    updates on the one-vs-rest weights too): fit, then partial_fit."""
    model = _fit(task, **params)
    classes = {"classes": np.unique(Y[task])} if task != "regression" else {}
    model.partial_fit(X, Y[task], **classes)
    assert len(chunks) == 4 * 4  # 4 epochs of 4 chunks
    expected = _per_batch(monkeypatch, lambda: _fit(task, **params).partial_fit(
        X, Y[task], **classes))
    _assert_same(_state(model), _state(expected))


#: scikit-learn's cumulative L1 penalty after the step (the string penalties), strong
#: enough to end coefficients of every task at exactly zero.
CUMULATIVE = {"l1": {"penalty": "l1", "alpha": 0.1},
              "elasticnet": {"penalty": "elasticnet", "alpha": 0.15, "l1_ratio": 0.9}}
#: Losses of the cumulative tests: the linear program's and others (the generic one).
CUMULATIVE_LOSSES = [("regression", "squared_error"), ("regression", "huber"),
                     ("binary", "hinge"), ("binary", "log_loss"),
                     ("binary", "modified_huber"), ("multiclass", "hinge"),
                     ("multiclass", "log_loss")]


def _cumulative_fits(monkeypatch, task, params):
    """fit then partial_fit with the program, and with the per-batch path."""
    classes = {"classes": np.unique(Y[task])} if task != "regression" else {}

    def train():
        return _fit(task, **params).partial_fit(X, Y[task], **classes)

    return train(), _per_batch(monkeypatch, train)


def _same_zeros(model, expected):
    """The same coefficients at exactly zero, some of them."""
    zeros = model.optimizer_.weights_[0] == 0
    np.testing.assert_array_equal(zeros, expected.optimizer_.weights_[0] == 0)
    assert zeros.any()


@pytest.mark.parametrize("penalty", list(CUMULATIVE))
@pytest.mark.parametrize(("task", "loss"), CUMULATIVE_LOSSES)
def test_cumulative_l1_trains_in_the_generic_program_bit_for_bit(monkeypatch, chunks, generic,
                                                                 task, loss, penalty):
    """The cumulative L1 penalty after every step of the generic program, its q carried
    from call to call, its u fed per step: float32 bit for bit as the per-batch path, the
    short last batch of every epoch (per batch) going on with the program's q and u, and
    both back to zero at partial_fit."""
    model, expected = _cumulative_fits(monkeypatch, task, {"loss": loss, **CUMULATIVE[penalty]})
    assert model.optimizer_.learning_penalty_.applies_after_step()
    assert len(chunks) == 4 * 4
    _assert_same(_state(model), _state(expected))
    _same_zeros(model, expected)


@pytest.mark.parametrize("penalty", list(CUMULATIVE))
@pytest.mark.parametrize(("task", "loss"), [
    case for case in CUMULATIVE_LOSSES if case[1] in LEAN_KINDS])
def test_cumulative_l1_trains_in_the_linear_program(monkeypatch, chunks, programs, task,
                                                    loss, penalty):
    """The linear program with the cumulative L1 penalty: equal to the per-batch path to
    rounding (as test_linear_program_trains_as_per_batch), the same coefficients at
    exactly zero."""
    model, expected = _cumulative_fits(monkeypatch, task, {"loss": loss, **CUMULATIVE[penalty]})
    assert programs == [LEAN_KINDS[loss]]
    assert len(chunks) == 4 * 4
    _assert_same(_state(model), _state(expected), rtol=1e-5)
    _same_zeros(model, expected)


#: 100 columns, 3% of the values stored: a batch of 32 rows stores about 60% of the
#: columns, and (the row layout) the padding rows of the short last batch index row 0,
#: whose columns that batch need not store.
X_SCARCE = sp.random(N_ROWS, 100, density=0.03, format="csr", dtype=np.float32,
                     random_state=np.random.default_rng(2), data_rvs=RNG.standard_normal)
SCARCE_SCORE = X_SCARCE @ RNG.standard_normal(100).astype(np.float32)
Y_SCARCE = {"regression": SCARCE_SCORE, "binary": (SCARCE_SCORE > 0).astype(np.int64),
            "multiclass": np.digitize(SCARCE_SCORE, [-1.0, 0.0, 1.0])}
#: Penalties leaving some coefficients of X_SCARCE nonzero, some at exactly zero.
SCARCE_CUMULATIVE = {"l1": {"penalty": "l1", "alpha": 0.001},
                     "elasticnet": {"penalty": "elasticnet", "alpha": 0.002,
                                    "l1_ratio": 0.5}}


def _body_results(program):
    """The names of the results of a program's step (its ``Scan``'s body)."""
    scan_node = next(node for node in program.model.graph.node if node.op_type == "Scan")
    body = next(a.g for a in scan_node.attribute if a.name == "body")
    return {name for node in body.node for name in node.output}


@pytest.mark.parametrize("whole", [False, True], ids=["gathered", "whole"])
@pytest.mark.parametrize("padding", [10, 0], ids=["row layout", "call layout"])
@pytest.mark.parametrize("penalty", list(SCARCE_CUMULATIVE))
@pytest.mark.parametrize(("task", "loss"), [
    case for case in CUMULATIVE_LOSSES if case[1] in LEAN_KINDS])
def test_cumulative_l1_trains_in_the_sparse_program(monkeypatch, chunks, programs, task,
                                                    loss, penalty, padding, whole):
    """Sparse X with the cumulative L1 penalty: the sparse program applies it at the
    features each batch stores only (columns stored by several rows of a batch, padding
    slots and the padding rows of the short last batch left out), its q carried from
    call to call: equal to the per-batch path to rounding, the same coefficients at
    exactly zero, after a fit then two partial_fit calls (each starting u and q afresh),
    in both layouts of the stored values, the rule at the gathered columns or on the
    whole of W (kept where stored)."""
    monkeypatch.setattr(batches, "STORED_ROWS_PADDING", padding)
    monkeypatch.setattr(program_choice, "WHOLE_RULE_STORED", 0.0 if whole else np.inf)
    y = Y_SCARCE[task]
    classes = {"classes": np.unique(y)} if task != "regression" else {}

    def train():
        model = ESTIMATORS[task](max_iter=3, tol=None, random_state=0, loss=loss,
                                 **SCARCE_CUMULATIVE[penalty]).fit(X_SCARCE, y)
        for _ in range(2):
            model.partial_fit(X_SCARCE, y, **classes)
        return model

    model = train()
    assert programs == [LEAN_KINDS[loss]]
    binding = transient(model.optimizer_).programs.binding
    assert type(binding) is SparseLinearProgramRun
    assert any(name.startswith("present_features")
               for name in _body_results(binding.program)) == whole
    assert len(chunks) == (3 + 2) * 4
    loader = transient(model.optimizer_).loader[1]
    assert (loader.stored_rows(np.float32) is None) == (padding == 0)
    expected = _per_batch(monkeypatch, train)
    _assert_same(_state(model), _state(expected), rtol=1e-5)
    _same_zeros(model, expected)


LEAN_CASES = [
    ("regression", {}), ("regression", {"penalty": None}),
    ("regression", {"penalty": PROXIMAL_L1, "alpha": 0.01}),
    ("regression", {"penalty": PROXIMAL_ELASTIC, "alpha": 0.001}),
    ("regression", {"learning_rate": "constant", "eta0": 0.001}),
    ("regression", {"shuffle": False}),
    ("binary", {"loss": "log_loss"}),
    ("binary", {"loss": "log_loss", "penalty": ElasticLearningPenalty(l1=1e-4, l2=0.0)}),
    ("binary", {}), ("binary", {"loss": "perceptron"}),
    ("binary", {"penalty": PROXIMAL_ELASTIC, "alpha": 0.001}), ("binary", {"shuffle": False}),
]


#: One-vs-rest classes: the linear program with one output per class.
MULTICLASS_CASES = [
    ("multiclass", {}), ("multiclass", {"loss": "log_loss"}),
    ("multiclass", {"loss": "perceptron", "shuffle": False}),
    ("multiclass", {"penalty": PROXIMAL_ELASTIC, "alpha": 0.001}),
    ("multiclass", {"class_weight": {0: 2.0, 1: 1.0, 2: 0.5, 3: 1.0}}),
]


@pytest.mark.parametrize(("task", "params"), [*LEAN_CASES, *MULTICLASS_CASES])
def test_linear_program_trains_as_per_batch(monkeypatch, chunks, programs, task, params):
    """The linear models with the squared, the log or the hinge loss (one-vs-rest
    classes too) run the hand-written step, every batch of the epoch (the short last one
    padded): float32 equal to the per-batch path to rounding (the loss sum and the
    gradient are summed in another order)."""
    model = _fit(task, **params)
    classes = {"classes": np.unique(Y[task])} if task != "regression" else {}
    model.partial_fit(X, Y[task], **classes)
    assert programs == [LEAN_KINDS[model.loss]]
    assert len(chunks) == 4 * 4
    expected = _per_batch(monkeypatch, lambda: _fit(task, **params).partial_fit(
        X, Y[task], **classes))
    _assert_same(_state(model), _state(expected), rtol=1e-5)


@pytest.mark.parametrize(("rows", "features", "expected"), [
    (32, 100, 64), (32, 200, 32), (32, 50, 64), (32, 1000, 32), (32, 100_000, 32),
    (200, 100, 32), (1, 1, 64),
])
def test_linear_chunks_read_a_bounded_number_of_values(rows, features, expected):
    """The defaults: 64 batches per call of the linear program at 100 features, fewer
    as the rows read per chunk grow (2**18 values), never fewer than the generic
    program's 32 unless the most allowed is smaller."""
    assert program_choice.linear_steps(rows, features, program_choice.LINEAR_STEPS,
                                 program_choice.PROGRAM_STEPS) == expected
    assert program_choice.linear_steps(rows, features, 8, 32) == 8
    assert program_choice.linear_steps(rows, features, 128, 1) == min(
        128, 2 ** int(np.log2(max(1, 2**18 // (rows * features)))))


def test_linear_program_runs_64_batches_per_call_at_defaults(monkeypatch):
    """At 100 features and batch 32, one call per 64 batches: a 10,000-row epoch
    (313 batches) is 5 calls."""
    calls = []
    original = ProgramRun.run
    monkeypatch.setattr(ProgramRun, "run", lambda self, chunk: (
        calls.append(self.chunks[chunk]), original(self, chunk)))
    rng = np.random.default_rng(0)
    X_wide = rng.standard_normal((10_000, 100)).astype(np.float32)
    OnnxSGDRegressor(max_iter=1, tol=None, random_state=0).fit(X_wide, X_wide[:, 0])
    assert calls == [(0, 64), (64, 64), (128, 64), (192, 64), (256, 57)]


def test_sparse_program_runs_128_batches_per_call_at_defaults(monkeypatch):
    """Sparse X, batch 32: one call per ``SPARSE_STEPS`` (128) batches whatever the
    width (dense rows of those widths run 64 and 32 a call): a 10,000-row epoch (313
    batches) is 3 calls, at 100 and at 100,000 columns."""
    assert program_choice.SPARSE_STEPS == 128
    calls = []
    original = ProgramRun.run
    monkeypatch.setattr(ProgramRun, "run", lambda self, chunk: (
        calls.append(self.chunks[chunk]), original(self, chunk)))
    rng = np.random.default_rng(0)
    for width in (100, 100_000):
        calls.clear()
        X_wide = sp.random(10_000, width, density=10 / width, format="csr",
                           random_state=rng, dtype=np.float32)
        OnnxSGDRegressor(max_iter=1, tol=None, random_state=0).fit(
            X_wide, rng.standard_normal(10_000))
        assert calls == [(0, 128), (128, 128), (256, 57)]


@pytest.mark.parametrize("loss", ["squared_error", "log", "hinge"])
def test_linear_program_float64(monkeypatch, chunks, programs, loss):
    """float64, every lean loss, the elastic penalty: equal to the per-batch path to
    1e-10."""
    y = Y["regression"] if loss == "squared_error" else Y["binary"]

    def fit():
        return OrtGradientForwardBackwardOptimizer(
            _linear_float64(), weights_to_train=["coef", "intercept"], batch_size=BATCHES,
            max_iter=3, random_state=0, learning_loss=LOSSES[loss],
            learning_rate=LearningRateSGD(eta0=0.01),
            learning_penalty=ElasticLearningPenalty(l1=1e-3, l2=1e-2),
        ).fit(X.astype(np.float64), y.astype(np.float64))

    got = fit()
    assert programs == [loss]
    expected = _per_batch(monkeypatch, fit)
    for a, b in zip(got.weights_, expected.weights_, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got.train_losses_, expected.train_losses_, rtol=1e-10)


def test_models_and_losses_out_of_the_linear_program_run_the_generic_one(chunks, programs):
    """Another loss (one output or several), a loss with eps > 0, the squared error on
    several outputs, a penalized intercept, weights in another order, another graph: the
    generic program."""
    OnnxSGDClassifier(loss="modified_huber", max_iter=1, tol=None).fit(X, Y["multiclass"])
    OnnxSGDClassifier(loss="modified_huber", max_iter=1, tol=None).fit(X, Y["binary"])
    OnnxSGDRegressor(loss="huber", max_iter=1, tol=None).fit(X, Y["regression"])
    common = {"weights_to_train": ["coef", "intercept"], "batch_size": BATCHES, "max_iter": 1}
    data = (X.astype(np.float64), Y["binary"].astype(np.float64))
    OrtGradientForwardBackwardOptimizer(
        _linear_float64(), learning_loss=NegLogLearningLoss(eps=1e-5), **common).fit(*data)
    OrtGradientForwardBackwardOptimizer(
        _linear_float64(), penalized_weights=["coef", "intercept"],
        learning_penalty=ElasticLearningPenalty(l2=1e-3), **common).fit(*data)
    OrtGradientForwardBackwardOptimizer(
        _linear_float64(), **{**common, "weights_to_train": ["intercept", "coef"]}).fit(*data)
    model = _linear_float64()
    model.graph.node[1].op_type = "Sub"
    OrtGradientForwardBackwardOptimizer(model, **common).fit(*data)
    OrtGradientForwardBackwardOptimizer(_linear_float64(outputs=2), **common).fit(
        data[0], np.stack([data[1], 1 - data[1]], axis=1))
    assert programs == [None] * 8


@pytest.mark.parametrize("lean", [True, False])
def test_sample_weights(monkeypatch, chunks, programs, lean):
    """Sample weights, a batch weighing nothing: the lean program to rounding (measured
    over 4 epochs: at most 1.9e-6 relative on the weights), the generic one bit for
    bit."""
    if not lean:
        _generic_only(monkeypatch)
    weights = RNG.integers(0, 3, N_ROWS).astype(np.float32)
    weights[:40] = 0  # a batch weighing nothing when not shuffled

    def fit(task, loss):
        model = OnnxSGDRegressor if task == "regression" else OnnxSGDClassifier
        return model(max_iter=2, tol=None, shuffle=False, loss=loss).fit(
            X, Y[task], sample_weight=weights)

    cases = [("regression", "squared_error"), ("binary", "log_loss"), ("binary", "hinge")]
    for task, loss in cases:
        model = fit(task, loss)
        assert chunks
        expected = _per_batch(monkeypatch, lambda task=task, loss=loss: fit(task, loss))
        _assert_same(_state(model), _state(expected), rtol=1e-5 if lean else 0.0)
    if lean:
        assert programs == ["squared_error", "log", "hinge"]


def _linear_float64(outputs=1):
    rng = np.random.default_rng(1)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "coef"], ["product"]),
         helper.make_node("Add", ["product", "intercept"], ["score"])],
        "linear",
        [helper.make_tensor_value_info("X", 11, [None, N_FEATURES])],
        [helper.make_tensor_value_info("score", 11, [None, outputs])],
        [numpy_helper.from_array(rng.standard_normal((N_FEATURES, outputs)), "coef"),
         numpy_helper.from_array(np.full(outputs, 0.3), "intercept")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                             ir_version=10)


def test_optimizer_float64_scaled_rate(monkeypatch, chunks):
    """float64, a ScaledLearningRate around LearningRateSGD, the compounded elastic
    decay (``rows``): equal to the per-batch path to 1e-10."""
    def fit():
        return OrtGradientForwardBackwardOptimizer(
            _linear_float64(), weights_to_train=["coef", "intercept"], batch_size=BATCHES,
            max_iter=3, random_state=0,
            learning_rate=ScaledLearningRate(LearningRateSGD(eta0=0.002), scale=BATCHES),
            learning_penalty=ElasticLearningPenalty(l1=1e-3, l2=1e-2, rows=BATCHES),
        ).fit(X.astype(np.float64), Y["regression"].astype(np.float64))

    got = fit()
    assert chunks
    expected = _per_batch(monkeypatch, fit)
    for a, b in zip(got.weights_, expected.weights_, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got.train_losses_, expected.train_losses_, rtol=1e-10)
    assert got.t_ == expected.t_


@pytest.mark.parametrize("params", [
    {"average": True}, {"verbose": 2}, {"learning_rate": "adaptive", "eta0": 0.01},
])
def test_estimator_cases_out_of_reach_run_per_batch(chunks, params, capsys):
    """Averaging and the per-batch report need every batch in Python. ('adaptive' is
    plain SGD in a ScaledLearningRate: the program runs it.)"""
    _fit("regression", **params)
    assert bool(chunks) == ("learning_rate" in params)


@pytest.mark.parametrize("lean", [True, False])
def test_short_epochs_run_per_batch(monkeypatch, chunks, lean):
    """Below ``_LINEAR_MIN_BATCHES`` (linear program) or ``_PROGRAM_MIN_BATCHES``
    (generic program) full batches the program saves less than it costs."""
    if not lean:
        _generic_only(monkeypatch)
    rows = 32 * (program_choice.LINEAR_MIN_BATCHES if lean
                 else program_choice.PROGRAM_MIN_BATCHES)
    model = OnnxSGDRegressor(random_state=0).partial_fit(X[:rows - 1], Y["regression"][:rows - 1])
    assert not chunks
    model.partial_fit(X[:rows], Y["regression"][:rows])
    assert chunks


@pytest.mark.parametrize("order", ["C", "F"])
def test_features_changed_in_place_between_calls(monkeypatch, chunks, order):
    """The linear program reads the features as given (C order) or a copy made for the
    call (any other layout): new values written into the same array between two
    partial_fit calls are trained on, as by the per-batch path."""
    def stream():
        features = np.array(X[:500], order=order)
        model = OnnxSGDRegressor(random_state=0)
        model.partial_fit(features, Y["regression"][:500])
        features[...] = X[500:]
        return model.partial_fit(features, Y["regression"][500:])

    model = stream()
    assert chunks
    _assert_same(_state(model), _state(_per_batch(monkeypatch, stream)), rtol=1e-5)


def _sparse(dense: np.ndarray) -> sp.csr_matrix:
    """``dense`` with 60% of its values zero and rows 5 and 700 empty, as CSR."""
    zeroed = np.where(np.random.default_rng(1).random(dense.shape) < 0.6, 0.0, dense)
    zeroed[[5, 700]] = 0.0
    return sp.csr_matrix(zeroed.astype(np.float32))


X_SPARSE = _sparse(X)


def _with_sparse_rule(monkeypatch, call):
    """``call()`` with the SGD estimators training any data as sparse data: the
    intercept's step damped (scikit-learn's ``intercept_decay``), so that dense rows
    train as the same rows sparse."""
    original = _BaseOnnxSGD._training_objects

    def damped(self, batch_size, mean_weight, sparse):
        return original(self, batch_size, mean_weight, True)

    return called_with(monkeypatch, _BaseOnnxSGD, "_training_objects", damped, call)


@pytest.mark.parametrize(("task", "params"), [
    *LEAN_CASES, *MULTICLASS_CASES[:-1],
    ("binary", {"class_weight": {0: 1.0, 1: 3.0}, "dtype": np.float64}),
    ("multiclass", {**MULTICLASS_CASES[-1][1], "dtype": np.float64}),
])
def test_sparse_linear_models_train_in_the_sparse_program(monkeypatch, chunks, programs,
                                                          task, params):
    """Sparse X: the linear models train in the program's sparse form, every batch of
    the epoch (the short last one padded), the intercept's step damped (scikit-learn's
    ``intercept_decay``), equal to rounding to the program on the same rows dense with
    the same damping and to the per-batch path (dense batches, the gradient graph): fit,
    then partial_fit. The perceptron is compared to the dense program only: its margins tie
    at 0 on the empty rows, where rounding decides the step, and the two paths' intercepts
    round differently. Class weights run in float64 (to 1e-10): in float32 the
    one-vs-rest intercepts of the per-batch path, summed in another order, drift 5e-5
    apart over the epochs."""
    classes = {"classes": np.unique(Y[task])} if task != "regression" else {}

    def train(features=X_SPARSE):
        model = ESTIMATORS[task](max_iter=3, tol=None, random_state=0, **params)
        return model.fit(features, Y[task]).partial_fit(features, Y[task], **classes)

    model = train()
    assert programs == [LEAN_KINDS[model.loss]]
    assert type(transient(model.optimizer_).programs.binding) is SparseLinearProgramRun
    assert len(chunks) == 4 * 4
    rtol = 1e-10 if params.get("dtype") == np.float64 else 1e-5
    _assert_same(_state(model), _state(_with_sparse_rule(
        monkeypatch, lambda: train(X_SPARSE.toarray()))), rtol=rtol)
    assert len(chunks) == 2 * 4 * 4 and programs[-1] == programs[0]
    if model.loss != "perceptron":
        _assert_same(_state(model), _state(_per_batch(monkeypatch, train)), rtol=rtol)


def _fed(binding, first, count):
    """What the call of ``binding`` running batches ``first .. first + count - 1`` is
    fed, by name (copies of its feed vector's values)."""
    vector, _ = binding._vectors(first, count)
    return {name: np.array(vector[i].numpy()) for i, name in enumerate(binding._inputs)}


def test_sparse_stored_values_laid_out_by_row(monkeypatch, chunks):
    """What a call reads: the stored values of the rows it indexes, zeros after, laid out
    one row a row, once per matrix (as wide as its longest row), or per call where that
    would be mostly padding (as wide as the call's longest row, its rows in order);
    densified, the rows of the epoch's order. Both layouts train alike, to rounding (the
    sums along rows of another width group their terms otherwise)."""
    states = []
    for padding in (10, 0):
        monkeypatch.setattr(batches, "STORED_ROWS_PADDING", padding)
        model = OnnxSGDRegressor(max_iter=2, tol=None, random_state=0).fit(
            X_SPARSE, Y["regression"])
        states.append(_state(model))
        binding = transient(model.optimizer_).programs.binding
        order = transient(model.optimizer_).loader[1].order
        lengths = np.diff(X_SPARSE.indptr)
        for first, count in binding.chunks:
            feeds = _fed(binding, first, count)
            rows = feeds["rows"].ravel()
            columns, values = feeds["stored_columns"][rows], feeds["stored_values"][rows]
            densified = np.zeros((count * BATCHES, N_FEATURES), dtype=np.float32)
            for i in range(count * BATCHES):
                np.add.at(densified[i], columns[i], values[i])
            taken = order[first * BATCHES:(first + count) * BATCHES]
            np.testing.assert_array_equal(densified[:len(taken)], X_SPARSE[taken].toarray())
            widest = lengths[taken] if padding == 0 else lengths
            assert feeds["stored_columns"].shape[1] == max(1, widest.max())
            if padding == 0:
                # The padding rows of a short last call store nothing.
                assert not densified[len(taken):].any()
    _assert_same(*states, rtol=1e-6)


def test_sparse_program_reads_the_matrix_of_each_call(monkeypatch, chunks):
    """partial_fit on one sparse matrix, then on another of the same shape (the loader
    refilled: the row layout of the second, made anew): as on the same rows dense (the
    intercept's step damped alike)."""
    monkeypatch.setattr(batches, "STORED_ROWS_PADDING", 10)  # the row layout
    other = _sparse(X[::-1] * 0.5)

    def train(first, second):
        model = OnnxSGDRegressor(random_state=0)
        return model.partial_fit(first, Y["regression"]).partial_fit(
            second, Y["regression"][::-1])

    model = train(X_SPARSE, other)
    binding = transient(model.optimizer_).programs.binding
    assert type(binding) is SparseLinearProgramRun
    assert len(chunks) == 2 * 4
    layout = transient(model.optimizer_).loader[1].stored_rows(np.float32)
    assert layout is not None
    # The calls feed the second matrix's layout.
    fed = _fed(binding, *binding.chunks[0])
    np.testing.assert_array_equal(fed["stored_columns"], layout[0])
    np.testing.assert_array_equal(fed["stored_values"], layout[1])
    _assert_same(_state(model), _state(_with_sparse_rule(
        monkeypatch, lambda: train(X_SPARSE.toarray(), other.toarray()))), rtol=1e-5)


def test_a_stream_of_sparse_blocks_binds_its_calls_once(monkeypatch, chunks):
    """partial_fit on a new sparse matrix of the same shape at every call: the calls are
    bound at the first, and each later call makes the two OrtValues of its matrix's
    layout only (the followed feeds), training as a binding made anew at every call, bit
    for bit."""
    monkeypatch.setattr(batches, "STORED_ROWS_PADDING", 10)  # the row layout
    made = []

    class Recording:
        @staticmethod
        def ortvalue_from_numpy(array, device):
            made.append(array.shape)
            return OrtValue.ortvalue_from_numpy(array, device)

    monkeypatch.setattr(program_run, "OrtValue", Recording)
    streamed, fresh = OnnxSGDRegressor(random_state=0), OnnxSGDRegressor(random_state=0)
    for k, block in enumerate([X_SPARSE, _sparse(X[::-1] * 0.5), _sparse(X * 2.0)]):
        made.clear()
        streamed.partial_fit(block, Y["regression"])
        binding = transient(streamed.optimizer_).programs.binding
        assert type(binding) is SparseLinearProgramRun
        # The first call binds every input and output of its calls.
        assert len(made) == 2 if k else len(made) > 2 * len(binding.chunks)
        if k:
            transient(fresh.optimizer_).programs._binding = None
        fresh.partial_fit(block, Y["regression"])
        np.testing.assert_array_equal(streamed.coef_, fresh.coef_)
        np.testing.assert_array_equal(streamed.intercept_, fresh.intercept_)


@pytest.mark.parametrize(("task", "params"), [
    ("regression", {}), ("binary", {}), ("binary", {"penalty": "l1", "alpha": 0.01}),
    ("binary", {"penalty": None}), ("multiclass", {}),
    ("multiclass", {"penalty": "l1", "alpha": 0.01}), ("multiclass", {"tol": 1e-3}),
    ("binary", {"tol": 1e-3})])
def test_several_steps_an_iteration_train_as_one_bit_for_bit(monkeypatch, chunks, task,
                                                              params):
    """Sparse X, the sparse program running 3 steps a ``Scan`` iteration (the grouped
    steps, then the rest one by one): the same weights, ``t``, epochs and losses as one
    step an iteration, bit for bit, after a fit and a partial_fit; the cumulative L1
    penalty (``penalty='l1'``), several outputs and the squared norm the steps keep for
    ``tol`` included."""
    classes = {"classes": np.unique(Y[task])} if task != "regression" else {}

    def train():
        """The model after a fit and a partial_fit, and the fit's program."""
        model = ESTIMATORS[task](**{"max_iter": 3, "tol": None, "random_state": 0,
                                    **params}).fit(X_SPARSE, Y[task])
        fitted = transient(model.optimizer_).programs.binding.program
        return model.partial_fit(X_SPARSE, Y[task], **classes), fitted

    expected, program = train()
    assert "unrolled_steps" not in {node.name for node in program.model.graph.node}
    program_choice.PROGRAMS.clear()
    with monkeypatch.context() as patches:
        patches.setattr(sparse_programs, "UNROLL_STEPS", 3)
        patches.setattr(sparse_programs, "UNROLL_FROM_WEIGHTS", 1)
        patches.setattr(sparse_programs, "UNROLL_WEIGHTS_PER_ROW", 0)
        linear_program.cache_clear()
        model, program = train()
        linear_program.cache_clear()
    assert type(transient(model.optimizer_).programs.binding) is SparseLinearProgramRun
    assert "grouped_steps_if" in {node.name for node in program.model.graph.node}
    # With tol, the objective's penalty: V's squared norm, a state of the steps.
    assert program.norms == (("squared_norms", "scales") if "tol" in params else ())
    _assert_same(_state(model), _state(expected))


def test_sparse_data_out_of_the_linear_program_runs_per_batch(chunks, programs):
    """Sparse X with a loss the linear program does not write (Huber) or an MLP: the
    per-batch path, on dense batches."""
    OnnxSGDRegressor(max_iter=1, tol=None, loss="huber").fit(X_SPARSE, Y["regression"])
    OnnxMLPRegressor(hidden_layer_sizes=(3,), batch_size=BATCHES, max_iter=1, alpha=0.0,
                     solver="sgd", momentum=0.0, tol=None).fit(X_SPARSE, Y["regression"])
    assert not chunks and programs == [None, None]


UPDATE_RULES = {
    "nesterov": lambda: LearningRateSGDNesterov(eta0=0.002, learning_rate="constant"),
    "momentum": lambda: LearningRateSGDNesterov(eta0=0.002, momentum=0.5, nesterov=False),
    "adam": lambda: LearningRateAdam(eta0=0.01, beta1=0.8),
    "adaptive adam": lambda: ScaledLearningRate(LearningRateAdam(eta0=0.01), adaptive=True),
}


def _optimizer_fit(rule, dtype, epochs=3, model=None):
    """``model`` (a new optimizer by default) on the float64 linear graph (or its float32
    cast), elastic penalty on the coefficients, fit: the generic program with the rule's
    update and state."""
    model = _optimizer(rule, dtype, epochs) if model is None else model
    return model.fit(X.astype(dtype), Y["regression"].astype(dtype))


def _optimizer(rule, dtype, epochs):
    model = _linear_float64()
    if dtype == np.float32:
        for init in model.graph.initializer:
            init.CopyFrom(numpy_helper.from_array(
                numpy_helper.to_array(init).astype(np.float32), init.name))
        model.graph.input[0].type.tensor_type.elem_type = 1
        model.graph.output[0].type.tensor_type.elem_type = 1
    return OrtGradientForwardBackwardOptimizer(
        model, weights_to_train=["coef", "intercept"], batch_size=BATCHES,
        max_iter=epochs, random_state=0, learning_rate=UPDATE_RULES[rule](),
        learning_penalty=ElasticLearningPenalty(l1=1e-4, l2=1e-2),
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("rule", list(UPDATE_RULES))
def test_update_rules_run_in_the_program_as_per_batch(monkeypatch, chunks, rule, dtype):
    """Momentum, Nesterov and Adam (also in a ScaledLearningRate) run in the generic
    program, their state (velocities, moments) carried from step to step in the graph:
    the weights, the whole state (Adam's counter included) and the losses are the
    per-batch path's, bit for bit in float32, to 1e-12 in float64."""
    got = _optimizer_fit(rule, dtype)
    assert len(chunks) == 3 * 4
    expected = _per_batch(monkeypatch, lambda: _optimizer_fit(rule, dtype))
    assert len(got.lr_state_) == len(expected.lr_state_) > 0
    for a, b in zip([*got.weights_, *got.lr_state_],
                    [*expected.weights_, *expected.lr_state_], strict=True):
        if dtype == np.float32:
            np.testing.assert_array_equal(a, b)
        else:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got.train_losses_, expected.train_losses_,
                               rtol=0 if dtype == np.float32 else 1e-12)
    assert got.t_ == expected.t_


@pytest.mark.parametrize("params", [{}, {"solver": "sgd"}, {"solver": "sgd",
                                                            "nesterovs_momentum": False}])
def test_mlps_train_in_the_program_bit_for_bit(monkeypatch, chunks, params):
    """The MLPs' stochastic solvers (Adam by default, Nesterov's or classical momentum)
    run in the program (without ``alpha``: its L2 term of the loss trains per batch,
    :func:`test_mlp_l2_term_of_the_loss_trains_per_batch`); fit then partial_fit,
    float32: bit for bit the per-batch path's weights, t_, n_iter_ and loss curve."""
    def train():
        model = OnnxMLPRegressor(hidden_layer_sizes=(5,), batch_size=BATCHES, max_iter=2,
                                 tol=None, random_state=0, alpha=0.0, **params)
        model.fit(X, Y["regression"])
        return model.partial_fit(X, Y["regression"])

    model = train()
    assert chunks
    _assert_same(_state(model), _state(_per_batch(monkeypatch, train)))


@pytest.mark.parametrize("params", [{}, {"solver": "sgd", "momentum": 0.0}])
def test_mlp_l2_term_of_the_loss_trains_per_batch(chunks, params):
    """An MLP's ``alpha`` is a term of every batch's loss whose gradient goes through the
    update rule (``L2LossPenalty``): the program does not write it, the batches run one
    by one (Adam, and plain SGD whose program has no state limit)."""
    OnnxMLPRegressor(hidden_layer_sizes=(5,), batch_size=BATCHES, max_iter=1, tol=None,
                     random_state=0, alpha=1e-4, **params).fit(X, Y["regression"])
    assert not chunks


def test_stateful_rules_of_large_models_run_per_batch(chunks):
    """Beyond ``_PROGRAM_MAX_STATE`` trained values numpy's update is faster: Adam and
    momentum run per batch, plain SGD still in the program."""
    def mlp(**params):
        return OnnxMLPRegressor(hidden_layer_sizes=(200,), batch_size=BATCHES, max_iter=1,
                                tol=None, random_state=0, alpha=0.0, **params).fit(
            X, Y["regression"])

    model = mlp()
    assert sum(w.size for w in model.optimizer_.weights_) > (
        program_choice.PROGRAM_MAX_STATE)
    mlp(solver="sgd")
    assert not chunks
    mlp(solver="sgd", momentum=0.0)
    assert chunks


@pytest.mark.usefixtures("chunk_checks")
def test_adam_divergence_in_a_chunk_keeps_the_state_of_the_last_finite_epoch(
        monkeypatch, chunks):
    """Adam's rate explodes from the 11th batch of epoch 2: the chunk's non-finite losses
    leave weights, moments and counter alone, its per-batch replay stops at the batch;
    state and message are the per-batch path's."""
    start = 1 + N_ROWS + 10 * BATCHES
    schedule = LearningRateAdam.schedule
    monkeypatch.setattr(
        LearningRateAdam, "schedule",
        lambda self, ts: np.where(np.asarray(ts) >= start, 1e38, schedule(self, ts)))

    def diverge():
        model = _optimizer("adam", np.float32, epochs=4)
        with pytest.raises(ConvergenceError) as info:
            _optimizer_fit("adam", np.float32, model=model)
        return model, str(info.value)

    model, message = diverge()
    assert "at epoch 2, batch 1" in message and model.n_iter_ == 1
    assert len(chunks) > 4  # epoch 1, then epoch 2's first chunks
    expected, expected_message = _per_batch(monkeypatch, diverge)
    assert message == expected_message
    assert int(model.lr_state_[-1]) == int(expected.lr_state_[-1]) == 32
    for a, b in zip([*model.weights_, *model.lr_state_],
                    [*expected.weights_, *expected.lr_state_], strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.fixture
def builds(monkeypatch):
    """The arguments of every program built."""
    calls = []
    original = program_choice.ProgramCache._build

    def build(self, *args):
        calls.append(args)
        return original(self, *args)

    monkeypatch.setattr(program_choice.ProgramCache, "_build", build)
    return calls


def test_program_is_built_once_and_bound_once_per_loader(chunks, builds):
    model = _fit("regression")
    bound = transient(model.optimizer_).programs.binding
    for _ in range(3):
        model.partial_fit(X, Y["regression"])
    assert len(builds) == 1
    assert transient(model.optimizer_).programs.binding is bound


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_stream_of_new_blocks_keeps_its_binding_and_trains_as_bindings_made_anew(
        chunks, dtype):
    """Blocks of one layout, a new array at every call (a stream, read as given): the
    binding stays and only its features feed changes (``follow``), with the weights of
    a binding made anew for every block, bit for bit; a block of another layout, or in
    Fortran order (copied), is bound anew."""
    streamed, fresh = _fit("regression"), _fit("regression")
    rng = np.random.default_rng(5)
    bindings = []
    for _ in range(4):
        block = rng.standard_normal(X.shape).astype(dtype)
        target = block @ np.arange(N_FEATURES, dtype=dtype)
        streamed.partial_fit(block, target)
        transient(fresh.optimizer_).programs._binding = None
        fresh.partial_fit(block, target)
        np.testing.assert_array_equal(streamed.coef_, fresh.coef_)
        np.testing.assert_array_equal(streamed.intercept_, fresh.intercept_)
        bindings.append(transient(streamed.optimizer_).programs.binding)
    # float64 blocks of the float32 model are read by a program of their own, from the
    # first of them on.
    bound = bindings[0]
    assert all(binding is bound for binding in bindings)
    for other in (X[:-7].astype(dtype), np.asfortranarray(X.astype(dtype))):
        streamed.partial_fit(other, Y["regression"][:len(other)])
        assert transient(streamed.optimizer_).programs.binding is not bound


def test_fits_with_other_penalty_values_share_their_program(chunks, builds):
    """The penalty's coefficients are per-step inputs, not graph constants: fits with two
    ``alpha`` build one program (the generic one, for the Huber loss)."""
    for alpha in (1e-4, 0.1):
        OnnxSGDRegressor(loss="huber", alpha=alpha, batch_size=BATCHES, max_iter=1,
                         tol=None, random_state=0).fit(X, Y["regression"])
    assert len(builds) == 1 and chunks


def test_fits_of_one_structure_share_their_program(chunks, builds):
    """Programs are shared across optimizers by model structure (weights by shape only),
    loss, rule and configuration: MLPs with other random initial weights build one;
    another hidden layer or another update rule builds its own."""
    def fit(**params):
        return OnnxMLPRegressor(**{"hidden_layer_sizes": (5,), "batch_size": BATCHES,
                                   "max_iter": 1, "tol": None, "alpha": 0.0, **params}).fit(
            X, Y["regression"])

    first = fit(random_state=0)
    fit(random_state=1)
    assert len(builds) == 1 and chunks
    fit(random_state=0, hidden_layer_sizes=(4,))
    fit(random_state=0, solver="sgd", momentum=0.0)
    assert len(builds) == 3
    # The weights of the first fit are its own: another fit trained elsewhere.
    assert not np.array_equal(first.coefs_[0], fit(random_state=1).coefs_[0])


@pytest.mark.usefixtures("chunk_checks")
@pytest.mark.parametrize(("lean", "sparse"), [(False, False), (True, False), (True, True)],
                         ids=["generic", "linear", "sparse linear"])
def test_divergence_in_a_chunk_is_reported_at_its_batch(monkeypatch, chunks, lean, sparse):
    """The rate explodes from the 11th batch of epoch 2 (inside the second chunk): the
    chunk's non-finite losses leave the weights alone, its per-batch replay (the linear
    program's features copied first, sparse ones densified per batch) finds the batch;
    message and the last finite weights the error carries are the per-batch path's (the
    linear program's weights to rounding); the estimator stays unfitted."""
    if not lean:
        _generic_only(monkeypatch)
    features = X_SPARSE if sparse else X
    start = 1 + N_ROWS + 10 * BATCHES
    schedule = LearningRateSGD.schedule
    monkeypatch.setattr(
        LearningRateSGD, "schedule",
        lambda self, ts: np.where(np.asarray(ts) >= start, 1e38, schedule(self, ts)))
    # A rate object: the estimators' own rates cap eta (stable_step).
    params = {"penalty": None, "max_iter": 4,
              "learning_rate": LearningRateSGD(eta0=0.01, learning_rate="constant")}

    def diverge():
        model = OnnxSGDRegressor(tol=None, random_state=0, **params)
        with pytest.raises(ConvergenceError) as info:
            model.fit(features, Y["regression"])
        assert "optimizer_" not in vars(model)
        return list(info.value.last_finite_weights.values()), str(info.value)

    weights, message = diverge()
    assert "at epoch 2, batch 1" in message  # eta at 1e38 from batch 10: NaN soon after
    assert len(chunks) > 4
    expected, expected_message = _per_batch(monkeypatch, diverge)
    # The words exactly; the losses quoted too, except the sparse program's: its scores
    # sum in another order, so its losses, like its weights, are equal to rounding.
    number = r"-?\d+(?:\.\d+)?(?:e[+-]\d+)?"
    assert re.split(number, message) == re.split(number, expected_message)
    np.testing.assert_allclose(
        [float(v) for v in re.findall(number, message)],
        [float(v) for v in re.findall(number, expected_message)], rtol=1e-5 if sparse else 0.0)
    # The end of epoch 1, and not the initial zeros.
    assert any(np.any(w != 0) for w in weights)
    for a, b in zip(weights, expected, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-5 if lean else 0.0, atol=1e-5 if lean else 0.0)


@pytest.mark.parametrize(("task", "params"), [
    ("regression", {"alpha": 0.05}), ("binary", {"alpha": 0.1}),
    ("binary", {"penalty": PROXIMAL_L1, "alpha": 0.01}),
], ids=["regression l2", "binary l2", "binary l1"])
@pytest.mark.parametrize("path", ["generic", "linear", "sparse linear", "grouped"])
def test_tol_on_the_objective_stops_where_the_per_batch_path_does(monkeypatch, chunks,
                                                                  path, task, params):
    """The SGD estimators' tol rule watches the loss plus the penalty at every batch's
    weights: the programs write the norms of the weights each step starts from, the
    per-batch path computes the penalty in numpy; the same epochs, t_ and weights (bit for
    bit through the generic program, to rounding through the linear ones, which also run
    several epochs per call when grouped). On these dense data, the loss alone would stop
    elsewhere."""
    _stops_as_per_batch(monkeypatch, chunks, path, task, params)


@pytest.mark.parametrize(("task", "params"), [
    ("regression", {"penalty": "l1", "alpha": 0.1}),
    ("binary", {"penalty": "elasticnet", "alpha": 0.01, "l1_ratio": 0.5}),
], ids=["regression l1", "binary elasticnet"])
@pytest.mark.parametrize("path", ["generic", "linear", "sparse linear", "grouped"])
def test_tol_on_the_objective_with_the_cumulative_l1(monkeypatch, chunks, path, task,
                                                     params):
    """The same with the cumulative L1 penalty in the programs: their norms include the
    L1 norm of the weights each step starts from."""
    _stops_as_per_batch(monkeypatch, chunks, path, task, params)


@pytest.mark.parametrize(("task", "params"), [
    ("binary", {"alpha": 0.01}), ("binary", {"alpha": 0.01, "loss": "log_loss"}),
    ("multiclass", {"alpha": 0.01}),
], ids=["binary hinge", "binary log", "multiclass hinge"])
@pytest.mark.parametrize("path", ["generic", "linear", "sparse linear", "grouped"])
def test_tol_on_the_unweighted_objective_with_sample_weights(monkeypatch, chunks, path,
                                                             task, params):
    """With sample weights the SGD estimators' rule watches the rows' unweighted losses
    (scikit-learn's): the generic program sums them by the model of the row losses in its
    step, the linear ones from their per-row values, the per-batch path by the trainer's
    row losses (sparse rows densified); the same epochs and weights. The weighted losses
    would stop elsewhere."""
    _stops_as_per_batch(monkeypatch, chunks, path, task, params, SAMPLE_WEIGHTS, True)


#: Sample weights of the rows (some zero).
SAMPLE_WEIGHTS = np.random.default_rng(5).uniform(-1.0, 4.0, N_ROWS).clip(0.0)


def _stops_as_per_batch(monkeypatch, chunks, path, task, params, sample_weight=None,
                        other=False):
    """Fit as the per-batch path does; with ``_tol_on_objective=other``, at another
    epoch."""
    if path == "generic":
        _generic_only(monkeypatch)
    calls = chunks
    if path == "grouped":
        monkeypatch.setattr(LinearProgramRun, "GROUP_STEPS", 128)
        calls = record_calls(monkeypatch, LinearProgramRun, "run_epochs")
    features = X_SPARSE if path == "sparse linear" else X

    def fit():
        return ESTIMATORS[task](max_iter=200, random_state=0, **params).fit(
            features, Y[task], sample_weight=sample_weight)

    model = fit()
    assert calls and 5 < model.n_iter_ < 200
    expected = _per_batch(monkeypatch, fit)
    _assert_same(_state(model), _state(expected), rtol=0.0 if path == "generic" else 1e-5)
    if features is X:
        monkeypatch.setattr(ESTIMATORS[task], "_tol_on_objective", other)
        assert fit().n_iter_ != model.n_iter_


@pytest.mark.parametrize("lean", [False, True], ids=["generic", "linear"])
def test_a_chunk_whose_replay_is_finite_rewinds_then_goes_on(monkeypatch, chunks, lean,
                                                             chunk_checks):
    """The chunks' losses are checked after they all ran: a non-finite one (here a NaN
    written into the second chunk's losses of epoch 2, once) rewinds the weights, states
    and t_ to that chunk's start, replays it batch by batch (8 forwards, all finite) and
    runs the chunks after it in the program again. Each chunk checked as it ends, that
    chunk is not taken, nothing rewinds, and the chunks after the replay run once. The
    fit ends as the one without the NaN, to the per-batch path's rounding."""
    if not lean:
        _generic_only(monkeypatch)
    clean = _fit("regression", learning_rate="constant", eta0=0.001)
    original = ProgramRun.step_losses if not lean else LinearProgramRun.step_losses
    owner = ProgramRun if not lean else LinearProgramRun
    poisoned, before = [], len(chunks)

    def step_losses(self, first, count):
        losses = original(self, first, count).copy()
        if len(chunks) - before > 4 and not poisoned and first <= STEPS < first + count:
            losses[STEPS - first + 3] = np.nan
            poisoned.append(len(chunks) - before)
        return losses

    monkeypatch.setattr(owner, "step_losses", step_losses)
    rewinds = record_calls(monkeypatch, ProgramEpoch, "_rewind")
    model = _fit("regression", learning_rate="constant", eta0=0.001)
    if chunk_checks == "checkpoints":
        assert poisoned == [8]  # epoch 2 ran whole before its losses were checked
        assert len(rewinds) == 1
        assert len(chunks) - before == 3 * 4 + 2  # the chunks after the replayed one, again
    else:
        assert poisoned == [6]  # epoch 2's second chunk, checked as it ended
        assert not rewinds
        assert len(chunks) - before == 3 * 4
    got, expected = _state(model), _state(clean)
    _assert_same(got, expected, rtol=1e-5)


def test_a_large_state_takes_no_checkpoints(monkeypatch, chunks):
    """A program's epoch copies the state at every chunk's start only where it holds at
    most ``CHECKPOINT_MAX_BYTES`` (``TrainingState.nbytes``: weights and states); the fit
    is the same bit for bit either way."""
    sizes = []
    original = TrainingState.checkpoint

    def checkpoint(self):
        sizes.append(self.nbytes)
        return original(self)

    monkeypatch.setattr(TrainingState, "checkpoint", checkpoint)
    small = _fit("regression", learning_rate="constant", eta0=0.001)
    nbytes = sum(w.nbytes for w in small.optimizer_.weights_)
    assert set(sizes) == {nbytes}
    taken, ran = len(sizes), len(chunks)
    monkeypatch.setattr(epochs, "CHECKPOINT_MAX_BYTES", nbytes - 1)
    large = _fit("regression", learning_rate="constant", eta0=0.001)
    assert len(chunks) == 2 * ran
    # The trainer's own, one per call and epoch, remain.
    assert len(sizes) - taken == taken - ran
    _assert_same(_state(large), _state(small))


@pytest.mark.usefixtures("default_sigint")
def test_ctrl_c_is_honoured_at_the_next_chunk_boundary(monkeypatch, chunks, generic):
    """SIGINT during the 3rd call of epoch 2: that chunk completes, nothing after it
    runs; the state is the per-batch path's interrupted after the same batches."""
    interrupted_at = 4 + 2  # 4 chunks per epoch; the third of epoch 2
    original = ProgramRun.run

    def run(self, chunk):
        if len(chunks) == interrupted_at:
            os.kill(os.getpid(), signal.SIGINT)
        return original(self, chunk)

    monkeypatch.setattr(ProgramRun, "run", run)
    model = OnnxSGDRegressor(max_iter=3, tol=None, random_state=0)
    with pytest.raises(KeyboardInterrupt):
        model.fit(X, Y["regression"])
    assert len(chunks) == interrupted_at + 1
    done = 32 + 3 * STEPS  # batches completed: epoch 1, then 3 chunks
    assert model.t_ == 1 + N_ROWS + 3 * STEPS * BATCHES
    assert model.optimizer_.epochs_completed_ == 1

    forwards = []

    def forward(self, feeds, _run=OrtGradientStep.run):
        forwards.append(1)
        if len(forwards) == done:
            os.kill(os.getpid(), signal.SIGINT)
        return _run(self, feeds)

    # An instrumented step forces the per-batch path.
    monkeypatch.setattr(OrtGradientStep, "run", forward)
    expected = OnnxSGDRegressor(max_iter=3, tol=None, random_state=0)
    with pytest.raises(KeyboardInterrupt):
        expected.fit(X, Y["regression"])
    assert len(chunks) == interrupted_at + 1  # no program call in the reference
    _assert_same(_state(model), _state(expected))


def test_pickled_stream_resumes_bit_for_bit(monkeypatch, chunks):
    def stream(pickled_after=None):
        model = OnnxSGDClassifier(random_state=0, tol=None)
        for call in range(4):
            model.partial_fit(X, Y["multiclass"], classes=np.unique(Y["multiclass"]))
            if call == pickled_after:
                model = pickle.loads(pickle.dumps(model))
        return model

    model = stream(pickled_after=1)
    assert chunks
    _assert_same(_state(model), _state(stream()))
    # The linear program (one-vs-rest, several outputs) equals the per-batch path to
    # rounding.
    _assert_same(_state(model), _state(_per_batch(monkeypatch, stream)), rtol=1e-5)


def test_pickled_adam_stream_resumes_bit_for_bit(monkeypatch, chunks):
    """A small MLP with Adam: the stream trains in the program; pickled after two calls,
    its moments no longer share one buffer (it resumes per batch) and the weights, t_ and
    loss curve stay those of the uninterrupted stream."""
    def stream(pickled_after=None):
        model = OnnxMLPRegressor(hidden_layer_sizes=(5,), batch_size=BATCHES,
                                 random_state=0, alpha=0.0)
        for call in range(4):
            model.partial_fit(X, Y["regression"])
            if call == pickled_after:
                model = pickle.loads(pickle.dumps(model))
        return model

    uninterrupted = stream()
    calls = len(chunks)
    assert calls == 4 * 4
    resumed = stream(pickled_after=1)
    assert len(chunks) - calls == 2 * 4  # the two calls before the pickle
    _assert_same(_state(resumed), _state(uninterrupted))
    np.testing.assert_array_equal(resumed.optimizer_.lr_state_[-1],
                                  uninterrupted.optimizer_.lr_state_[-1])
