"""The fast path behind one seam (``resolvers/fastpath``).

- private names of Strawberry and graphql-core are used in one module only
  (``resolvers/fastpath/internals.py``), read from every module's syntax tree;
- ``resolvers/`` and ``runtime/`` import each other without a cycle, counting imports under
  ``TYPE_CHECKING``;
- with ``RUNSGATE_COMPILED_EXECUTION=false`` the fast path is never imported;
- when a private name is missing (a Strawberry upgrade), the app logs one WARNING at start and
  answers every request through Strawberry's standard path.
"""

from __future__ import annotations

import ast
import logging
import os
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import httpx
import pytest
import strawberry.schema._graphql_core
from strawberry.asgi import GraphQL

from resolvers.fastpath import internals
from server.app import create_app
from server.settings import DEMO_AGENTS, Settings

from .. import _processes
from .._graphql import graphql_schema, graphql_view
from .._structure import cycles, import_graph

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("server", "resolvers", "runtime", "storage", "bench")
SEAM = ROOT / "resolvers" / "fastpath" / "internals.py"
LIBRARIES = ("strawberry", "graphql")


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


@cache
def _library_private_names() -> frozenset[str]:
    """Every private name Strawberry and graphql-core define: functions, classes, attributes
    assigned anywhere, module-level names."""
    names: set[str] = set()
    for library in LIBRARIES:
        module = __import__(library)
        assert module.__file__ is not None
        for path in Path(module.__file__).parent.rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_bytes())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    names.add(node.name)
                elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                    names.add(node.attr)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    names.add(node.id)
    return frozenset(name for name in names if _private(name))


def _imported_from_libraries(tree: ast.Module) -> set[str]:
    """Names a module binds by importing them from Strawberry or graphql-core."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in LIBRARIES:
            names.update(alias.asname or alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] in LIBRARIES)
    return names


def private_uses(path: Path) -> list[str]:
    """Where a module uses a private name of Strawberry or graphql-core: imports from a private
    module or of a private name; a ``._name`` attribute (read or written) or a string given to
    ``getattr``/``hasattr``/``setattr``/``delattr`` naming a private name the libraries define
    but the module does not define itself; a method of a class deriving from a library class
    that overrides a private name of the libraries."""
    tree = ast.parse(path.read_bytes())
    library_names = _library_private_names()
    from_libraries = _imported_from_libraries(tree)
    own = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)}
    own_methods: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
            derived = bool(bases & from_libraries) or any(
                isinstance(b, ast.Attribute) and isinstance(b.value, ast.Name) and b.value.id in from_libraries
                for b in node.bases
            )
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and _private(item.name):
                    if derived and item.name in library_names:
                        found.append(f"{path.name}:{item.lineno} overrides {item.name}")
                    else:
                        own_methods.add(item.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in LIBRARIES:
            if any(map(_private, node.module.split("."))):
                found.append(f"{path.name}:{node.lineno} imports {node.module}")
            found += [f"{path.name}:{node.lineno} imports {a.name}" for a in node.names if _private(a.name)]
        elif isinstance(node, ast.Import):
            found += [
                f"{path.name}:{node.lineno} imports {a.name}"
                for a in node.names
                if a.name.split(".")[0] in LIBRARIES and any(map(_private, a.name.split(".")))
            ]
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            if node.attr in library_names and node.attr not in own | own_methods:
                found.append(f"{path.name}:{node.lineno} .{node.attr}")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "hasattr", "setattr", "delattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
            and _private(node.args[1].value)
            and node.args[1].value in library_names
            and node.args[1].value not in own | own_methods
        ):
            found.append(f"{path.name}:{node.lineno} {node.func.id}(..., {node.args[1].value!r})")
    return found


def _modules(*layers: str) -> Iterator[Path]:
    for layer in layers:
        yield from sorted((ROOT / layer).rglob("*.py"))


def test_private_names_of_strawberry_and_graphql_core_are_used_in_one_module() -> None:
    uses = {path: private_uses(path) for path in _modules(*LAYERS)}
    assert {str(path.relative_to(ROOT)): found for path, found in uses.items() if found and path != SEAM} == {}
    assert len(uses[SEAM]) >= 5  # the seam itself is found by the same reading


def test_the_reading_finds_private_names(tmp_path: Path) -> None:
    # the check above could fail: each kind of use is found in a module written for it
    module = tmp_path / "uses.py"
    module.write_text(
        "from strawberry.schema._graphql_core import execution_context_class_kwargs\n"
        "from strawberry.schema.schema import _OperationContextAwareGraphQLResolveInfo\n"
        "from strawberry.extensions import MaskErrors\n"
        "class Masking(MaskErrors):\n"
        "    def _process_errors(self, errors): return errors\n"
        "def run(schema, resolve):\n"
        "    getattr(resolve, '_is_default', False)\n"
        "    return schema._get_execute_function()\n"
    )
    assert len(private_uses(module)) == 5, private_uses(module)


def test_resolvers_and_runtime_import_without_a_cycle() -> None:
    graph = import_graph("resolvers", "runtime")
    assert "resolvers.fastpath" in graph["resolvers.schema"]
    assert cycles(graph) == []


def test_cycles_are_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


SUBPROCESS = """
import asyncio, sys
import httpx
from server.app import create_app

