"""Fixtures shared by every test package: the MongoDB server and the three stores."""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from server.settings import Settings
from storage import MemorySnapshotStore, MongoSnapshotStore, SnapshotStore, SQLiteSnapshotStore

from . import _documentdb, _processes, _servers
from ._servers import documentdb, ferretdb, mongo_store, with_database

IN_CI = os.environ.get("CI", "").lower() in {"1", "true", "yes"}
HERE = Path(__file__).resolve().parent

PROCESS_FOLDERS = frozenset({"ecosystem", "examples", "instances", "security", "subscriptions", "webhooks"})
"""Folders of tests/ whose every test talks to processes it starts (or, as the security suite's
coverage check, depends on the tests that do).

Tests that start processes (runsgate servers, Node scripts, the ``runsgate`` command) carry the
``process`` marker, so ``./dev test -m "not process"`` is the fast inner loop; FerretDB, started
once per session, does not count. Every test of these folders is marked by
``pytest_collection_modifyitems``; elsewhere a test is marked where it is defined
(``@pytest.mark.process``), and one that starts runsgate or another listening process without
the marker fails (``_servers.require_process_marker``)."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test of ``PROCESS_FOLDERS`` with ``process`` (before ``-m`` selects)."""
    for item in items:
        path = Path(item.path)
        if path.is_relative_to(HERE) and path.relative_to(HERE).parts[0] in PROCESS_FOLDERS:
            item.add_marker(pytest.mark.process)


class _LoadWatch:
    """The 1-minute load average, read every 10 s while the session runs (docs/testing.md "A busy machine")."""

    def __init__(self) -> None:
        self.samples = [os.getloadavg()[0]]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="load-average", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.wait(10):
            self.samples.append(os.getloadavg()[0])

    def summary(self) -> str:
        self._stop.set()
        self.samples.append(os.getloadavg()[0])
        mean = sum(self.samples) / len(self.samples)
        return (
            f"load average (1 min, {os.cpu_count()} cores): start {self.samples[0]:.2f}, "
            f"mean {mean:.2f}, max {max(self.samples):.2f}, end {self.samples[-1]:.2f}"
        )


_LOAD: _LoadWatch | None = None
_SWEPT: list[str] = []
"""Temporary folders and groups files of dead sessions, ended and removed at this one's start."""

DEFAULT_PORT: int = Settings.model_fields["port"].default
"""The port ``runsgate serve`` listens on when none is chosen (``RUNSGATE_PORT``, ``--port``)."""
DEFAULT_PORT_HOSTS = ("127.0.0.1", "::1")
"""Where the session holds ``DEFAULT_PORT``: a socket bound there also keeps every other process
from binding ``0.0.0.0`` and ``::`` at that port."""
_HELD_DEFAULT_PORT: dict[str, socket.socket | str] = {}
"""Host -> the socket the session holds there, or why it could not (another process has it)."""


def hold_default_port() -> dict[str, socket.socket | str]:
    """Bind ``DEFAULT_PORT`` on each of ``DEFAULT_PORT_HOSTS`` for the rest of this process, so that
    a test starting a server on the default port fails at once (exit status 4), whether or not a
    ``./dev serve`` runs on this machine: no test may depend on a fixed port.

    The sockets are bound without ``SO_REUSEADDR`` and do not listen: another bind of that port
    on the host or on a wildcard address fails (``EADDRINUSE``), and a connection is refused. A
    host where the port is taken already (by a ``./dev serve``, another session) is left to its
    holder, whose socket refuses binds as well. Returns host -> socket, or the reason it is not held.
    """
    for host in DEFAULT_PORT_HOSTS:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError as exc:  # no IPv6 on this machine
            _HELD_DEFAULT_PORT[host] = exc.strerror or str(exc)
            continue
        try:
            sock.bind((host, DEFAULT_PORT))
        except OSError as exc:
            sock.close()
            _HELD_DEFAULT_PORT[host] = exc.strerror or str(exc)
        else:
            _HELD_DEFAULT_PORT[host] = sock
    return _HELD_DEFAULT_PORT


def _holds_default_port() -> bool:
    """Whether this session holds ``DEFAULT_PORT``: in CI (``CI`` set, as ``.ci/run`` runs), or
    when ``RUNSGATE_TEST_HOLD_PORT=1`` asks for it. Not otherwise: a held port makes a developer's
    ``./dev serve``, started while tests run, fail to bind."""
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"} or os.environ.get("RUNSGATE_TEST_HOLD_PORT") == "1"


