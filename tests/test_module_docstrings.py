"""Every product module (the wheel's packages) says what it is in a docstring of at most 10 lines;
reasons and figures live in docs/ (docs/architecture.md)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PRODUCT = ("storage", "runtime", "resolvers", "server")
"""The wheel's packages (pyproject.toml ``[tool.hatch.build.targets.wheel]``)."""
MAX_LINES = 10


def docstring_lines(path: Path) -> int:
    """Lines of a module's docstring (0 without one), as ``ast.get_docstring`` cleans it."""
    docstring = ast.get_docstring(ast.parse(path.read_bytes()))
    return 0 if docstring is None else len(docstring.strip().splitlines())


def product_modules() -> list[Path]:
    return sorted(path for package in PRODUCT for path in (ROOT / package).rglob("*.py"))


def test_the_count_reads_docstrings(tmp_path: Path) -> None:
    module = tmp_path / "module.py"
    module.write_text('"""One.\n\nThree.\n"""\n\nx = 1\n')
    assert docstring_lines(module) == 3
    module.write_text("x = 1\n")
    assert docstring_lines(module) == 0


def test_every_module_docstring_has_at_most_10_lines() -> None:
    modules = product_modules()
    assert len(modules) > 100  # every package was read
    longer = {str(path.relative_to(ROOT)): n for path in modules if (n := docstring_lines(path)) > MAX_LINES}
    assert longer == {}
