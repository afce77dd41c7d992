r"""An integrity digest over the whole of a saved file, checked before anything is read.

A file of :func:`skl_ortgrad.save` is an ONNX model (a protobuf message) whose bytes
:math:`P` are followed by one more ``metadata_props`` entry, the *trailer*

.. math::

    T(P) = \mathrm{ModelProto}(\mathrm{metadata\_props} = [(\texttt{skl\_ortgrad.sha256},
    \mathrm{hex}(\mathrm{SHA256}(P)))])

serialized on its own: protobuf merges a message's fields wherever they appear, so
:math:`P \, T(P)` is still the ONNX model, with the digest as its last metadata entry,
and onnxruntime serves it as is. :math:`P` holds everything a load reads: the graph, its
weights, the state tensors, the JSON document with the class names and the format
version.

:func:`signed_payload` accepts a file only if it ends with exactly :math:`T(P)` for the
bytes :math:`P` before it: a change of any byte, in :math:`P` (the digest no longer
matches) or in :math:`T` (its fixed layout breaks), is detected, before any parsing.
The digest guards against damage (disk, transfer, a partial copy, an editor), not against
someone who rewrites the file on purpose and recomputes it: loading runs no code from the
file either way.

This module imports only the standard library and onnx.
"""

from __future__ import annotations

import hashlib

import onnx

#: Key of the digest's ``metadata_props`` entry.
DIGEST_KEY = "skl_ortgrad.sha256"


def _trailer(hexdigest: str) -> bytes:
    """The serialized ``metadata_props`` entry holding ``hexdigest``."""
    model = onnx.ModelProto()
    model.metadata_props.add(key=DIGEST_KEY, value=hexdigest)
    return model.SerializeToString()


#: Length of every trailer (a SHA-256 is 64 hexadecimal digits).
TRAILER_SIZE = len(_trailer("0" * 64))


def sign(payload: bytes) -> bytes:
    """``payload`` (a serialized ONNX model) followed by the trailer of its digest."""
    return payload + _trailer(hashlib.sha256(payload).hexdigest())


def signed_payload(data: bytes) -> bytes | None:
    """The bytes :func:`sign` was given, if ``data`` is exactly what it returned.

    Returns
    -------
    bytes or None
        ``data`` without its trailer when the trailer is there, whole, and holds the
        digest of the bytes before it; None otherwise (no digest, or a damaged file).
    """
    if len(data) <= TRAILER_SIZE:
        return None
    payload = data[:-TRAILER_SIZE]
    if data[-TRAILER_SIZE:] != _trailer(hashlib.sha256(payload).hexdigest()):
        return None
    return payload


def ends_with_a_digest(data: bytes) -> bool:
    """Whether the digest's key is in the last bytes of ``data``, where :func:`sign`
    writes it: a file it signed (if :func:`signed_payload` refuses it, a damaged one).
    Only the end is looked at: elsewhere the key could be a feature name of a file
    without digest."""
    return DIGEST_KEY.encode() in data[-TRAILER_SIZE:]
