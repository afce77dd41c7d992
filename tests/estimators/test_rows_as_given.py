"""A ``partial_fit`` of a linear model, the first or a later one, trains on dense rows as
given, unchecked (the linear program casts each batch it reads to the model's type): the
same weights, bit for bit, as on ``X`` checked and cast (the checked call's: ``X`` in
Fortran order is checked and cast first), and, for a NaN, an infinity or a value beyond
float32, scikit-learn's error with the estimator unchanged; a divergence, or a
configuration no program of the kind runs, gives what the checked call gives."""

import numpy as np
import pytest
from _linear_cases import LINEAR_CASES

from skl_ortgrad import OnnxSGDClassifier
from skl_ortgrad.estimators import finite_input
from skl_ortgrad.exceptions import ConvergenceError
from skl_ortgrad.runtime import program_run
from skl_ortgrad.training import program_choice

RNG = np.random.default_rng(0)
X = RNG.standard_normal((3000, 8))
SCORE = X @ RNG.standard_normal(8) + 0.3 * RNG.standard_normal(3000)
LABELS = np.digitize(SCORE, [-0.5, 0.5])
TARGETS = {"regressor": SCORE, "binary": (SCORE > 0).astype(int), "classes": LABELS}
WEIGHTS = RNG.integers(0, 3, len(X)).astype(float)
CASES = LINEAR_CASES


def _new(case, **params):
    """The estimator of ``case``, its targets, and the arguments of its first call."""
    cls, kwargs, kind = CASES[case]
    extra = {"classes": np.unique(TARGETS[kind])} if cls is OnnxSGDClassifier else {}
    return cls(random_state=0, **kwargs, **params), TARGETS[kind], extra


def _started(case, layout="C", dtype=np.float64, **params):
    """The estimator of ``case`` after a first ``partial_fit`` on the first half of ``X``
    as ``dtype``, in ``layout`` (``"F"``: checked and cast first)."""
    model, target, extra = _new(case, **params)
    rows = np.asarray(X[:1500], dtype=dtype, order=layout)
    return model.partial_fit(rows, target[:1500], **extra), target


def _fitted(model):
    return {"coef": model.coef_.copy(), "intercept": model.intercept_.copy(),
            "t": model.t_, "n_iter": model.n_iter_}


def _assert_same(got, want):
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)


@pytest.fixture(autouse=True, params=[False, True], ids=["one core", "a free core"])
def cores(monkeypatch, request):
    """Whether a core is free to a call: a call of 3000 rows is two calls of the linear
    program, reading its rows by index, or staged by the helper thread."""
    monkeypatch.setattr(program_choice, "helper_core_free", lambda threads: request.param)
    monkeypatch.setattr(program_run, "helper_core_free", lambda threads: request.param)


@pytest.fixture
def checks(monkeypatch):
    """The layout ("C" or "F") of every ``X`` that validation checks (and casts), call
    after call."""
    seen = []
    cast_checked = finite_input._cast_checked

    def counting(data, dtype, **options):
        seen.append("C" if data.flags.c_contiguous else "F")
        return cast_checked(data, dtype, **options)

    monkeypatch.setattr(finite_input, "_cast_checked", counting)
    return seen


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("case", list(CASES))
def test_blocks_train_as_the_blocks_checked(case, dtype, weighted, checks):
    as_given, target = _started(case, dtype=dtype)
    checked, _ = _started(case, "F", dtype)
    _assert_same(_fitted(as_given), _fitted(checked))
    for block in (slice(1500, 2300), slice(2300, 3000), slice(0, 1500)):
        weights = {"sample_weight": WEIGHTS[block]} if weighted else {}
        rows = X[block].astype(dtype)
        as_given.partial_fit(rows, target[block], **weights)
        checked.partial_fit(np.asfortranarray(rows), target[block], **weights)
        _assert_same(_fitted(as_given), _fitted(checked))
    # Only the Fortran-ordered blocks were checked, the first call's included.
    assert checks == ["F"] * 4
    assert as_given.optimizer_.reads_rows_as_given


@pytest.mark.parametrize(("dtype", "value"), [
    (np.float64, np.nan), (np.float64, np.inf), (np.float64, -np.inf), (np.float64, 1e39),
    (np.float32, np.nan), (np.float32, np.inf)])
