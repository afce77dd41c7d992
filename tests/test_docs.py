"""The documentation builds with warnings as errors, gallery executed, quietly.

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


def _copy(work):
    """Copy docs/ and examples/ into ``work``."""
    shutil.copytree(ROOT / "docs", work / "docs",
                    ignore=shutil.ignore_patterns("_build", "auto_examples",
                                                  "sg_execution_times.rst"))
    shutil.copytree(ROOT / "examples", work / "examples")


def _build(work, *options):
    """Build the copy in ``work`` as ``make docs`` does, quietly (``-q``: only warnings
    and errors are printed); return the build's result."""
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-E", "-q", *options,
         "-b", "html", str(work / "docs"), str(work / "html")],
        capture_output=True, text=True, timeout=600,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    work = tmp_path_factory.mktemp("docs")
    _copy(work)
    result = _build(work)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-8000:]
    return work / "html", result


@pytest.fixture(scope="module")
def html(build):
    return build[0]


@pytest.mark.slow  # ~60 s on 2 cores: runs the six gallery examples
def test_docs_build_without_warnings(html):
    for page in ("index", "getting_started", "user_guide", "benchmarks", "guarantees",
                 "changelog", "api/public", "api/engine", "auto_examples/index"):
        assert (html / f"{page}.html").is_file(), page


@pytest.mark.slow
def test_the_build_prints_nothing(build):
    """No warning (each one fails the build, -W), and nothing else either: no log
    record of the examples (dask's scheduler, training epochs), no Python warning."""
    _, result = build
    assert result.stderr == "" and result.stdout == "", result.stderr[-4000:]


def test_a_new_sphinx_warning_fails_the_build(tmp_path):
    """What guards test_docs_build_without_warnings: a warning fails the build (here a
    reference to a page that does not exist; the gallery is not run)."""
    _copy(tmp_path)
    result = _build(tmp_path, "-D", "plot_gallery=0")
    assert result.returncode == 0, result.stderr[-4000:]
    with (tmp_path / "docs" / "getting_started.rst").open("a", encoding="utf-8") as page:
        page.write("\nSee :doc:`no_such_page`.\n")
    result = _build(tmp_path, "-D", "plot_gallery=0")
    assert result.returncode != 0
    assert "unknown document: 'no_such_page'" in result.stderr


def _reference(html):
    """Every generated reference page, one text."""
    return "".join(page.read_text(encoding="utf-8")
                   for page in sorted((html / "api" / "generated").glob("*.html")))


@pytest.mark.slow
def test_one_page_per_estimator_and_per_family(html):
    pages = {page.stem for page in (html / "api" / "generated").glob("*.html")}
    estimators = {name for name in skl_ortgrad.__all__ if name.startswith("Onnx")}
    assert estimators | {"learning_rates", "losses", "penalties", "exceptions"} <= pages
    page = (html / "api" / "generated" / "OnnxSGDRegressor.html").read_text(encoding="utf-8")
    assert 'id="skl_ortgrad.OnnxSGDRegressor"' in page
    assert 'id="skl_ortgrad.OnnxSGDClassifier"' not in page
    losses = (html / "api" / "generated" / "losses.html").read_text(encoding="utf-8")
    assert 'id="skl_ortgrad.HuberLearningLoss"' in losses
    # The index links every public name to its page.
    index = (html / "api" / "public.html").read_text(encoding="utf-8")
    assert 'href="generated/OnnxSGDRegressor.html#skl_ortgrad.OnnxSGDRegressor"' in index


@pytest.mark.slow
def test_every_public_name_is_documented(html):
    reference = _reference(html)
    for name in skl_ortgrad.__all__:
        assert f'id="skl_ortgrad.{name}"' in reference, name
    engine = (html / "api" / "engine.html").read_text(encoding="utf-8")
    engine += (html / "api" / "plotting.html").read_text(encoding="utf-8")
    for name in ENGINE_NAMES:
        assert f'id="{name}"' in engine, name


@pytest.mark.slow
def test_fitted_attributes_keep_their_trailing_underscore(html):
    """Each attribute is an entry of its own, its name whole (an :ivar: field showed
    "intercepts (coefs,)")."""
    public = _reference(html)
    for name in ("OnnxSGDRegressor.coef_", "OnnxSGDClassifier.intercept_",
                 "OnnxMLPRegressor.loss_", "OnnxMLPClassifier.classes_",
                 "OnnxMLPRegressor.coefs_", "OnnxMLPRegressor.intercepts_",
                 "OnnxSGDRegressor.validation_scores_", "OnnxGradientClassifier.backend_"):
        assert f'id="skl_ortgrad.{name}"' in public, name


def _parameter(page, name):
    """The rendered entry of parameter ``name`` on a reference page."""
    match = re.search(rf"<li><p><strong>{name}</strong>(.*?)</li>", page, re.DOTALL)
    assert match, name
    return match.group(1)


@pytest.mark.slow
def test_each_parameter_reads_its_own_description(html):
    """The SGD page once gave max_iter, tol, eta0... verbose's description."""
    page = (html / "api" / "generated" / "OnnxSGDRegressor.html").read_text(encoding="utf-8")
    assert "progress bar" in _parameter(page, "verbose")
    for name in ("max_iter", "tol", "shuffle", "epsilon", "random_state", "eta0",
                 "power_t", "early_stopping", "n_iter_no_change", "warm_start"):
        assert "progress bar" not in _parameter(page, name), name
    assert "default=1000" in _parameter(page, "max_iter")


@pytest.mark.slow
def test_user_guide_has_no_error_box(html):
    """furo does not support ``.. contents::``: the guide opened with an error."""
    guide = (html / "user_guide.html").read_text(encoding="utf-8")
    assert "contents" not in guide.split('<article', 1)[1].split("</article>", 1)[0]
    assert "system-message" not in guide


@pytest.mark.slow
def test_formulas_render_offline(html):
    """MathJax is served with the pages, fonts included; no page loads it from the web."""
    mathjax = html / "_static" / "mathjax"
    assert (mathjax / "tex-chtml.js").is_file()
    assert list((mathjax / "output" / "chtml" / "fonts" / "woff-v2").glob("*.woff"))
    guide = (html / "user_guide.html").read_text(encoding="utf-8")
    assert 'src="_static/mathjax/tex-chtml.js' in guide and "\\(" in guide
    for page in html.rglob("*.html"):
        assert "cdn.jsdelivr.net" not in page.read_text(encoding="utf-8"), page


@pytest.mark.slow
def test_gallery_goes_from_first_steps_to_advanced(html):
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    try:
        from gallery_order import EXAMPLES
    finally:
        sys.path.remove(str(ROOT / "docs" / "_ext"))
    assert sorted(EXAMPLES) == sorted(p.name for p in (ROOT / "examples").glob("plot_*.py"))
    index = (html / "auto_examples" / "index.html").read_text(encoding="utf-8")
    shown = list(dict.fromkeys(re.findall(r'href="(plot_\w+)\.html', index)))
    assert shown == [name.removesuffix(".py") for name in EXAMPLES]


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
