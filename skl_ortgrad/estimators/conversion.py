"""skl2onnx conversions, memoized on everything but the values of the weights.

A small fit spent 10-18 ms in skl2onnx (``to_onnx`` builds a topology, resolves
shapes, checks every operator's version) to convert a model whose graph was the same as
at the previous fit: only the values of the weights differ (an MLP's random initial
weights, a grid search's folds), and sometimes not even those (the zero weights of an
SGD template). :func:`convert_model` converts each distinct model once and returns a
copy with the current weights written in.

Where the weights go in the graph is learnt once per model, by converting a *probe*:
a shallow copy of the model whose weights (its public fitted float arrays: ``coef_``,
``coefs_``...) hold distinct markers, integers from :data:`_MARKER_BASE` on. Every
initializer of the probe then either holds only markers (a weight: the markers say
which element of which array each value is, whatever transposition or reshape the
converter applied), or none (a constant). Anything else (a marker in a node attribute,
a marker transformed by the converter) means the weights are not plain initializers,
and that model is converted afresh at every call.

A copy is identical to a fresh conversion of the same model (checked by the tests on
the SGD and MLP templates). One case is not: skl2onnx stores initializers with equal
content once (the nodes of both read the same tensor), which the probe's distinct
markers never trigger; when the current weights would (a weight equal to another or to
a constant of the same shape), :func:`convert_model` converts afresh, so that the result
is always what skl2onnx gives.
"""

from __future__ import annotations

import copy
from collections.abc import Hashable, Iterator
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from sklearn.base import BaseEstimator

from skl_ortgrad._cache import BoundedCache, Unfreezable, freeze
from skl_ortgrad.graph.model import TARGET_OPSET

# Markers are the integers from 2**22 to 2**24, exact in float32: 12.5 million weight
# values, far from the constants converters write (0, 1, -1, small shapes).
_MARKER_BASE = 2.0**22
_MARKER_END = 2.0**24
# Element types a weight can be written back into, with the repeated field that holds
# their values when the converter did not use raw_data.
_MARKED_TYPES = (np.dtype(np.float32), np.dtype(np.float64))
_FLOAT_FIELDS = {onnx.TensorProto.FLOAT: "float_data", onnx.TensorProto.DOUBLE: "double_data"}


def _is_weight(name: str, value: Any) -> bool:
    """Whether attribute ``name`` of a model holds weights: a public fitted float array
    (``coef_``) or a non-empty list of them (``coefs_``); ``classes_`` is a label set."""
    if not name.endswith("_") or name.startswith("_") or name == "classes_":
        return False
    values = value if isinstance(value, list | tuple) and value else [value]
    # Markers are exact in float32 and float64 only.
    return all(isinstance(v, np.ndarray) and v.dtype in _MARKED_TYPES for v in values)


def _arrays(value: Any) -> list[np.ndarray]:
    return list(value) if isinstance(value, list | tuple) else [value]


def _describe(value: Any) -> Hashable:
    """``value`` as a key: :func:`~skl_ortgrad._cache.freeze`, and for a scikit-learn
    object inside the model (an MLP's ``LabelBinarizer``) its type and attributes.

    Raises
    ------
    Unfreezable
        When some part has no reliable key.
    """
    if isinstance(value, BaseEstimator):
        return "object", freeze(type(value)), tuple(
            (name, _describe(item)) for name, item in sorted(vars(value).items())
        )
    if isinstance(value, list | tuple):
        return type(value).__name__, tuple(_describe(item) for item in value)
    return freeze(value)


def _model_key(model: Any, weights: dict[str, Any]) -> Hashable:
    """The model's type and every attribute (parameters, fitted attributes, private
    state such as an MLP's label binarizer), the weights by their shapes and types only."""
    return freeze(type(model)), tuple(
        (name, ("weights", tuple((a.shape, a.dtype.str) for a in _arrays(value))))
        if name in weights else (name, _describe(value))
        for name, value in sorted(vars(model).items())
    )


