r"""skl2onnx converters for the estimators, so that a whole pipeline exports as one graph.

Importing :mod:`skl_ortgrad` registers, with ``skl2onnx.update_registered_converter``, a
shape calculator and a converter for :class:`~skl_ortgrad.OnnxSGDRegressor`,
:class:`~skl_ortgrad.OnnxSGDClassifier`, :class:`~skl_ortgrad.OnnxMLPRegressor`,
:class:`~skl_ortgrad.OnnxMLPClassifier`, :class:`~skl_ortgrad.OnnxGradientRegressor` and
:class:`~skl_ortgrad.OnnxGradientClassifier` (aliases ``'SklOrtgrad' + class name``).
``skl2onnx.to_onnx`` then converts a ``Pipeline``, a ``ColumnTransformer``, a
``GridSearchCV``... holding them, in float32 (``X.astype(np.float32)``) or float64
(``X.astype(np.float64)``), like any scikit-learn model::

    onx = skl2onnx.to_onnx(pipeline, X[:1].astype(np.float32), target_opset=21,
                           options={"zipmap": False})

A fitted estimator is converted as its scikit-learn counterpart, a model holding its
trained weights whose skl2onnx graph computes ``predict`` and ``predict_proba``:

=====================================  ==================================================
estimator                              counterpart
=====================================  ==================================================
OnnxSGDRegressor                       ``LinearRegression``: :math:`x^\top w + b`
OnnxSGDClassifier, 2 classes           ``SGDClassifier(loss='log_loss')``:
                                       :math:`[1 - \sigma(s), \sigma(s)]`
OnnxSGDClassifier, softmax loss        ``LogisticRegression``: :math:`\mathrm{softmax}(s)`
OnnxSGDClassifier, one-vs-rest loss    ``LogisticRegression`` one-vs-rest:
                                       :math:`\sigma(s_k) / \sum_j \sigma(s_j)`
OnnxMLPRegressor, OnnxMLPClassifier    ``MLPRegressor``, ``MLPClassifier``
OnnxMLPClassifier, multilabel          ``MLPRegressor`` ending in the logistic function:
                                       the probabilities; labels :math:`p > 0.5`
OnnxGradientRegressor,                 ``estimator_``, the fine-tuned model or pipeline
OnnxGradientClassifier                 (what their ``to_onnx()`` converts)
=====================================  ==================================================

with :math:`s = x^\top W + b` the scores and the label :math:`\arg\max_k s_k` (the
class of :math:`s > 0` for two classes). The estimator's operator delegates to the
counterpart's operator, whose own skl2onnx converter writes the nodes::

    inputs -> [counterpart] -> label, probabilities -> Identity -> label, probabilities
    inputs -> [counterpart] -> y -> Reshape(-1, n_outputs) -> variable

so skl2onnx's classifier options keep their meaning: ``zipmap`` (True, False,
``'columns'``) and ``output_class_labels`` are applied after the estimator's operator by
skl2onnx's classifier parser; ``nocl`` and ``raw_scores`` go to the counterpart's converter
(to the last step of a pipeline); ``OnnxMLPClassifier`` has no ``raw_scores``, as
skl2onnx's ``MLPClassifier``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
from onnx import TensorProto
from skl2onnx import get_model_alias, update_registered_converter
from skl2onnx.common._apply_operation import apply_cast, apply_identity, apply_reshape
from skl2onnx.common._container import ModelComponentContainer
from skl2onnx.common._topology import Operator, Scope
from skl2onnx.common.data_types import DoubleTensorType, FloatTensorType, Int64TensorType
from skl2onnx.common.shape_calculator import calculate_linear_classifier_output_shapes
from skl2onnx.common.utils import check_input_and_output_numbers
from sklearn.base import ClassifierMixin, is_classifier
from sklearn.linear_model import LinearRegression, LogisticRegression, SGDClassifier
from sklearn.neural_network import MLPClassifier, MLPRegressor
from sklearn.preprocessing import LabelBinarizer

from skl_ortgrad.estimators.classification import onnx_classes
from skl_ortgrad.estimators.gradient import (
    OnnxGradientClassifier,
    OnnxGradientRegressor,
    _split,
)
from skl_ortgrad.estimators.mlp import OnnxMLPClassifier, OnnxMLPRegressor
from skl_ortgrad.estimators.sgd import OnnxSGDClassifier, OnnxSGDRegressor

# skl2onnx's classifier parser reads 'nocl' of every classifier: it must be allowed.
_CLASSIFIER_OPTIONS = {
    "zipmap": [True, False, "columns"],
    "nocl": [True, False],
    "output_class_labels": [False, True],
}
_LINEAR_CLASSIFIER_OPTIONS = {**_CLASSIFIER_OPTIONS, "raw_scores": [True, False]}
# Applied by skl2onnx's classifier parser around the estimator's operator; the other
# options change what the counterpart's converter computes.
_PARSER_OPTIONS = {"zipmap", "output_class_labels"}


def _sgd_regressor(estimator: OnnxSGDRegressor) -> LinearRegression:
    model = LinearRegression()
    model.coef_, model.intercept_ = estimator._dense_coef(), estimator.intercept_
    model.n_features_in_ = estimator.n_features_in_
    return model


def _sgd_classifier(estimator: OnnxSGDClassifier) -> SGDClassifier | LogisticRegression:
    if len(estimator.classes_) == 2 or estimator._counterpart_loss() == "modified_huber":
        # The graph OnnxSGDClassifier trains: one score, sigmoid (or modified Huber's)
        # probabilities; for several classes skl2onnx's modified Huber graph labels the
        # class of the highest probability, the first of those clipped at 1.
        model = SGDClassifier(loss=estimator._counterpart_loss())
    else:
        model = LogisticRegression()
        if not estimator._softmax_loss():
            # skl2onnx still reads LogisticRegression's former multi_class='ovr'
            # (scikit-learn 1.8 removed the parameter): normalized sigmoids and the label
            # of the highest score. Its SGDClassifier graph takes the label of the highest
            # probability instead, wrong when several sigmoids round to 1 (scores > 17).
            model.multi_class = "ovr"
    model.coef_, model.intercept_ = estimator._dense_coef(), estimator.intercept_
    model.classes_ = onnx_classes(estimator.classes_)
    model.n_features_in_ = estimator.n_features_in_
    return model


def _multilabel(estimator: Any) -> bool:
    return isinstance(estimator, OnnxMLPClassifier) and estimator._multilabel()


def _mlp(estimator: OnnxMLPRegressor | OnnxMLPClassifier) -> MLPRegressor | MLPClassifier:
    if is_classifier(estimator) and not _multilabel(estimator):
        model = MLPClassifier(activation=estimator.activation)
        model.classes_ = onnx_classes(estimator.classes_)
        model._label_binarizer = LabelBinarizer().fit(model.classes_)
    else:
        # A multilabel classifier's probabilities are a regressor's outputs through the
        # logistic function (convert_estimator thresholds them: skl2onnx's multilabel
        # graph has a Binarizer without a double kernel, and two labels' probabilities
        # written as a binary problem's).
        model = MLPRegressor(activation=estimator.activation)
        # skl2onnx knows no 'exp' output (loss='poisson'): convert_estimator adds it.
    model.coefs_, model.intercepts_ = estimator.coefs_, estimator.intercepts_
    model.n_layers_, model.n_outputs_ = estimator.n_layers_, estimator.n_outputs_
    model.out_activation_ = (
        "identity" if estimator.out_activation_ == "exp" else estimator.out_activation_
    )
    model.n_features_in_ = estimator.n_features_in_
    return model


def _fine_tuned(estimator: OnnxGradientRegressor | OnnxGradientClassifier) -> Any:
    return estimator.estimator_


# estimator class -> (counterpart of a fitted estimator, options of a classifier)
_REGISTRY: dict[type, tuple[Callable[[Any], Any], dict[str, list] | None]] = {
    OnnxSGDRegressor: (_sgd_regressor, None),
    OnnxSGDClassifier: (_sgd_classifier, _LINEAR_CLASSIFIER_OPTIONS),
    OnnxMLPRegressor: (_mlp, None),
    OnnxMLPClassifier: (_mlp, _CLASSIFIER_OPTIONS),
    OnnxGradientRegressor: (_fine_tuned, None),
    # Its final step may be any classifier; that step's converter checks the options.
    OnnxGradientClassifier: (_fine_tuned, _LINEAR_CLASSIFIER_OPTIONS),
}


def _n_outputs(estimator: Any) -> int:
    return getattr(estimator, "n_outputs_", 1)


def calculate_regressor_output_shapes(operator: Operator) -> None:
    """Type of a regressor's output ``variable``: (N, n_outputs), float64 for a float64
    input, float32 otherwise."""
    check_input_and_output_numbers(operator, input_count_range=1, output_count_range=1)
    source = operator.inputs[0]
    tensor = DoubleTensorType if isinstance(source.type, DoubleTensorType) else FloatTensorType
    operator.outputs[0].type = tensor(
        [source.get_first_dimension(), _n_outputs(operator.raw_operator)]
    )


def convert_estimator(
    scope: Scope, operator: Operator, container: ModelComponentContainer
) -> None:
    """Write the graph of a fitted skl_ortgrad estimator through its counterpart.

    The counterpart (see the module's table) becomes an operator of the topology reading
    the estimator's inputs, converted later by its own skl2onnx converter; its outputs
    feed the estimator's through ``Identity`` (classifiers) or ``Reshape(-1, n_outputs)``
    (regressors: skl2onnx's MLPRegressor flattens a multi-output prediction into one
    column).
    """
    estimator = operator.raw_operator
    model = _REGISTRY[type(estimator)][0](estimator)
    options = {
        name: value for name, value in container.get_options(estimator).items()
        if name not in _PARSER_OPTIONS
    }
    if options.get("nocl") and isinstance(estimator, OnnxMLPClassifier):
        # skl2onnx's MLPClassifier converter ignores nocl and writes classes_ as the
        # labels: the class indices become the labels.
        model.classes_ = np.arange(len(model.classes_))
    if options:
        final = _split(model)[2]
        scope.add_options(id(final), options)
        container.add_options(id(final), options)
    delegate = scope.declare_local_operator(get_model_alias(type(model)), model)
    delegate.inputs = operator.inputs
    if _multilabel(estimator):
        _convert_multilabel(scope, operator, container, delegate)
        return
    for output in operator.outputs:
        # A copy: the counterpart's shape calculator sets the type of its own outputs.
        delegate.outputs.append(
            scope.declare_local_variable(output.onnx_name, type=copy.deepcopy(output.type))
        )
    if is_classifier(estimator):
        for result, output in zip(delegate.outputs, operator.outputs, strict=True):
            apply_identity(scope, result.full_name, output.full_name, container)
    else:
        prediction = delegate.outputs[0].full_name
        if getattr(estimator, "out_activation_", None) == "exp":
            expected = scope.get_unique_variable_name("expected_count")
            container.add_node("Exp", prediction, expected,
                               name=scope.get_unique_operator_name("Exp"))
            prediction = expected
        apply_reshape(
            scope, prediction, operator.outputs[0].full_name, container,
            desired_shape=(-1, _n_outputs(estimator)),
        )


def _convert_multilabel(scope: Scope, operator: Operator, container: ModelComponentContainer,
                        delegate: Operator) -> None:
    """A multilabel ``OnnxMLPClassifier``: the probabilities are the counterpart
    regressor's outputs, ``Reshape(-1, n_labels)``; the labels are ``p > 0.5`` as int64
    (``predict``)."""
    n_labels = _n_outputs(operator.raw_operator)
    probabilities = operator.outputs[1]
    delegate.outputs.append(scope.declare_local_variable(
        "label_probabilities", type=copy.deepcopy(probabilities.type)))
    apply_reshape(scope, delegate.outputs[0].full_name, probabilities.full_name, container,
                  desired_shape=(-1, n_labels))
    half = scope.get_unique_variable_name("half")
    container.add_initializer(half, probabilities.type.to_onnx_type().tensor_type.elem_type,
                              [], [0.5])
    above = scope.get_unique_variable_name("above_half")
    container.add_node("Greater", [probabilities.full_name, half], above,
                       name=scope.get_unique_operator_name("Greater"))
    apply_cast(scope, above, operator.outputs[0].full_name, container, to=TensorProto.INT64)


def calculate_mlp_classifier_output_shapes(operator: Operator) -> None:
    """A multilabel ``OnnxMLPClassifier``: labels int64 and probabilities, ``(N,
    n_labels)`` each; otherwise skl2onnx's classifier outputs."""
    if not _multilabel(operator.raw_operator):
        calculate_linear_classifier_output_shapes(operator)
        return
    check_input_and_output_numbers(operator, input_count_range=1, output_count_range=2)
    source = operator.inputs[0]
    shape = [source.get_first_dimension(), _n_outputs(operator.raw_operator)]
    tensor = DoubleTensorType if isinstance(source.type, DoubleTensorType) else FloatTensorType
    operator.outputs[0].type = Int64TensorType(shape)
    operator.outputs[1].type = tensor(shape)


def _register() -> None:
    for estimator_class, (_, options) in _REGISTRY.items():
        classifier = issubclass(estimator_class, ClassifierMixin)
        shapes = (calculate_mlp_classifier_output_shapes if estimator_class is OnnxMLPClassifier
                  else calculate_linear_classifier_output_shapes if classifier
                  else calculate_regressor_output_shapes)
        update_registered_converter(
            estimator_class, f"SklOrtgrad{estimator_class.__name__}", shapes,
            convert_estimator, options=options,
        )


_register()
