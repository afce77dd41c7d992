"""Keep onnxruntime's import from configuring the root logger, and from importing torch.

onnxruntime-training's ``import onnxruntime`` imports ``onnxruntime.training``, whose
``onnxruntime/tools/logger.py`` calls ``logging.basicConfig()`` at import time: the root
logger gets a stderr handler, and a user's later ``logging.basicConfig(level=...,
filename=...)`` silently does nothing, since it only acts on a root logger without
handlers. ``import skl_ortgrad`` does not import onnxruntime (the first fit or predict
does, :mod:`skl_ortgrad._import_hooks`): this module makes its first import, whoever
makes it, run inside :func:`root_logger_kept`, which puts the root logger's handlers and
level back as they were before it.

The same import would load torch where it is installed (2.5 s,
:func:`~skl_ortgrad._import_hooks.refused`): torch is refused to it, which leaves
``onnxruntime.training`` unimported (it needs torch where torch is installed). Its later
import, if any, then runs inside :func:`root_logger_kept` too
(:func:`onnxruntime_first_import`).
"""

import importlib.util
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from skl_ortgrad._import_hooks import around_import, refused


@contextmanager
def root_logger_kept() -> Iterator[None]:
    """Remove (and close) the root logger's handlers added inside, restore its level."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        yield
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        root.setLevel(level)


@contextmanager
def onnxruntime_first_import() -> Iterator[None]:
    """:func:`root_logger_kept` without torch; then, if ``onnxruntime.training`` exists
    and is not imported, its first import inside :func:`root_logger_kept`."""
    with root_logger_kept(), refused("torch"):
        yield
    if ("onnxruntime.training" not in sys.modules
            and importlib.util.find_spec("onnxruntime.training") is not None):
        around_import("onnxruntime.training", root_logger_kept)


around_import("onnxruntime", onnxruntime_first_import)
