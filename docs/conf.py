"""Sphinx configuration of the skl_ortgrad documentation.

``make docs`` builds it with ``-W`` (warnings are errors); ``tests/test_docs.py`` runs the
same build, gallery included, into a temporary folder.
"""

import importlib.util
import logging
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "_ext"))
sys.path.insert(0, str(ROOT))
os.environ.setdefault("MPLBACKEND", "Agg")
# Sphinx reports through its own loggers. The root logger is configured here, at WARNING,
# before furo imports accessible-pygments, whose import calls
# logging.basicConfig(level=logging.INFO): every INFO record of the gallery's examples
# (dask's scheduler and workers, skl_ortgrad's epochs) would be printed during the build.
logging.basicConfig(level=logging.WARNING)

import skl_ortgrad  # noqa: E402

project = "skl_ortgrad"
author = "skl_ortgrad developers"
copyright = "skl_ortgrad developers"
release = skl_ortgrad.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "public_api",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "**.ipynb_checkpoints", "auto_examples/*.ipynb"]
templates_path = []

# -- autodoc / napoleon ---------------------------------------------------------------
autodoc_member_order = "bysource"
# Defaults as written in the source: ``dtype=np.float32`` rather than the repr of the
# class, which is no Python and made Sphinx split ``hidden_layer_sizes=(100,)`` at its comma.
autodoc_preserve_defaults = True
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented"
autodoc_default_options = {
    "show-inheritance": True,
    # scikit-learn's generated metadata-routing setters: not part of this package's API.
    "exclude-members": "set_fit_request, set_partial_fit_request, set_score_request, "
    "set_predict_request, set_transform_request",
}
autosummary_generate = False
napoleon_google_docstring = False
napoleon_numpy_docstring = True
# Attributes as ``.. attribute::`` entries: in an ``:ivar:`` field, ``coef_`` was read as a
# link and shown as "coef", and "coefs_, intercepts_" as "intercepts (coefs,)".
napoleon_use_ivar = False
napoleon_use_rtype = False
napoleon_preprocess_types = False

# -- MyST (docs/benchmarks.md, written by bench/run_all.py) ---------------------------
myst_enable_extensions = ["dollarmath"]
myst_heading_anchors = 3

# -- sphinx-gallery: examples/plot_*.py run into auto_examples/ -----------------------
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    # Only plot_*.py belong to the gallery (examples/demo.py is `make demo`'s script).
    "filename_pattern": r"plot_",
    "ignore_pattern": r"^(?!plot_)",
    # First steps to advanced uses: docs/_ext/gallery_order.py.
    "within_subsection_order": "gallery_order.FirstStepsFirst",
    "download_all_examples": False,
    "remove_config_comments": True,
    "plot_gallery": "True",
    "matplotlib_animations": False,
    "image_scrapers": ("matplotlib",),
    "capture_repr": (),
    "show_memory": False,
    "min_reported_time": 1,
    "write_computation_times": False,
}

# -- HTML -----------------------------------------------------------------------------
html_theme = "furo"
html_title = f"skl_ortgrad {release}"
# MathJax served with the pages, so formulas render offline: the MathJax 3 files that the
# sphinx-mathjax-offline package ships (requirements-dev.txt), copied into _static/mathjax.
MATHJAX_FILES = Path(importlib.util.find_spec("sphinx-mathjax-offline").origin).parent / "static"
html_static_path = [str(MATHJAX_FILES)]
mathjax_path = "mathjax/tex-chtml.js"
html_show_sourcelink = False
