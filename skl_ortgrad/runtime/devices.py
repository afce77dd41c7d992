"""Devices, execution providers and log levels of the onnxruntime sessions.

onnxruntime is imported by the functions that need it: ``import skl_ortgrad`` does not
load it (:mod:`skl_ortgrad._import_hooks`).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from onnxruntime.capi._pybind_state import OrtDevice

_PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}


def parse_device(device: str) -> tuple[str, int]:
    """Split ``'cpu'``, ``'cuda'`` or ``'cuda:1'`` into (kind, index).

    Raises
    ------
    ValueError
        For any other string.
    """
    kind, _, index = str(device).partition(":")
    if kind not in _PROVIDERS or (index and not index.isdigit()) or (kind == "cpu" and index):
        raise ValueError(f"Unknown device {device!r}: use 'cpu', 'cuda' or 'cuda:<index>'.")
    return kind, int(index or 0)


def device_providers(device: str) -> list[str]:
    """Execution providers for ``device``, checked against the installed onnxruntime.

    Raises
    ------
    ValueError
        If ``device`` is a CUDA device and onnxruntime was built without CUDA (a CPU
        package is installed: ``onnxruntime-training-cpu`` up to Python 3.12, plain
        ``onnxruntime`` from 3.13 on); the message gives the README's install command
        for the running Python.
    """
    kind, _ = parse_device(device)
    provider = _PROVIDERS[kind]
    if provider not in get_available_providers():
        # onnxruntime-training's CUDA 12 build has wheels up to Python 3.12 only; later
        # Pythons take onnxruntime-gpu (CUDA 13). Each replaces the CPU package.
        install = (
            "pip uninstall onnxruntime && pip install -e .[gpu-cuda13]"
            if sys.version_info >= (3, 13)
            else "pip uninstall onnxruntime-training-cpu && pip install -e .[gpu]"
        )
        raise ValueError(
            f"device={device!r} needs {provider}, which this onnxruntime does not have "
            f"(available: {get_available_providers()}). Install the CUDA build, in the "
            f"skl_ortgrad checkout: `{install}`."
        )
    return [provider] if kind == "cpu" else [provider, _PROVIDERS["cpu"]]


def get_available_providers() -> list[str]:
    """The execution providers of the installed onnxruntime."""
    from onnxruntime.capi._pybind_state import get_available_providers as available

    return available()


def log_severity(enable_logging: bool = False, verbose: int = 0) -> int:
    """onnxruntime's log severity for our sessions.

    Everything with ``enable_logging``; its warnings (e.g. "unreachable nodes" in
    converted graphs, harmless here) only from ``verbose >= 2``; otherwise errors only.
    """
    if enable_logging:
        return 0
    return 2 if verbose >= 2 else 3


def ort_device(device: str) -> OrtDevice:
    """The ``OrtDevice`` for ``'cpu'``, ``'cuda'`` or ``'cuda:<index>'``."""
    from onnxruntime.capi._pybind_state import OrtDevice

    kind, index = parse_device(device)
    kind_id = OrtDevice.cpu() if kind == "cpu" else OrtDevice.cuda()
    return OrtDevice(kind_id, OrtDevice.default_memory(), index)
