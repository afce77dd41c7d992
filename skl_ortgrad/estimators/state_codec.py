"""The state of an estimator as JSON plus tensors, read back without running any code.

:class:`StateEncoder` turns parameters and fitted attributes into JSON values; numeric
arrays become ONNX tensors referenced by name, stored once however often they appear.
:class:`StateDecoder` reads them back, accepting only what the encoder writes: JSON
values, tensors of a numeric or boolean type, and objects of a known class (the training
objects of skl_ortgrad, a short list of scikit-learn models) rebuilt from their
parameters. Nothing is imported or called by name from the data, unlike pickle.

Encoded forms (``$``-tagged dicts are the only JSON objects written):

=========================================  ============================================
value                                      JSON
=========================================  ============================================
None, bool, int, float, str                itself
list                                       a list of encoded items
tuple, dict with str keys                  ``{"$tuple": [...]}``, ``{"$dict": {...}}``
numeric or boolean ndarray                 ``{"$tensor": name}``
1-D ndarray of strings                     ``{"$strings": [...], "dtype": "<U3"}``
numpy scalar (numeric or boolean)          ``{"$scalar": "float32", "value": 0.5}``
numpy scalar type, dtype                   ``{"$type": "float32"}``, ``{"$dtype": ...}``
training object                            ``{"$learning": "LearningRateSGD", "params"}``
scikit-learn model                         ``{"$sklearn": "...Ridge", "params", "fitted"}``
numpy RandomState                          ``{"$random_state": [...]}`` (state only)
=========================================  ============================================
"""

from __future__ import annotations

import hashlib
import inspect
from typing import Any

import numpy as np
from onnx import TensorProto, numpy_helper
from sklearn.linear_model import (
    ElasticNet,
    Lasso,
    LinearRegression,
    LogisticRegression,
    Ridge,
    SGDClassifier,
    SGDRegressor,
)
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.preprocessing import LabelBinarizer

from skl_ortgrad.optim.base import BaseLearningObject
from skl_ortgrad.runtime.random_state import blank_random_state

#: The scikit-learn models an estimator may wrap (``OnnxGradient*``) and still be saved:
#: their fitted attributes are public arrays and numbers.
SKLEARN_MODELS: dict[str, type] = {
    f"sklearn.{module}.{cls.__name__}": cls
    for module, classes in (
        ("linear_model", (ElasticNet, Lasso, LinearRegression, LogisticRegression, Ridge,
                          SGDClassifier, SGDRegressor)),
        ("neural_network", (MLPClassifier, MLPRegressor)),
    )
    for cls in classes
}

# Tensor types a state may hold (numpy_helper reads them back with their dtype).
_TENSOR_KINDS = "biuf"


def _training_classes() -> dict[str, type]:
    """Concrete training objects of skl_ortgrad (learning rates, losses, penalties)."""
    found, stack = {}, [BaseLearningObject]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls.__module__.startswith("skl_ortgrad.") and not inspect.isabstract(cls):
            found[cls.__name__] = cls
    return found


def _fitted_attributes(model: Any) -> dict[str, Any]:
    """The public fitted attributes of a scikit-learn model (``coef_``, ``classes_``...)."""
    return {
        name: value for name, value in vars(model).items()
        if name.endswith("_") and not name.startswith("_")
    }


def _private_state(model: Any) -> None:
    """Rebuild the private attribute a scikit-learn model needs to predict (in place):
    ``MLPClassifier`` decodes its outputs with a ``LabelBinarizer`` of its classes."""
    if isinstance(model, MLPClassifier) and hasattr(model, "classes_"):
        model._label_binarizer = LabelBinarizer().fit(model.classes_)


