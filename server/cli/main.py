"""``runsgate``'s entry point (``[project.scripts]``, ``python -m server``): the parser of the
command line, ``new-key``, and the dispatch to the other commands, each imported only when run."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Mapping
from typing import NoReturn

from . import INVALID


class _Parser(argparse.ArgumentParser):
    """argparse's parser whose errors are one line ``runsgate: invalid configuration: ...`` (exit
    status 2), naming the option (``--port: invalid int value: 'abc'``); ``--help`` is unchanged."""

    def error(self, message: str) -> NoReturn:
        print(INVALID + re.sub(r"^argument ([^:]+): ", r"\1: ", message), file=sys.stderr)
        raise SystemExit(2)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; returns the exit status (2 for invalid configuration or a refused backup, 3 when
    the store cannot start, 4 when the address cannot be bound, 1 when a seed or backup failed)."""
    from storage.registry import STORES, accepted_urls  # the store URLs --help names

    parser = _Parser(prog="runsgate", description="GraphQL server for suspended agent runs.")
    commands = parser.add_subparsers(dest="command")
    serve = commands.add_parser("serve", help="start the GraphQL server")
    serve.add_argument("--host", help="interface to listen on (default RUNSGATE_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default RUNSGATE_PORT or 4000)")
    serve.add_argument(
        "--store", help=f"store URL: {accepted_urls()} (default RUNSGATE_STORE, else MONGODB_URI, else memory://)"
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
    key.add_argument(
        "--scopes",
        default="runs:read,runs:decide,runs:start",
        help="comma-separated scopes: runsgate's own (runs:read, runs:decide, runs:start, webhooks:read) or a custom "
        "one a tool rule names (refunds:approve)",
    )
    key.add_argument("--resources", default="*", help='comma-separated resourceIds, or "*" for every run')
    key.add_argument(
        "--email", type=_address, metavar="ADDRESS", help="where the key's holder gets the emails of rules naming it"
    )
    seed = commands.add_parser(
        "seed",
        help="write N realistic suspended runs (clones of real demo runs) into a SQLite or MongoDB store",
        description="Runs the demo agents to get real suspended runs, then bulk-writes N clones with new run ids, "
        "threads, resources and creation times into the store named by --store, RUNSGATE_STORE or MONGODB_URI "
        "(one a server can then serve: not the memory store, for which you start the server with "
        "RUNSGATE_SEED_RUNS=N instead).",
    )
    seed.add_argument(
        "--store",
        help=f"store URL: {_or(form for entry in STORES if entry.shared for form in entry.forms)} "
        "(default RUNSGATE_STORE, else MONGODB_URI)",
    )
    seed.add_argument("--runs", type=int, required=True, help="number of runs to write")
    seed.add_argument("--agents", type=int, default=1, help="runs go to the first A of refund-agent, weather-agent")
    seed.add_argument("--threads", type=int, default=100, help="distinct thread ids (default 100)")
    seed.add_argument("--resources", type=int, help="distinct resource ids (default threads/4)")
    seed.add_argument("--days", type=float, default=30.0, help="spread creation times over this many days before now")
    seed.add_argument("--seed", type=int, default=0, help="random seed (same seed: same run ids)")
    seed.add_argument("--reset", action="store_true", help="delete every stored run, event and key of the store first")
    copy = commands.add_parser(
        "backup",
        help="copy a SQLite store to a file while servers use it",
        description="Takes a consistent copy of the SQLite store (SQLite's online backup API, under one read "
        "transaction) while servers read and write it: every write committed before the backup began is in the copy. "
        "Exit status 2 when refused (not a SQLite store, an existing target without --force), 1 when the copy failed.",
    )
    copy.add_argument(
        "--store", required=True, help="the store: sqlite:///relative/path.db or sqlite:////absolute/path.db"
    )
    copy.add_argument("--to", required=True, help="the file to write (refused if it exists, unless --force)")
    copy.add_argument("--force", action="store_true", help="replace an existing target file")
    args = parser.parse_args(argv)
    if args.command in (None, "serve"):
        from .serve import run_serve_command

        return run_serve_command(
            getattr(args, "host", None),
            getattr(args, "port", None),
            getattr(args, "store", None),
            getattr(args, "workers", 1),
        )
    if args.command == "new-key":
        return _new_key(args.name, args.scopes, args.resources, args.email)
    if args.command == "seed":
        from .seed import run_seed_command

        return run_seed_command(args)
    if args.command == "backup":
        from .backup import run_backup_command

        return run_backup_command(args.store, args.to, force=args.force)
    parser.error(f"unknown command {args.command}")
    return 2


def _or(items: Iterable[str]) -> str:
    """``a, b or c``."""
    listed = list(items)
    return f"{', '.join(listed[:-1])} or {listed[-1]}" if len(listed) > 1 else "".join(listed)


def _address(value: str) -> str:
    """``value`` when it is an email address (``local@domain``) as ``RUNSGATE_API_KEYS`` takes it.

    Raises:
        argparse.ArgumentTypeError: It is not.
    """
    from pydantic import TypeAdapter, ValidationError

    from ..settings.links import Email

    try:
        return TypeAdapter(Email).validate_python(value)
    except ValidationError:
        raise argparse.ArgumentTypeError(f"not an email address (local@domain): {value!r}") from None


_OPTIONS = {"name": "--name", "scopes": "--scopes", "resources": "--resources", "email": "--email"}
"""The option of each field of a key's entry."""


def _check_entry(entry: Mapping[str, object]) -> None:
    """Refuse an entry ``RUNSGATE_API_KEYS`` would refuse (``ApiKeyConfig``, the server's own
    check), naming its option: one line ``runsgate: invalid configuration: --name: ...``.

    Raises:
        SystemExit: Status 2, the entry is refused.
    """
    from pydantic import ValidationError

    from ..settings.security import ApiKeyConfig

    try:
        ApiKeyConfig.model_validate(entry)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = str(error["loc"][0]) if error["loc"] else "name"
        print(f"{INVALID}{_OPTIONS.get(field, field)}: {error['msg']} (got {error['input']!r})", file=sys.stderr)
        raise SystemExit(2) from None


def _new_key(name: str, scopes: str, resources: str, email: str | None = None) -> int:
    """Print a fresh API key (shown once) and the JSON entry to add to ``RUNSGATE_API_KEYS``
    (with ``email`` when given); on stderr, a note per custom scope (a tool rule must name it).

    Raises:
        SystemExit: Status 2, nothing printed on stdout: ``scopes`` or ``resources`` lists
            nothing, a scope is in runsgate's own namespace but not one of its scopes ("did you
            mean"), or ``_check_entry`` refuses the entry.
    """
    from runtime import ALL_SCOPES

    from ..auth import hash_api_key, new_api_key
    from ..settings.security import unknown_own_scope

    granted = [s.strip() for s in scopes.split(",") if s.strip()]
    if not granted:
        _refuse(f"--scopes: no scope given: name at least one, comma-separated ({', '.join(sorted(ALL_SCOPES))})")
    if resources.strip() != "*" and not [r for r in resources.split(",") if r.strip()]:
        _refuse('--resources: no resource given: name at least one resourceId, comma-separated, or "*" for every run')
    for scope in granted:
        if (refused := unknown_own_scope(scope)) is not None:
            _refuse(f"--scopes: {refused}")
    key = new_api_key()
    entry = {
        "name": name,
        "hash": hash_api_key(key),
        "scopes": granted,
        "resources": "*" if resources.strip() == "*" else [r.strip() for r in resources.split(",") if r.strip()],
    }
    if email is not None:
        entry["email"] = email
    _check_entry(entry)
    for scope in granted:
        if scope not in ALL_SCOPES:
            print(
                f"runsgate: note: {scope!r} is not one of runsgate's own scopes: it grants something only where a "
                f'tool rule of RUNSGATE_TOOL_RULES names it ("scope": "{scope}")',
                file=sys.stderr,
            )
    print(f"key (give it to {name}; it is not stored anywhere): {key}")
    print(f"RUNSGATE_API_KEYS entry: {json.dumps(entry)}")
    return 0


def _refuse(message: str) -> NoReturn:
    """Print ``runsgate: invalid configuration: <message>`` on stderr and exit with status 2."""
    print(INVALID + message, file=sys.stderr)
    raise SystemExit(2)
