"""The rows' stable step and spread (estimators/curvature.py) against their formulas in
numpy, float64."""

import numpy as np
import pytest
import scipy.sparse as sp

from skl_ortgrad.estimators import curvature as module
from skl_ortgrad.estimators.curvature import curvature


def _reference(X, column=1.0):
    """(1 / lambda, rho / lambda^2) of x~ = (x, column) by eigen-decompositions in
    numpy."""
    augmented = np.hstack([X, np.full((X.shape[0], 1), column)])
    second = augmented.T @ augmented / X.shape[0]
    squares = (augmented * augmented).sum(axis=1)
    fourth = (augmented * squares[:, None]).T @ augmented / X.shape[0]
    top = np.linalg.eigvalsh(second)[-1]
    return 1.0 / top, np.linalg.eigvalsh(fourth)[-1] / top**2


@pytest.mark.parametrize("columns", [5, 300])
@pytest.mark.parametrize("sparse", [False, True])
def test_the_step_and_spread_are_their_formulas(columns, sparse):
    """Exactly (eigvalsh) below 256 columns, by power iteration above; dense or CSR."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((1000, columns)) * rng.exponential(size=(1000, 1))
    step, spread = curvature(sp.csr_matrix(X) if sparse else X, spread=True)
    expected_step, expected_spread = _reference(X)
    tolerance = 1e-8 if columns < module._EXACT_COLUMNS else 1e-4
    assert step == pytest.approx(expected_step, rel=tolerance)
    assert spread == pytest.approx(expected_spread, rel=tolerance)
    assert curvature(X)[1] == 1.0  # not measured


def test_the_spread_is_at_least_one_and_measured_at_any_scale():
    """kappa = rho / lambda^2 >= 1 (E[|x|^2 (v.x)^2] >= E[(v.x)^2]^2); X times s has the
    spread of (x, 1 / s) (the intercept's 1 does not scale: a tiny X is the intercept
    alone, 1), measured without overflow at any finite scale."""
    rng = np.random.default_rng(1)
    X = rng.standard_normal((500, 8)) * rng.exponential(size=(500, 1))
    assert curvature(X, spread=True)[1] >= 1.0
    for scale in (1e-3, 1e3, 1e150):
        assert curvature(X * scale, spread=True)[1] == pytest.approx(
            _reference(X, 1.0 / scale)[1], rel=1e-8)
    assert curvature(X * 1e-150, spread=True)[1] == pytest.approx(1.0)
    assert curvature(X * 1e300, spread=True)[1] == pytest.approx(_reference(X, 0.0)[1])
    assert curvature(np.ones((10, 1)), spread=True)[1] == pytest.approx(1.0)
    assert curvature(np.zeros((4, 2)), spread=True) == (np.inf, 1.0)


def test_the_spread_is_that_of_the_rows_as_the_model_reads_them():
    """Measured on the measured rows cast to the model's type, as the stable step."""
    X = np.random.default_rng(2).standard_normal((300, 6)) * 1e20
    assert curvature(X, np.float32, spread=True) == curvature(
        X.astype(np.float32), spread=True)
