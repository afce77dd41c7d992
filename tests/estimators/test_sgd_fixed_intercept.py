"""``fit_intercept=False``: the intercept stays at 0 or ``intercept_init`` while the
linear program (dense or sparse) trains the coefficients alone, reading the fixed
intercept as a weight it never steps; the steps are scikit-learn's."""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import load_breast_cancer, load_diabetes, load_iris
from sklearn.linear_model import SGDClassifier, SGDRegressor
from sklearn.preprocessing import StandardScaler

from skl_ortgrad import OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.runtime.program_run import (
    LinearProgramRun,
    PassiveAggressiveRun,
    SparseLinearProgramRun,
    SparsePassiveAggressiveRun,
)
from skl_ortgrad.training import program_choice
from skl_ortgrad.training.caches import transient

TASKS = {
    "binary": (load_breast_cancer, OnnxSGDClassifier, SGDClassifier, 1),
    "multiclass": (load_iris, OnnxSGDClassifier, SGDClassifier, 3),
    "regression": (load_diabetes, OnnxSGDRegressor, SGDRegressor, 1),
}
LOSSES = {"binary": ["hinge", "log_loss"], "multiclass": ["hinge", "log_loss"],
          "regression": ["squared_error"]}


def _data(task, sparse):
    load, _, _, _ = TASKS[task]
    X, y = load(return_X_y=True)
    X = StandardScaler().fit_transform(X)[:200]
    y = y[:200] if task != "regression" else (y[:200] - y.mean()) / y.std()
    return (sp.csr_matrix(X) if sparse else X), y


def _binding(model):
    return type(transient(model.optimizer_).programs.binding)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize(("task", "loss"), [(task, loss) for task in TASKS
                                            for loss in LOSSES[task]])
def test_the_linear_program_trains_without_intercept_as_scikit_learn(task, loss, sparse):
    """float64, one row a batch in one order, elasticnet (its cumulative L1 step):
    coefficients scikit-learn's to 1e-9, the intercept ``intercept_init`` exactly."""
    _, ours, theirs, outputs = TASKS[task]
    X, y = _data(task, sparse)
    params = {"loss": loss, "fit_intercept": False, "shuffle": False, "max_iter": 5,
              "tol": None, "random_state": 0, "penalty": "elasticnet", "alpha": 0.001}
    init = np.full(outputs, 0.3)
    model = ours(**params, dtype=np.float64, batch_size=1).fit(X, y, intercept_init=init)
    assert _binding(model) is (SparseLinearProgramRun if sparse else LinearProgramRun)
    reference = theirs(**params).fit(X, y, intercept_init=init)
    np.testing.assert_allclose(model.coef_, reference.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(model.intercept_, init)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("task", list(TASKS))
def test_the_program_steps_as_the_per_batch_path_at_the_defaults(monkeypatch, task, sparse):
    """float32, shuffled, the default batch: the program's coefficients are the
    per-batch path's to float32 rounding; the intercept stays 0."""
    _, ours, _, outputs = TASKS[task]
    X, y = _data(task, sparse)
    params = {"fit_intercept": False, "max_iter": 5, "tol": None, "random_state": 0}
    model = ours(**params).fit(X, y)
    assert _binding(model) is (SparseLinearProgramRun if sparse else LinearProgramRun)
    monkeypatch.setattr(program_choice, "PROGRAM_STEPS", 1)
    per_batch = ours(**params).fit(X, y)
    np.testing.assert_allclose(model.coef_, per_batch.coef_, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(model.intercept_, np.zeros(outputs))


@pytest.mark.parametrize("sparse", [False, True])
def test_the_passive_aggressive_program_keeps_the_fixed_intercept(sparse):
    X, y = _data("binary", sparse)
    params = {"learning_rate": "pa1", "eta0": 0.5, "fit_intercept": False,
              "shuffle": False, "max_iter": 5, "tol": None, "random_state": 0}
    model = OnnxSGDClassifier(**params, dtype=np.float64).fit(X, y, intercept_init=[-0.2])
    assert _binding(model) is (SparsePassiveAggressiveRun if sparse else PassiveAggressiveRun)
    reference = SGDClassifier(**params).fit(X, y, intercept_init=[-0.2])
    np.testing.assert_allclose(model.coef_, reference.coef_, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(model.intercept_, [-0.2])


@pytest.mark.parametrize("task", list(TASKS))
def test_a_fixed_intercept_keeps_the_score_linear(task):
    """Predictions read the score as linear (a fixed intercept, not a feed): sparse rows
    scored by scipy, equal to the dense rows' scores, and to scikit-learn's decision
    function in float64."""
    _, ours, theirs, outputs = TASKS[task]
    X, y = _data(task, False)
    params = {"fit_intercept": False, "max_iter": 5, "tol": None, "random_state": 0,
              "shuffle": False, "batch_size": 1}
    init = np.full(outputs, 0.3)
    model = ours(**params, dtype=np.float64).fit(X, y, intercept_init=init)
    assert model._linear_weights() == ("coef", "intercept")
    dense, stored = model.predict(X), model.predict(sp.csr_matrix(X))
    reference = theirs(**{k: v for k, v in params.items() if k != "batch_size"}).fit(
        X, y, intercept_init=init)
    # Labels equal; values (the regressor's) to rounding: scipy sums in another order.
    check = (np.testing.assert_array_equal if task != "regression" else
             lambda got, want: np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14))
    check(stored, dense)
    check(dense, reference.predict(X))
    if hasattr(model, "decision_function"):
        np.testing.assert_allclose(model.decision_function(sp.csr_matrix(X)),
                                   reference.decision_function(X), rtol=1e-9, atol=1e-12)


def test_float64_blocks_train_a_float32_model_without_intercept_as_given():
    """A stream of float64 blocks into a float32 model without intercept: the linear
    program reads them as given (none cast first), bit for bit what it computes on the
    blocks cast."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 10))
    y = X @ rng.standard_normal(10) + 0.1 * rng.standard_normal(2000)
    models = [OnnxSGDRegressor(fit_intercept=False, random_state=0) for _ in range(2)]
    for start in range(0, len(y), 500):
        models[0].partial_fit(X[start:start + 500], y[start:start + 500])
        models[1].partial_fit(X[start:start + 500].astype(np.float32), y[start:start + 500])
    assert _binding(models[0]) is LinearProgramRun
    assert not transient(models[0].optimizer_).programs.rows_cast
    np.testing.assert_array_equal(models[0].coef_, models[1].coef_)
