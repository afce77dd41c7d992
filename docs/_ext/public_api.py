"""Sphinx extension of the skl_ortgrad documentation.

* ``.. public-api::``: the reference of every name in ``skl_ortgrad.__all__``. The names
  are read from the package at build time and grouped by base class, so a new estimator
  or training object appears in the reference as soon as it is exported; a name that
  fits no group is listed under "Other" rather than left out.
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
        ("Estimators", "scikit-learn estimators trained by onnxruntime-training.",
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


def _rst(package: str) -> list[str]:
    module = importlib.import_module(package)
    lines: list[str] = [f".. currentmodule:: {package}", ""]
    for title, text, names in _groups(package):
        lines += [title, "-" * len(title), "", text, "", ".. autosummary::", ""]
        # Short names: the page sets ``.. currentmodule::`` to the package.
        lines += [f"   {name}" for name in names]
        lines.append("")
        for name in names:
            obj = getattr(module, name)
            directive = "autoclass" if isinstance(obj, type) else "autofunction"
            lines += [f".. {directive}:: {package}.{name}"]
            if title == "Estimators":
                methods = [m for m in ESTIMATOR_METHODS if hasattr(obj, m)]
                lines += [f"   :members: {', '.join(methods)}"]
            elif isinstance(obj, type) and not issubclass(obj, BaseException):
                lines += ["   :members:"]
            lines.append("")
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
    # Before napoleon (priority 500) turns numpydoc sections into reST.
    app.connect("autodoc-process-docstring", _process_docstring, priority=400)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
