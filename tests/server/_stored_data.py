"""A server over a copy of a store written by an earlier version (``tests/data/v<N>``)."""

from __future__ import annotations

import json
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from bson import json_util
from pymongo import AsyncMongoClient

from .conftest import Apps, Served

DATA = Path(__file__).resolve().parent.parent / "data"


def run_ids(version: str) -> dict[str, dict[str, str]]:
    """The ids of the runs in ``tests/data/<version>``, by store kind then by name."""
    ids: dict[str, dict[str, str]] = json.loads((DATA / version / "runs.json").read_text())
    return ids


@asynccontextmanager
async def served_over(
    request: pytest.FixtureRequest, tmp_path: Path, version: str
) -> AsyncIterator[tuple[Served, dict[str, str]]]:
    """Today's server (demo agents, no tool rules) over a copy of ``tests/data/<version>``'s store
    of the kind ``request.param`` names (``sqlite`` or ``mongo``), and the ids of its runs."""
    kind, data = request.param, DATA / version
    fields: dict[str, Any] = {"agents": "tests.runtime.agents:WITH_DEMO_AGENTS", "tool_rules": []}
    if kind == "sqlite":
        copy = tmp_path / "runs.db"
        shutil.copy(data / "runs.db", copy)
        fields["store"] = f"sqlite:///{copy}"
    else:
        uri = request.getfixturevalue("mongodb_uri")
        client: AsyncMongoClient[Any] = AsyncMongoClient(uri, tz_aware=True)
        database = client.get_default_database()
        for name, docs in json_util.loads((data / "mongo.json").read_text()).items():
            if docs:
                await database[name].insert_many(docs)
        await client.close()
        fields["mongodb_uri"] = uri
    apps = Apps(request, kind)
    try:
        yield await apps.start(**fields), run_ids(version)[kind]
    finally:
        await apps.close()
