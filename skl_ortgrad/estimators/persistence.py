"""Save a fitted estimator, or a pipeline ending in one, as one ONNX file that serves,
resumes training, and runs no code when loaded.

The file is an ONNX model that ``InferenceSession(path)`` serves as is: the estimator's
``estimator.to_onnx()`` (outputs of ``predict`` and ``predict_proba``), or the whole
pipeline converted by skl2onnx (:mod:`~skl_ortgrad.estimators.pipeline_state`). Three
additions make it resumable and safe to read:

* the ``skl_ortgrad`` entry of ``metadata_props``, a JSON document: the format, the
  version of skl_ortgrad that wrote it, and the estimator
  (:mod:`~skl_ortgrad.estimators.estimator_state`: class name, parameters, fitted
  attributes, training state) or the pipeline (its steps, the scikit-learn version);
* the arrays that document refers to, as the initializers of the graph
  ``training_info[0].algorithm`` (ONNX's slot for training state), which onnxruntime
  ignores: initializers of the served graph that no node reads would be dropped with a
  warning at every session;
* last, the ``skl_ortgrad.sha256`` entry of ``metadata_props``: the SHA-256 of every
  byte before it (:mod:`~skl_ortgrad.estimators.integrity`).

:func:`load` checks the digest before it parses anything: a file with one byte changed
anywhere is refused. Files of format 1 (skl_ortgrad 0.1.0) have no digest; they load
only in exactly the layout that release wrote (one estimator, the two entries above,
nothing else, bytes that protobuf writes back identically), so that a damaged file of
the current format cannot pass for one. Then it reads only JSON values and tensors,
builds only the estimators and training objects of skl_ortgrad and a short list of
scikit-learn models and transformers, and checks types and shapes: a file that is
anything else is refused with a ``ValueError``. :func:`save` writes through
:func:`~skl_ortgrad.estimators.atomic_file.write_atomically`: a crash leaves the previous
file or the new one, never a torn one.
"""

from __future__ import annotations

import json
import os
from typing import Any

import onnx
from google.protobuf.message import DecodeError
from sklearn.pipeline import Pipeline

from skl_ortgrad._version import __version__
from skl_ortgrad.estimators.atomic_file import target_path, write_atomically
from skl_ortgrad.estimators.base import BaseOnnxEstimator
from skl_ortgrad.estimators.estimator_state import (
    ESTIMATORS,
    decode_estimator,
    encode_estimator,
    is_estimator,
)
from skl_ortgrad.estimators.integrity import (
    DIGEST_KEY,
    ends_with_a_digest,
    sign,
    signed_payload,
)
from skl_ortgrad.estimators.pipeline_state import (
    check_pipeline,
    decode_pipeline,
    encode_pipeline,
    pipeline_encoder,
    served_model,
)
from skl_ortgrad.estimators.state_codec import StateDecoder, StateEncoder
from skl_ortgrad.graph.external import check_external_data

#: Version of the file format written; :func:`load` reads it and :data:`LEGACY_FORMAT`.
FORMAT = 2
#: The format of skl_ortgrad 0.1.0 (one estimator, no digest), and the release writing it.
LEGACY_FORMAT, LEGACY_VERSION = 1, "0.1.0"
#: Key of the JSON document in ``metadata_props``.
METADATA_KEY = "skl_ortgrad"
#: Name of the ``training_info`` graph holding the arrays.
STATE_GRAPH = "skl_ortgrad.training_state"

_DAMAGED = "the file was damaged, or changed after skl_ortgrad.save wrote it"


