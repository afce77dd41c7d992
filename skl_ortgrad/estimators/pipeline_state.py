"""A fitted scikit-learn ``Pipeline`` ending in an estimator of skl_ortgrad, as one served
ONNX graph plus a JSON entry and tensors, and back.

The graph is the whole pipeline converted by skl2onnx (importing skl_ortgrad registers
converters for its estimators, :mod:`~skl_ortgrad.estimators.converters`), with
``zipmap=False`` for classifiers: onnxruntime serves it as is, with the outputs of
``predict`` (``label``, or ``variable`` for regressors) and ``predict_proba``
(``probabilities``). Its inputs follow the data the pipeline was fitted on:

* a pipeline fitted on a pandas DataFrame whose first step is a ``ColumnTransformer``
  takes one input per column it reads, named after the column, of shape ``(N, 1)``:
  a string tensor for the columns a ``OneHotEncoder`` (or a ``SimpleImputer`` of
  strings) reads as strings, an int64 tensor for integer categories, and otherwise the
  float type the estimator trains in (float32 by default); columns the pipeline drops
  are not inputs;
* any other pipeline takes one input ``X`` of shape ``(N, n_features_in_)`` in that
  float type.

The entry is the pipeline itself through :mod:`~skl_ortgrad.estimators.state_codec`:
its scikit-learn steps as ``$transformer`` (class, parameters, fitted state) and its
estimator as ``$estimator`` (:func:`~skl_ortgrad.estimators.estimator_state.encode_estimator`
with its own trained graph embedded), so that :func:`decode_pipeline` rebuilds a pipeline
that predicts as the saved one and whose last step resumes training bit for bit. Only the
transformers of :data:`~skl_ortgrad.estimators.state_codec.SKLEARN_TRANSFORMERS` are
written: a ``FunctionTransformer`` holding a function (code) and any other class are
refused with an error naming the step.
"""

from __future__ import annotations

import warnings
from itertools import chain
from typing import Any

import numpy as np
import onnx
import sklearn
from sklearn.base import is_classifier
from sklearn.compose import ColumnTransformer
from sklearn.exceptions import InconsistentVersionWarning
from sklearn.impute import SimpleImputer
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer, OneHotEncoder
from sklearn.utils.validation import check_is_fitted

from skl_ortgrad.estimators.base import BaseOnnxEstimator
from skl_ortgrad.estimators.estimator_state import (
    ESTIMATORS,
    decode_estimator,
    encode_estimator,
    is_estimator,
)
from skl_ortgrad.estimators.state_codec import (
    SKLEARN_TRANSFORMERS,
    StateDecoder,
    StateEncoder,
)
from skl_ortgrad.graph.model import TARGET_OPSET, subgraph_inputs

# Steps that stand for no transformer.
_NO_STEP = (None, "passthrough", "drop")


def _step_path(path: list[str]) -> str:
    return " > ".join(repr(name) for name in path)


def check_pipeline(pipeline: Pipeline) -> None:
    """Refuse, naming the step, what a pipeline file cannot hold.

    Raises
    ------
    ValueError
        If the last step is not an estimator of skl_ortgrad, or another step is not a
        transformer of :data:`~skl_ortgrad.estimators.state_codec.SKLEARN_TRANSFORMERS`
        (a ``FunctionTransformer`` holds code), or a ``ColumnTransformer`` selects
        columns with a function.
    sklearn.exceptions.NotFittedError
        If the pipeline is not fitted.
    """
    *steps, (name, final) = pipeline.steps
    if not is_estimator(final):
        raise ValueError(
            f"skl_ortgrad.save writes Pipelines ending in an estimator of skl_ortgrad "
            f"{sorted(ESTIMATORS)}; this one ends in step {name!r} "
            f"({type(final).__name__})."
        )
    check_is_fitted(final, "optimizer_")
    for step_name, step in steps:
        _check_step(step, [step_name])


