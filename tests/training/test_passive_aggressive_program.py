"""The linear program's passive-aggressive step (``passive_aggressive=(variant, C)``)
against its formula, row by row in numpy: per row :math:`x` (in the epoch's order), its
scores :math:`p = x W + b` and losses :math:`\\ell` at the weights it starts from, the
step size :math:`\\tau = \\min(C, \\ell / \\lVert x \\rVert^2)` (PA-I) or :math:`\\ell /
(\\lVert x \\rVert^2 + 1/(2C))` (PA-II), the L2 decay of :math:`W` at :math:`\\eta = C`,
then :math:`W \\mathrel{+}= \\tau s d\\, x^\\top`, :math:`b \\mathrel{+}= \\tau s d` with
the row's weight :math:`s` and direction :math:`d` (:math:`2y - 1` for the hinge loss,
:math:`\\operatorname{sign}(y - p)` for the epsilon-insensitive one); PA-I skips a row
of no norm (its loss counts; no decay, no step), its rate 0. In float64 both
agree to 1e-12, dense rows and sparse ones (read from their stored values); the staged
form computes the same bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from onnxruntime import InferenceSession

from skl_ortgrad.runtime.options import session_options
from skl_ortgrad.training.programs import (
    PassiveAggressiveProgram,
    SparsePassiveAggressiveProgram,
    linear_program,
)

N_ROWS, N_FEATURES, C = 23, 5, 0.3
ZERO_ROWS = (2, 11)
#: The epsilon-insensitive loss's epsilon, the hinge loss's margin.
THRESHOLDS = {"hinge": 1.0, "epsilon_insensitive": 0.1}
#: L2 weight: the decay of every step is 1 - C l2.
PENALTIES = {"none": 0.0, "l2": 0.05}


def _data(loss: str, outputs: int) -> dict[str, np.ndarray]:
    """Rows, labels (one column of 0/1 labels per output for the hinge loss), sample
    weights, the epoch's order and starting weights."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((N_ROWS, N_FEATURES))
    # Zeros (what sparse rows do not store), two rows all zero.
    X[rng.random(X.shape) < 0.4] = 0.0
    X[~X.any(axis=1), 0] = 1.0
    X[list(ZERO_ROWS)] = 0.0
    score = X @ rng.standard_normal((N_FEATURES, outputs)) + 0.3
    noisy = score + rng.standard_normal(score.shape)
    y = (noisy > 0).astype(float) if loss == "hinge" else noisy
    return {"X": X, "label": y, "sample_weight": rng.uniform(0.2, 2.0, N_ROWS),
            "order": rng.permutation(N_ROWS),
            "coef": 0.1 * rng.standard_normal((N_FEATURES, outputs)),
            "intercept": 0.1 * rng.standard_normal(outputs)}


