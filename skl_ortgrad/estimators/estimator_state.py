"""One fitted estimator of skl_ortgrad as a JSON entry plus tensors, and back.

:func:`encode_estimator` writes what resuming needs: the estimator's class name, its
parameters (training objects as their class name and parameters), its fitted attributes,
the training state of its optimizer (weights, ``t_``, the learning rate's state such as
Adam's moments, the shuffling generator) and, for the estimators whose served graph is
the trained graph, which results and initializers of that graph the training uses.
:func:`decode_estimator` rebuilds the estimator from that entry and its graph, checking
types, names and shapes; anything else is a ``ValueError``. Values go through
:mod:`~skl_ortgrad.estimators.state_codec`: no code is run or imported by name.

The graph is the file's own (``to_onnx()`` is what a file of one estimator serves), or,
for an estimator inside a saved pipeline, whose file serves the whole pipeline, its
``to_onnx()`` serialized into a ``uint8`` tensor of the state (the entry's
``template.graph``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from sklearn.base import is_classifier
from sklearn.utils.validation import check_is_fitted

from skl_ortgrad.estimators.base import BaseOnnxEstimator
from skl_ortgrad.estimators.gradient import OnnxGradientClassifier, OnnxGradientRegressor
from skl_ortgrad.estimators.mlp import OnnxMLPClassifier, OnnxMLPRegressor
from skl_ortgrad.estimators.sgd import OnnxSGDClassifier, OnnxSGDRegressor
from skl_ortgrad.estimators.state_codec import (
    StateDecoder,
    StateEncoder,
    check_attribute_names,
)
from skl_ortgrad.estimators.template import Template
from skl_ortgrad.graph.cut import select_model_output
from skl_ortgrad.graph.external import check_external_data

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
_TEMPLATE_FIELDS = {"score", "weights", "outputs", "penalized"}

if TYPE_CHECKING:
    from skl_ortgrad.training.trainer import Trainer


def is_estimator(value: Any) -> bool:
    """Whether ``value`` is one of the six estimators of skl_ortgrad (not a subclass)."""
    return ESTIMATORS.get(type(value).__name__) is type(value)


def _serves_its_training_graph(cls: type) -> bool:
    """Whether ``to_onnx()`` is the trained graph itself (the fine-tuning estimators
    convert the whole updated scikit-learn model instead)."""
    return cls.to_onnx is BaseOnnxEstimator.to_onnx


def encode_estimator(estimator: BaseOnnxEstimator, encoder: StateEncoder,
                     embed_graph: bool = False) -> dict[str, Any]:
    """The JSON entry of a fitted estimator; its arrays go to ``encoder.tensors``.

    Parameters
    ----------
    estimator : fitted skl_ortgrad estimator
    encoder : StateEncoder
    embed_graph : bool
        Whether the trained graph goes into the entry (an estimator inside a pipeline)
        rather than being the file's graph.

    Raises
    ------
    sklearn.exceptions.NotFittedError
        If ``estimator`` is not fitted.
    ValueError
        If a parameter or attribute is of a type the format does not hold.
    """
    check_is_fitted(estimator, "optimizer_")
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
    stored = None
    if _serves_its_training_graph(type(estimator)):
        stored = {"score": template.score, "weights": template.weights,
                  "outputs": template.outputs, "penalized": template.penalized}
        if embed_graph:
            graph = np.frombuffer(estimator.to_onnx().SerializeToString(), dtype=np.uint8)
            stored["graph"] = encoder.encode(graph, "template.graph")
    return {
        "class": type(estimator).__name__,
        "dtype": optimizer.model_dtype().name,
        "params": encoder.encode(params, "params"),
        "attributes": encoder.encode(attributes, "attributes"),
        "template": stored,
        "optimizer": encoder.encode(state, "optimizer", random_state=True),
    }


def decode_estimator(entry: Any, decoder: StateDecoder,
                     graph: onnx.ModelProto | None) -> BaseOnnxEstimator:
    """The estimator :func:`encode_estimator` wrote as ``entry``.

    Parameters
    ----------
    entry : JSON value
    decoder : StateDecoder
        Holds the tensors of the file.
    graph : onnx.ModelProto or None
        The graph the file serves, without skl_ortgrad's metadata and training state;
        None when the entry embeds its own (an estimator inside a pipeline).

    Raises
    ------
    ValueError
        If the entry is not one :func:`encode_estimator` writes, or its values do not
        fit together (weights of the wrong shape, a classifier without classes...).
    """
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
    check_attribute_names(attributes, "attributes", forbidden=set(params) | _REBUILT)
    if is_classifier(estimator) != ("classes_" in attributes):
        raise ValueError(f"the attributes are not those of a fitted {cls.__name__}: "
                         f"{'no' if is_classifier(estimator) else 'a'} classes_.")
    estimator.__dict__.update(attributes)
    dtype = np.dtype(entry["dtype"])
    template = _template(estimator, entry["template"], graph, dtype, decoder)
    state = decoder.decode(entry["optimizer"], "optimizer")
    check_attribute_names(state, "optimizer", forbidden=_NOT_STORED)
    state["model_onnx"] = select_model_output(template.model, template.score)
    # Imported here: the trainer loads onnxruntime, which ``import skl_ortgrad`` does not.
    from skl_ortgrad.training.trainer import Trainer

    optimizer = Trainer.__new__(Trainer)
    optimizer.__setstate__(state)
    _check_training_state(optimizer, template, dtype)
    estimator._template_ = template
    estimator.optimizer_ = optimizer
    return estimator


def _names(value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise ValueError(f"{where} is a list of names.")
    return value


def _embedded_graph(value: Any, decoder: StateDecoder) -> onnx.ModelProto:
    """The model serialized in the ``uint8`` tensor ``value`` refers to."""
    data = decoder.decode(value, "template.graph")
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 1:
        raise ValueError("template.graph is a tensor of bytes.")
    model = onnx.ModelProto()
    model.ParseFromString(data.tobytes())
    check_external_data(model)
    return model


def _template(
    estimator: BaseOnnxEstimator, stored: Any, graph: onnx.ModelProto | None,
    dtype: np.dtype, decoder: StateDecoder,
) -> Template:
    """The graph the estimator trains: the file's own graph or the entry's, or rebuilt
    from the fitted scikit-learn model for the fine-tuning estimators."""
    serves = _serves_its_training_graph(type(estimator))
    if (stored is None) == serves:
        raise ValueError("the template entry does not match the estimator's class.")
    if stored is None:
        n_features = estimator.n_features_in_
        if not isinstance(n_features, int) or isinstance(n_features, bool) or n_features < 1:
            raise ValueError(f"n_features_in_={n_features!r} is not a positive integer.")
        return estimator._template(n_features, dtype)
    fields = _TEMPLATE_FIELDS | ({"graph"} if graph is None else set())
    if not isinstance(stored, dict) or set(stored) != fields:
        raise ValueError(f"the template entry has the fields {', '.join(sorted(fields))}.")
    if graph is None:
        graph = _embedded_graph(stored["graph"], decoder)
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
