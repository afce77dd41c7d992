"""Save a fitted estimator as one ONNX file that serves, resumes training, and runs no code
when loaded.

The file is the trained model itself, ``estimator.to_onnx()``: ``InferenceSession(path)``
serves it as is, with the outputs of ``predict`` (and ``predict_proba``). Two additions
make it resumable:

* the ``skl_ortgrad`` entry of ``metadata_props``, a JSON document: the estimator's class
  name, its parameters (training objects as their class name and parameters), its fitted
  attributes (classes, ``t_``, loss curve...), the training state of its optimizer
  (weights, ``t_``, the learning rate's state such as Adam's moments, the shuffling
  generator), and for the estimators whose served graph is the trained graph, which of
  its initializers are trained (see :mod:`~skl_ortgrad.estimators.state_codec`);
* the arrays that document refers to, as the initializers of the graph
  ``training_info[0].algorithm`` (ONNX's slot for training state), which onnxruntime
  ignores: initializers of the served graph that no node reads would be dropped with a
  warning at every session.

:func:`load` reads only JSON values and tensors, builds only the estimators and training
objects of skl_ortgrad and a short list of scikit-learn models, and checks types and
shapes: a file that is anything else is refused with a ``ValueError``. :func:`save`
writes through :func:`~skl_ortgrad.estimators.atomic_file.write_atomically`: a crash
leaves the previous file or the new one, never a torn one.
"""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from sklearn.utils.validation import check_is_fitted

from skl_ortgrad._version import __version__
from skl_ortgrad.estimators.atomic_file import write_atomically
from skl_ortgrad.estimators.base import BaseOnnxEstimator, Template
from skl_ortgrad.estimators.gradient import OnnxGradientClassifier, OnnxGradientRegressor
from skl_ortgrad.estimators.mlp import OnnxMLPClassifier, OnnxMLPRegressor
from skl_ortgrad.estimators.sgd import OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.estimators.state_codec import StateDecoder, StateEncoder
from skl_ortgrad.graph.cut import select_model_output
from skl_ortgrad.graph.external import check_external_data

if TYPE_CHECKING:
    from skl_ortgrad.training.trainer import Trainer

#: Version of the file format; :func:`load` reads this one only.
FORMAT = 1
#: Key of the JSON document in ``metadata_props``.
METADATA_KEY = "skl_ortgrad"
#: Name of the ``training_info`` graph holding the arrays.
STATE_GRAPH = "skl_ortgrad.training_state"

ESTIMATORS: dict[str, type[BaseOnnxEstimator]] = {
    cls.__name__: cls for cls in (
        OnnxSGDRegressor, OnnxSGDClassifier, OnnxMLPRegressor, OnnxMLPClassifier,
        OnnxGradientRegressor, OnnxGradientClassifier,
    )
}

# Estimator attributes rebuilt by load rather than stored.
_REBUILT = {"_template_", "optimizer_"}
# Optimizer state left out: the graph (the template's) and the version (the document's).
_NOT_STORED = {"model_onnx", "_skl_ortgrad_version"}


def _serves_its_training_graph(cls: type) -> bool:
    """Whether ``to_onnx()`` is the trained graph itself (the fine-tuning estimators
    convert the whole updated scikit-learn model instead)."""
    return cls.to_onnx is BaseOnnxEstimator.to_onnx


def save(estimator: BaseOnnxEstimator, path: str | os.PathLike) -> None:
    """Write a fitted estimator to ``path``, an ONNX file (``.onnx``).

    The file is ``estimator.to_onnx()`` with the estimator's parameters, fitted
    attributes and training state in its metadata: ``onnxruntime.InferenceSession(path)``
    serves it, and :func:`load` returns an estimator that predicts the same and whose
    ``partial_fit`` (or ``fit`` with ``warm_start=True``) continues bit for bit like the
    original's.
    The write is atomic: ``path`` holds the previous file or the new one, whatever
    happens.

    Parameters
    ----------
    estimator : fitted skl_ortgrad estimator
        One of the six estimators of skl_ortgrad (not a subclass).
    path : str or os.PathLike
        The file written.

    Raises
    ------
    ValueError
        If ``estimator`` is not an estimator of skl_ortgrad, or holds something the format
        cannot (a ``RandomState`` parameter, a wrapped model other than the linear models
        and MLPs of scikit-learn, a ``Pipeline``...): pickle it instead.
    sklearn.exceptions.NotFittedError
        If ``estimator`` is not fitted.
    """
    cls = type(estimator)
    if ESTIMATORS.get(cls.__name__) is not cls:
        raise ValueError(
            f"skl_ortgrad.save writes the estimators {sorted(ESTIMATORS)}, got "
            f"{cls.__name__}."
        )
    check_is_fitted(estimator, "optimizer_")
    encoder = StateEncoder()
    document = {
        "format": FORMAT, "version": __version__,
        "estimator": _encode_estimator(estimator, encoder),
    }
    model = estimator.to_onnx()
    model.metadata_props.add(key=METADATA_KEY, value=json.dumps(document))
    state = model.training_info.add()
    state.algorithm.name = STATE_GRAPH
    state.algorithm.initializer.extend(encoder.tensors)
    write_atomically(path, model.SerializeToString())