def _check_step(step: Any, path: list[str]) -> None:
    if isinstance(step, str | None) and step in _NO_STEP:
        return
    if type(step) is Pipeline:
        for name, inner in step.steps:
            _check_step(inner, [*path, name])
        return
    if type(step) is ColumnTransformer:
        for name, inner, columns in chain(step.transformers,
                                          getattr(step, "transformers_", [])):
            if callable(columns):
                raise ValueError(
                    f"Step {_step_path([*path, name])} selects its columns with "
                    f"{columns!r}, a function, which a saved file cannot hold (it would "
                    "run code when loaded): give the column names, or pickle the pipeline "
                    "(pickles run code when loaded: only load those you trust)."
                )
            _check_step(inner, [*path, name])
        return
    functions = [value for value in (step.func, step.inverse_func, step.feature_names_out)
                 if callable(value)] if isinstance(step, FunctionTransformer) else []
    if functions:
        raise ValueError(
            f"Step {_step_path(path)} is a FunctionTransformer: it holds a function "
            f"({functions[0]!r}), code, which a saved file cannot hold (it would run code "
            "when loaded). Pickle the pipeline instead (pickles run code when loaded: "
            "only load those you trust)."
        )
    if type(step) is SimpleImputer and step.add_indicator:
        raise ValueError(
            f"Step {_step_path(path)} is a SimpleImputer with add_indicator=True: skl2onnx "
            "does not convert its missing indicator, so no ONNX graph can serve the "
            "pipeline. Pickle it instead (pickles run code when loaded: only load those "
            "you trust)."
        )
    if not any(type(step) is cls for cls in SKLEARN_TRANSFORMERS.values()):
        raise ValueError(
            f"Step {_step_path(path)} is a {type(step).__name__}: a saved pipeline holds "
            f"the transformers {sorted(cls.__name__ for cls in SKLEARN_TRANSFORMERS.values())}"
            " and ends in an estimator of skl_ortgrad. Pickle it instead (pickles run code "
            "when loaded: only load those you trust)."
        )


# -- the served graph -----------------------------------------------------------------


def _tensor_kind(dtype: np.dtype) -> str:
    """``"string"``, ``"int64"`` or ``"float"``: the input type for a column of ``dtype``."""
    if dtype.kind in "OUS":
        return "string"
    return "int64" if dtype.kind in "iub" else "float"


def _column_kinds(step: Any, n_columns: int) -> list[str]:
    """The input type of each of the ``n_columns`` columns ``step`` reads."""
    if type(step) is Pipeline:
        first = next((inner for _, inner in step.steps if inner not in _NO_STEP), None)
        return _column_kinds(first, n_columns)
    if type(step) is OneHotEncoder:
        return [_tensor_kind(categories.dtype) for categories in step.categories_]
    if type(step) is SimpleImputer:
        return [_tensor_kind(step._fit_dtype)] * n_columns
    return ["float"] * n_columns


def _column_names(columns: Any, names: np.ndarray) -> list[str]:
    """The names of the columns a ``ColumnTransformer`` entry selects."""
    if isinstance(columns, str | int):
        columns = [columns]
    if isinstance(columns, slice):
        return [str(name) for name in names[columns]]
    selected = np.asarray(columns)
    if selected.dtype.kind in "biu":
        return [str(name) for name in names[selected]]
    return [str(name) for name in selected]


def _input_types(pipeline: Pipeline, dtype: np.dtype) -> list[tuple[str, Any]]:
    """skl2onnx's ``initial_types`` for the data ``pipeline`` was fitted on."""
    # skl2onnx is imported when a pipeline is saved, not with skl_ortgrad (its import
    # registers skl_ortgrad's converters, skl_ortgrad._import_hooks).
    from skl2onnx.common.data_types import (
        DoubleTensorType,
        FloatTensorType,
        Int64TensorType,
        StringTensorType,
    )

    float_type = DoubleTensorType if dtype == np.float64 else FloatTensorType
    first = next((step for _, step in pipeline.steps if step not in _NO_STEP), None)
    names = getattr(first, "feature_names_in_", None)
    if type(first) is not ColumnTransformer or names is None:
        return [("X", float_type([None, first.n_features_in_]))]
    kinds: dict[str, str] = {}
    for _, step, columns in first.transformers_:
        if step == "drop":
            continue
        selected = _column_names(columns, names)
        kinds.update(zip(selected, _column_kinds(step, len(selected)), strict=True))
    types = {"string": StringTensorType, "int64": Int64TensorType, "float": float_type}
    return [(str(name), types[kinds.get(str(name), "float")]([None, 1])) for name in names]


