"""The store registry (``storage.store_from_url``): each URL scheme gives its store, not opened,
with the options it takes; a URL no store takes is refused naming the accepted forms; PyMongo is
imported only when a MongoDB URL is made into a store."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from storage import (
    MemorySnapshotStore,
    MongoSnapshotStore,
    SQLiteSnapshotStore,
    StoreUnavailableError,
    UnknownStoreError,
    store_from_url,
)
from storage.registry import (
    STORES,
    accepted_urls,
    check_reachable,
    check_store_url,
    sqlite_path,
    store_address,
    store_entry,
)
from storage.sqlite import DEFAULT_BUSY_TIMEOUT

from .. import _processes
from ._contract import snapshot

ROOT = Path(__file__).resolve().parents[2]


def test_memory_is_a_new_empty_store_each_call() -> None:
    first = store_from_url("memory://")
    second = store_from_url("memory://")

    assert isinstance(first, MemorySnapshotStore)
    assert isinstance(second, MemorySnapshotStore)
    assert first is not second


async def test_a_run_stored_in_one_memory_store_is_not_in_the_next() -> None:
    first = store_from_url("memory://")
    await first.open()
    run = snapshot("run-1")
    await first.insert(run, b"[]")

    second = store_from_url("memory://")
    await second.open()

    assert await first.get(run["agentId"], "run-1") == run
    assert await second.get(run["agentId"], "run-1") is None


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///runsgate.db", Path("runsgate.db")),
        ("sqlite:///./data/runs.db", Path("data/runs.db")),
        ("sqlite:////var/lib/runsgate/runs.db", Path("/var/lib/runsgate/runs.db")),
    ],
)
def test_sqlite_urls_name_the_file_after_three_slashes(url: str, path: Path) -> None:
    store = store_from_url(url)

    assert isinstance(store, SQLiteSnapshotStore)
    assert store.path == path
    assert sqlite_path(url) == path
    assert store.busy_timeout == DEFAULT_BUSY_TIMEOUT


def test_sqlite_takes_the_busy_timeout_and_ignores_the_mongodb_option() -> None:
    store = store_from_url("sqlite:///x.db", busy_timeout=0.25, server_selection_timeout=9.0)

    assert isinstance(store, SQLiteSnapshotStore)
    assert store.busy_timeout == 0.25


@pytest.mark.parametrize(
    "url", ["mongodb://127.0.0.1:1/x", "mongodb://alice:s3cret@h1:27017,h2/runsgate?replicaSet=rs0"]
)
def test_mongodb_urls_give_a_mongodb_store_on_that_uri(url: str) -> None:
    store = store_from_url(url, busy_timeout=0.25)

    assert isinstance(store, MongoSnapshotStore)
    assert store.uri == url


def test_a_mongodb_srv_url_gives_a_mongodb_store_not_yet_connected() -> None:
    url = "mongodb+srv://alice:s3cret@cluster0.example.net/runsgate"  # no DNS lookup until opened

    store = store_from_url(url)

    assert isinstance(store, MongoSnapshotStore)
    assert store.uri == url


async def test_mongodb_waits_the_server_selection_timeout_given() -> None:
    store = store_from_url("mongodb://127.0.0.1:1/x", server_selection_timeout=0.3)  # nothing listens there
    started = time.monotonic()

    with pytest.raises(StoreUnavailableError):
        await store.open()
    waited = time.monotonic() - started
    await store.close()

    assert 0.3 <= waited < 3.0  # the default is 5 s


async def test_an_open_that_fails_closes_the_client_it_made() -> None:
    # an unclosed AsyncMongoClient is reported, when collected, in whatever runs then
    store = store_from_url("mongodb://127.0.0.1:1/x", server_selection_timeout=0.3)  # nothing listens there
    assert isinstance(store, MongoSnapshotStore)

    with pytest.raises(StoreUnavailableError):
        await store.open()

    assert store._client is None  # closed by the open that failed, not left to the caller


@pytest.mark.parametrize(
    "url",
    [
        "postgres://alice:s3cret@db/x",
        "./runsgate.db",
        "runsgate.db",
        "",
        "memory://x",
        "memory:",
        "sqlite://",
        "sqlite:///",
        "SQLITE:///x.db",
        "redis://s3cret@cache",
    ],
)
def test_a_url_no_store_takes_is_refused_naming_the_accepted_forms_and_not_the_url(url: str) -> None:
    with pytest.raises(UnknownStoreError) as refused:
        store_from_url(url)

    assert isinstance(refused.value, ValueError)
    message = str(refused.value)
    assert message.endswith("a store URL is " + accepted_urls())
    assert "s3cret" not in message
    assert sqlite_path(url) is None


def test_the_accepted_forms_are_every_stores_forms() -> None:
    assert accepted_urls() == ("memory://, sqlite:///relative/path.db, sqlite:////absolute/path.db or a mongodb:// URI")


def test_one_entry_per_store_each_scheme_in_one_entry() -> None:
    schemes = [scheme for entry in STORES for scheme in entry.schemes]

    assert len(schemes) == len(set(schemes))
    assert [entry.name for entry in STORES] == ["memory", "sqlite", "mongodb"]
    assert {entry.name: entry.shared for entry in STORES} == {"memory": False, "sqlite": True, "mongodb": True}
    assert store_entry("mongodb+srv://h/x") is store_entry("mongodb://h/x")


PYMONGO_LAZY = """
import sys
from storage import store_from_url