def _encode_estimator(estimator: BaseOnnxEstimator, encoder: StateEncoder) -> dict[str, Any]:
    params = estimator.get_params(deep=False)
    attributes = {
        name: value for name, value in vars(estimator).items()
        if name not in params and name not in _REBUILT
    }
    optimizer = estimator.optimizer_
    state = {
        name: value for name, value in optimizer.__getstate__().items()
        if name not in _NOT_STORED
    }
    template = estimator._template_
    return {
        "class": type(estimator).__name__,
        "dtype": optimizer._model_dtype().name,
        "params": encoder.encode(params, "params"),
        "attributes": encoder.encode(attributes, "attributes"),
        "template": {
            "score": template.score, "weights": template.weights,
            "outputs": template.outputs, "penalized": template.penalized,
        } if _serves_its_training_graph(type(estimator)) else None,
        "optimizer": encoder.encode(state, "optimizer", random_state=True),
    }


def load(path: str | os.PathLike) -> BaseOnnxEstimator:
    """Read an estimator written by :func:`save`; no code from the file is executed.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    estimator
        The fitted estimator, ready to predict and to continue training.

    Raises
    ------
    ValueError
        If the file is not an ONNX model written by :func:`save` in this format, names
        a class other than skl_ortgrad's estimators and training objects and the
        scikit-learn models :func:`save` accepts, holds values of the wrong type or
        shape, or tensors stored as external data.
    """
    with open(path, "rb") as stream:
        data = stream.read()
    try:
        model = onnx.ModelProto()
        model.ParseFromString(data)
        check_external_data(model)
        document = _document(model)
        states = [info.algorithm for info in model.training_info
                  if info.algorithm.name == STATE_GRAPH]
        if len(states) != 1:
            raise ValueError(f"expected one training_info graph {STATE_GRAPH!r}, "
                             f"found {len(states)}.")
        return _decode_estimator(
            document["estimator"], StateDecoder(list(states[0].initializer)), model
        )
    except (DecodeError, ValueError, TypeError, KeyError, AttributeError, IndexError,
            RecursionError) as exc:
        raise ValueError(f"Cannot load {os.fspath(path)!r} as a skl_ortgrad estimator: "
                         f"{exc}") from exc


def _document(model: onnx.ModelProto) -> dict[str, Any]:
    """The JSON document of ``model``'s metadata, its format checked."""
    text = next((prop.value for prop in model.metadata_props if prop.key == METADATA_KEY), None)
    if text is None:
        raise ValueError(f"no {METADATA_KEY!r} metadata: the file was not written by "
                         "skl_ortgrad.save.")
    document = json.loads(text)
    if not isinstance(document, dict) or set(document) != {"format", "version", "estimator"}:
        raise ValueError("the metadata is not a document of skl_ortgrad.save.")
    if document["format"] != FORMAT:
        raise ValueError(
            f"the file was written by skl_ortgrad {document['version']!r} in format "
            f"{document['format']!r}; skl_ortgrad {__version__} reads format {FORMAT}."
        )
    return document