def save(estimator: BaseOnnxEstimator | Pipeline, path: str | os.PathLike) -> None:
    """Write a fitted estimator, or a ``Pipeline`` ending in one, to ``path``, an ONNX
    file (``.onnx``).

    The file is what onnxruntime serves (``estimator.to_onnx()``, or the whole pipeline
    as one graph) with the estimator's parameters, fitted attributes and training state
    (and a pipeline's steps) in its metadata, and a digest of all of it:
    ``onnxruntime.InferenceSession(path)`` serves it, and :func:`load` returns an
    estimator (a pipeline) that predicts the same and whose ``partial_fit`` (of its last
    step), or ``fit`` with ``warm_start=True``, continues bit for bit like the original's.
    The write is atomic: ``path`` holds the previous file or the new one, whatever
    happens.

    Parameters
    ----------
    estimator : fitted skl_ortgrad estimator or Pipeline
        One of the six estimators of skl_ortgrad (not a subclass), or a scikit-learn
        ``Pipeline`` ending in one whose other steps are ``ColumnTransformer``,
        ``Pipeline``, ``StandardScaler``, ``MinMaxScaler``, ``MaxAbsScaler``,
        ``RobustScaler``, ``OneHotEncoder``, ``SimpleImputer``, ``'passthrough'`` or
        ``'drop'``.
    path : str or os.PathLike
        The file written.

    Raises
    ------
    ValueError
        If ``path`` names no file (empty, or a folder), before anything is written; if
        ``estimator`` is neither, or holds something the format cannot (a
        ``RandomState`` parameter, a wrapped model other than the linear models and MLPs
        of scikit-learn, a ``FunctionTransformer``...): pickle it instead; scikit-learn's
        ``InvalidParameterError`` (a ``ValueError``) for a parameter set to an invalid
        value since the fit, which :func:`load` would refuse.
    sklearn.exceptions.NotFittedError
        If ``estimator`` is not fitted.
    """
    try:
        target = target_path(path)
    except ValueError as exc:
        raise ValueError(f"skl_ortgrad.save cannot write to {path!r}: {exc}") from None
    encoder: StateEncoder
    if type(estimator) is Pipeline:
        check_pipeline(estimator)
        encoder = pipeline_encoder()
        content = {"pipeline": encode_pipeline(estimator, encoder)}
        model = served_model(estimator)
    elif is_estimator(estimator):
        # load validates the parameters: a value set_params left invalid (refused at the
        # next fit) is refused here, before a file load would refuse is written.
        estimator._validate_params()
        encoder = StateEncoder(transformers=True)
        content = {"estimator": encode_estimator(estimator, encoder)}
        model = estimator.to_onnx()
    else:
        raise ValueError(
            f"skl_ortgrad.save writes the estimators {sorted(ESTIMATORS)} and Pipelines "
            f"ending in one, got {type(estimator).__name__}."
        )
    document = {"format": FORMAT, "version": __version__, **content}
    model.metadata_props.add(key=METADATA_KEY, value=json.dumps(document))
    state = model.training_info.add()
    state.algorithm.name = STATE_GRAPH
    state.algorithm.initializer.extend(encoder.tensors)
    write_atomically(target, sign(model.SerializeToString()))


def load(path: str | os.PathLike) -> BaseOnnxEstimator | Pipeline:
    """Read an estimator (or pipeline) written by :func:`save`; no code from the file is
    executed.

    Parameters
    ----------
    path : str or os.PathLike
        The file.

    Returns
    -------
    estimator or Pipeline
        The fitted estimator (pipeline), ready to predict and to continue training.

    Raises
    ------
    ValueError
        Naming the file, if its digest does not match its content (one byte changed
        anywhere), if it is not an ONNX model written by :func:`save`, names a class
        other than skl_ortgrad's estimators and training objects and the scikit-learn
        models and transformers :func:`save` accepts, holds values of the wrong type or
        shape, or tensors stored as external data.
    """
    with open(path, "rb") as stream:
        data = stream.read()
    try:
        model, document = _read(data)
        states = [info.algorithm for info in model.training_info
                  if info.algorithm.name == STATE_GRAPH]
        if len(states) != 1:
            raise ValueError(f"expected one training_info graph {STATE_GRAPH!r}, "
                             f"found {len(states)}.")
        tensors = list(states[0].initializer)
        if "pipeline" in document:
            return decode_pipeline(document["pipeline"], tensors)
        # Format 1 knew no transformers: strictly what 0.1.0 wrote.
        decoder = StateDecoder(tensors, transformers=document["format"] == FORMAT)
        return decode_estimator(document["estimator"], decoder, _served_graph(model))
    except (DecodeError, ValueError, TypeError, KeyError, AttributeError, IndexError,
            RecursionError) as exc:
        raise ValueError(f"Cannot load {os.fspath(path)!r} as a skl_ortgrad estimator: "
                         f"{exc}") from exc


