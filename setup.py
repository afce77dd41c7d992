"""Packaging for skl_ortgrad."""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
CPU_RUNTIME = "onnxruntime-training-cpu==1.19.2"
COMMON = [
    "onnx>=1.16",
    "skl2onnx>=1.17",
    "scikit-learn>=1.6",
    "numpy>=1.26",
    "pandas>=2.0",
    "scipy>=1.11",
    "tqdm>=4.60",
]

setup(
    name="skl_ortgrad",
    version="0.1.0",
    description=(
        "scikit-learn compatible estimators trained by onnxruntime-training, "
        "exporting the trained ONNX graph"
    ),
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["skl_ortgrad", "skl_ortgrad.*"]),
    python_requires=">=3.10,<3.13",
    install_requires=[CPU_RUNTIME, *COMMON],
    extras_require={
        # The CUDA build of onnxruntime-training provides the same `onnxruntime` module:
        # uninstall onnxruntime-training-cpu first (pip cannot swap a requirement in an extra).
        "gpu": ["onnxruntime-training==1.19.2"],
        "test": ["pytest>=8"],
    },
    classifiers=[
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "License :: OSI Approved :: MIT License",
    ],
)
