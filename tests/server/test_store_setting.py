"""Choosing the store: ``RUNSGATE_STORE`` / ``--store`` URLs, and a SQLite file that cannot serve.

A SQLite path that cannot be opened or written, a corrupt file and one of a newer schema version
stop ``runsgate serve`` with one line on stderr naming the file, before anything listens.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import httpx
import pytest

from server.app import create_app
from server.services import make_store
from server.settings import DEMO_AGENTS, ApiKeyConfig, ConfigError, Settings, load_settings
from storage import SCHEMA_VERSION, MemorySnapshotStore, MongoSnapshotStore, SQLiteSnapshotStore

from .._auth import ADMIN
from .._graphql import APPROVE, REFUND, REFUND_PROMPT, START_RUN, SUSPENDED_RUNS, GraphQLClient, data
from .._servers import SERVE, runsgate_servers
from ._cli import serve_with_only


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No store variable set, no ``.env`` (the test runs in ``tmp_path``)."""
    monkeypatch.chdir(tmp_path)
    for variable in ("RUNSGATE_STORE", "MONGODB_URI", "RUNSGATE_MONGODB_URI", "RUNSGATE_SEED_RUNS"):
        monkeypatch.delenv(variable, raising=False)
    return tmp_path


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:///./runsgate.db", Path("runsgate.db")),
        ("sqlite:///data/runs.db", Path("data/runs.db")),
        ("sqlite:////var/lib/runsgate/runs.db", Path("/var/lib/runsgate/runs.db")),
    ],
)
def test_sqlite_urls_follow_sqlalchemys_slashes(clean_env: Path, url: str, path: Path) -> None:
    settings = Settings(store=url)

    assert settings.sqlite_path == path
    assert isinstance(make_store(settings), SQLiteSnapshotStore)


