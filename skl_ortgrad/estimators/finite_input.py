"""scikit-learn's ``validate_data`` with a cheaper check that a dense ``X`` is finite.

scikit-learn checks that a dense float ``X`` holds no NaN or infinity with one sum over
all of its values (``_assert_all_finite``): 1.8 ms for 100k x 100 float32 on this machine
kind, a tenth of a ``partial_fit`` epoch at the defaults, paid at every call. A
matrix-vector product with a vector of ones finds the same in 0.7 ms (BLAS): a row's sum
is finite when all its values are, and NaN or infinite as soon as one is not. When a sum
is not finite (a non-finite value, or finite values whose sum overflows), scikit-learn's
own check runs and decides, with its own error message.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sklearn.utils import check_array
from sklearn.utils.validation import validate_data


def validate_finite_data(estimator: Any, X: Any, y: Any = "no_validation",
                         **params: Any) -> Any:
    """``validate_data(estimator, X, y, **params)``: the same result and the same errors,
    the finiteness of a dense ``X`` checked by its row sums (see the module).

    ``params`` must not set ``ensure_all_finite``: ``X`` is always required finite, as
    scikit-learn's default; ``y`` is checked by ``validate_data`` itself.
    """
    result = validate_data(estimator, X, y, ensure_all_finite=False, **params)
    checked = result if isinstance(y, str) and y == "no_validation" else result[0]
    if not _row_sums_finite(checked):
        check_array(checked, accept_sparse=True, dtype=None, ensure_2d=False,
                    estimator=estimator, input_name="X")
    return result


def _row_sums_finite(X: Any) -> bool:
    """Whether ``X`` is a dense 2-D float array whose row sums are all finite (then so
    are its values); False for anything else (sparse matrices included)."""
    if not isinstance(X, np.ndarray) or X.dtype.kind != "f" or X.ndim != 2:
        return False
    with np.errstate(over="ignore", invalid="ignore"):
        sums = X @ np.ones(X.shape[1], dtype=X.dtype)
    return bool(np.isfinite(sums).all())