def _default_port_line() -> str:
    if not _HELD_DEFAULT_PORT:
        return (
            f"port {DEFAULT_PORT} (runsgate's default): not held by this session "
            "(held in CI, or with RUNSGATE_TEST_HOLD_PORT=1); tests choose free ports"
        )
    held = [host for host, sock in _HELD_DEFAULT_PORT.items() if isinstance(sock, socket.socket)]
    others = [f"{host} ({why})" for host, why in _HELD_DEFAULT_PORT.items() if isinstance(why, str)]
    line = f"port {DEFAULT_PORT} (runsgate's default): "
    line += f"held by this session on {', '.join(held)}" if held else "not held by this session"
    if others:
        line += f"; not on {', '.join(others)}"
    return line + ": a test binding it fails, tests choose free ports"


def pytest_configure(config: pytest.Config) -> None:
    """In the session's controller (not in a pytest-xdist worker), name the file where every
    process of the session records the process groups it starts (``_processes.record_groups``),
    take a port slot, and hold runsgate's default port for the session (``hold_default_port``).

    Raises:
        pytest.UsageError: Workers are asked for with a distribution other than ``loadfile``.
    """
    if (config.getoption("numprocesses", None) or 0) and config.getoption("dist", "no") != "loadfile":
        raise pytest.UsageError(
            f"the suite runs on pytest-xdist workers with --dist loadfile only, not --dist "
            f'{config.getoption("dist")} (docs/testing.md "Parallel runs")'
        )
    if not hasattr(config, "workerinput"):
        _SWEPT.extend(_processes.sweep_leftovers())  # what a killed session left: its owner is dead
        _processes.record_groups()
        _documentdb.take_port_slot()  # before the workers start: they inherit it
        if _holds_default_port():
            hold_default_port()  # here, in the controller, before any worker or test starts a server


def pytest_unconfigure() -> None:
    """Let go of the default port (``hold_default_port``)."""
    for sock in _HELD_DEFAULT_PORT.values():
        if isinstance(sock, socket.socket):
            sock.close()
    _HELD_DEFAULT_PORT.clear()


def pytest_sessionstart() -> None:
    """Watch the load; and let SIGTERM and SIGHUP (a CI time-out, a closed terminal) end the session
    as Ctrl-C does, so that the teardowns end every process group the tests started: those groups
    are not pytest's own, so a signal to pytest's group no longer reaches them."""
    global _LOAD
    _LOAD = _LoadWatch()
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.default_int_handler)


def pytest_report_header() -> list[str]:
    """The machine's load and the wait scale, at the top of every run; what was swept."""
    one, five, fifteen = os.getloadavg()
    lines = [
        f"load average: {one:.2f} {five:.2f} {fifteen:.2f} ({os.cpu_count()} cores); "
        f"{_processes.WAIT_SCALE_VARIABLE}={_processes.wait_scale():g}"
    ]
    slot = os.environ.get(_documentdb.SLOT_VARIABLE, "")
    if slot.isdigit():
        ports, size = _documentdb.slot_ports(int(slot)), _documentdb.WORKER_PORTS[1]
        lines.append(
            f"port slot {slot} ({_documentdb.SLOT_VARIABLE}): ports {ports.start}-{ports.stop - 1}, "
            f"{size} per worker from {ports.start} + {size} x N for gwN"
        )
    else:
        lines.append("no port slot: other sessions hold every slot, the kernel picks the ports")
    if _HELD_DEFAULT_PORT:
        lines.append(_default_port_line())
    if _SWEPT:
        lines.append(f"removed {len(_SWEPT)} leftover(s) of dead test sessions: {', '.join(_SWEPT)}")
    return lines


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The load average over the run, beside the counts; and any process group a test left running."""
    if _LOAD is not None:
        terminalreporter.write_line(_LOAD.summary())
    left = _processes.kill_leftovers() + _processes.kill_recorded()  # the latter: those of dead workers
    if left:
        terminalreporter.write_line(f"killed {len(left)} process group(s) left running by tests: {left}", red=True)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Let ``_servers.require_process_marker`` see the test whose fixtures are being set up."""
    _servers.CURRENT_TEST = item


@pytest.fixture(scope="session")
def mongodb_server() -> Iterator[str]:
    """Base URI of the MongoDB wire-protocol server of the MongoDB tests: ``MONGODB_URI``, or
    FerretDB 2.5 on PostgreSQL with DocumentDB, started for the session.

    Under ``CI=true`` a missing server fails the run instead of skipping MongoDB tests.
    """
    if os.environ.get("MONGODB_URI"):
        yield os.environ["MONGODB_URI"]
        return
    try:
        with documentdb() as uri:
            yield uri
    except RuntimeError as exc:
        if IN_CI:
            pytest.fail(f"no MongoDB server for the tests: {exc}")
        pytest.skip(f"no MongoDB server: {exc}")