def _tensors(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    """Every tensor stored in node attributes of ``graph`` and its subgraphs."""
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.HasField("t"):
                yield attribute.t
            yield from attribute.tensors
            for sub in [attribute.g] if attribute.HasField("g") else []:
                yield from sub.initializer
                yield from _tensors(sub)
            for sub in attribute.graphs:
                yield from sub.initializer
                yield from _tensors(sub)


def _attribute_numbers(graph: onnx.GraphProto) -> Iterator[float]:
    """Every number held in a node attribute of ``graph`` and its subgraphs."""
    for node in graph.node:
        for attribute in node.attribute:
            yield attribute.f
            yield attribute.i
            yield from attribute.floats
            yield from attribute.ints
            for sub in [attribute.g, *attribute.graphs]:
                yield from _attribute_numbers(sub)


def _marked(values: np.ndarray) -> np.ndarray:
    """Which of ``values`` (float64) lie in the markers' range, either sign."""
    magnitude = np.abs(values)
    return (magnitude >= _MARKER_BASE) & (magnitude < _MARKER_END)


def _signature(data_type: int, dims: Any, values: np.ndarray) -> tuple:
    """What skl2onnx compares to merge two initializers (up to their storage)."""
    return data_type, tuple(dims), values.tobytes()


class _Conversion:
    """A probe's graph and where each weight value goes in it.

    Parameters
    ----------
    model : onnx.ModelProto
        The probe's conversion.
    gathers : list of (str, numpy.ndarray, numpy.dtype, str)
        Per weight initializer: its name, the index of each of its values in the
        weights flattened one after the other, its element type and the field holding
        its values.
    constants : set of tuple
        :func:`_signature` of every other initializer.
    """

    def __init__(self, model: onnx.ModelProto, gathers: list[tuple], constants: set) -> None:
        self.model = model
        self.gathers = gathers
        self.constants = constants

    @classmethod
    def probe(cls, model: Any, weights: dict[str, Any], convert: Any) -> _Conversion | None:
        """Convert a copy of ``model`` whose weights hold markers and read where they
        went; None when the weights are not plain initializers."""
        end = _MARKER_BASE + sum(a.size for value in weights.values() for a in _arrays(value))
        if end > _MARKER_END:
            return None
        probe = copy.copy(model)
        start = _MARKER_BASE
        for name, value in weights.items():
            marked = []
            for array in _arrays(value):
                marked.append(
                    (start + np.arange(array.size)).reshape(array.shape).astype(array.dtype)
                )
                start += array.size
            setattr(probe, name, marked if isinstance(value, list | tuple) else marked[0])
        onx = convert(probe)
        graph = onx.graph
        if graph.sparse_initializer or any(
            _marked(np.asarray(numpy_helper.to_array(t), dtype=np.float64).ravel()).any()
            for t in _tensors(graph) if t.data_type != onnx.TensorProto.STRING
        ) or _marked(np.fromiter(_attribute_numbers(graph), dtype=np.float64)).any():
            return None
        gathers, constants = [], set()
        for init in graph.initializer:
            if init.data_type == onnx.TensorProto.STRING:
                continue
            array = numpy_helper.to_array(init)
            values = array.astype(np.float64).ravel()
            marked = _marked(values)
            if not marked.any():
                constants.add(_signature(init.data_type, init.dims, array))
                continue
            # Only markers, unchanged: anything else is a value the converter computed.
            if not marked.all() or init.data_type not in _FLOAT_FIELDS or (
                values < 0).any() or (values >= end).any() or (values != np.round(values)).any():
                return None
            field = "raw_data" if init.raw_data else _FLOAT_FIELDS[init.data_type]
            index = (values - _MARKER_BASE).astype(np.int64)
            gathers.append((init.name, index, array.dtype, field))
        return cls(onx, gathers, constants)

    def instantiate(self, weights: dict[str, Any]) -> onnx.ModelProto | None:
        """A copy of the probe's graph holding ``weights``; None when skl2onnx would have
        merged one of them with another initializer (see the module docstring)."""
        flat = np.concatenate([
            np.asarray(a, dtype=np.float64).ravel()
            for value in weights.values() for a in _arrays(value)
        ])
        result = onnx.ModelProto()
        result.CopyFrom(self.model)
        initializers = {init.name: init for init in result.graph.initializer}
        seen = set(self.constants)
        for name, index, dtype, field in self.gathers:
            init = initializers[name]
            values = flat[index].astype(dtype)
            signature = _signature(init.data_type, init.dims, values)
            if signature in seen:
                return None
            seen.add(signature)
            if field == "raw_data":
                init.raw_data = values.tobytes()
            else:
                stored = getattr(init, field)
                del stored[:]
                stored.extend(values.tolist())
        return result


#: Conversions by model (weights by shape), input and conversion options.
CONVERSIONS: BoundedCache[_Conversion | None] = BoundedCache(64)


def convert_model(
    model: Any,
    n_features: int,
    dtype: np.dtype,
    options: dict[str, Any] | None = None,
    black_op: set[str] | None = None,
    target_opset: Any = TARGET_OPSET,
) -> onnx.ModelProto:
    """``skl2onnx.to_onnx(model, ...)`` for a float input of ``n_features`` columns,
    memoized (see the module docstring).

    Parameters
    ----------
    model : scikit-learn estimator
        A fitted model, or a template with its fitted attributes set.
    n_features : int
        Columns of the input.
    dtype : numpy.dtype
        float32 or float64, the input's and the graph's type.
    options : dict, optional
        skl2onnx options of ``model`` itself (``{'zipmap': False}``).
    black_op : set of str, optional
        Operators skl2onnx must not use.
    target_opset : int or dict
        Opsets of the graph.

    Returns
    -------
    onnx.ModelProto
        A model of its own: the caller may modify it.
    """
    dtype = np.dtype(dtype)

    def convert(source: Any) -> onnx.ModelProto:
        # Imported at the first conversion: ``import skl_ortgrad`` does not load skl2onnx.
        from skl2onnx import to_onnx

        return to_onnx(source, np.zeros((1, n_features), dtype=dtype),
                       target_opset=target_opset, black_op=black_op, options=options)

    # Sorted: the weights are flattened in this order, the same for every model of a key.
    weights = {
        name: value for name, value in sorted(vars(model).items()) if _is_weight(name, value)
    }
    try:
        key = ("conversion", _model_key(model, weights), int(n_features), dtype.str,
               freeze(options), freeze(black_op), freeze(target_opset))
    except Unfreezable:
        return convert(model)
    conversion = CONVERSIONS.get(key, lambda: _Conversion.probe(model, weights, convert))
    result = None if conversion is None else conversion.instantiate(weights)
    return convert(model) if result is None else result
