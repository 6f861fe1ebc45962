"""What one conditional write costs on FerretDB as its collection grows:
``./dev run python -m bench.ferretdb_filters [sizes]`` (default ``1000,4000``).

runsgate's compare-and-set writes (idempotency keys, claims, decisions) filter on ``_id`` plus a
condition, e.g. ``{"_id": key, "reservedBy": owner}``. On MongoDB the ``_id`` index finds the one
document. This times, on a FerretDB started here (``FERRETDB_BIN``, as ``./dev test`` builds it),
``find_one`` and ``update_one`` by ``_id`` alone and by ``_id`` with one more condition, on a
collection of idempotency-key-shaped documents of each size: the median of 15 of each, in
milliseconds.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

from pymongo import MongoClient

from tests._servers import ferretdb


def _median_ms(action: Callable[[], Any], times: int = 15) -> float:
    action()
    samples = []
    for _ in range(times):
        begun = time.perf_counter()
        action()
        samples.append((time.perf_counter() - begun) * 1000)
    return statistics.median(samples)


def _figures(keys: Any, key: str) -> list[float]:
    held = {"_id": key, "reservedBy": "instance-a"}
    return [
        _median_ms(lambda: keys.find_one({"_id": key})),
        _median_ms(lambda: keys.find_one(held)),
        _median_ms(lambda: keys.update_one({"_id": key}, {"$set": {"n": 1}})),
        _median_ms(lambda: keys.update_one(held, {"$set": {"n": 2}})),
    ]


def main(argv: list[str]) -> int:
    sizes = [int(size) for size in (argv[0] if argv else "1000,4000").split(",")]
    print("| documents | find_one `_id` | find_one `_id` + 1 condition | update_one `_id` | `_id` + 1 condition |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    with ferretdb() as uri:
        client: MongoClient[dict[str, Any]] = MongoClient(uri)
        keys = client["bench_filters"]["keys"]
        count = 0
        for size in sizes:
            keys.insert_many(
                [
                    {"_id": f"key-{n}", "reservedBy": "instance-a", "result": {"answers": ["x" * 200]}}
                    for n in range(count, size)
                ]
            )
            count = size
            figures = _figures(keys, f"key-{size // 2}")
            print(f"| {size:,} | " + " | ".join(f"{figure:.1f} ms" for figure in figures) + " |")
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