def _names(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise ValueError(f"{where} is a list of names.")
    return value


def _decode_estimator(
    entry: Any, decoder: StateDecoder, model: onnx.ModelProto
) -> BaseOnnxEstimator:
    fields = {"class", "dtype", "params", "attributes", "template", "optimizer"}
    if not isinstance(entry, dict) or set(entry) != fields:
        raise ValueError(f"the estimator entry has the fields {sorted(fields)}.")
    cls = ESTIMATORS.get(entry["class"]) if isinstance(entry["class"], str) else None
    if cls is None:
        raise ValueError(f"{entry['class']!r} is not an estimator of skl_ortgrad "
                         f"({sorted(ESTIMATORS)}).")
    if entry["dtype"] not in ("float32", "float64"):
        raise ValueError(f"dtype {entry['dtype']!r} is not float32 or float64.")
    params = decoder.decode(entry["params"], "params")
    estimator = cls(**params)
    # scikit-learn's own checks of every parameter (InvalidParameterError is a ValueError).
    estimator._validate_params()
    attributes = decoder.decode(entry["attributes"], "attributes")
    _check_names(attributes, "attributes", forbidden=set(params) | _REBUILT)
    estimator.__dict__.update(attributes)
    template = _template(estimator, entry["template"], model, np.dtype(entry["dtype"]))
    state = decoder.decode(entry["optimizer"], "optimizer")
    _check_names(state, "optimizer", forbidden=_NOT_STORED)
    state["model_onnx"] = select_model_output(template.model, template.score)
    # Imported here: the trainer loads onnxruntime, which ``import skl_ortgrad`` does not.
    from skl_ortgrad.training.trainer import Trainer

    optimizer = Trainer.__new__(Trainer)
    optimizer.__setstate__(state)
    _check_training_state(optimizer, template, np.dtype(entry["dtype"]))
    estimator._template_ = template
    estimator.optimizer_ = optimizer
    return estimator


def _check_names(values: Any, where: str, forbidden: set[str]) -> None:
    """``values`` is a dict of attributes: identifiers, none of them dunder or forbidden."""
    if not isinstance(values, dict):
        raise ValueError(f"{where} is a dict.")
    bad = [name for name in values
           if not name.isidentifier() or name.startswith("__") or name in forbidden]
    if bad:
        raise ValueError(f"{where} holds attributes that cannot be set: {sorted(bad)}.")


def _template(
    estimator: BaseOnnxEstimator, stored: Any, model: onnx.ModelProto, dtype: np.dtype
) -> Template:
    """The graph the estimator trains: the file's own graph, or rebuilt from the fitted
    scikit-learn model for the fine-tuning estimators."""
    serves = _serves_its_training_graph(type(estimator))
    if (stored is None) == serves:
        raise ValueError("the template entry does not match the estimator's class.")
    if stored is None:
        n_features = estimator.n_features_in_
        if not isinstance(n_features, int) or isinstance(n_features, bool) or n_features < 1:
            raise ValueError(f"n_features_in_={n_features!r} is not a positive integer.")
        return estimator._template(n_features, dtype)
    if not isinstance(stored, dict) or set(stored) != {"score", "weights", "outputs",
                                                      "penalized"}:
        raise ValueError("the template entry has the fields score, weights, outputs, "
                         "penalized.")
    graph = onnx.ModelProto()
    graph.CopyFrom(model)
    del graph.training_info[:]
    kept = [prop for prop in graph.metadata_props if prop.key != METADATA_KEY]
    del graph.metadata_props[:]
    graph.metadata_props.extend(kept)
    initializers = {init.name for init in graph.graph.initializer}
    outputs = {out.name for out in graph.graph.output}
    results = outputs | {name for node in graph.graph.node for name in node.output}
    weights = _names(stored["weights"], "template.weights")
    penalized = stored["penalized"]
    if penalized is not None:
        penalized = _names(penalized, "template.penalized")
    if (not isinstance(stored["score"], str) or stored["score"] not in results
            or not set(weights) <= initializers
            or not set(_names(stored["outputs"], "template.outputs")) <= outputs
            or not set(penalized or []) <= set(weights)):
        raise ValueError("the template entry names results the graph does not have.")
    return Template(graph, stored["score"], weights, stored["outputs"], penalized)


def _check_training_state(
    optimizer: Trainer, template: Template, dtype: np.dtype
) -> None:
    """The trained weights fit the graph, the learning rate's state fits the weights."""
    if optimizer.weights_to_train_ != template.weights:
        raise ValueError(f"the trained weights {optimizer.weights_to_train_!r} are not the "
                         f"graph's {template.weights!r}.")
    shapes = {init.name: tuple(init.dims) for init in template.model.graph.initializer}
    weights = optimizer.weights_
    if not isinstance(weights, list) or len(weights) != len(template.weights):
        raise ValueError("weights_ holds one array per trained weight.")
    for name, weight in zip(template.weights, weights, strict=True):
        if not isinstance(weight, np.ndarray) or weight.dtype != dtype or (
                weight.shape != shapes[name]):
            raise ValueError(f"weight {name!r} must be a {dtype} array of shape "
                             f"{shapes[name]}.")
    expected = optimizer.learning_rate_.init_state(weights)
    state = optimizer.lr_state_
    if not isinstance(state, list) or len(state) != len(expected) or any(
        not isinstance(got, np.ndarray) or got.shape != want.shape or got.dtype != want.dtype
        for got, want in zip(state, expected, strict=False)
    ):
        raise ValueError("lr_state_ does not fit the learning rate and the weights.")
    t = optimizer.t_
    if not isinstance(t, int) or isinstance(t, bool) or t < 1:
        raise ValueError(f"t_={t!r} is not a positive integer.")
