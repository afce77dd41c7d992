"""Order of the examples gallery: first steps first, advanced uses last.

sphinx-gallery's ``within_subsection_order`` names :class:`FirstStepsFirst` (a class it
imports and builds with the gallery's folder); an example missing from ``EXAMPLES``
comes after the listed ones, in file-name order, and tests/test_docs.py fails until it
is placed.
"""

from __future__ import annotations

from pathlib import Path

EXAMPLES = (
    "plot_regression.py",             # fit, partial_fit, the loss curve
    "plot_classification.py",         # binary and multiclass, string labels
    "plot_export_onnx.py",            # to_onnx and onnxruntime serving
    "plot_grid_search.py",            # nested parameters of the training objects
    "plot_partial_fit_streaming.py",  # data arriving in chunks
    "plot_losses_penalties.py",       # choosing the loss and the penalty, float64
    "plot_mlp_digits.py",             # neural networks
    "plot_finetune_pipeline.py",      # continuing the training of a fitted pipeline
    "plot_scaling_out.py",            # dask-ml, joblib on a cluster, Parquet streaming
    "plot_seed_api.py",               # the engine underneath (onnxcustom's API)
)


class FirstStepsFirst:
    """Sort key of the example files: their rank in ``EXAMPLES``."""

    def __init__(self, src_dir: str) -> None:
        self.src_dir = src_dir

    def __call__(self, filename: str) -> tuple[int, str]:
        name = Path(filename).name
        rank = EXAMPLES.index(name) if name in EXAMPLES else len(EXAMPLES)
        return rank, name

    def __repr__(self) -> str:
        # sphinx-gallery compares configurations by repr to decide what to rebuild.
        return f"{type(self).__name__}()"
