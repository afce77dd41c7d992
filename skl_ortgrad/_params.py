"""Constructor parameters: their names memoized per class (the mixin that gives them to
scikit-learn's ``get_params``), and their validation memoized per set of values."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import validate_parameter_constraints

from skl_ortgrad._cache import BoundedCache

_NAMES: dict[type, list[str]] = {}


def param_names(cls: type) -> list[str]:
    """The parameters of ``cls.__init__``, sorted: scikit-learn's ``_get_param_names``
    (its rule and its errors), computed once per class.

    scikit-learn reads the constructor's signature with ``inspect.signature`` at every
    ``get_params`` (35-40 µs here), which every ``fit`` and ``partial_fit`` (parameter
    validation), every ``clone`` of a grid search and every nested ``set_params`` runs.
    """
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = BaseEstimator._get_param_names.__func__(cls)
    # A copy: callers may change the list they get, as they may scikit-learn's.
    return list(names)


class MemoizedParamNames:
    """Mixin before :class:`sklearn.base.BaseEstimator` in the bases: its
    ``_get_param_names`` is :func:`param_names`, so ``get_params``, ``set_params``,
    ``clone`` and the parameter validation stop reading the signature at every call."""

    @classmethod
    def _get_param_names(cls) -> list[str]:
        return param_names(cls)


#: The (class, parameter values) pairs that passed scikit-learn's parameter validation.
VALIDATED: BoundedCache[bool] = BoundedCache(256)
#: Values that cannot change once made, and compare equal only to equal values of their
#: type: what a key of parameter values may hold.
_PLAIN_TYPES = (type(None), bool, int, float, str, type, np.number, np.bool_, np.str_)


def _plain_key(params: dict[str, Any]) -> Hashable | None:
    """The parameters' names, types and values when every value is plain
    (:data:`_PLAIN_TYPES`), else None (a learning-rate object, a dict, a generator...
    could change after being validated)."""
    values = tuple(params.values())
    if not all(isinstance(value, _PLAIN_TYPES) for value in values):
        return None
    return tuple(params), tuple(map(type, values)), values


class MemoizedParamValidation:
    """Mixin before :class:`sklearn.base.BaseEstimator` in the bases: its
    ``_validate_params`` validates as scikit-learn's does (``_parameter_constraints``,
    its errors), once per class and set of parameter values.

    Every ``fit`` and ``partial_fit`` validates the parameters, as scikit-learn's SGD
    estimators do: 85 µs, a tenth of a small fit, spent again on the same values by every
    fit of a grid search and every call of a ``partial_fit`` stream. Parameters holding
    anything but plain values (:func:`_plain_key`) are validated every time.
    """

    def _validate_params(self) -> None:
        params = self.get_params(deep=False)

        def validate() -> bool:
            validate_parameter_constraints(
                self._parameter_constraints, params, caller_name=type(self).__name__)
            return True

        key = _plain_key(params)
        if key is None:
            validate()
        else:
            VALIDATED.get((type(self), key), validate)
