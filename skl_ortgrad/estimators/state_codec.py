"""The state of an estimator as JSON plus tensors, read back without running any code.

:class:`StateEncoder` turns parameters and fitted attributes into JSON values; numeric
arrays become ONNX tensors referenced by name, stored once however often they appear.
:class:`StateDecoder` reads them back, accepting only what the encoder writes: JSON
values, tensors of a numeric or boolean type, and objects of a known class (the training
objects of skl_ortgrad, a short list of scikit-learn models and, since format 2 of the
files, of scikit-learn transformers) rebuilt from their parameters and fitted state.
Nothing is imported or called by name from the data, unlike pickle.

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
scikit-learn transformer (transformers)    ``{"$transformer": "...StandardScaler",
                                           "params", "state"}``
slice (transformers)                       ``{"$slice": [start, stop, step]}``
other 1-D object array (transformers)      ``{"$objects": [...]}`` (encoded items)
an object of a caller's extension          ``{"$<tag>": ...}`` (see ``objects``)
=========================================  ============================================

The forms marked *transformers* are written and read with ``transformers=True``: files
of format 2 (pipelines, and the pipelines ``OnnxGradient*`` wrap), not those of format 1.
A scikit-learn model keeps its public fitted attributes (``coef_``...), from which
:func:`_private_state` rebuilds what it needs to predict; a transformer keeps every
attribute that is not a parameter, private ones included (``OneHotEncoder``'s
``_n_features_outs``, ``ColumnTransformer``'s ``output_indices_``...): those are
scikit-learn's own state for its version, which a file of a pipeline records.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from onnx import TensorProto, numpy_helper
from sklearn.compose import ColumnTransformer
from sklearn.impute import SimpleImputer
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
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import (
    FunctionTransformer,
    LabelBinarizer,
    MaxAbsScaler,
    MinMaxScaler,
    OneHotEncoder,
    RobustScaler,
    StandardScaler,
)

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

#: The scikit-learn transformers and containers a saved pipeline may hold: their
#: parameters and fitted state are numbers, strings, arrays, slices and the transformers
#: themselves. ``FunctionTransformer`` is there for ``ColumnTransformer``'s
#: ``remainder='passthrough'``, which it fits as a ``FunctionTransformer()`` (the
#: identity): one with a function cannot be encoded (a function is code), nor decoded
#: (scikit-learn's validation wants a callable, which JSON cannot give).
SKLEARN_TRANSFORMERS: dict[str, type] = {
    f"sklearn.{module}.{cls.__name__}": cls
    for module, classes in (
        ("compose", (ColumnTransformer,)),
        ("impute", (SimpleImputer,)),
        ("pipeline", (Pipeline,)),
        ("preprocessing", (FunctionTransformer, MaxAbsScaler, MinMaxScaler, OneHotEncoder,
                           RobustScaler, StandardScaler)),
    )
    for cls in classes
}

# Tensor types a state may hold (numpy_helper reads them back with their dtype).
_TENSOR_KINDS = "biuf"
# Dtypes a transformer's state may name (SimpleImputer's _fit_dtype of strings: object).
_DTYPE_KINDS = _TENSOR_KINDS + "OU"

#: Encodes an object of a caller's class: (encoder, value, where) -> its JSON form.
ObjectEncoder = Callable[["StateEncoder", Any, str], Any]
#: Decodes a caller's tag: (decoder, JSON form, where) -> the object.
ObjectDecoder = Callable[["StateDecoder", dict, str], Any]


def _registered(registry: dict[str, type], value: Any) -> str | None:
    """The name ``value``'s exact class has in ``registry`` (None for a subclass)."""
    return next((name for name, cls in registry.items() if type(value) is cls), None)


