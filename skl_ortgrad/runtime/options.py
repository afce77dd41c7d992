"""Session options of the package's onnxruntime sessions.

onnxruntime is imported by the functions that need it: ``import skl_ortgrad`` does not
load it (:mod:`skl_ortgrad._import_hooks`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onnxruntime import SessionOptions


def session_options(n_threads: int = 1, log_severity_level: int = 3) -> SessionOptions:
    """Options of a training or inference session: ``n_threads`` intra-op threads (one
    is fastest on small graphs), one inter-op thread, and a log level."""
    from onnxruntime import SessionOptions

    options = SessionOptions()
    options.intra_op_num_threads = int(n_threads)
    options.inter_op_num_threads = 1
    options.log_severity_level = log_severity_level
    return options


# Public SessionOptions properties that can be read back; config entries, custom op
# libraries, added initializers and free-dimension overrides cannot and are not copied.
_SESSION_PROPERTIES = (
    "enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse", "enable_profiling",
    "execution_mode", "execution_order", "inter_op_num_threads", "intra_op_num_threads",
    "log_severity_level", "log_verbosity_level", "logid", "profile_file_prefix",
    "use_deterministic_compute",
)


def options_key(options: SessionOptions) -> tuple[str, ...]:
    """What tells two ``SessionOptions`` apart in a cache key: every readable property.

    Session config entries, custom op libraries, added initializers and free-dimension
    overrides cannot be read back: they are not part of the key (the package sets none).
    """
    names = (*_SESSION_PROPERTIES, "graph_optimization_level", "optimized_model_filepath")
    return tuple(str(getattr(options, name)) for name in names)


def unoptimized_session_options(options: SessionOptions | None = None) -> SessionOptions:
    """A copy of ``options`` with graph optimizations disabled.

    A rewritten float64 gradient graph must run as written: onnxruntime's optimizers
    would fuse ``Transpose`` + ``MatMul`` back into ``FusedMatMul``, which has no double
    kernel. ``SessionOptions`` neither pickles nor copies, so the readable properties are
    copied one by one (session config entries and custom op libraries are not readable
    and are lost); the caller's object is left untouched.
    """
    from onnxruntime import GraphOptimizationLevel, SessionOptions

    result = SessionOptions()
    if options is not None:
        for name in _SESSION_PROPERTIES:
            setattr(result, name, getattr(options, name))
    result.graph_optimization_level = GraphOptimizationLevel.ORT_DISABLE_ALL
    return result
