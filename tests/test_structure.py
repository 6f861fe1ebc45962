"""The product's layout holds what docs/architecture.md promises a newcomer: no import circle in any
product folder (counting imports under ``TYPE_CHECKING`` and inside functions), no folder of more
than 15 modules, no module of more than 500 lines."""

from __future__ import annotations

import pytest

from ._structure import PRODUCT, ROOT, cycles, import_graph

MAX_MODULES = 15
MAX_LINES = 500


def test_the_graph_ties_a_module_to_a_package_only_for_names_the_package_defines() -> None:
    graph = import_graph("runtime", "server")
    assert "runtime.deciding.rules" in graph["runtime.deciding.gate"]  # from . import rules as R
    assert "runtime.deciding" not in graph["runtime.deciding.gate"]
    assert "server.cli" in graph["server.cli.serve"]  # names defined in server/cli/__init__.py
    assert cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b", "a"]]


@pytest.mark.parametrize("package", PRODUCT)
def test_no_product_folder_has_an_import_circle(package: str) -> None:
    assert cycles(import_graph(package)) == []


def test_the_product_folders_import_each_other_without_a_circle() -> None:
    assert cycles(import_graph(*PRODUCT)) == []


def test_no_product_folder_holds_more_than_15_modules() -> None:
    folders = {path.parent for package in PRODUCT for path in (ROOT / package).rglob("*.py")}
    crowded = {
        str(folder.relative_to(ROOT)): count
        for folder in folders
        if (count := len(list(folder.glob("*.py")))) > MAX_MODULES  # a package's ``__init__`` is a module too
    }
    assert crowded == {}


def test_no_product_module_is_over_500_lines() -> None:
    long = {
        str(path.relative_to(ROOT)): lines
        for package in PRODUCT
        for path in (ROOT / package).rglob("*.py")
        if (lines := len(path.read_text().splitlines())) > MAX_LINES
    }
    assert long == {}
