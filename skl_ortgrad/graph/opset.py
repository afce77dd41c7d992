"""Which version of an operator set a model imports."""

from __future__ import annotations

from onnx import ModelProto

_MAIN_DOMAINS = ("", "ai.onnx")


def main_opset(model: ModelProto, default: int | None = None) -> int:
    """The version of the default ONNX domain that ``model`` imports.

    Raises
    ------
    ValueError
        If the model does not import it and no ``default`` is given.
    """
    for op in model.opset_import:
        if op.domain in _MAIN_DOMAINS:
            return op.version
    if default is None:
        raise ValueError("The model does not import the main ONNX domain.")
    return default


def other_domains(*models: ModelProto) -> list[tuple[str, int]]:
    """``(domain, version)`` of every other domain the models import (highest version)."""
    versions: dict[str, int] = {}
    for model in models:
        for op in model.opset_import:
            if op.domain not in _MAIN_DOMAINS:
                versions[op.domain] = max(versions.get(op.domain, 0), op.version)
    return sorted(versions.items())
