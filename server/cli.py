"""Command line: ``runsgate serve --host --port`` (also ``python -m server``)."""

from __future__ import annotations

import argparse
import sys

import uvicorn

from .config import ConfigError, load_settings
from .logs import configure_logging


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status (2 for invalid configuration)."""
    parser = argparse.ArgumentParser(prog="runsgate", description="GraphQL server for suspended agent runs.")
    commands = parser.add_subparsers(dest="command")
    serve = commands.add_parser("serve", help="start the GraphQL server")
    serve.add_argument("--host", help="interface to listen on (default RUNSGATE_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default RUNSGATE_PORT or 4000)")
    args = parser.parse_args(argv)
    if args.command in (None, "serve"):
        return _serve(getattr(args, "host", None), getattr(args, "port", None))
    parser.error(f"unknown command {args.command}")
    return 2


def _serve(host: str | None, port: int | None) -> int:
    try:
        settings = load_settings()
    except ConfigError as exc:
        print(f"runsgate: {exc}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    from .app import create_app

    try:
        app = create_app(settings)
    except ConfigError as exc:
        print(f"runsgate: {exc}", file=sys.stderr)
        return 2
    uvicorn.run(
        app,
        host=host or settings.host,
        port=settings.port if port is None else port,
        log_level=settings.log_level.lower(),
        log_config=None,  # uvicorn's loggers propagate to ours (server.logs): one format, with request ids
    )
    return 0