class StateEncoder:
    """Encode values into JSON, collecting the tensors they reference.

    Attributes
    ----------
    tensors : list of onnx.TensorProto
        Every array encoded, once per distinct content.
    """

    def __init__(self) -> None:
        self.tensors: list[TensorProto] = []
        self._names: dict[tuple, str] = {}

    def encode(self, value: Any, where: str, random_state: bool = False) -> Any:
        """Return the JSON form of ``value``.

        Parameters
        ----------
        value : any
            What to encode.
        where : str
            Its path (``"params.learning_rate"``), named in errors.
        random_state : bool
            Whether a ``RandomState`` may be encoded (its state): a training state's
            shuffling generator may, a parameter may not (pickle would keep it shared
            with the generators created from it; the file cannot).

        Raises
        ------
        ValueError
            If ``value`` (or a part of it) is of a type the format does not hold.
        """
        if isinstance(value, np.generic):
            # Before the Python types: np.float64 is a float, and would lose its type.
            if value.dtype.kind not in _TENSOR_KINDS:
                raise ValueError(f"{where}: numpy scalars of dtype {value.dtype} cannot be saved.")
            return {"$scalar": value.dtype.name, "value": value.item()}
        if value is None or isinstance(value, bool | int | float | str):
            return value
        if isinstance(value, list):
            return [self.encode(item, f"{where}[{i}]", random_state)
                    for i, item in enumerate(value)]
        if isinstance(value, tuple):
            return {"$tuple": self.encode(list(value), where, random_state)}
        if isinstance(value, dict) and all(isinstance(key, str) for key in value):
            return {"$dict": {key: self.encode(item, f"{where}.{key}", random_state)
                              for key, item in value.items()}}
        if isinstance(value, np.ndarray):
            return self._array(value, where)
        if isinstance(value, type) and issubclass(value, np.generic):
            return {"$type": np.dtype(value).name}
        if isinstance(value, np.dtype):
            return {"$dtype": value.name}
        if _training_classes().get(type(value).__name__) is type(value):
            return {"$learning": type(value).__name__,
                    "params": self.encode(value.get_params(deep=False), where, random_state)}
        name = next((name for name, cls in SKLEARN_MODELS.items() if type(value) is cls), None)
        if name is not None:
            return {"$sklearn": name,
                    "params": self.encode(value.get_params(deep=False), f"{where}.params"),
                    "fitted": self.encode(_fitted_attributes(value), f"{where}.fitted")}
        if random_state and isinstance(value, np.random.RandomState):
            return {"$random_state": self.encode(list(value.get_state()), where)}
        raise ValueError(
            f"{where} = {value!r} ({type(value).__name__}) cannot be saved: the format "
            "holds numbers, strings, arrays, skl_ortgrad's training objects and the "
            f"scikit-learn models {sorted(SKLEARN_MODELS)}. Use pickle for anything else "
            "(pickles execute code when loaded: only load those you trust)."
        )

    def _array(self, array: np.ndarray, where: str) -> Any:
        if (array.dtype.kind in "UO" and array.ndim == 1
                and all(isinstance(item, str) for item in array)):
            # Labels and feature names.
            return {"$strings": array.tolist(), "dtype": array.dtype.str}
        if array.dtype.kind not in _TENSOR_KINDS:
            raise ValueError(f"{where}: arrays of dtype {array.dtype} cannot be saved.")
        # Not np.ascontiguousarray: it makes a 0-d array 1-d.
        data = np.array(array, order="C", copy=None)
        key = (data.dtype.str, data.shape, hashlib.sha256(data.tobytes()).hexdigest())
        if key not in self._names:
            self._names[key] = f"skl_ortgrad.state.{len(self.tensors)}"
            self.tensors.append(numpy_helper.from_array(data, self._names[key]))
        return {"$tensor": self._names[key]}


