"""Keep onnxruntime's import from configuring the root logger.

onnxruntime-training's ``import onnxruntime`` imports ``onnxruntime.training``, whose
``onnxruntime/tools/logger.py`` calls ``logging.basicConfig()`` at import time: the root
logger gets a stderr handler, and a user's later ``logging.basicConfig(level=...,
filename=...)`` silently does nothing, since it only acts on a root logger without
handlers. ``import skl_ortgrad`` does not import onnxruntime (the first fit or predict
does, :mod:`skl_ortgrad._import_hooks`): this module makes its first import, whoever
makes it, run inside :func:`root_logger_kept`, which puts the root logger's handlers and
level back as they were before it.
"""

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from skl_ortgrad._import_hooks import around_import


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


around_import("onnxruntime", root_logger_kept)
