"""``scripts/documentdb-reindex.sh`` on a real FerretDB 2.5 with DocumentDB: after deletes, the
REINDEX gives the indexes' pages back (VACUUM does not: docs/operations.md), and it refuses a
collection the database does not have."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from pymongo import ASCENDING, MongoClient

from tests import _documentdb, _processes

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "documentdb-reindex.sh"

pytestmark = pytest.mark.process


def _run(server: _documentdb.DocumentDB, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PGHOST": "127.0.0.1",
        "PGPORT": str(server.postgres_port),
        "PGUSER": "postgres",
        "PGDATABASE": "postgres",
        "PSQL": str(_documentdb.POSTGRES_BIN / "psql"),
    }
    return _processes.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=120)


def test_a_reindex_gives_back_the_index_pages_of_deleted_documents() -> None:
    with _documentdb.documentdb() as server:
        client: MongoClient[dict[str, object]] = MongoClient(server.uri)
        try:
            # given a collection with a secondary index, whose documents came and went
            events = client["runsgate"]["run_events"]
            events.create_index([("agentId", ASCENDING), ("runId", ASCENDING), ("at", ASCENDING)])
            for round_ in range(4):
                events.insert_many(
                    [{"_id": f"{round_}-{i}", "agentId": "a", "runId": f"r{i}", "at": i} for i in range(2000)]
                )
                events.delete_many({})
            events.insert_one({"_id": "kept", "agentId": "a", "runId": "r", "at": 0})

            # when the script reindexes that collection
            done = _run(server, "runsgate", "run_events")

            # then it succeeded, and the indexes are smaller than before
            assert done.returncode == 0, done.stderr
            found = re.search(r"^run_events \(documents_\d+\): indexes (\d+) -> (\d+) bytes", done.stdout, re.M)
            assert found, done.stdout
            before, after = int(found[1]), int(found[2])
            assert after < before / 2, done.stdout
            assert events.find_one({"agentId": "a", "runId": "r"}) is not None  # the index still serves

            # and a collection the database does not have is refused
            missing = _run(server, "runsgate", "no_such_collection")
            assert missing.returncode == 2
            assert "no collection named no_such_collection" in missing.stderr
        finally:
            client.close()