class StateDecoder:
    """Decode what :class:`StateEncoder` wrote, refusing anything else.

    Parameters
    ----------
    tensors : list of onnx.TensorProto
        The tensors the JSON refers to.
    """

    def __init__(self, tensors: list[TensorProto]) -> None:
        self._tensors = {tensor.name: tensor for tensor in tensors}

    def decode(self, value: Any, where: str) -> Any:
        """Return the value ``value`` encodes.

        Raises
        ------
        ValueError
            If ``value`` is not a form :class:`StateEncoder` writes, names a tensor that
            is not there or of another type, or an unknown class, or if a class refuses
            the parameters given.
        """
        if value is None or isinstance(value, bool | int | float | str):
            return value
        if isinstance(value, list):
            return [self.decode(item, f"{where}[{i}]") for i, item in enumerate(value)]
        if not isinstance(value, dict) or len([k for k in value if k.startswith("$")]) != 1:
            raise ValueError(f"{where}: {value!r} is not a value the format writes.")
        tag = next(key for key in value if key.startswith("$"))
        reader = {
            "$tuple": self._tuple, "$dict": self._dict, "$tensor": self._tensor,
            "$strings": self._strings, "$scalar": self._scalar, "$type": self._dtype,
            "$dtype": self._dtype, "$learning": self._learning, "$sklearn": self._sklearn,
            "$random_state": self._random_state,
        }.get(tag)
        if reader is None:
            raise ValueError(f"{where}: unknown tag {tag!r}.")
        return reader(value, where)

    @staticmethod
    def _fields(value: dict, expected: set[str], where: str) -> None:
        if set(value) != expected:
            raise ValueError(
                f"{where}: expected the fields {sorted(expected)}, got {sorted(value)}."
            )

    def _tuple(self, value: dict, where: str) -> tuple:
        self._fields(value, {"$tuple"}, where)
        items = self.decode(value["$tuple"], where)
        if not isinstance(items, list):
            raise ValueError(f"{where}: a tuple holds a list.")
        return tuple(items)

    def _dict(self, value: dict, where: str) -> dict:
        self._fields(value, {"$dict"}, where)
        if not isinstance(value["$dict"], dict):
            raise ValueError(f"{where}: a dict holds an object.")
        return {key: self.decode(item, f"{where}.{key}") for key, item in value["$dict"].items()}

    def _tensor(self, value: dict, where: str) -> np.ndarray:
        self._fields(value, {"$tensor"}, where)
        tensor = self._tensors.get(value["$tensor"]) if isinstance(value["$tensor"], str) else None
        if tensor is None:
            raise ValueError(f"{where}: no tensor named {value['$tensor']!r} in the file.")
        if tensor.data_location == TensorProto.EXTERNAL:
            # numpy_helper would read it from the current directory.
            raise ValueError(f"{where}: tensor {tensor.name!r} is stored as external data.")
        array = numpy_helper.to_array(tensor)
        if array.dtype.kind not in _TENSOR_KINDS:
            raise ValueError(f"{where}: tensor {tensor.name!r} has dtype {array.dtype}.")
        # to_array may return a read-only view of the file's bytes: training writes in place.
        return np.array(array, order="C")

    def _strings(self, value: dict, where: str) -> np.ndarray:
        self._fields(value, {"$strings", "dtype"}, where)
        dtype = np.dtype(self._dtype_name(value["dtype"], where, kinds="UO"))
        items = value["$strings"]
        if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
            raise ValueError(f"{where}: an array of strings holds a list of strings.")
        return np.array(items, dtype=dtype)

    def _scalar(self, value: dict, where: str) -> np.generic:
        self._fields(value, {"$scalar", "value"}, where)
        dtype = np.dtype(self._dtype_name(value["$scalar"], where, kinds=_TENSOR_KINDS))
        if isinstance(value["value"], str) or not isinstance(value["value"], bool | int | float):
            raise ValueError(f"{where}: a numpy scalar holds a number.")
        return dtype.type(value["value"])

    def _dtype(self, value: dict, where: str) -> Any:
        tag = next(iter(value))
        self._fields(value, {tag}, where)
        dtype = np.dtype(self._dtype_name(value[tag], where, kinds=_TENSOR_KINDS))
        return dtype.type if tag == "$type" else dtype

    @staticmethod
    def _dtype_name(name: Any, where: str, kinds: str) -> str:
        try:
            dtype = np.dtype(name) if isinstance(name, str) else None
        except TypeError:
            dtype = None
        if dtype is None or dtype.kind not in kinds:
            raise ValueError(f"{where}: {name!r} is not a dtype the format uses.")
        return name

    def _instance(self, cls: type, value: dict, where: str) -> Any:
        params = self.decode(value["params"], f"{where}.params")
        if not isinstance(params, dict):
            raise ValueError(f"{where}: parameters are a dict.")
        try:
            return cls(**params)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {cls.__name__} refuses its parameters: {exc}") from exc

    def _learning(self, value: dict, where: str) -> BaseLearningObject:
        self._fields(value, {"$learning", "params"}, where)
        cls = _training_classes().get(value["$learning"]) if isinstance(
            value["$learning"], str) else None
        if cls is None:
            raise ValueError(f"{where}: {value['$learning']!r} is not a training object of "
                             "skl_ortgrad.")
        return self._instance(cls, value, where)

    def _sklearn(self, value: dict, where: str) -> Any:
        self._fields(value, {"$sklearn", "params", "fitted"}, where)
        cls = SKLEARN_MODELS.get(value["$sklearn"]) if isinstance(value["$sklearn"], str) else None
        if cls is None:
            raise ValueError(f"{where}: {value['$sklearn']!r} is not one of the scikit-learn "
                             f"models the format holds ({sorted(SKLEARN_MODELS)}).")
        model = self._instance(cls, value, where)
        fitted = self.decode(value["fitted"], f"{where}.fitted")
        if not isinstance(fitted, dict) or not all(
            name.endswith("_") and name.isidentifier() and not name.startswith("_")
            for name in fitted
        ):
            raise ValueError(f"{where}: fitted attributes are public names ending with '_'.")
        model.__dict__.update(fitted)
        _private_state(model)
        return model

    def _random_state(self, value: dict, where: str) -> np.random.RandomState:
        self._fields(value, {"$random_state"}, where)
        state = self.decode(value["$random_state"], where)
        rng = blank_random_state()
        try:
            rng.set_state(tuple(state))
        except (TypeError, ValueError, IndexError) as exc:
            raise ValueError(f"{where}: not the state of a RandomState: {exc}") from exc
        return rng
