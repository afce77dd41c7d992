"""check_dtype_range: finite values that the training dtype cannot hold are named."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from skl_ortgrad.estimators.dtype_range import check_dtype_range

# The smallest float64 that becomes inf in float32: halfway between the largest float32,
# 2**128 - 2**104, and 2**128 (a tie rounds to the even mantissa, 2**128).
OVERFLOW = 2.0**128 - 2.0**103


def test_rounding_boundary_of_float32():
    below = np.nextafter(OVERFLOW, 0)
    with np.errstate(over="ignore"):
        assert np.isfinite(np.float32(below)) and np.isinf(np.float32(OVERFLOW))
    check_dtype_range(np.array([[below, -below]]), np.float32)  # rounds to the largest
    with pytest.raises(ValueError, match=r"in column 1, row 0: -3\.40282\d*e\+38"):
        check_dtype_range(np.array([[below, -OVERFLOW]]), np.float32)


def test_message_names_column_feature_row_dtype_and_count():
    X = np.zeros((4, 3))
    X[2, 1], X[3, 2] = 1e39, -1e300
    with pytest.raises(ValueError, match=(
            r"^Input X contains a value too large for dtype\('float32'\) in column 1 "
            r"\('b'\), row 2: 1e\+39, beyond 3\.4028234663852886e\+38 \(2 such value\(s\)\)\. "
            r"The model computes in float32: scale the data, or train with "
            r"dtype=np\.float64\.$")):
        check_dtype_range(X, np.float32, "X", np.array(["a", "b", "c"], dtype=object))


def test_one_dimensional_and_sparse_inputs():
    with pytest.raises(ValueError, match=r"Input y contains .* at row 3: -1e\+40"):
        check_dtype_range(np.array([0.0, 1.0, 2.0, -1e40]), np.float32, "y")
    X = sp.csr_matrix(([1.0, 5e38, 2.0], ([0, 2, 3], [1, 0, 2])), shape=(4, 3))
    with pytest.raises(ValueError, match=r"in column 0, row 2: 5e\+38"):
        check_dtype_range(X, np.float32)


@pytest.mark.parametrize(("values", "dtype"), [
    (np.array([[1e300]]), np.float64),              # float64 model: nothing to check
    (np.array([[3e38]], dtype=np.float32), np.float32),   # already float32
    (np.array([[7]], dtype=np.int64), np.float32),   # integers cast to float32 fit
    (np.zeros((0, 3)), np.float32),
], ids=["float64-model", "float32-input", "integers", "empty"])
def test_values_the_dtype_holds_pass(values, dtype):
    check_dtype_range(values, dtype)
