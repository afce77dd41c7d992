"""The package's shape (docs/architecture.rst): each layer imports only the layers below
it, no module imports the package root, no import cycle, no module over 700 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "skl_ortgrad"

#: What each layer may import besides itself (the package's top-level helper modules,
#: ``_cache``, ``_params``, ``_version``, ``exceptions``, ``_logging``, are below all).
ALLOWED = {
    "estimators": {"training", "optim", "objective", "gradient", "graph", "runtime"},
    "training": {"optim", "objective", "gradient", "graph", "runtime"},
    "utils": {"objective", "graph"},
    "optim": {"objective", "graph", "runtime"},
    "objective": {"graph"},
    "gradient": {"graph", "runtime"},
    "runtime": {"graph"},
    "graph": set(),
}
HELPERS = {"_cache", "_params", "_version", "exceptions", "_logging", "_import_hooks"}


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _imports(path: Path) -> list[str]:
    """The skl_ortgrad modules ``path`` imports when it is imported (module level, not
    under ``if TYPE_CHECKING``), a name imported from a package resolved to its submodule
    when it is one."""
    tree = ast.parse(path.read_text())
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        for sub in ast.walk(node) if isinstance(node, (ast.If, ast.Try)) else [node]:
            if isinstance(sub, ast.Import):
                names.extend(alias.name for alias in sub.names)
            elif isinstance(sub, ast.ImportFrom) and sub.module and sub.level == 0:
                for alias in sub.names:
                    child = f"{sub.module}.{alias.name}"
                    names.append(child if child in MODULES else sub.module)
    return [name for name in names if name.split(".")[0] == "skl_ortgrad"]


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


@pytest.mark.parametrize("module", sorted(MODULES))
def test_a_layer_imports_only_the_layers_below_it(module):
    layer = _layer(module)
    if layer not in ALLOWED:
        return  # the package root and its top-level modules (plotting, helpers)
    wrong = [name for name in _imports(MODULES[module])
             if _layer(name) not in {layer, *ALLOWED[layer], *HELPERS}]
    assert not wrong, f"{module} ({layer}) imports {wrong}"


def test_nothing_inside_imports_the_package_root():
    offenders = [module for module, path in MODULES.items()
                 if module != "skl_ortgrad" and "skl_ortgrad" in _imports(path)]
    assert not offenders


def test_no_import_cycle():
    graph = {module: set(_imports(path)) & set(MODULES) for module, path in MODULES.items()}
    done: set[str] = set()

    def visit(module: str, stack: list[str]) -> None:
        if module in stack:
            raise AssertionError(" -> ".join([*stack[stack.index(module):], module]))
        if module in done:
            return
        for child in sorted(graph[module]):
            visit(child, [*stack, module])
        done.add(module)

    for module in sorted(graph):
        visit(module, [])


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_module_is_over_700_lines(module):
    lines = len(MODULES[module].read_text().splitlines())
    assert lines <= 700, f"{module}: {lines} lines"


def test_the_checks_see_the_layers():
    """The rules above would pass on an empty or unreadable tree."""
    assert {_layer(m) for m in MODULES} >= set(ALLOWED)
    assert "skl_ortgrad.optim.schedules" in _imports(MODULES["skl_ortgrad.optim.sgd"])
    assert len(MODULES) > 100
