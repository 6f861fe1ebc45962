"""Write tests/data/v5-mongo-before-queue-counts with the runsgate before MongoDB's queue counts.

Pinned: run from a checkout of commit 2530bd3 (schema version 5, MongoDB backfill 3: ``run_counts``
kept, the queue's ``totalCount`` an aggregation over its runs), with a MongoDB-wire server at
``MONGODB_URI``::

    git archive 2530bd3 | tar -x -C /tmp/v5src && cd /tmp/v5src && \\
        MONGODB_URI=mongodb://127.0.0.1:27017/v5queue ./dev run python PATH/TO/make.py OUT_DIR

It fills the database with the runs and writes of ``../v5-before-queue-counts/make.py`` (the
same 60 runs, decisions and claim), then writes ``OUT_DIR/mongo.json`` (every collection as
MongoDB Extended JSON) and ``OUT_DIR/queue.json``: for each queue filter, the pending questions
that version counted, which a later runsgate must count the same
(``tests/storage/test_review_counts_upgrade.py``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any

from bson import json_util

from storage import MongoSnapshotStore

_SPEC = importlib.util.spec_from_file_location(
    "v5_make", Path(__file__).parent.parent / "v5-before-queue-counts" / "make.py"
)
assert _SPEC is not None
assert _SPEC.loader is not None
V5: Any = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(V5)


async def write() -> tuple[dict[str, int], str]:
    store = MongoSnapshotStore(os.environ["MONGODB_URI"])
    answers = await V5.fill(store)  # opens and closes the store
    await store.open()
    dump = {}
    for name in sorted(await store.database.list_collection_names()):
        dump[name] = [doc async for doc in store.database[name].find({})]
    await store.drop_all()
    await store.close()
    return answers, json_util.dumps(dump, indent=1, json_options=json_util.CANONICAL_JSON_OPTIONS)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    answers, dump = asyncio.run(write())
    (out / "mongo.json").write_text(dump)
    (out / "queue.json").write_text(json.dumps({"filters": V5.FILTERS, "answers": answers}, indent=1) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
