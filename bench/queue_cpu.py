"""CPU milliseconds per request of the reviewers' queue against the listing, in process, on a
seeded SQLite file: ``./dev run python -m bench.queue_cpu FILE [requests]`` (issue 45).

The real app over ``FILE`` (a file ``bench.listing_totals`` seeded; it is opened, so the code's
indexes are made in it), called as ASGI in process (``bench.inprocess.best_cpu_ms``: scenarios
alternate in rounds, the best round counts), answers ``bench.listing_totals``' page+total
scenarios: ``suspendedRuns`` and ``reviewQueue``, unfiltered, of one thread and of one resource.
CPU time counts every thread of the process (the SQLite reader's too) and barely moves with the
machine's load, so a version's figures compare with another's run seconds apart.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from server.settings import DEMO_AGENTS, Settings

from .inprocess import Scenario, best_cpu_ms
from .listing_totals import SCENARIOS
from .serve import create_bench_app

PAIRS = ("page+total", "thread page+total", "resource page+total")
"""The listing's scenarios, each measured beside ``queue`` + its name."""


async def cpu_ms(file: Path, requests: int) -> dict[str, float]:
    """Scenario -> CPU milliseconds per request of the app over ``file``."""
    settings = Settings(agents=DEMO_AGENTS, mongodb_uri=None, store=f"sqlite:///{file}", auth=False)
    app = create_bench_app(settings)
    scenarios: dict[str, Scenario] = {}
    for name in PAIRS:
        for each in (name, f"queue {name}"):
            path, body = SCENARIOS[each]
            scenarios[each] = (app, path, body.encode())
    async with app.router.lifespan_context(app):
        return await best_cpu_ms(scenarios, requests)


def main(argv: list[str]) -> int:
    file = Path(argv[0])
    requests = int(argv[1]) if len(argv) > 1 else 50
    figures = asyncio.run(cpu_ms(file, requests))
    for name in PAIRS:
        listing, queue = figures[name], figures[f"queue {name}"]
        ratio = queue / listing
        print(f"{name:<20} listing {listing:6.3f}  queue {queue:6.3f} CPU ms/request  queue/listing {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
