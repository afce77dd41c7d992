"""Packaging for skl_ortgrad."""

from pathlib import Path

from setuptools import find_packages, setup

HERE = Path(__file__).parent
# onnxruntime-training (last release 1.19.2) has wheels for Python 3.10-3.12 only; Python 3.13+
# gets plain onnxruntime and the standard-ONNX ("onnx") gradient backend. Both packages provide
# the `onnxruntime` module, so the markers keep them mutually exclusive.
RUNTIME = [
    'onnxruntime-training-cpu==1.19.2; python_version < "3.13"',
    'onnxruntime>=1.20; python_version >= "3.13"',
]
COMMON = [
    "onnx>=1.16",
    # onnx's import imports ml_dtypes: 0.7.0's initialisation takes 0.8-1.2 s on Intel
    # Xeon machines of this project's kind, where 0.6.0's takes 7 ms (measured).
    "ml_dtypes!=0.7.0",
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
        "scikit-learn compatible estimators trained by onnxruntime "
        "(onnxruntime-training or standard ONNX gradients), exporting the trained ONNX graph"
    ),
    long_description=(HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    packages=find_packages(include=["skl_ortgrad", "skl_ortgrad.*"]),
    python_requires=">=3.10",
    # An SPDX expression: setuptools deprecates the "License ::" classifier.
    license="MIT",
    install_requires=[*RUNTIME, *COMMON],
    extras_require={
        # The CUDA 12 build of onnxruntime-training (Python < 3.13) provides the same
        # `onnxruntime` module: uninstall onnxruntime-training-cpu first (pip cannot swap a
        # requirement in an extra).
        "gpu": ['onnxruntime-training==1.19.2; python_version < "3.13"'],
        # The CUDA 13 build of plain onnxruntime, for the portable "onnx" backend (any Python
        # with its wheels). It provides the same `onnxruntime` module as onnxruntime and
        # onnxruntime-training-cpu: uninstall those first (pip uninstall onnxruntime
        # onnxruntime-training-cpu), both would write the same files.
        "gpu-cuda13": ["onnxruntime-gpu>=1.31"],
        "test": ["pytest>=8"],
        # The PyTorch rows of bench/ (cases 1-5 and 10), left out without it. On Linux,
        # PyPI's torch wheel brings the CUDA libraries (GBs): the CPU build satisfies this
        # pin too (2.13.0+cpu), e.g. pip install torch==2.13.0 --index-url
        # https://download.pytorch.org/whl/cpu before pip install -e .[bench].
        "bench": ["torch==2.13.0"],
    },
    classifiers=[
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
    ],
)