async def main():
    app = create_app()
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            for _ in range(2):
                answer = await client.post("/graphql", json={"query": "{ agents { id } }"})
                assert answer.status_code == 200, answer.text
    print(",".join(sorted(name for name in sys.modules if name.startswith("resolvers."))))

asyncio.run(main())
"""


@pytest.mark.parametrize("compiled", ["false", "true"])
def test_compiled_execution_off_never_imports_the_fast_path(compiled: str) -> None:
    environment = {name: value for name, value in os.environ.items() if name != "MONGODB_URI"}
    environment |= {"RUNSGATE_COMPILED_EXECUTION": compiled, "RUNSGATE_AUTH": "false", "RUNSGATE_SWEEP_INTERVAL": "0"}
    environment["RUNSGATE_AGENTS"] = DEMO_AGENTS
    done = _processes.run(
        [sys.executable, "-c", SUBPROCESS], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    modules = done.stdout.strip().split(",")
    assert "resolvers.schema" in modules
    assert any(name.startswith("resolvers.fastpath") for name in modules) is (compiled == "true"), modules


QUERY = '{ agents { id } suspendedRuns(agentId: "refund-agent", first: 2) { totalCount } }'


@pytest.mark.parametrize(
    ("owner", "name"),
    [
        # names Strawberry's own standard path does not need while answering QUERY (it imported
        # the first by name; it calls the second only for a response with errors)
        (strawberry.schema._graphql_core, "execution_context_class_kwargs"),
        (GraphQL, "_handle_errors"),
    ],
)
async def test_a_missing_private_name_turns_the_fast_path_off(
    owner: object, name: str, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    # given a Strawberry that lacks one of the private names (as a new version might)
    if isinstance(owner, type):
        owner = next(cls for cls in owner.__mro__ if name in vars(cls))  # the class defining it
    monkeypatch.delattr(owner, name)
    assert internals.missing() != []

    # when an app with compiled execution is built and serves a query twice
    with caplog.at_level(logging.WARNING, logger="runsgate.graphql"):
        app = create_app(Settings(agents=DEMO_AGENTS, mongodb_uri=None, auth=False, sweep_interval=0))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    async with (
        app.router.lifespan_context(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as client,
    ):
        answers = [await client.post("/graphql", json={"query": QUERY}) for _ in range(2)]

    # then one WARNING named the missing name, and Strawberry's standard path answered both
    assert len(warnings) == 1
    assert "compiled execution is OFF" in warnings[0].getMessage()
    assert name in warnings[0].getMessage()
    assert [a.status_code for a in answers] == [200, 200]
    assert answers[0].json() == answers[1].json()
    assert "errors" not in answers[0].json()
    schema = graphql_schema(app)
    assert not hasattr(schema, "prepared_operations")
    assert schema.execution_context_class is not None
    assert "fastpath" not in schema.execution_context_class.__module__
    assert graphql_view(app).prepared_requests == 0


def test_every_private_name_is_there_in_the_pinned_versions() -> None:
    assert internals.missing() == []


HTTP_MODULES = ("starlette", "cross_web", "strawberry.http", "strawberry.asgi", "httpx", "uvicorn")
"""Libraries and modules of HTTP serving; ``resolvers/`` imports none (docs/architecture.md "Layers")."""


def _is_http(module: str) -> bool:
    return any(module == name or module.startswith(name + ".") for name in HTTP_MODULES)


def http_imports(path: Path) -> list[str]:
    """The imports of ``HTTP_MODULES`` in a module, at any level of its code."""
    found = []
    for node in ast.walk(ast.parse(path.read_bytes())):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [node.module]
        found += [f"{path.name}:{node.lineno} {name}" for name in names if _is_http(name)]
    return found


def test_resolvers_know_nothing_of_http() -> None:
    # the seam reads the names of Strawberry's ASGI view it needs (and only it, as every private name)
    uses = {str(path.relative_to(ROOT)): http_imports(path) for path in _modules("resolvers") if path != SEAM}
    assert {path: found for path, found in uses.items() if found} == {}
    assert http_imports(ROOT / "server" / "view" / "graphql_view.py")  # the reading finds them
