"""The process-wide cache of onnxruntime inference sessions.

Building an ``InferenceSession`` costs 0.5 to 9 ms even for the graphs of a binary
logistic regression (graph resolution, optimization, kernel creation), and a small fit
needs several: a grid search of 20 small fits spent more time creating sessions than
training. The graphs the
package runs take the weights as inputs, never as initializers, so the same model bytes
come back fit after fit (other random initial weights, another ``alpha`` or learning
rate): :func:`cached_session` builds each distinct session once and hands the same
object to every caller.

Sharing is safe because callers only ``run`` a session, which onnxruntime allows from
several threads at once, and each keeps its own output buffers and ``RunOptions``. The
cache is bounded (:data:`SESSIONS`, least recently used first out) and guarded by a
lock; a session it forgets stays alive as long as someone holds it.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import onnx

if TYPE_CHECKING:
    from onnxruntime import InferenceSession, SessionOptions

from skl_ortgrad._cache import BoundedCache, Unfreezable, digest, freeze
from skl_ortgrad.runtime.options import options_key

#: Every session of the package comes from this cache (64 sessions at most).
SESSIONS: BoundedCache[InferenceSession] = BoundedCache(64)


def cached_session(
    model: onnx.ModelProto | bytes,
    options: SessionOptions,
    providers: list[Any],
    provider_options: list[dict] | None = None,
) -> InferenceSession:
    """The session of ``model`` with these options and providers, from :data:`SESSIONS`.

    The key is the hash of the serialized model, the readable session options
    (:func:`~skl_ortgrad.runtime.options.options_key`), the providers and their options.
    Options with ``enable_profiling`` always get a session of their own (a profile
    belongs to one caller), and so do providers whose options have no reliable key
    (:func:`~skl_ortgrad._cache.freeze`).

    Parameters
    ----------
    model : onnx.ModelProto or bytes
        The model or its serialization.
    options : SessionOptions
        Threads, optimization level, log level...
    providers : list
        Execution providers (names, or ``(name, options)`` pairs).
    provider_options : list of dict, optional
        Their options.
    """
    from onnxruntime import InferenceSession

    content = model if isinstance(model, bytes) else model.SerializeToString()

    def build() -> InferenceSession:
        return InferenceSession(content, options, providers=providers,
                                provider_options=provider_options)

    if options.enable_profiling:
        return build()
    try:
        key = (digest(content), options_key(options), freeze(providers),
               freeze(provider_options))
    except Unfreezable:
        return build()
    return SESSIONS.get(key, build)


_IO_NAMES: weakref.WeakKeyDictionary[InferenceSession,
                                     tuple[tuple[str, ...], tuple[str, ...]]] = (
    weakref.WeakKeyDictionary())


def io_names(session: InferenceSession) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The names of ``session``'s inputs and of its outputs, in order, read once per
    session: each read of an onnxruntime ``NodeArg`` costs about a microsecond, and the
    cached sessions serve fit after fit. Tuples: every caller shares them."""
    names = _IO_NAMES.get(session)
    if names is None:
        names = (tuple(i.name for i in session.get_inputs()),
                 tuple(o.name for o in session.get_outputs()))
        _IO_NAMES[session] = names
    return names
