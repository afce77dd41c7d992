"""Sphinx extension of the skl_ortgrad documentation.

* ``.. public-api::``: the index of every name in ``skl_ortgrad.__all__``, read from the
  package at build time and grouped by base class, so a new estimator or training object
  appears in the reference as soon as it is exported; a name that fits no group is listed
  under "Other" rather than left out. The reference itself is written, when the build
  starts, into one page per estimator and one page per family of training objects
  (``api/generated/``), which the index links to.
* Docstring clean-ups before napoleon reads them (``autodoc-process-docstring``):

  - a numpydoc parameter line naming several parameters may wrap
    (``max_iter, tol,`` / ``shuffle, verbose :``); napoleon expects one line, so the
    wrapped name lines are joined;
  - a field section (``Parameters``, ``Attributes``...) ends, for napoleon, only at the
    next section header: a prose paragraph written after it, at the left margin, is
    moved before the section so that it is not read as more fields;
  - methods inherited from scikit-learn (``score``...) cross-reference scikit-learn's
    own documentation labels (``:ref:``, ``:term:``), which do not exist here: those
    roles become plain text.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

# Methods shown for estimators, when the class has them (scikit-learn's generated
# metadata-routing methods and BaseEstimator's get/set_params are left out).
ESTIMATOR_METHODS = (
    "fit", "partial_fit", "predict", "predict_proba", "predict_log_proba",
    "decision_function", "score", "to_onnx",
)


def _groups(package: str) -> list[tuple[str, str, list[str]]]:
    """(title, description, names) for every group of ``package.__all__``."""
    module = importlib.import_module(package)
    from skl_ortgrad.estimators.base import BaseOnnxEstimator
    from skl_ortgrad.training.sgd_learning_loss import BaseLearningLoss
    from skl_ortgrad.training.sgd_learning_penalty import BaseLearningPenalty
    from skl_ortgrad.training.sgd_learning_rate import BaseLearningRate

    rules = [
        ("Estimators", "scikit-learn estimators whose weights are trained on their ONNX "
         "graph by onnxruntime, with either gradient backend (see :doc:`/backends`).",
         lambda obj: isinstance(obj, type) and issubclass(obj, BaseOnnxEstimator)),
        ("Learning rates", "Step-size schedules and update rules "
         "(``learning_rate`` parameter).",
         lambda obj: isinstance(obj, type) and issubclass(obj, BaseLearningRate)),
        ("Losses", "Training losses, each building its ONNX loss graph "
         "(``learning_loss`` parameter).",
         lambda obj: isinstance(obj, type) and issubclass(obj, BaseLearningLoss)),
        ("Penalties", "Regularization applied after each gradient step "
         "(``learning_penalty`` parameter).",
         lambda obj: isinstance(obj, type) and issubclass(obj, BaseLearningPenalty)),
        ("Exceptions", "Errors raised by the package.",
         lambda obj: isinstance(obj, type) and issubclass(obj, BaseException)),
    ]
    grouped: dict[str, list[str]] = {title: [] for title, _, _ in rules}
    other: list[str] = []
    for name in sorted(module.__all__):
        obj = getattr(module, name)
        for title, _, test in rules:
            if test(obj):
                grouped[title].append(name)
                break
        else:
            other.append(name)
    result = [(title, text, grouped[title]) for title, text, _ in rules if grouped[title]]
    if other:
        result.append(("Other", "Other public names.", other))
    return result


GENERATED = "api/generated"


def _slug(title: str) -> str:
    return title.lower().replace(" ", "_")


def _pages(package: str) -> dict[str, tuple[str, str, list[str]]]:
    """``{page name: (title, description, names)}``: one page per estimator, one per
    other group (a family of training objects, the exceptions...)."""
    pages: dict[str, tuple[str, str, list[str]]] = {}
    for title, text, names in _groups(package):
        if title == "Estimators":
            pages.update({name: (name, text, [name]) for name in names})
        else:
            pages[_slug(title)] = (title, text, names)
    return pages


def _reference(package: str, title: str, text: str, names: list[str]) -> list[str]:
    """The reST of one reference page: the autodoc entries of ``names``."""
    from skl_ortgrad.estimators.base import BaseOnnxEstimator

    module = importlib.import_module(package)
    lines = [title, "=" * len(title), "", f".. currentmodule:: {package}", "", text, ""]
    if len(names) > 1:
        # Short names: the page sets ``.. currentmodule::`` to the package.
        lines += [".. autosummary::", "", *[f"   {name}" for name in names], ""]
    for name in names:
        obj = getattr(module, name)
        directive = "autoclass" if isinstance(obj, type) else "autofunction"
        lines += [f".. {directive}:: {package}.{name}"]
        if isinstance(obj, type) and issubclass(obj, BaseOnnxEstimator):
            methods = [m for m in ESTIMATOR_METHODS if hasattr(obj, m)]
            lines += [f"   :members: {', '.join(methods)}"]
        elif isinstance(obj, type) and not issubclass(obj, BaseException):
            lines += ["   :members:"]
        lines.append("")
    return lines


def write_pages(app) -> None:
    """Write the reference pages of ``skl_ortgrad`` into ``api/generated/`` of the sources
    (builder-inited: before Sphinx reads them)."""
    folder = Path(app.srcdir) / GENERATED
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.rst"):
        old.unlink()
    for page, (title, text, names) in _pages("skl_ortgrad").items():
        (folder / f"{page}.rst").write_text("\n".join(_reference("skl_ortgrad", title, text,
                                                                 names)), encoding="utf-8")


def _rst(package: str) -> list[str]:
    """The index: every group with a summary table of its names, and the pages' toctree."""
    lines: list[str] = [f".. currentmodule:: {package}", ""]
    for title, text, names in _groups(package):
        lines += [title, "-" * len(title), "", text, "", ".. autosummary::", ""]
        lines += [f"   {name}" for name in names]
        lines.append("")
    lines += [".. toctree::", "   :hidden:", ""]
    lines += [f"   generated/{page}" for page in _pages(package)]
    return lines


