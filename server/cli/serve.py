"""``runsgate serve``: every check that can refuse a start, then uvicorn (one process, or ``--workers N``)."""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import socket
import sys
from collections.abc import Callable, Iterator
from types import FrameType
from typing import TYPE_CHECKING, Any, NoReturn

import uvicorn
from uvicorn.supervisors import Multiprocess

from storage.registry import check_reachable, store_address, store_entry

from ..observability.logs import configure_logging
from ..settings import ConfigError, Settings, load_settings
from . import INVALID, refused, store_setting

if TYPE_CHECKING:
    from starlette.applications import Starlette


WORKERS_ENV = "RUNSGATE_WORKER_OF"
"""Set in the environment of ``--workers`` processes (to the command's instance id) by ``run_serve_command``."""

BIND_FAILED = 4
"""Exit status when the address cannot be bound (in use, or not this host's)."""

logger = logging.getLogger("runsgate")


def run_serve_command(
    host: str | None,
    port: int | None,
    store: str | None = None,
    workers: int = 1,
    *,
    app_factory: Callable[[Settings], Starlette] | None = None,
    worker_app: str = "server.app:worker_app",
) -> int:
    """``runsgate serve``: every check that can refuse the start runs before the app and the agents are
    imported, quickest first: the settings, ``RUNSGATE_AGENTS`` among them (2), the address (4), the
    store's start-up check (3: its registry entry's ``check_reachable``, a MongoDB server's ping);
    then the agents and the rules (2), a SQLite store (3), the app (2). Once they pass, one line
    names the registry and the agents served, before uvicorn starts.

    ``app_factory`` builds the app of one process (default ``server.app.create_app``), and
    ``worker_app`` names the factory each ``--workers`` process imports (uvicorn's import string).
    """
    options = {name: value for name, value in (("host", host), ("port", port), ("store", store)) if value is not None}
    try:
        settings = load_settings(**options)
        settings.agents_path()  # set: nothing is served by default
    except ConfigError as exc:
        print(f"runsgate: {exc}", file=sys.stderr)
        return 2
    if workers < 1:
        print(f"{INVALID}--workers: must be at least 1 (got {workers})", file=sys.stderr)
        return 2
    if workers > 1 and not store_entry(settings.store_url).shared:  # the memory store
        print(
            f"{INVALID}--workers {workers} needs a store the processes can share: the memory store lives inside "
            "one process, so each worker would see other runs. Use --store sqlite:///runsgate.db (one host) or "
            "a MongoDB URI, or one worker",
            file=sys.stderr,
        )
        return 2
    from ..settings import security_problems

    problems = security_problems(settings, settings.host)
    if problems:
        print(f"runsgate: invalid configuration: {'; '.join(problems)}", file=sys.stderr)
        return 2
    configure_logging(settings.log_level, settings.log_format)
    try:
        sock = bind_socket(settings.host, settings.port)
    except OSError as exc:
        print(
            f"runsgate cannot start: {_address(settings.host, settings.port)} cannot be bound ({exc.strerror or exc}); "
            "choose another port with --port or RUNSGATE_PORT",
            file=sys.stderr,
        )
        return BIND_FAILED
    with sock:
        try:
            return _serve_on(sock, settings, store_setting(store, settings), workers, app_factory, worker_app)
        except KeyboardInterrupt:  # Ctrl-C before uvicorn handles it (importing the app, checking the store)
            stopped_by(signal.SIGINT)


def stopped_by(sig: int) -> NoReturn:
    """Log ``runsgate stopped (SIGINT)`` (or the signal's name), then end the process by ``sig``
    with its default action, so that a shell reports 128 + ``sig`` (130, 143), as uvicorn does."""
    logger.info("runsgate stopped (%s)", signal.Signals(sig).name)
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    signal.signal(sig, signal.SIG_DFL)
    signal.raise_signal(sig)
    raise SystemExit(128 + sig)  # not reached: the default action of SIGINT and SIGTERM ends the process


def _say_listening(sock: socket.socket) -> None:
    host, port = sock.getsockname()[:2]
    url = f"http://{_address(host, port)}"
    logger.info("runsgate listening on %s: GraphQL at %s/graphql, inbox at %s/inbox", url, url, url)