def _reference(loss: str, variant: str, l2: float, weighted: bool,
               outputs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The weights after the epoch and every row's loss times its weight, in numpy."""
    data = _data(loss, outputs)
    W, b = data["coef"].copy(), data["intercept"].copy()
    losses = []
    for i in data["order"]:
        x, y = data["X"][i], data["label"][i]
        s = data["sample_weight"][i] if weighted else 1.0
        p = x @ W + b
        if loss == "hinge":
            direction = 2 * y - 1
            each = np.maximum(0.0, THRESHOLDS[loss] - direction * p)
        else:
            direction = np.sign(y - p)
            each = np.maximum(0.0, np.abs(y - p) - THRESHOLDS[loss])
        squared = x @ x
        losses.append(np.sum(each * s))
        if variant == "pa1" and squared == 0:
            continue
        tau = (np.minimum(C, each / squared) if variant == "pa1"
               else each / (squared + 0.5 / C))
        W *= max(0.0, 1.0 - C * l2)
        W += np.outer(x, tau * s * direction)
        b += tau * s * direction
    return W, b, np.array(losses)


def _stored_layout(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The sparse program's layout of ``X``: row i's non-zero values and their columns
    in row i, padded with column 0 and value 0."""
    width = int((X != 0).sum(axis=1).max())
    columns = np.zeros((len(X), width), dtype=np.int32)
    values = np.zeros((len(X), width), dtype=X.dtype)
    for i, row in enumerate(X):
        stored = np.flatnonzero(row)
        columns[i, :len(stored)], values[i, :len(stored)] = stored, row[stored]
    return columns, values


def _run(program: PassiveAggressiveProgram, loss: str, l2: float, weighted: bool,
         outputs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The program over the epoch, its per-row inputs computed as its binding does (a
    sparse program reads the stored values of the rows)."""
    data = _data(loss, outputs)
    dtype = program.dtype
    order = data["order"]
    session = InferenceSession(program.model.SerializeToString(), session_options(1),
                               providers=["CPUExecutionProvider"])
    X = data["X"].astype(dtype)
    squared = np.einsum("ij,ij->i", X, X)[order]
    # The rate of a row PA-I skips is 0 (the binding's stepped_rates).
    etas = np.where((squared > 0) | (program.variant == "pa2"), C, 0.0)
    table = program.scalar_table(etas, np.ones(N_ROWS), 0.0, l2, 1)
    shape = (N_ROWS, outputs) if outputs > 1 else (N_ROWS,)
    label = data["label"][order].reshape(shape)
    row_weight = data["sample_weight"][order] if weighted else np.ones(N_ROWS)
    per_row = {name: np.empty(shape, dtype=dtype) for name in program.per_row}
    per_row["rows"] = order.astype(np.int64)
    program.targets(label.astype(dtype), per_row["target"])
    rates = row_weight * (etas != 0)
    if outputs > 1:
        rates = np.repeat(rates[:, None], outputs, axis=1)
    program.step_weights(rates, per_row["target"], per_row["step_weight"])
    program.denominators(squared, per_row["denominator"])
    weights = [data["coef"].astype(dtype), data["intercept"].astype(dtype)]
    values = np.empty(shape, dtype=dtype)
    for first in range(0, N_ROWS, program.steps):
        count = min(program.steps, N_ROWS - first)
        if isinstance(program, SparsePassiveAggressiveProgram):
            feeds = program.feeds(*_stored_layout(X), per_row, table, weights, first, count)
        else:
            rows = X[order[first:first + count]] if program.staged else X
            feeds = program.feeds(rows, per_row, table, weights, first, count)
        new = [np.empty_like(w) for w in weights]
        fetches = program.fetches(values, new, first, count)
        names = list(fetches)
        for name, value in zip(names, session.run(names, feeds), strict=True):
            fetches[name][...] = value
        weights = new
    losses = program.losses(values, per_row["target"], row_weight.astype(dtype))
    return weights[0], weights[1], losses


CASES = [("hinge", 1), ("hinge", 3), ("epsilon_insensitive", 1)]


@pytest.mark.parametrize("sparse", [False, True], ids=["rows", "stored values"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("penalty", list(PENALTIES))
@pytest.mark.parametrize("variant", ["pa1", "pa2"])
@pytest.mark.parametrize(("loss", "outputs"), CASES)
def test_the_step_is_its_formula(loss, outputs, variant, penalty, weighted, sparse):
    """float64, 1, 4 and 8 rows a call (a short last call): the weights and every row's
    weighted loss."""
    l2 = PENALTIES[penalty]
    W, b, losses = _reference(loss, variant, l2, weighted, outputs)
    for steps in (1, 4, 8):
        program = linear_program(loss, N_FEATURES, steps, 1, np.float64, l2=l2 > 0,
                                 threshold=THRESHOLDS[loss], n_outputs=outputs,
                                 sparse=sparse, passive_aggressive=(variant, C))
        assert type(program) is (SparsePassiveAggressiveProgram if sparse
                                 else PassiveAggressiveProgram)
        assert not program.rated
        got = _run(program, loss, l2, weighted, outputs)
        for value, want in zip(got, (W, b, losses), strict=True):
            np.testing.assert_allclose(value.reshape(want.shape), want, rtol=1e-12,
                                       atol=1e-14)


@pytest.mark.parametrize("variant", ["pa1", "pa2"])
@pytest.mark.parametrize(("loss", "outputs"), CASES)
def test_the_float32_step_is_its_formula_to_float32_rounding(loss, outputs, variant):
    W, b, losses = _reference(loss, variant, 0.05, True, outputs)
    program = linear_program(loss, N_FEATURES, 8, 1, np.float32, l2=True,
                             threshold=THRESHOLDS[loss], n_outputs=outputs,
                             passive_aggressive=(variant, C))
    got = _run(program, loss, 0.05, True, outputs)
    for value, want in zip(got, (W, b, losses), strict=True):
        np.testing.assert_allclose(value.reshape(want.shape), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize(("loss", "outputs"), CASES)
def test_the_staged_step_computes_what_it_computes_on_rows_by_index(loss, outputs, dtype):
    arguments = dict(l2=True, threshold=THRESHOLDS[loss], n_outputs=outputs,
                     passive_aggressive=("pa1", C))
    by_index = linear_program(loss, N_FEATURES, 8, 1, dtype, **arguments)
    staged = linear_program(loss, N_FEATURES, 8, 1, dtype, staged=True, **arguments)
    assert staged.per_row == ("target", "step_weight", "denominator")
    for got, want in zip(_run(staged, loss, 0.05, True, outputs),
                         _run(by_index, loss, 0.05, True, outputs), strict=True):
        np.testing.assert_array_equal(got, want)


def test_pa2_adds_the_inverse_of_2C_to_the_denominators():
    """PA-I's of a row of no norm, which it skips, is 1 (a finite quotient)."""
    squared = np.array([0.0, 2.0, 0.5])
    out = np.empty((3, 2))
    for variant, expected in (("pa1", np.array([1.0, 2.0, 0.5])),
                              ("pa2", squared + 0.5 / C)):
        linear_program("hinge", N_FEATURES, 2, 1, np.float64, n_outputs=2,
                       passive_aggressive=(variant, C)).denominators(squared, out)
        np.testing.assert_array_equal(out, np.repeat(expected[:, None], 2, axis=1))


def test_bad_arguments():
    with pytest.raises(ValueError, match="passive-aggressive step's loss must be one of"):
        linear_program("log", N_FEATURES, 2, 1, passive_aggressive=("pa1", C))
    for bad in (("pa3", C), ("pa1", 0.0), ("pa2", np.inf)):
        with pytest.raises(ValueError, match=r"passive_aggressive must be \(one of"):
            linear_program("hinge", N_FEATURES, 2, 1, passive_aggressive=bad)
    with pytest.raises(ValueError, match="reads one row a batch, got batch_rows=4"):
        linear_program("hinge", N_FEATURES, 2, 4, passive_aggressive=("pa1", C))
    for sparse in (False, True):
        with pytest.raises(ValueError, match="loss must be one of"):
            linear_program("epsilon_insensitive", N_FEATURES, 2, 1, sparse=sparse)