def check_attribute_names(values: Any, where: str, forbidden: set[str]) -> None:
    """``values`` is a dict of attributes to set: identifiers, none of them dunder or
    ``forbidden``.

    Raises
    ------
    ValueError
        Naming the attributes that cannot be set.
    """
    if not isinstance(values, dict):
        raise ValueError(f"{where} is a dict.")
    bad = [name for name in values
           if not name.isidentifier() or name.startswith("__") or name in forbidden]
    if bad:
        raise ValueError(f"{where} holds attributes that cannot be set: {sorted(bad)}.")


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

    Parameters
    ----------
    transformers : bool
        Whether the scikit-learn transformers and containers of
        :data:`SKLEARN_TRANSFORMERS` (slices, object arrays) may be encoded: files of
        format 2.
    objects : mapping of type to callable, optional
        Encoders of the caller's own classes (exact types), tried first: how a pipeline
        file writes the estimators of skl_ortgrad it holds.

    Attributes
    ----------
    tensors : list of onnx.TensorProto
        Every array encoded, once per distinct content.
    """

    def __init__(self, transformers: bool = False,
                 objects: Mapping[type, ObjectEncoder] | None = None) -> None:
        self.transformers = transformers
        self.objects = dict(objects or {})
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
        handler = self.objects.get(type(value))
        if handler is not None:
            return handler(self, value, where)
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
            if value.kind not in (_DTYPE_KINDS if self.transformers else _TENSOR_KINDS):
                raise ValueError(f"{where}: the dtype {value} cannot be saved.")
            return {"$dtype": value.str if value.kind == "U" else value.name}
        if self.transformers and isinstance(value, slice):
            return {"$slice": self.encode([value.start, value.stop, value.step], where)}
        if _training_classes().get(type(value).__name__) is type(value):
            return {"$learning": type(value).__name__,
                    "params": self.encode(value.get_params(deep=False), where, random_state)}
        name = _registered(SKLEARN_MODELS, value)
        if name is not None:
            return {"$sklearn": name,
                    "params": self.encode(value.get_params(deep=False), f"{where}.params"),
                    "fitted": self.encode(_fitted_attributes(value), f"{where}.fitted")}
        name = _registered(SKLEARN_TRANSFORMERS, value) if self.transformers else None
        if name is not None:
            params = value.get_params(deep=False)
            state = {key: item for key, item in vars(value).items() if key not in params}
            return {"$transformer": name,
                    "params": self.encode(params, f"{where}.params"),
                    "state": self.encode(state, f"{where}.state")}
        if random_state and isinstance(value, np.random.RandomState):
            return {"$random_state": self.encode(list(value.get_state()), where)}
        if callable(value):
            raise ValueError(
                f"{where} = {value!r} is a function (or a class): code, which the format "
                "cannot hold (loading runs no code). Use pickle for it (pickles execute "
                "code when loaded: only load those you trust)."
            )
        models = sorted(SKLEARN_MODELS) + (sorted(SKLEARN_TRANSFORMERS) if self.transformers
                                           else [])
        raise ValueError(
            f"{where} = {value!r} ({type(value).__name__}) cannot be saved: the format "
            "holds numbers, strings, arrays, skl_ortgrad's training objects and the "
            f"scikit-learn models {models}. Use pickle for anything else "
            "(pickles execute code when loaded: only load those you trust)."
        )

    def _array(self, array: np.ndarray, where: str) -> Any:
        if (array.dtype.kind in "UO" and array.ndim == 1
                and all(isinstance(item, str) for item in array)):
            # Labels and feature names.
            return {"$strings": array.tolist(), "dtype": array.dtype.str}
        if self.transformers and array.dtype.kind == "O" and array.ndim == 1:
            # OneHotEncoder's drop_idx_: indices or None.
            return {"$objects": [self.encode(item, f"{where}[{i}]")
                                 for i, item in enumerate(array)]}
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
    transformers : bool
        Whether the forms ``$transformer``, ``$slice`` and ``$objects`` (and dtypes of
        strings) are read: files of format 2, not those of format 1.
    objects : mapping of str to callable, optional
        Decoders of the caller's own tags (``"$estimator"``), the counterparts of
        :class:`StateEncoder`'s ``objects``.
    """

    def __init__(self, tensors: list[TensorProto], transformers: bool = False,
                 objects: Mapping[str, ObjectDecoder] | None = None) -> None:
        self._tensors = {tensor.name: tensor for tensor in tensors}
        self.transformers = transformers
        self.objects = dict(objects or {})

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
        readers = {
            "$tuple": self._tuple, "$dict": self._dict, "$tensor": self._tensor,
            "$strings": self._strings, "$scalar": self._scalar, "$type": self._dtype,
            "$dtype": self._dtype, "$learning": self._learning, "$sklearn": self._sklearn,
            "$random_state": self._random_state,
        }
        if self.transformers:
            readers.update({"$transformer": self._transformer, "$slice": self._slice,
                            "$objects": self._objects})
        if tag in self.objects:
            return self.objects[tag](self, value, where)
        reader = readers.get(tag)
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
        kinds = _DTYPE_KINDS if self.transformers and tag == "$dtype" else _TENSOR_KINDS
        dtype = np.dtype(self._dtype_name(value[tag], where, kinds=kinds))
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

    def _transformer(self, value: dict, where: str) -> Any:
        self._fields(value, {"$transformer", "params", "state"}, where)
        name = value["$transformer"]
        cls = SKLEARN_TRANSFORMERS.get(name) if isinstance(name, str) else None
        if cls is None:
            raise ValueError(f"{where}: {name!r} is not one of the scikit-learn transformers "
                             f"the format holds ({sorted(SKLEARN_TRANSFORMERS)}).")
        model = self._instance(cls, value, where)
        try:
            # scikit-learn's own checks (InvalidParameterError is a ValueError).
            model._validate_params()
        except (TypeError, ValueError) as exc:
            raise ValueError(f"{where}: {cls.__name__} refuses its parameters: {exc}") from exc
        state = self.decode(value["state"], f"{where}.state")
        check_attribute_names(state, f"{where}.state", forbidden=set(model.get_params(deep=False)))
        model.__dict__.update(state)
        return model

    def _slice(self, value: dict, where: str) -> slice:
        self._fields(value, {"$slice"}, where)
        bounds = value["$slice"]
        if not isinstance(bounds, list) or len(bounds) != 3 or not all(
                bound is None or (isinstance(bound, int) and not isinstance(bound, bool))
                for bound in bounds):
            raise ValueError(f"{where}: a slice holds [start, stop, step], integers or null.")
        return slice(*bounds)

    def _objects(self, value: dict, where: str) -> np.ndarray:
        self._fields(value, {"$objects"}, where)
        items = self.decode(value["$objects"], where)
        if not isinstance(items, list):
            raise ValueError(f"{where}: an array of objects holds a list.")
        # Item by item: np.array would stack items that are arrays into more dimensions.
        array = np.empty(len(items), dtype=object)
        for i, item in enumerate(items):
            array[i] = item
        return array

    def _random_state(self, value: dict, where: str) -> np.random.RandomState:
        self._fields(value, {"$random_state"}, where)
        state = self.decode(value["$random_state"], where)
        rng = blank_random_state()
        try:
            rng.set_state(tuple(state))
        except (TypeError, ValueError, IndexError) as exc:
            raise ValueError(f"{where}: not the state of a RandomState: {exc}") from exc
        return rng