@pytest.mark.parametrize("row", [0, 1234, 2999])
@pytest.mark.parametrize("case", ["squared error", "hinge", "log loss", "hinge, 3 classes"])
def test_values_the_model_cannot_read_are_refused_and_change_nothing(case, row, dtype,
                                                                     value):
    """scikit-learn's error (the checked call's) and the estimator as before, for a value
    anywhere, the last row of the call included (whose step the losses do not show)."""
    model, target = _started(case)
    before = _fitted(model)
    bad = X.astype(dtype)
    bad[row, 5] = value
    with pytest.raises(ValueError) as checked:
        _started(case)[0].partial_fit(np.asfortranarray(bad), target)
    with pytest.raises(ValueError) as as_given:
        model.partial_fit(bad, target)
    assert str(as_given.value) == str(checked.value)
    _assert_same(_fitted(model), before)
    # The next calls still read their rows as given.
    assert model.optimizer_.reads_rows_as_given


@pytest.mark.parametrize(("dtype", "value"), [
    (np.float64, np.nan), (np.float64, np.inf), (np.float64, 1e39), (np.float32, np.nan)])
@pytest.mark.parametrize("row", [0, 1234, 2999])
@pytest.mark.parametrize("case", ["squared error", "hinge, 3 classes"])
def test_a_first_call_on_values_the_model_cannot_read_leaves_it_unfitted(case, row, dtype,
                                                                         value):
    """The first call too: scikit-learn's error, and nothing fitted (row 0 is among the
    rows the default rate measures, row 2999 is not)."""
    model, target, extra = _new(case)
    bad = X.astype(dtype)
    bad[row, 5] = value
    with pytest.raises(ValueError) as checked:
        _new(case)[0].partial_fit(np.asfortranarray(bad), target, **extra)
    with pytest.raises(ValueError) as as_given:
        model.partial_fit(bad, target, **extra)
    assert str(as_given.value) == str(checked.value)
    assert vars(model) == vars(_new(case)[0])
    model.partial_fit(X, target, **extra)
    assert model.optimizer_.reads_rows_as_given


def test_a_hinge_margin_made_infinite_on_the_right_side_is_refused():
    """A row whose infinity puts it infinitely far on the right side of the margin has a
    loss of 0 and no step, but ``0 * inf`` is NaN in the update: refused all the same."""
    model, target = _started("hinge")
    column = int(np.argmax(np.abs(model.coef_[0])))
    bad = X.copy()
    bad[2999, column] = np.inf * np.sign(model.coef_[0, column]) * (2 * target[2999] - 1)
    before = _fitted(model)
    with pytest.raises(ValueError, match="Input X contains infinity"):
        model.partial_fit(bad, target)
    _assert_same(_fitted(model), before)


def test_a_divergence_gives_the_checked_calls_error():
    """Rows far larger than the first call's (the rate was fixed by those): the
    checked call's message, last finite weights, and the estimator as before."""
    as_given, target = _started("squared error")
    cast, _ = _started("squared error")
    before = _fitted(as_given)
    large = X * 1e10
    with pytest.raises(ConvergenceError) as checked:
        cast.partial_fit(np.asfortranarray(large), target)
    with pytest.raises(ConvergenceError) as error:
        as_given.partial_fit(large, target)
    assert str(error.value) == str(checked.value)
    for got, want in zip(error.value.last_finite_weights.values(),
                         checked.value.last_finite_weights.values(), strict=True):
        np.testing.assert_array_equal(got, want)
    _assert_same(_fitted(as_given), before)


@pytest.mark.parametrize("params", [{"average": True}, {"batch_size": 4000}],
                         ids=["averaged", "one short batch"])
def test_calls_no_program_reads_rows_as_given_for_are_checked(params, checks):
    """Averaged SGD runs per batch, as does a call shorter than the program's least
    batches: the first call finds it before any step and runs checked, and the next ones
    are checked from the start (the first call's try drops the optimizer that learned
    it, and tells the one of the checked call); the weights are the checked calls'."""
    as_given, target = _started("squared error", **params)
    checked, _ = _started("squared error", "F", **params)
    assert not as_given.optimizer_.reads_rows_as_given
    for block in (slice(0, 1500), slice(1500, 3000), slice(0, 3000)):
        as_given.partial_fit(X[block], target[block])
        checked.partial_fit(np.asfortranarray(X[block]), target[block])
        _assert_same(_fitted(as_given), _fitted(checked))
    assert not as_given.optimizer_.reads_rows_as_given
    # Every call checked X once: the first after its try, the next ones at once.
    assert checks == ["C", "F"] * 4