@pytest.fixture(scope="session")
def ferretdb1_server() -> Iterator[str]:
    """Base URI of FerretDB 1.24 (SQLite backend), started for the session: the second engine
    of the storage suites (``STORE_KINDS``). Skipped when ``MONGODB_URI`` names the session's
    one MongoDB server; failed rather than skipped under ``CI=true`` when it cannot start."""
    if os.environ.get("MONGODB_URI"):
        pytest.skip("MONGODB_URI names this session's MongoDB server")
    try:
        with ferretdb() as uri:
            yield uri
    except RuntimeError as exc:
        if IN_CI:
            pytest.fail(f"no FerretDB 1.24 for the tests: {exc}")
        pytest.skip(f"no FerretDB 1.24: {exc}")


@pytest.fixture
def mongodb_uri(mongodb_server: str) -> str:
    """A URI naming a fresh database on the test server."""
    return with_database(mongodb_server)


MONGO_SERVERS = {"mongo": "mongodb_server", "ferretdb1": "ferretdb1_server"}
"""The store kinds on a MongoDB wire-protocol server, and the fixture of each one's server."""
STORE_KINDS = ["memory", "sqlite", pytest.param("mongo", marks=pytest.mark.mongo)]
"""The stores most suites run against; ``mongo`` is ``mongodb_server``."""
STORAGE_STORE_KINDS = [*STORE_KINDS, pytest.param("ferretdb1", marks=pytest.mark.mongo)]
"""The stores of ``tests/storage`` (its ``conftest.py``): FerretDB 1.24 too, whose conditional
writes must mean what they mean on DocumentDB and MongoDB."""


def kind_uri(request: pytest.FixtureRequest, kind: str) -> str:
    """A URI naming a fresh database on the server of store kind ``kind`` (``MONGO_SERVERS``)."""
    return with_database(request.getfixturevalue(MONGO_SERVERS[kind]))


@pytest.fixture(scope="module", params=["sqlite", pytest.param("mongo", marks=pytest.mark.mongo)])
def shared_store_kind(request: pytest.FixtureRequest) -> str:
    """``sqlite`` then ``mongo``: the store the multi-process suites share (``_servers.shared_store_env``)."""
    return str(request.param)


@pytest.fixture
def sqlite_path(tmp_path: Path) -> Path:
    """A fresh SQLite database file (not created yet) in the test's own directory."""
    return tmp_path / "runsgate.db"


@asynccontextmanager
async def open_store(request: pytest.FixtureRequest, kind: str) -> AsyncIterator[SnapshotStore]:
    """An open store of ``kind`` (``memory``, ``sqlite`` or a key of ``MONGO_SERVERS``), closed
    afterwards (a MongoDB database dropped first)."""
    if kind == "memory":
        memory = MemorySnapshotStore()
        await memory.open()
        yield memory
        return
    if kind == "sqlite":
        sqlite = SQLiteSnapshotStore(request.getfixturevalue("sqlite_path"))
        await sqlite.open()
        try:
            yield sqlite
        finally:
            await sqlite.close()
        return
    mongo = mongo_store(kind_uri(request, kind))
    await mongo.open()
    try:
        yield mongo
    finally:
        await mongo.drop_all()
        await mongo.close()


@pytest.fixture(params=STORE_KINDS)
async def store(request: pytest.FixtureRequest) -> AsyncIterator[SnapshotStore]:
    """Each store in turn: the contract suites run against all three."""
    async with open_store(request, request.param) as opened:
        yield opened


@asynccontextmanager
async def open_two_clients(
    request: pytest.FixtureRequest, kind: str
) -> AsyncIterator[tuple[SnapshotStore, SnapshotStore]]:
    """Two open stores on one database of ``kind`` (``sqlite`` or a key of ``MONGO_SERVERS``)."""
    if kind == "sqlite":
        path = request.getfixturevalue("sqlite_path")
        pair: tuple[SnapshotStore, SnapshotStore] = (SQLiteSnapshotStore(path), SQLiteSnapshotStore(path))
    else:
        uri = kind_uri(request, kind)
        pair = (mongo_store(uri), mongo_store(uri))
    for client in pair:
        await client.open()
    try:
        yield pair
    finally:
        if isinstance(pair[0], MongoSnapshotStore):
            await pair[0].drop_all()
        for client in pair:
            await client.close()


@pytest.fixture(params=STORE_KINDS[1:])
async def two_clients(request: pytest.FixtureRequest) -> AsyncIterator[tuple[SnapshotStore, SnapshotStore]]:
    """Two stores on one database, as two processes would have: two connections to one SQLite
    file, then two clients of one fresh MongoDB database (dropped afterwards)."""
    async with open_two_clients(request, request.param) as pair:
        yield pair
