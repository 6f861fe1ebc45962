"""Command line: ``runsgate serve --host --port --store --workers`` and ``runsgate seed --runs N
--agents A --threads T`` (also ``python -m server``)."""

from __future__ import annotations

import argparse
import json
import math
import os
import socket
import sys
from typing import Any

import uvicorn
from uvicorn.supervisors import Multiprocess

from .config import ConfigError, Settings, load_settings
from .logs import configure_logging


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status (2 for invalid configuration, 3 when the store cannot
    start, 4 when the address cannot be bound)."""
    parser = argparse.ArgumentParser(prog="runsgate", description="GraphQL server for suspended agent runs.")
    commands = parser.add_subparsers(dest="command")
    serve = commands.add_parser("serve", help="start the GraphQL server")
    serve.add_argument("--host", help="interface to listen on (default RUNSGATE_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default RUNSGATE_PORT or 4000)")
    serve.add_argument(
        "--store",
        help="store URL: memory://, sqlite:///relative/path.db, sqlite:////absolute/path.db or mongodb://... "
        "(default RUNSGATE_STORE, else MONGODB_URI, else memory://)",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=1,
        help="server processes sharing the port (default 1); more than one needs a store they can share "
        "(SQLite or MongoDB), never the memory store",
    )
    key = commands.add_parser("new-key", help="print a new API key and its RUNSGATE_API_KEYS entry")
    key.add_argument("--name", required=True, help="who holds the key (recorded as decidedBy)")
    key.add_argument("--scopes", default="runs:read,runs:decide,runs:start", help="comma-separated scopes")
    key.add_argument("--resources", default="*", help='comma-separated resourceIds, or "*" for every run')
    seed = commands.add_parser(
        "seed",
        help="write N realistic suspended runs (clones of real demo runs) into the SQLite or MongoDB store",
        description="Runs the demo agents to get real suspended runs, then bulk-writes N clones with new run ids, "
        "threads, resources and creation times into the store named by --store, RUNSGATE_STORE or MONGODB_URI "
        "(SQLite or MongoDB). For the memory store, start the server with RUNSGATE_SEED_RUNS=N instead.",
    )
    seed.add_argument("--store", help="store URL: sqlite:///path.db or mongodb://... (default RUNSGATE_STORE)")
    seed.add_argument("--runs", type=int, required=True, help="number of runs to write")
    seed.add_argument("--agents", type=int, default=1, help="runs go to the first A of refund-agent, weather-agent")
    seed.add_argument("--threads", type=int, default=100, help="distinct thread ids (default 100)")
    seed.add_argument("--resources", type=int, help="distinct resource ids (default threads/4)")
    seed.add_argument("--days", type=float, default=30.0, help="spread creation times over this many days before now")
    seed.add_argument("--seed", type=int, default=0, help="random seed (same seed: same run ids)")
    seed.add_argument("--reset", action="store_true", help="delete every stored run, event and key of the store first")
    args = parser.parse_args(argv)
    if args.command in (None, "serve"):
        return _serve(
            getattr(args, "host", None),
            getattr(args, "port", None),
            getattr(args, "store", None),
            getattr(args, "workers", 1),
        )
    if args.command == "new-key":
        return _new_key(args.name, args.scopes, args.resources)
    if args.command == "seed":
        from .seed_command import run_seed_command

        return run_seed_command(args)
    parser.error(f"unknown command {args.command}")
    return 2


WORKERS_ENV = "RUNSGATE_WORKER_OF"
"""Set in the environment of ``--workers`` processes (to the command's instance id) by ``_serve``."""

BIND_FAILED = 4
"""Exit status when the address cannot be bound (in use, or not this host's)."""


def _serve(host: str | None, port: int | None, store: str | None = None, workers: int = 1) -> int:
    """``runsgate serve``: every check that can refuse the start runs before the app and the agents are
    imported, quickest first: the settings (2), the address (4), a MongoDB store's reachability
    (3); then the agents and the rules (2), a SQLite store (3), the app (2)."""
    options = {name: value for name, value in (("host", host), ("port", port), ("store", store)) if value is not None}
    try:
        settings = load_settings(**options)
    except ConfigError as exc:
        print(f"runsgate: {exc}", file=sys.stderr)
        return 2
    if workers < 1:
        print(f"runsgate: --workers must be at least 1, got {workers}", file=sys.stderr)
        return 2
    if workers > 1 and settings.sqlite_path is None and not settings.mongodb_uri:
        print(
            f"runsgate: --workers {workers} needs a store the processes can share: the memory store lives inside "
            "one process, so each worker would see other runs. Use --store sqlite:///runsgate.db (one host) or "
            "a MongoDB URI, or one worker",
            file=sys.stderr,
        )
        return 2
    from .security_settings import security_problems

    problems = security_problems(settings, settings.host)
    if problems:
        print(f"runsgate: invalid configuration: {'; '.join(problems)}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    try:
        sock = bind_socket(settings.host, settings.port)
    except OSError as exc:
        print(
            f"runsgate cannot start: {_address(settings.host, settings.port)} cannot be bound ({exc.strerror or exc})",
            file=sys.stderr,
        )
        return BIND_FAILED
    with sock:
        return _serve_on(sock, settings, workers)


def bind_socket(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (not listening yet), as uvicorn's own
    ``Config.bind_socket`` makes it (``SO_REUSEADDR``, inheritable by ``--workers`` processes).

    Raises:
        OSError: The address is in use, or not one of this host's.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family=family)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.set_inheritable(True)
    return sock


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _serve_on(sock: socket.socket, settings: Settings, workers: int) -> int:
    if settings.mongodb_uri:  # before the agents and the app are imported (seconds, more under load)
        from storage.mongo import check_reachable, store_address
        from storage.protocol import StoreUnavailableError

        try:
            check_reachable(settings.mongodb_uri, settings.mongodb_timeout)
        except StoreUnavailableError as exc:
            address = store_address(settings.mongodb_uri)
            print(f"runsgate cannot start: the store at {address} is unreachable ({exc})", file=sys.stderr)
            return 3  # as uvicorn's when a lifespan cannot start
        except ValueError as exc:
            print(f"runsgate: invalid configuration: MONGODB_URI: {exc}", file=sys.stderr)
            return 2
    from runtime.registry import load_registry

    try:  # before uvicorn, whose failed lifespan would log a traceback and exit with status 3
        agents = load_registry(settings.agents)
    except ValueError as exc:
        print(f"runsgate: invalid configuration: RUNSGATE_AGENTS: {exc}{_extra_hint(exc)}", file=sys.stderr)
        return 2
    from .app import check_webhook_agents, create_app, store_problem, tool_rules

    try:
        tool_rules(settings, agents)
        check_webhook_agents(settings, agents)
    except ConfigError as exc:
        print(f"runsgate: {exc}", file=sys.stderr)
        return 2

    problem = store_problem(settings)
    if problem:  # exit status 3, as uvicorn's when a lifespan cannot start (a MongoDB store's case)
        print(problem, file=sys.stderr)
        return 3
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level.lower(),
        "log_config": None,  # uvicorn's loggers propagate to ours (server.logs): one format, with request ids
        "ws_max_size": settings.max_body_bytes,  # a WebSocket message is held to the body limit too
    }
    if workers > 1:
        # Each worker is a new process that builds its own app from the environment (uvicorn's
        # factory by import string), so the command line's options are passed on there; each
        # runs its own lifespan (store connection, sweeper, event feed) and gets its own instance
        # id, so claims held by one worker are never taken as held by another. A worker answers
        # uvicorn's health check once its interpreter has started, before it imports the app
        # (server/__init__.py imports nothing), and gets RUNSGATE_WORKER_HEALTHCHECK_TIMEOUT.
        os.environ.update(
            {
                "RUNSGATE_STORE": settings.store_url,
                "RUNSGATE_HOST": settings.host,
                "RUNSGATE_PORT": str(settings.port),
                WORKERS_ENV: settings.instance_id,
            }
        )
        config = uvicorn.Config(
            "server.app:worker_app",
            factory=True,
            workers=workers,
            timeout_worker_healthcheck=math.ceil(settings.worker_healthcheck_timeout),
            **options,
        )
        Multiprocess(config, sockets=[sock]).run()
        return 0
    try:  # one process: build the app here (--workers: each worker builds its own, unchecked here twice)
        app = create_app(settings)
    except ConfigError as exc:
        print(f"runsgate: {exc}", file=sys.stderr)
        return 2
    server = uvicorn.Server(uvicorn.Config(app, **options))
    server.run(sockets=[sock])
    return 0 if server.started else 3  # 3: the lifespan could not start (as uvicorn.run)


def _extra_hint(exc: BaseException) -> str:
    """`` (runsgate's `openai` extra installs it; ...)`` when a module missing in ``exc``'s causes
    (pydantic-ai raises ``ImportError`` from the ``ModuleNotFoundError``) is one of runsgate's extras."""
    from importlib.metadata import PackageNotFoundError, metadata

    try:
        extras = set(metadata("runsgate").get_all("Provides-Extra") or [])
    except PackageNotFoundError:
        return ""
    cause = exc.__cause__
    while cause is not None:
        if isinstance(cause, ModuleNotFoundError) and cause.name and cause.name.partition(".")[0] in extras:
            extra = cause.name.partition(".")[0]
            return f" (runsgate's `{extra}` extra installs it; see docs/configuration.md)"
        cause = cause.__cause__
    return ""


def _new_key(name: str, scopes: str, resources: str) -> int:
    """Print a fresh API key (shown once) and the JSON entry to add to ``RUNSGATE_API_KEYS``."""
    from .auth import hash_api_key, new_api_key

    key = new_api_key()
    entry = {
        "name": name,
        "hash": hash_api_key(key),
        "scopes": [s.strip() for s in scopes.split(",") if s.strip()],
        "resources": "*" if resources.strip() == "*" else [r.strip() for r in resources.split(",") if r.strip()],
    }
    print(f"key (give it to {name}; it is not stored anywhere): {key}")
    print(f"RUNSGATE_API_KEYS entry: {json.dumps(entry)}")
    return 0
