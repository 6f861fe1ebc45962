"""Adding a store (docs/architecture.md "Adding a store"): a store added to ``STORES`` with its one
entry is taken by the commands with no other change: ``runsgate serve`` runs its start-up check and
names it by its address, ``runsgate seed`` writes into it (``--reset`` empties it when it has
``drop_all``), ``runsgate backup`` refuses it with its entry's advice. The added store is a real
one, SQLite files under a scheme of their own (``vault:///absolute/path.db``), in ``tmp_path``."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import NoReturn

import pytest
from pydantic_ai import models

from server.cli.main import main
from server.cli.serve import run_serve_command
from server.settings import DEMO_AGENTS, ConfigError, Settings
from storage import MemorySnapshotStore, RunFilter, SQLiteSnapshotStore, StoreUnavailableError, registry
from storage.registry import StoreEntry, StoreOptions

models.ALLOW_MODEL_REQUESTS = False  # the demo agents' scripted FunctionModels only


def _path(url: str) -> Path:
    return Path(url.removeprefix("vault://"))


def _reach(url: str, options: StoreOptions) -> None:
    """A vault is reachable when its folder exists; a vault URL takes no options."""
    if "?" in url:
        raise ValueError("a vault URL takes no options")
    if not _path(url).parent.is_dir():
        raise StoreUnavailableError(f"no folder {_path(url).parent}")


VAULT = StoreEntry(
    name="vault",
    schemes=("vault",),
    forms=("vault:///absolute/path.db",),
    shared=True,
    accepts=lambda url: url.startswith("vault:///") and url != "vault:///",
    create=lambda url, options: SQLiteSnapshotStore(_path(url), busy_timeout=options.busy_timeout or 2.0),
    address=lambda url: f"vault {_path(url).name}",
    check_reachable=_reach,
    backup_advice="back a vault up with vault-dump",
)


@pytest.fixture(autouse=True)
def vault(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``VAULT`` is one more entry of the registry, and the commands run in ``tmp_path`` with no
    ``RUNSGATE_*`` variable but ``RUNSGATE_AUTH=off`` and the demo agents, no ``MONGODB_URI`` and
    no ``.env``."""
    monkeypatch.setattr(registry, "STORES", (*registry.STORES, VAULT))
    monkeypatch.setattr(registry, "BY_SCHEME", {**registry.BY_SCHEME, "vault": VAULT})
    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith("RUNSGATE_") or k == "MONGODB_URI"]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("RUNSGATE_AUTH", "off")  # runsgate serve on 127.0.0.1 without a credential
    monkeypatch.setenv("RUNSGATE_AGENTS", DEMO_AGENTS)  # runsgate serve needs agents to serve


def _not_served(settings: Settings) -> NoReturn:
    """The app factory of ``run_serve_command``: every check passed, so the command stops here."""
    raise ConfigError(f"every check passed on {settings.store_url}")


def _serve(store: str | None = None) -> int:
    return run_serve_command(None, 0, store, app_factory=_not_served)


def test_serve_checks_an_added_store_before_start_naming_its_address(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"vault://{tmp_path / 'missing' / 'runs.db'}"

    assert _serve(url) == 3  # as a MongoDB store no server answers

    assert capsys.readouterr().err == (
        f"runsgate cannot start: the store at vault runs.db is unreachable (no folder {tmp_path / 'missing'})\n"
    )


def test_serve_starts_on_an_added_store_its_check_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"vault://{tmp_path / 'runs.db'}"

    assert _serve(url) == 2

    assert capsys.readouterr().err == f"runsgate: every check passed on {url}\n"


@pytest.mark.parametrize("given", ["--store", "RUNSGATE_STORE"])
def test_a_url_the_added_stores_check_refuses_is_invalid_configuration_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], given: str
) -> None:
    url = f"vault://{tmp_path / 'runs.db'}?fast=1"
    if given == "RUNSGATE_STORE":
        monkeypatch.setenv("RUNSGATE_STORE", url)

    assert _serve(url if given == "--store" else None) == 2

    refused = f"runsgate: invalid configuration: {given}: a vault URL takes no options (got '{url}')\n"
    assert capsys.readouterr().err == refused


async def _count(path: Path) -> int:
    store = SQLiteSnapshotStore(path)
    await store.open()
    try:
        return await store.count_runs("refund-agent", RunFilter())
    finally:
        await store.close()


def test_seed_writes_into_an_added_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "seeded.db"

    status = main(["seed", "--runs", "12", "--threads", "3", "--store", f"vault://{path}"])

    assert status == 0, capsys.readouterr().err
    assert "wrote 12 suspended runs" in capsys.readouterr().out
    assert asyncio.run(_count(path)) == 12


def test_seed_reset_empties_an_added_store_first(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"vault://{tmp_path / 'seeded.db'}"
    assert main(["seed", "--runs", "7", "--store", url]) == 0, capsys.readouterr().err

    assert main(["seed", "--runs", "4", "--seed", "1", "--store", url, "--reset"]) == 0, capsys.readouterr().err

    assert asyncio.run(_count(tmp_path / "seeded.db")) == 4


def test_seed_reset_is_refused_on_an_added_store_that_cannot_be_emptied(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # a store without drop_all (the memory store's class, entered as one processes share)
    kept = StoreEntry(
        name="kept",
        schemes=("kept",),
        forms=("kept://",),
        shared=True,
        accepts=lambda url: url == "kept://",
        create=lambda url, options: MemorySnapshotStore(),
        address=lambda url: url,
    )
    monkeypatch.setattr(registry, "STORES", (*registry.STORES, kept))
    monkeypatch.setattr(registry, "BY_SCHEME", {**registry.BY_SCHEME, "kept": kept})

    assert main(["seed", "--runs", "3", "--store", "kept://", "--reset"]) == 2

    assert capsys.readouterr().err == (
        "runsgate: invalid configuration: --reset: the kept store cannot delete its runs, events and keys\n"
    )


def test_backup_refuses_an_added_store_with_its_entrys_advice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"vault://{tmp_path / 'runs.db'}"

    assert main(["backup", "--store", url, "--to", str(tmp_path / "copy.db")]) == 2

    assert capsys.readouterr().err == (
        f"runsgate: invalid configuration: --store: back a vault up with vault-dump (got '{url}')\n"
    )
    assert list(tmp_path.iterdir()) == []