store_from_url("memory://")
store_from_url("sqlite:///x.db")
print("pymongo" in sys.modules)
store_from_url("mongodb://127.0.0.1:1/x")
print("pymongo" in sys.modules)
"""


def test_pymongo_is_imported_only_when_a_mongodb_url_is_made_a_store() -> None:
    environment = {name: value for name, value in os.environ.items() if name != "MONGODB_URI"}
    done = _processes.run(
        [sys.executable, "-c", PYMONGO_LAZY], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "True"]


@pytest.mark.parametrize(
    ("url", "address"),
    [
        ("memory://", "memory://"),
        ("sqlite:///./data/runs.db", "data/runs.db"),
        ("sqlite:////var/lib/runsgate/runs.db", "/var/lib/runsgate/runs.db"),
        ("mongodb://alice:s3cret@h1:27017,h2/runsgate?replicaSet=rs0", "h1:27017,h2:27017"),
        ("mongodb+srv://alice:s3cret@cluster0.example.net/runsgate", "cluster0.example.net"),
        # a password holding `?`, `/`, `@` or `#` unescaped: the credentials end at the last `@`
        ("mongodb://alice:s3?cr=et@h1/runsgate", "h1:27017"),
        ("mongodb://alice:s3/cr@et@h1:27018/runsgate?w=1", "h1:27018"),
        ("mongodb+srv://alice:s3#cr?et@cluster0.example.net/runsgate", "cluster0.example.net"),
    ],
)
def test_each_store_is_named_by_its_address_never_a_password(url: str, address: str) -> None:
    assert store_address(url) == address


def test_the_start_up_check_of_a_store_in_this_process_or_a_file_reaches_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "missing" / "runs.db"  # a SQLite file is opened later, after the agents load

    check_reachable("memory://")
    check_reachable(f"sqlite:///{missing}", busy_timeout=0.1)

    assert not missing.parent.exists()


def test_the_start_up_check_of_a_server_store_fails_within_its_timeout_without_the_url() -> None:
    started = time.monotonic()

    with pytest.raises(StoreUnavailableError) as unreachable:
        check_reachable("mongodb://alice:s3cret@127.0.0.1:1/x", server_selection_timeout=0.3)  # nothing listens

    assert 0.3 <= time.monotonic() - started < 3.0
    assert "s3cret" not in str(unreachable.value)
    assert "127.0.0.1" not in str(unreachable.value)


def test_the_url_check_is_its_stores_own_and_never_shows_the_url() -> None:
    check_store_url("memory://")
    check_store_url("sqlite:///runs.db")
    check_store_url("mongodb://alice:s3cret@h1:27017/runsgate?replicaSet=rs0")

    with pytest.raises(ValueError, match=r"^unknown option 'bogusOption'$"):
        check_store_url("mongodb://alice:s3cret@h1/runsgate?bogusOption=1")
    with pytest.raises(UnknownStoreError, match="a store URL is"):
        check_store_url("postgres://alice:s3cret@db/x")


def test_every_entry_names_how_it_is_reached_and_backed_up() -> None:
    hooks = {
        entry.name: (entry.check_url is not None, entry.check_reachable is not None, entry.backup_advice is not None)
        for entry in STORES
    }

    assert hooks == {"memory": (False, False, True), "sqlite": (False, False, False), "mongodb": (True, True, True)}
