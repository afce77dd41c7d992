"""Devices and providers: the CUDA error names the README's install command."""

import re
import sys
from pathlib import Path

import pytest

from skl_ortgrad.runtime import devices

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def _readme_gpu_command(python_row):
    """The GPU install command of the README's install table row for ``python_row``."""
    row = next(line for line in README.splitlines() if line.startswith(f"| {python_row} |"))
    return re.search(r"CUDA \d+: `([^`]+)`", row)[1]


@pytest.mark.parametrize(("version", "python_row"), [
    ((3, 11, 7), "3.10, 3.11, 3.12"), ((3, 12, 0), "3.10, 3.11, 3.12"),
    ((3, 13, 0), "3.13 and later"), ((3, 14, 1), "3.13 and later")])
def test_cuda_without_a_cuda_build_gives_the_readme_command(monkeypatch, version, python_row):
    monkeypatch.setattr(devices, "get_available_providers", lambda: ["CPUExecutionProvider"])
    monkeypatch.setattr(sys, "version_info", version)
    with pytest.raises(ValueError, match="needs CUDAExecutionProvider") as info:
        devices.device_providers("cuda:1")
    assert f"`{_readme_gpu_command(python_row)}`" in str(info.value)
    assert devices.device_providers("cpu") == ["CPUExecutionProvider"]
