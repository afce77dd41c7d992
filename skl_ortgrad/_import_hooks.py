"""Code that runs around the first import of another package, whoever imports it.

``import skl_ortgrad`` loads neither onnxruntime (0.3 s, 60 MB) nor skl2onnx (0.25 s
more): the first fit, predict or conversion imports them. Two things used to be done by
importing them eagerly and must still happen whichever code imports them first, the
package's or the user's:

- onnxruntime-training's import configures the root logger (``logging.basicConfig()``
  in its ``onnxruntime.training``): its import must run inside a guard that puts the root
  logger back (:mod:`skl_ortgrad._logging`);
- ``skl2onnx.to_onnx(pipeline, X)`` must find the estimators' converters: they are
  registered right after skl2onnx is imported (:mod:`skl_ortgrad.estimators`).

And one is kept from happening: onnxruntime-training's ``import onnxruntime`` checks its
build by importing ``onnxruntime.training.ortmodule`` (torch's ``ORTModule``), whose
package imports torch (and sympy) wherever torch is installed: 2.5 of its 2.7 s, paid by
the first fit of every new process (each worker of a ``GridSearchCV(n_jobs=2)`` on a cold
pool). Nothing of skl_ortgrad uses torch: the import runs inside :func:`refused`, which
makes torch's import fail in the importing thread (the check takes it as a build without
``ORTModule`` and goes on), and leaves torch importable afterwards: a later ``import
onnxruntime.training`` runs in full, as it would have then (:mod:`skl_ortgrad._logging`).

:func:`around_import` puts a finder first on ``sys.meta_path`` that finds the package as
the other finders do and wraps its loader's ``exec_module`` in a context manager; the
module keeps its own loader (``__loader__``, ``__spec__.loader``), and the finder removes
itself once every package it waits for is imported.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, contextmanager
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

Manager = Callable[[], AbstractContextManager[Any]]


class _Loader(importlib.abc.Loader):
    """``loader``, with ``exec_module`` run inside ``managers``."""

    def __init__(self, loader: Any, managers: list[Manager]) -> None:
        self._loader = loader
        self._managers = managers

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # The module and its resources (importlib.resources reads __spec__.loader) see
        # their own loader.
        module.__loader__ = self._loader
        if module.__spec__ is not None:
            module.__spec__.loader = self._loader
        _run_inside(self._managers, lambda: self._loader.exec_module(module))


def _run_inside(managers: list[Manager], call: Callable[[], None]) -> None:
    if not managers:
        call()
        return
    with managers[0]():
        _run_inside(managers[1:], call)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the packages of :data:`_WAITING` through the other finders, wrapped."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        with _LOCK:
            managers = _WAITING.pop(fullname, None)
            if managers is None:
                return None
            if not _WAITING and self in sys.meta_path:
                sys.meta_path.remove(self)
        for finder in [f for f in sys.meta_path if f is not self]:
            find = getattr(finder, "find_spec", None)
            spec = None if find is None else find(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _Loader(spec.loader, managers)
                return spec
        return None


_LOCK = threading.Lock()
#: Top-level package name -> the context managers its first import runs inside.
_WAITING: dict[str, list[Manager]] = {}
_FINDER = _Finder()


def around_import(name: str, manager: Manager) -> bool:
    """Run the first import of the top-level package ``name`` inside ``manager()``.

    Returns
    -------
    bool
        False when ``name`` is imported already (nothing is installed), True otherwise.
    """
    with _LOCK:
        if name in sys.modules:
            return False
        _WAITING.setdefault(name, []).append(manager)
        if _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)
    return True


@contextmanager
def refused(*names: str) -> Any:
    """Within the block, an import of the top-level packages ``names`` (not imported yet)
    or of their modules, by the thread that entered it, raises ``ModuleNotFoundError``
    as if they were not installed; other threads import them as usual."""
    finder = _Refusing({name for name in names if name not in sys.modules},
                       threading.get_ident())
    with _LOCK:
        sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        with _LOCK:
            sys.meta_path.remove(finder)


class _Refusing(importlib.abc.MetaPathFinder):
    """Refuses the top-level packages ``names`` to the thread ``thread``."""

    def __init__(self, names: set[str], thread: int) -> None:
        self._names, self._thread = names, thread

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname.partition(".")[0] in self._names and threading.get_ident() == self._thread:
            raise ModuleNotFoundError(f"No module named {fullname!r}", name=fullname)
        return None


def after_import(name: str, callback: Callable[[ModuleType], None]) -> None:
    """Call ``callback(module)`` once the top-level package ``name`` is imported: now
    when it is already, else right after its first import completes."""

    @contextmanager
    def then_call() -> Any:
        yield
        callback(sys.modules[name])

    if not around_import(name, then_call):
        callback(sys.modules[name])
