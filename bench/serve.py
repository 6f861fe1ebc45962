"""``python -m bench.serve [--host H] [--port P] [--store URL] [--workers N]``: ``runsgate serve``
with the benchmark's raw endpoint, ``POST /bench/raw-page`` (``bench.raw_page``), mounted.

The product never mounts it (bench/ is not in the wheel): ``create_bench_app`` adds the route to
``server.app.create_app``'s app, and ``runsgate serve``'s own checks and uvicorn serve it.
"""

from __future__ import annotations

import argparse
import sys

from starlette.applications import Starlette
from starlette.routing import Route

from server.app import create_app, worker_settings
from server.cli.serve import run_serve_command
from server.settings import Settings

from .raw_page import raw_page

RAW_PAGE_PATH = "/bench/raw-page"


def create_bench_app(settings: Settings | None = None, *, settle: bool = False) -> Starlette:
    """``server.app.create_app``'s app with ``POST /bench/raw-page`` (``settle``: as ``create_app``'s)."""
    app = create_app(settings, settle=settle)
    app.router.routes.append(Route(RAW_PAGE_PATH, raw_page, methods=["POST"]))
    return app


def worker_app() -> Starlette:
    """The app of one ``--workers`` process (uvicorn's factory), as ``server.app.worker_app``."""
    return create_bench_app(worker_settings(), settle=True)


def main(argv: list[str]) -> int:
    """Serve as ``runsgate serve`` does; returns its exit status."""
    parser = argparse.ArgumentParser(prog="python -m bench.serve", description=__doc__)
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    parser.add_argument("--store")
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args(argv)
    return run_serve_command(
        args.host,
        args.port,
        args.store,
        args.workers,
        app_factory=create_bench_app,
        worker_app="bench.serve:worker_app",
    )


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
