"""The documentation builds with warnings as errors, gallery executed.

The build runs on a copy of docs/ and examples/ in a temporary folder, so the checkout
stays clean; it is the same configuration as ``make docs``.
"""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import skl_ortgrad

ROOT = Path(__file__).resolve().parent.parent
ENGINE_NAMES = [
    "skl_ortgrad.gradient.forward_backward.OrtGradientForwardBackward",
    "skl_ortgrad.gradient.forward_backward.OrtGradientForwardBackwardFunction",
    "skl_ortgrad.training.optimizers_partial.OrtGradientForwardBackwardOptimizer",
    "skl_ortgrad.gradient.derivative.onnx_derivative",
    "skl_ortgrad.gradient.derivative.DerivativeOptions",
    "skl_ortgrad.gradient.derivative.random_feed",
    "skl_ortgrad.gradient.backend.resolve_backend",
    "skl_ortgrad.objective.merge.add_loss_output",
    "skl_ortgrad.objective.penalty.penalty_loss_onnx",
    "skl_ortgrad.graph.weights.get_train_initializer",
    "skl_ortgrad.plotting.plot_learning_curve",
]


@pytest.fixture(scope="module")
def html(tmp_path_factory):
    work = tmp_path_factory.mktemp("docs")
    shutil.copytree(ROOT / "docs", work / "docs",
                    ignore=shutil.ignore_patterns("_build", "auto_examples",
                                                  "sg_execution_times.rst"))
    shutil.copytree(ROOT / "examples", work / "examples")
    out = work / "html"
    result = subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", "-b", "html",
         str(work / "docs"), str(out)],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-8000:]
    return out


@pytest.mark.slow  # ~60 s on 2 cores: runs the six gallery examples
def test_docs_build_without_warnings(html):
    for page in ("index", "getting_started", "user_guide", "benchmarks", "guarantees",
                 "changelog", "api/public", "api/engine", "auto_examples/index"):
        assert (html / f"{page}.html").is_file(), page


@pytest.mark.slow
def test_every_public_name_is_documented(html):
    public = (html / "api" / "public.html").read_text(encoding="utf-8")
    for name in skl_ortgrad.__all__:
        assert f'id="skl_ortgrad.{name}"' in public, name
    engine = (html / "api" / "engine.html").read_text(encoding="utf-8")
    engine += (html / "api" / "plotting.html").read_text(encoding="utf-8")
    for name in ENGINE_NAMES:
        assert f'id="{name}"' in engine, name


@pytest.mark.slow
def test_gallery_ran_every_example_with_plots(html):
    examples = sorted(p.stem for p in (ROOT / "examples").glob("plot_*.py"))
    assert len(examples) >= 6
    for stem in examples:
        page = (html / "auto_examples" / f"{stem}.html").read_text(encoding="utf-8")
        assert re.search(rf"sphx_glr_{stem}_\d+\.png", page), f"{stem}: no figure"
    # The benchmarks page is docs/benchmarks.md, rendered by myst-parser.
    bench = (html / "benchmarks.html").read_text(encoding="utf-8")
    assert "Linear regression" in bench and "<table" in bench