class Server(uvicorn.Server):
    """uvicorn's server that says where it listens once it does (its app started, then
    ``server.app.settle_memory``), and records the signal that stopped it (``stopped``) instead of
    raising it again inside the event loop's runner, where Ctrl-C's ``KeyboardInterrupt`` would
    print a traceback; ``stopped_by`` raises it once it is done."""

    stopped: int | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            from ..app import settle_memory

            settle_memory()
        if sockets:
            _say_listening(sockets[0])

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.stopped = self.stopped or sig
        super().handle_exit(sig, frame)

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


class _Supervisor(Multiprocess):
    """uvicorn's ``--workers`` supervisor, recording the signal that stopped it (``stopped``)."""

    stopped: int | None = None

    def handle_int(self) -> None:
        self.stopped = self.stopped or signal.SIGINT
        super().handle_int()

    def handle_term(self) -> None:
        self.stopped = self.stopped or signal.SIGTERM
        super().handle_term()


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


def _serve_on(
    sock: socket.socket,
    settings: Settings,
    setting: str | None,
    workers: int,
    app_factory: Callable[[Settings], Starlette] | None,
    worker_app: str,
) -> int:
    """Serve on ``sock`` once the remaining checks pass; ``setting`` named the store (``--store``,
    ``RUNSGATE_STORE``, ``MONGODB_URI``; ``None``: the default)."""
    from storage.protocol import StoreUnavailableError

    url = settings.store_url
    try:  # before the agents and the app are imported (seconds, more under load)
        check_reachable(url, server_selection_timeout=settings.mongodb_timeout)
    except StoreUnavailableError as exc:
        print(f"runsgate cannot start: the store at {store_address(url)} is unreachable ({exc})", file=sys.stderr)
        return 3  # as uvicorn's when a lifespan cannot start
    except ValueError as exc:  # the store refuses its URL (the default store never does)
        print(INVALID + refused(setting or "RUNSGATE_STORE", str(exc), url), file=sys.stderr)
        return 2
    from runtime.registry import load_registry

    path = settings.agents_path()
    try:  # before uvicorn, whose failed lifespan would log a traceback and exit with status 3
        agents = load_registry(path)
    except ValueError as exc:
        print(f"runsgate: invalid configuration: RUNSGATE_AGENTS: {exc}{_extra_hint(exc)}", file=sys.stderr)
        return 2
    from ..services import check_webhook_agents, store_problem, tool_rules  # the app (Strawberry) is not needed yet

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
    serving = ("runsgate serves the agents of RUNSGATE_AGENTS=%s: %s", path, ", ".join(agents.ids()))
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level.lower(),
        # uvicorn's loggers propagate to ours (server.observability.logs): one format, with request ids
        "log_config": None,
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
                "RUNSGATE_AGENTS": path,
                WORKERS_ENV: settings.instance_id,
            }
        )
        config = uvicorn.Config(
            worker_app,
            factory=True,
            workers=workers,
            timeout_worker_healthcheck=math.ceil(settings.worker_healthcheck_timeout),
            **options,
        )
        supervisor = _Supervisor(config, sockets=[sock])
        logger.info(*serving)
        sock.listen(config.backlog)  # connections wait for the first worker; each worker listens on it too
        _say_listening(sock)
        from ..observability.metrics import workers_metrics_dir

        with workers_metrics_dir():  # /metrics adds up every worker (prometheus_client's multiprocess mode)
            supervisor.run()
        if supervisor.stopped:
            stopped_by(supervisor.stopped)
        return 0
    if app_factory is None:
        from ..app import create_app

        app_factory = create_app
    try:  # one process: build the app here (--workers: each worker builds its own, unchecked here twice)
        app = app_factory(settings)
    except ConfigError as exc:
        print(f"runsgate: {exc}", file=sys.stderr)
        return 2
    logger.info(*serving)
    server = Server(uvicorn.Config(app, **options))
    server.run(sockets=[sock])
    if server.stopped:
        stopped_by(server.stopped)
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
