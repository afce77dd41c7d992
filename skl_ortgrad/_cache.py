"""Bounded, thread-safe memoization shared by the package's process-wide caches.

Several things a small fit used to rebuild every time are the same fit after fit
(onnxruntime sessions, skl2onnx conversions, gradient graphs): each is kept in a
:class:`BoundedCache`, keyed by a hashable description of what it depends on
(:func:`freeze`, :func:`digest`).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Generic, NamedTuple, TypeVar

import numpy as np

Value = TypeVar("Value")


class CacheInfo(NamedTuple):
    """Statistics of a :class:`BoundedCache`, as ``functools.lru_cache`` reports them."""

    hits: int
    misses: int
    maxsize: int
    currsize: int


class Unfreezable(TypeError):
    """A value has no reliable hashable description: whatever depends on it is not cached."""


def freeze(value: Any) -> Hashable:
    """A hashable description of ``value`` that is equal only for equal values.

    Numbers, strings, bytes, None, numpy scalars and dtypes stand for themselves (with
    their type, so that 1 and 1.0 differ); lists and tuples become tuples, dicts sorted
    tuples of items, arrays their dtype, shape and bytes, types their qualified name.

    Raises
    ------
    Unfreezable
        For any other object: its ``repr`` may hide a difference (scikit-learn
        abbreviates long arrays) and its ``id`` can be reused once it is freed.
    """
    if value is None or isinstance(value, bool | int | float | str | bytes | np.generic):
        return type(value).__name__, value
    if isinstance(value, list | tuple):
        return type(value).__name__, tuple(freeze(item) for item in value)
    if isinstance(value, dict):
        return "dict", tuple(sorted((freeze(key), freeze(item)) for key, item in value.items()))
    if isinstance(value, set | frozenset):
        return "set", tuple(sorted(freeze(item) for item in value))
    if isinstance(value, np.ndarray) and value.dtype != object:
        return "array", value.dtype.str, value.shape, value.tobytes()
    if isinstance(value, np.dtype):
        return "dtype", value.str
    if isinstance(value, type):
        return "type", f"{value.__module__}.{value.__qualname__}"
    raise Unfreezable(f"No cache key for a {type(value).__name__}.")


def digest(content: bytes) -> tuple[bytes, int]:
    """A short key standing for ``content`` (a serialized model): its hash and length."""
    return hashlib.blake2b(content, digest_size=20).digest(), len(content)


class BoundedCache(Generic[Value]):
    """A least-recently-used cache of at most ``maxsize`` values, safe across threads.

    Parameters
    ----------
    maxsize : int
        Values kept; the least recently used one is forgotten beyond that.
    """

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError(f"maxsize must be >= 1, got {maxsize}.")
        self.maxsize = int(maxsize)
        self._values: OrderedDict[Hashable, Value] = OrderedDict()
        self._lock = threading.Lock()
        self._hits = self._misses = 0

    def get(self, key: Hashable, build: Callable[[], Value]) -> Value:
        """The value of ``key``; ``build()`` makes and stores it on a miss.

        ``build`` runs outside the lock: one slow build does not hold up the threads
        whose value is already there. Two threads that miss the same key both build it;
        the first stored is kept and returned to both.
        """
        with self._lock:
            if key in self._values:
                self._hits += 1
                self._values.move_to_end(key)
                return self._values[key]
            self._misses += 1
        value = build()
        with self._lock:
            value = self._values.setdefault(key, value)
            self._values.move_to_end(key)
            while len(self._values) > self.maxsize:
                self._values.popitem(last=False)
        return value

    def clear(self) -> None:
        """Forget every value and reset the statistics."""
        with self._lock:
            self._values.clear()
            self._hits = self._misses = 0

    def info(self) -> CacheInfo:
        """Hits, misses, bound and current size."""
        with self._lock:
            return CacheInfo(self._hits, self._misses, self.maxsize, len(self._values))

    def __len__(self) -> int:
        with self._lock:
            return len(self._values)
