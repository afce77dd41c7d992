"""Session options of the package's onnxruntime sessions.

onnxruntime is imported by the functions that need it: ``import skl_ortgrad`` does not
load it (:mod:`skl_ortgrad._import_hooks`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onnxruntime import SessionOptions


#: The session config entry that lets onnxruntime's intra-op threads spin between tasks.
ALLOW_SPINNING = "session.intra_op.allow_spinning"


def session_options(n_threads: int = 1, log_severity_level: int = 3,
                    spin: bool = False) -> SessionOptions:
    """Options of a training or inference session: ``n_threads`` intra-op threads (one
    is fastest on small graphs), one inter-op thread, a log level, and threads that
    spin between tasks (``spin``, onnxruntime's default: a prediction, whose blocks run
    one after the other) or sleep (a training step: :func:`_sleeping_threads`)."""
    from onnxruntime import SessionOptions

    options = SessionOptions()
    options.intra_op_num_threads = int(n_threads)
    options.inter_op_num_threads = 1
    options.log_severity_level = log_severity_level
    if not spin:
        _sleeping_threads(options)
    return options


def _sleeping_threads(options: SessionOptions) -> None:
    """Keep the intra-op threads of a session of several from spinning once their task
    is done (onnxruntime's default): a training step hands the cores back to the calling
    thread, whose numpy update and Python work follow every ``run``.

    Measured on a 2-core Intel Xeon (December 2026, onnxruntime 1.19.2), one
    ``partial_fit`` epoch of a 784-256-128-10 MLP on 20,000 rows, two intra-op threads,
    two estimators in one process in turns (8 rounds): with another process busy on the
    machine, sleeping threads took 0.70x and 0.75x the time of spinning ones (0.37-0.40
    s against 0.52 s); in two such processes training side by side, 0.63x and 0.66x;
    on an idle machine, 0.98x and 1.02x. A prediction runs its blocks one after the
    other: there, sleeping threads were slower (a 100-128-10 MLP predicting 200,000 rows
    on two threads, two estimators in turns, 15 rounds: 1.07x and 1.13x), so prediction
    sessions spin. A session of one thread has no thread pool: nothing to set.
    """
    if options.intra_op_num_threads != 1:
        options.add_session_config_entry(ALLOW_SPINNING, "0")


# Public SessionOptions properties that can be read back; config entries (but
# ALLOW_SPINNING), custom op libraries, added initializers and free-dimension overrides
# are not copied.
_SESSION_PROPERTIES = (
    "enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse", "enable_profiling",
    "execution_mode", "execution_order", "inter_op_num_threads", "intra_op_num_threads",
    "log_severity_level", "log_verbosity_level", "logid", "profile_file_prefix",
    "use_deterministic_compute",
)


def options_key(options: SessionOptions) -> tuple[str | None, ...]:
    """What tells two ``SessionOptions`` apart in a cache key: every readable property,
    and the :data:`ALLOW_SPINNING` entry (None where unset).

    Other session config entries, custom op libraries, added initializers and
    free-dimension overrides are not part of the key (the package sets none of them).
    """
    names = (*_SESSION_PROPERTIES, "graph_optimization_level", "optimized_model_filepath")
    return (*(str(getattr(options, name)) for name in names),
            _config_entry(options, ALLOW_SPINNING))


def _config_entry(options: SessionOptions, key: str) -> str | None:
    """The session config entry ``key`` of ``options``, None where unset."""
    try:
        return options.get_session_config_entry(key)
    except RuntimeError:  # onnxruntime's answer for a key never set
        return None


def unoptimized_session_options(options: SessionOptions | None = None) -> SessionOptions:
    """A copy of ``options`` with graph optimizations disabled.

    A rewritten float64 gradient graph must run as written: onnxruntime's optimizers
    would fuse ``Transpose`` + ``MatMul`` back into ``FusedMatMul``, which has no double
    kernel. ``SessionOptions`` neither pickles nor copies, so the readable properties are
    copied one by one, and :data:`ALLOW_SPINNING` where set (as
    :func:`_sleeping_threads` sets it otherwise); other session config entries and
    custom op libraries are lost. The caller's object is left untouched.
    """
    from onnxruntime import GraphOptimizationLevel, SessionOptions

    result = SessionOptions()
    if options is not None:
        for name in _SESSION_PROPERTIES:
            setattr(result, name, getattr(options, name))
    result.graph_optimization_level = GraphOptimizationLevel.ORT_DISABLE_ALL
    spinning = None if options is None else _config_entry(options, ALLOW_SPINNING)
    if spinning is None:
        _sleeping_threads(result)
    else:
        result.add_session_config_entry(ALLOW_SPINNING, spinning)
    return result