def test_the_store_defaults_to_memory_and_mongodb_uri_keeps_working(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert isinstance(make_store(load_settings()), MemorySnapshotStore)
    assert isinstance(make_store(load_settings(store="memory://")), MemorySnapshotStore)

    monkeypatch.setenv("MONGODB_URI", "mongodb://127.0.0.1:1/x")
    assert isinstance(make_store(load_settings()), MongoSnapshotStore)

    monkeypatch.setenv("RUNSGATE_STORE", "mongodb://127.0.0.1:1/x")  # the same store twice: fine
    settings = load_settings()
    assert (settings.store_url, settings.mongodb_uri) == ("mongodb://127.0.0.1:1/x", "mongodb://127.0.0.1:1/x")


def test_a_mongodb_store_url_sets_the_mongodb_uri(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNSGATE_STORE", "mongodb://127.0.0.1:1/x")

    settings = load_settings()

    assert settings.mongodb_uri == "mongodb://127.0.0.1:1/x"
    assert isinstance(make_store(settings), MongoSnapshotStore)


@pytest.mark.parametrize("store", ["sqlite:///./runsgate.db", "memory://", "mongodb://127.0.0.1:2/other"])
def test_two_variables_naming_different_stores_are_refused(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, store: str
) -> None:
    monkeypatch.setenv("RUNSGATE_STORE", store)
    monkeypatch.setenv("MONGODB_URI", "mongodb://alice:s3cret@127.0.0.1:1/x")

    with pytest.raises(ConfigError, match=r"RUNSGATE_STORE .* and MONGODB_URI name different stores") as refused:
        load_settings()
    # both values shown, the password masked
    assert f"(got RUNSGATE_STORE={store!r}, MONGODB_URI='mongodb://alice:***@127.0.0.1:1/x')" in str(refused.value)
    assert "s3cret" not in str(refused.value)


@pytest.mark.parametrize("store", ["sqlite://", "sqlite:///", "postgres://db/x", "./runsgate.db", "memory://x"])
def test_an_invalid_store_url_is_refused_naming_the_variable(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, store: str
) -> None:
    monkeypatch.setenv("RUNSGATE_STORE", store)

    with pytest.raises(ConfigError, match=r"RUNSGATE_STORE: .*sqlite:///relative/path\.db"):
        load_settings()


def test_seeding_at_start_stays_memory_only(clean_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RUNSGATE_SEED_RUNS", "10")
    monkeypatch.setenv("RUNSGATE_STORE", "sqlite:///./runsgate.db")

    with pytest.raises(ConfigError, match="RUNSGATE_SEED_RUNS seeds the memory store only; for SQLite") as refused:
        load_settings()
    assert "(got RUNSGATE_SEED_RUNS=10, RUNSGATE_STORE='sqlite:///./runsgate.db')" in str(refused.value)


def test_the_busy_timeout_stays_below_half_the_subscription_lookback(clean_env: Path) -> None:
    default = make_store(Settings(store="sqlite:///x.db"))
    short = make_store(Settings(store="sqlite:///x.db", subscription_lookback=1.0))

    assert isinstance(default, SQLiteSnapshotStore)
    assert isinstance(short, SQLiteSnapshotStore)
    assert default.busy_timeout == 2.0 < Settings().subscription_lookback / 2
    assert short.busy_timeout == 0.5


def one_line_refusal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path, *args: str
) -> str:
    """``runsgate serve ARGS`` must exit 3 (the store cannot start) with exactly one line on stderr
    and no traceback; that line."""
    status = serve_with_only(monkeypatch, tmp_path, {"RUNSGATE_AUTH": "off"}, *args)
    err = capsys.readouterr().err
    assert status == 3, err
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err
    return err.strip()


def test_serve_on_a_path_that_cannot_be_written_stops_with_one_line_naming_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    (tmp_path / "a-file").write_text("x")
    path = tmp_path / "a-file" / "runsgate.db"

    line = one_line_refusal(monkeypatch, capsys, tmp_path, "--store", f"sqlite:///{path}")

    assert line.startswith("runsgate cannot start: cannot open or write the SQLite database ")
    assert str(path) in line


def test_serve_on_a_corrupt_file_stops_with_one_line_and_leaves_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    corrupt = tmp_path / "runsgate.db"
    corrupt.write_bytes(b"not a database\n" * 500)

    line = one_line_refusal(monkeypatch, capsys, tmp_path, "--store", "sqlite:///./runsgate.db")

    assert "runsgate.db is corrupt or not a SQLite database" in line
    assert corrupt.read_bytes() == b"not a database\n" * 500


def test_serve_on_a_file_of_a_newer_schema_stops_with_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "runsgate.db"
    db = sqlite3.connect(path)
    with db:
        db.execute("CREATE TABLE runsgate_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID")
        db.execute("INSERT INTO runsgate_meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION + 1),))
    db.close()

    line = one_line_refusal(monkeypatch, capsys, tmp_path, "--store", f"sqlite:///{path}")

    assert line.startswith(
        f"runsgate cannot start: the store holds run snapshots of schema version {SCHEMA_VERSION + 1}"
    )
    assert "upgrade runsgate" in line


def test_serve_store_option_conflicting_with_mongodb_uri_exits_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status = serve_with_only(
        monkeypatch, tmp_path, {"MONGODB_URI": "mongodb://127.0.0.1:1/x"}, "--store", "sqlite:///./runsgate.db"
    )

    assert status == 2
    assert "name different stores" in capsys.readouterr().err
    assert not (tmp_path / "runsgate.db").exists()


async def test_a_decision_while_another_process_holds_the_lock_is_store_unavailable_and_changes_nothing(
    tmp_path: Path,
) -> None:
    path = tmp_path / "runsgate.db"
    settings = Settings(
        agents=DEMO_AGENTS,
        store=f"sqlite:///{path}",
        subscription_lookback=0.6,  # busy timeout 0.3 s
        sweep_interval=0,
        api_keys=[ApiKeyConfig.model_validate(ADMIN.entry())],
    )
    app = create_app(settings)
    blocker = sqlite3.connect(path, isolation_level=None)
    try:
        async with (
            app.router.lifespan_context(app),
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://test", headers=ADMIN.headers
            ) as http,
        ):
            gql = GraphQLClient(http)
            run = await gql.suspend(REFUND, REFUND_PROMPT)
            call_id = run["toolCalls"][0]["toolCallId"]

            # when another process holds the database's write lock during an approval
            blocker.execute("BEGIN IMMEDIATE")
            data, errors = await gql.errors(
                APPROVE, input={"agentId": REFUND, "runId": run["runId"], "toolCallId": call_id}
            )
            blocker.execute("ROLLBACK")

            # then the client is told the store is unavailable, and the run is listed as it was
            assert data is None
            assert [e["extensions"] for e in errors] == [{"code": "STORE_UNAVAILABLE"}]
            assert [edge["node"] for edge in (await gql.suspended_runs(REFUND))["edges"]] == [run]

            # and the same approval goes through once the lock is free
            done = await gql.approve(REFUND, run["runId"], call_id)
            assert done["status"] == "COMPLETED", done
    finally:
        blocker.close()


def test_serve_workers_on_the_memory_store_is_refused_with_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status = serve_with_only(monkeypatch, tmp_path, {}, "--workers", "2")

    assert status == 2
    err = capsys.readouterr().err
    assert err.startswith(
        "runsgate: invalid configuration: --workers 2 needs a store the processes can share: the memory store"
    )
    assert "Traceback" not in err


def test_serve_workers_below_one_is_refused_with_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    status = serve_with_only(monkeypatch, tmp_path, {}, "--store", "sqlite:///./runsgate.db", "--workers", "0")

    assert status == 2
    assert capsys.readouterr().err == "runsgate: invalid configuration: --workers: must be at least 1 (got 0)\n"
    assert not (tmp_path / "runsgate.db").exists()


def _children(pid: int) -> list[int]:
    return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


@pytest.mark.process
def test_serve_with_two_workers_on_one_sqlite_file_serves_runs_from_both(tmp_path: Path) -> None:
    path = tmp_path / "runsgate.db"
    logs = [tmp_path / "runsgate.log"]
    with runsgate_servers(logs, [*SERVE, "--workers", "2"], RUNSGATE_STORE=f"sqlite:///{path}") as servers:
        (server,) = servers
        # then the command runs two worker processes (besides uvicorn's supervisor)
        workers = [pid for pid in _children(server.process.pid) if "spawn_main" in _command_line(pid)]
        assert len(workers) == 2, [_command_line(pid) for pid in _children(server.process.pid)]

        url = server.url
        run = data(url, None, START_RUN, input={"agentId": REFUND, "prompt": REFUND_PROMPT})["startRun"]["run"]
        # a run started through one worker is listed the same by whichever answers
        for _ in range(20):
            listed = data(url, None, SUSPENDED_RUNS, agentId=REFUND)["suspendedRuns"]["edges"]
            assert [edge["node"] for edge in listed] == [run]
        call_id = run["toolCalls"][0]["toolCallId"]
        outcome = data(url, None, APPROVE, input={"agentId": REFUND, "runId": run["runId"], "toolCallId": call_id})
        assert outcome["approveToolCall"]["status"] == "COMPLETED", outcome
        assert data(url, None, SUSPENDED_RUNS, agentId=REFUND)["suspendedRuns"]["edges"] == []


def _command_line(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.parametrize("lookback", ["0", "0.4"])
def test_a_sqlite_store_refuses_a_lookback_too_short_for_its_lock_wait(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch, lookback: str
) -> None:
    """A lookback of 0 once made every SQLite write that overlapped another fail at once
    (STORE_UNAVAILABLE): the lock wait is half the lookback."""
    monkeypatch.setenv("RUNSGATE_STORE", "sqlite:///./runsgate.db")
    monkeypatch.setenv("RUNSGATE_SUBSCRIPTION_LOOKBACK", lookback)

    with pytest.raises(ConfigError, match=r"RUNSGATE_SUBSCRIPTION_LOOKBACK must be at least 0\.5 on a SQLite store"):
        load_settings()


def test_the_least_sqlite_lookback_and_a_memory_stores_zero_are_accepted(
    clean_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUNSGATE_SUBSCRIPTION_LOOKBACK", "0.5")
    monkeypatch.setenv("RUNSGATE_STORE", "sqlite:///./runsgate.db")
    least = make_store(load_settings())
    assert isinstance(least, SQLiteSnapshotStore)
    assert least.busy_timeout == 0.25
    monkeypatch.setenv("RUNSGATE_SUBSCRIPTION_LOOKBACK", "0")
    monkeypatch.setenv("RUNSGATE_STORE", "memory://")
    assert load_settings().subscription_lookback == 0
