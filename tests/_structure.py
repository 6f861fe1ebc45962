"""The product's structure as its code states it: the import graph of its modules (every import,
at any level of a module: top level, ``TYPE_CHECKING`` blocks, functions), and its cycles."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("storage", "runtime", "resolvers", "server")
"""The wheel's packages (pyproject.toml ``[tool.hatch.build.targets.wheel]``)."""


def _modules(*packages: str) -> list[Path]:
    return [path for package in packages for path in sorted((ROOT / package).rglob("*.py"))]


def _name(path: Path) -> str:
    """The module's absolute name (``pkg/__init__.py`` is ``pkg``)."""
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def _imports(path: Path, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that the module at ``path`` imports (absolute names), at any
    level of its code, also under ``if TYPE_CHECKING:`` (an import only the type checker follows
    still ties the two modules). ``from package import module`` ties to that module only; a
    package is tied when a name it defines (or re-exports) is imported from it."""
    name = _name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                source = f"{base}.{node.module}" if node.module else base
            else:
                source = node.module or ""
            submodules = {f"{source}.{alias.name}" for alias in node.names} & modules
            found |= submodules
            if len(submodules) < len(node.names):
                found.add(source)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found & modules


def import_graph(*packages: str) -> dict[str, set[str]]:
    """Module -> the modules of ``packages`` it imports (``pkg/__init__.py`` is ``pkg``)."""
    paths = {_name(path): path for path in _modules(*packages)}
    modules = {_name(path) for path in _modules(*PRODUCT)}
    return {
        name: {other for other in _imports(path, modules) if other in paths and other != name}
        for name, path in paths.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Import cycles (each once, from the module where the search met it)."""
    found: list[list[str]] = []
    state: dict[str, int] = {}  # 1 on the stack, 2 done

    def visit(node: str, stack: list[str]) -> None:
        state[node] = 1
        stack.append(node)
        for other in sorted(graph[node]):
            if state.get(other) == 1:
                found.append([*stack[stack.index(other) :], other])
            elif other not in state:
                visit(other, stack)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [])
    return found
