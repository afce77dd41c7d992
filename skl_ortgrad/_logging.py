"""Import onnxruntime without letting it configure the root logger.

onnxruntime-training's ``import onnxruntime`` imports ``onnxruntime.training``, whose
``onnxruntime/tools/logger.py`` calls ``logging.basicConfig()`` at import time: the root
logger gets a stderr handler, and a user's later ``logging.basicConfig(level=...,
filename=...)`` silently does nothing, since it only acts on a root logger without
handlers. ``skl_ortgrad/__init__.py`` imports this module before anything that imports
onnxruntime, so the first import of onnxruntime happens here, and the root logger's
handlers and level are put back as they were before it.
"""

import logging


def _import_onnxruntime() -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        import onnxruntime  # noqa: F401
    finally:
        for handler in root.handlers[:]:
            if handler not in handlers:
                root.removeHandler(handler)
                handler.close()
        root.setLevel(level)


_import_onnxruntime()
