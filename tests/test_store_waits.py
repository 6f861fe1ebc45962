"""Every MongoDB store a test opens in process waits the suite's time for its server.

The product's default server-selection timeout (5 s) is missed by a first ``hello`` to FerretDB on
a busy machine; ``_servers.mongo_store`` waits ``scaled(STORE_SELECTION_WAIT)`` (docs/testing.md
"A busy machine").
"""

from __future__ import annotations

import ast

from ._servers import ROOT

HELPER = ROOT / "tests" / "_servers.py"
MADE_BY_SCRIPTS = ROOT / "tests" / "data"
"""Scripts that wrote the stored fixtures, run by hand against ``MONGODB_URI``, never by the suite."""


def _direct_constructions() -> list[str]:
    found = []
    for path in sorted((ROOT / "tests").rglob("*.py")):
        if path == HELPER or MADE_BY_SCRIPTS in path.parents or "node_modules" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "MongoSnapshotStore":
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_tests_make_their_mongodb_stores_with_the_suites_wait() -> None:
    # given every test module, when its calls are read, then none builds a MongoSnapshotStore itself
    assert _direct_constructions() == [], "use tests._servers.mongo_store(uri, ...) instead"