# One or more identifiers separated by commas, ending with a comma: a wrapped name list.
_WRAPPED_NAMES = re.compile(r"^(\s*)[A-Za-z_]\w*(,\s*[A-Za-z_]\w*)*,$")
_NAMES_CONTINUED = re.compile(r"^(\s*)[A-Za-z_]\w*(,\s*[A-Za-z_]\w*)*,?(\s+:.*|\s*:)?$")
_LABEL_ROLE = re.compile(r":(?:ref|term):`([^`<]*?)\s*(?:<[^`>]*>)?`")


def join_wrapped_names(lines: list[str]) -> None:
    """Join parameter name lists wrapped over several lines (in place)."""
    i = 0
    while i < len(lines) - 1:
        first, second = _WRAPPED_NAMES.match(lines[i]), _NAMES_CONTINUED.match(lines[i + 1])
        if first and second and first.group(1) == second.group(1):
            lines[i] = f"{lines[i]} {lines.pop(i + 1).strip()}"
        else:
            i += 1


_FIELD_SECTIONS = {"Parameters", "Attributes", "Other Parameters", "Returns", "Yields",
                   "Raises", "Warns", "Keyword Arguments"}
_FIELD_ENTRY = re.compile(r"^[A-Za-z_*][\w*]*(,\s*[A-Za-z_*][\w*]*)*\s*(:.*)?$")


def _is_header(lines: list[str], i: int) -> bool:
    return (
        i + 1 < len(lines) and bool(lines[i].strip())
        and not lines[i].startswith(" ")
        and set(lines[i + 1].strip()) == {"-"}
        and len(lines[i + 1].strip()) >= len(lines[i].strip())
    )


def hoist_prose_after_fields(lines: list[str]) -> None:
    """Move prose found after a field section to before that section (in place)."""
    i = 0
    while i < len(lines):
        if not (_is_header(lines, i) and lines[i].strip() in _FIELD_SECTIONS):
            i += 1
            continue
        start, j = i, i + 2
        while j < len(lines) and not _is_header(lines, j):
            prose = (
                lines[j].strip() and not lines[j].startswith(" ")
                and not lines[j - 1].strip() and not _FIELD_ENTRY.match(lines[j])
            )
            if prose:
                end = j
                while end < len(lines) and not _is_header(lines, end):
                    end += 1
                block = lines[j:end]
                del lines[j:end]
                while lines and j <= len(lines) and not lines[j - 1].strip():
                    del lines[j - 1]
                    j -= 1
                lines[start:start] = [*block, ""]
                break
            j += 1
        # Go on from the next header (the same section again when prose was moved
        # above it: it then has none left).
        i = start + 1
        while i < len(lines) and not _is_header(lines, i):
            i += 1


def _process_docstring(app, what, name, obj, options, lines):
    join_wrapped_names(lines)
    hoist_prose_after_fields(lines)
    module = getattr(obj, "__module__", None) or ""
    if module.split(".")[0] == "sklearn":
        lines[:] = [_LABEL_ROLE.sub(lambda m: m.group(1) or "", line) for line in lines]


class PublicApi(SphinxDirective):
    """Document ``package.__all__`` (argument: the package, default skl_ortgrad)."""

    optional_arguments = 1

    def run(self) -> list[nodes.Node]:
        package = self.arguments[0] if self.arguments else "skl_ortgrad"
        source = self.get_source_info()[0]
        content = StringList()
        for i, line in enumerate(_rst(package)):
            content.append(line, source, i)
        container = nodes.section()
        container.document = self.state.document
        nested_parse_with_titles(self.state, content, container)
        return container.children


def setup(app):
    app.add_directive("public-api", PublicApi)
    app.connect("builder-inited", write_pages)
    # Before napoleon (priority 500) turns numpydoc sections into reST.
    app.connect("autodoc-process-docstring", _process_docstring, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