def _drop_unused_inputs(model: onnx.ModelProto) -> None:
    """Remove the inputs no node reads (columns the pipeline drops), in place."""
    read = {name for node in model.graph.node for name in node.input}
    read |= {name for node in model.graph.node for name in subgraph_inputs(node)}
    read |= {out.name for out in model.graph.output}
    kept = [value for value in model.graph.input if value.name in read]
    del model.graph.input[:]
    model.graph.input.extend(kept)


def served_model(pipeline: Pipeline) -> onnx.ModelProto:
    """The whole fitted pipeline as one ONNX graph, converted by skl2onnx.

    Raises
    ------
    ValueError
        If skl2onnx cannot convert it.
    """
    from skl2onnx import to_onnx

    final = pipeline.steps[-1][1]
    dtype = final.optimizer_.model_dtype()
    options = {id(final): {"zipmap": False}} if is_classifier(final) else None
    try:
        model = to_onnx(pipeline, initial_types=_input_types(pipeline, dtype),
                        target_opset=TARGET_OPSET, options=options)
    except (RuntimeError, TypeError, ValueError, NotImplementedError, KeyError) as exc:
        raise ValueError(f"skl2onnx cannot convert the pipeline to ONNX: {exc}") from exc
    _drop_unused_inputs(model)
    return model


# -- the entry --------------------------------------------------------------------------


def _encode_nested(encoder: StateEncoder, estimator: BaseOnnxEstimator, where: str) -> dict:
    return {"$estimator": encode_estimator(estimator, encoder, embed_graph=True)}


def _decode_nested(decoder: StateDecoder, value: dict, where: str) -> BaseOnnxEstimator:
    if set(value) != {"$estimator"}:
        raise ValueError(f"{where}: expected the fields ['$estimator'], got {sorted(value)}.")
    return decode_estimator(value["$estimator"], decoder, None)


def pipeline_encoder() -> StateEncoder:
    """The encoder of a pipeline's entry: transformers, and estimators with their graph."""
    return StateEncoder(transformers=True,
                        objects={cls: _encode_nested for cls in ESTIMATORS.values()})


def encode_pipeline(pipeline: Pipeline, encoder: StateEncoder) -> dict[str, Any]:
    """The JSON entry of a pipeline that :func:`check_pipeline` accepted."""
    return {"scikit-learn": sklearn.__version__, "model": encoder.encode(pipeline, "pipeline")}


def decode_pipeline(entry: Any, tensors: list[onnx.TensorProto]) -> Pipeline:
    """The pipeline :func:`encode_pipeline` wrote as ``entry``.

    A file written with another version of scikit-learn, whose transformers may keep
    another private state, loads with scikit-learn's ``InconsistentVersionWarning``.

    Raises
    ------
    ValueError
        If ``entry`` is not one :func:`encode_pipeline` writes.
    """
    if not isinstance(entry, dict) or set(entry) != {"scikit-learn", "model"}:
        raise ValueError("the pipeline entry has the fields ['model', 'scikit-learn'].")
    decoder = StateDecoder(tensors, transformers=True,
                           objects={"$estimator": _decode_nested})
    pipeline = decoder.decode(entry["model"], "pipeline")
    if type(pipeline) is not Pipeline or not pipeline.steps or not is_estimator(
            pipeline.steps[-1][1]):
        raise ValueError("the entry is not a Pipeline ending in an estimator of skl_ortgrad.")
    if entry["scikit-learn"] != sklearn.__version__:
        warnings.warn(InconsistentVersionWarning(
            estimator_name="Pipeline", current_sklearn_version=sklearn.__version__,
            original_sklearn_version=str(entry["scikit-learn"])), stacklevel=3)
    return pipeline