def _read(data: bytes) -> tuple[onnx.ModelProto, dict[str, Any]]:
    """The model and document of a file, its digest checked first (or, without one,
    its layout: exactly that of format 1)."""
    signed = signed_payload(data) is not None
    if not signed and ends_with_a_digest(data):
        raise ValueError(f"its content does not match its integrity digest: {_DAMAGED}.")
    model = onnx.ModelProto()
    model.ParseFromString(data)
    check_external_data(model)
    document = _document(model)
    if signed:
        if document["format"] != FORMAT:
            raise ValueError(f"format {document['format']!r} with a digest: {_DAMAGED}.")
    elif document["format"] == FORMAT:
        raise ValueError(f"it has no integrity digest, which every file of format {FORMAT} "
                         f"ends with: {_DAMAGED}.")
    else:
        _check_legacy(model, document, data)
    return model, document


def _document(model: onnx.ModelProto) -> dict[str, Any]:
    """The JSON document of ``model``'s metadata, its format and fields checked."""
    texts = [prop.value for prop in model.metadata_props if prop.key == METADATA_KEY]
    if not texts:
        raise ValueError(f"no {METADATA_KEY!r} metadata: the file was not written by "
                         "skl_ortgrad.save.")
    if len(texts) > 1:
        raise ValueError(f"{len(texts)} {METADATA_KEY!r} metadata entries.")
    document = json.loads(texts[0])
    if not isinstance(document, dict) or "format" not in document:
        raise ValueError("the metadata is not a document of skl_ortgrad.save.")
    if type(document["format"]) is not int or document["format"] not in (LEGACY_FORMAT,
                                                                          FORMAT):
        raise ValueError(
            f"the file was written by skl_ortgrad {document.get('version')!r} in format "
            f"{document['format']!r}; skl_ortgrad {__version__} reads formats "
            f"{LEGACY_FORMAT} and {FORMAT}."
        )
    fields = [["estimator", "format", "version"]]
    if document["format"] == FORMAT:
        fields.append(["format", "pipeline", "version"])
    if sorted(document) not in fields:
        raise ValueError(f"the metadata is not a document of skl_ortgrad.save (format "
                         f"{document['format']}: fields {' or '.join(map(str, fields))}, "
                         f"got {sorted(document)}).")
    return document


def _check_legacy(model: onnx.ModelProto, document: dict[str, Any], data: bytes) -> None:
    """A file without digest is one of format 1 exactly as skl_ortgrad 0.1.0 wrote it."""
    if (document["version"] != LEGACY_VERSION
            or [prop.key for prop in model.metadata_props] != [METADATA_KEY]
            or len(model.training_info) != 1
            or model.SerializeToString() != data):
        raise ValueError(
            f"it has no integrity digest, which files have since format {FORMAT}, and is "
            f"not a file of format {LEGACY_FORMAT} as skl_ortgrad {LEGACY_VERSION} wrote "
            f"it: {_DAMAGED}."
        )


def _served_graph(model: onnx.ModelProto) -> onnx.ModelProto:
    """``model`` without what :func:`save` added: the graph ``to_onnx()`` returned."""
    graph = onnx.ModelProto()
    graph.CopyFrom(model)
    del graph.training_info[:]
    kept = [prop for prop in graph.metadata_props if prop.key not in (METADATA_KEY,
                                                                      DIGEST_KEY)]
    del graph.metadata_props[:]
    graph.metadata_props.extend(kept)
    return graph
