"""The store registry: which store a URL names (docs/architecture.md "Adding a store").

``STORES`` holds one entry per store: its URL schemes and forms, whether processes can share it,
its factory, its address in messages, its URL and start-up checks, and what backs it up.
``store_from_url``, ``store_address``, ``check_store_url`` and ``check_reachable`` pick the entry
by scheme; each hook imports its store's package only when called, so PyMongo is imported only
when a MongoDB URL is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .url_credentials import after_credentials, holds_reserved

if TYPE_CHECKING:
    from .protocol import SnapshotStore

MEMORY_URL = "memory://"
"""The memory store's only URL (the default store)."""
SQLITE_PREFIX = "sqlite:///"
"""What a SQLite URL starts with; the path follows (SQLAlchemy's convention: ``sqlite:////abs``)."""
RESERVED_IN_USERINFO = (
    "the user name or password holds an unescaped '@', '/' or '?': percent-encode it (urllib.parse.quote_plus)"
)
"""Why a MongoDB URI whose user information holds ``@``, ``/`` or ``?`` is refused (``check_mongodb_uri``)."""


class UnknownStoreError(ValueError):
    """No store takes this URL: its scheme names none, or it is not in its store's form
    (``sqlite:///`` without a path, ``memory://x``). The message names the accepted forms,
    never the URL (it may hold a password)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StoreOptions:
    """What a store may be made with; each store takes those it has and ignores the others."""

    busy_timeout: float | None = None
    """SQLite: seconds a write waits for the database lock (``None``: its default)."""
    server_selection_timeout: float | None = None
    """MongoDB: seconds an operation waits for a reachable server (``None``: its default)."""
    socket_timeout: float | None = None
    """MongoDB: seconds a command waits for the server's answer (``None``: its default)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class StoreEntry:
    """One store in the registry."""

    name: str
    schemes: tuple[str, ...]
    """The URL schemes it answers (before ``://``)."""
    forms: tuple[str, ...]
    """Its URLs as messages spell them (``sqlite:///relative/path.db``)."""
    shared: bool
    """Whether several processes (``runsgate serve --workers N``) can share one store."""
    accepts: Callable[[str], bool]
    """Whether a URL of its scheme is in its form."""
    create: Callable[[str, StoreOptions], SnapshotStore]
    """The store the URL names, not opened."""
    address: Callable[[str], str]
    """Where the URL's store is, as messages name it (``the store at ...``): never a password."""
    check_url: Callable[[str], None] | None = None
    """Checks a URL it accepts as the store will read it, without connecting, raising
    ``ValueError`` with the reason (never the URL); ``None``: ``accepts`` is the whole check."""
    check_reachable: Callable[[str, StoreOptions], None] | None = None
    """Whether the store answers, checked by ``runsgate serve`` before it imports the agents:
    raises ``StoreUnavailableError`` (a short reason, never the URL), or ``ValueError`` when the
    store refuses the URL; ``None``: nothing to reach before the store is opened."""
    backup_advice: str | None = None
    """What ``runsgate backup``, which copies SQLite stores only, says to use instead; ``None``
    for SQLite (and a generic refusal for any other store without it)."""


def _memory(url: str, options: StoreOptions) -> SnapshotStore:
    from .memory import MemorySnapshotStore

    return MemorySnapshotStore()


def _sqlite(url: str, options: StoreOptions) -> SnapshotStore:
    from .sqlite import SQLiteSnapshotStore

    path = url.removeprefix(SQLITE_PREFIX)
    if options.busy_timeout is None:
        return SQLiteSnapshotStore(path)
    return SQLiteSnapshotStore(path, busy_timeout=options.busy_timeout)


def _mongodb(url: str, options: StoreOptions) -> SnapshotStore:
    from .mongo import MongoSnapshotStore  # PyMongo is imported here, and only here

    selection, socket = options.server_selection_timeout, options.socket_timeout
    return MongoSnapshotStore(
        url,
        server_selection_timeout=MONGODB_TIMEOUT if selection is None else selection,
        socket_timeout=MONGODB_SOCKET_TIMEOUT if socket is None else socket,
    )


MONGODB_TIMEOUT = 5.0
"""Seconds MongoDB's start-up check waits for a server when none is given (``MongoSnapshotStore``'s default)."""
MONGODB_SOCKET_TIMEOUT = 30.0
"""Seconds a MongoDB command waits for its answer when none is given (``MongoSnapshotStore``'s default)."""


def _mongodb_reachable(url: str, options: StoreOptions) -> None:
    from .mongo.reachability import check_reachable

    timeout = options.server_selection_timeout
    check_reachable(url, MONGODB_TIMEOUT if timeout is None else timeout)


def _mongodb_address(url: str) -> str:
    from .mongo.reachability import store_address

    return store_address(url)


STORES: tuple[StoreEntry, ...] = (
    StoreEntry(
        name="memory",
        schemes=("memory",),
        forms=(MEMORY_URL,),
        shared=False,
        accepts=lambda url: url == MEMORY_URL,
        create=_memory,
        address=lambda url: MEMORY_URL,
        backup_advice="the memory store lives inside the server process and is lost when it stops: there is "
        "nothing to back up. Use a SQLite file (--store sqlite:///runsgate.db) to keep runs",
    ),
    StoreEntry(
        name="sqlite",
        schemes=("sqlite",),
        forms=("sqlite:///relative/path.db", "sqlite:////absolute/path.db"),
        shared=True,
        accepts=lambda url: url.startswith(SQLITE_PREFIX) and url != SQLITE_PREFIX,
        create=_sqlite,
        address=lambda url: str(sqlite_path(url)),
        # no start-up check: runsgate serve opens the file once the agents are loaded (store_problem)
    ),
    StoreEntry(
        name="mongodb",
        schemes=("mongodb", "mongodb+srv"),
        forms=("a mongodb:// URI",),
        shared=True,
        accepts=lambda url: True,  # check_url reads the rest with PyMongo's parser
        create=_mongodb,
        address=_mongodb_address,
        check_url=lambda url: check_mongodb_uri(url),
        check_reachable=_mongodb_reachable,
        backup_advice="backup copies SQLite stores only: back a MongoDB store up with mongodump --oplog (a replica "
        'set) or with your provider\'s snapshots (docs/operations.md "Backup and restore")',
    ),
)
"""Every store, one entry each: adding a store is its package and one entry here."""

BY_SCHEME: Mapping[str, StoreEntry] = {scheme: entry for entry in STORES for scheme in entry.schemes}
"""URL scheme -> the store answering it."""


def accepted_urls() -> str:
    """The accepted store URLs, as messages list them: ``memory://, ... or a mongodb:// URI``."""
    forms = [form for entry in STORES for form in entry.forms]
    return f"{', '.join(forms[:-1])} or {forms[-1]}"


def store_entry(url: str) -> StoreEntry:
    """The registry entry of the store ``url`` names.

    Raises:
        UnknownStoreError: No store takes ``url`` (unknown scheme, or not in its store's form).
    """
    scheme, separator, _ = url.partition("://")
    entry = BY_SCHEME.get(scheme) if separator else None
    if entry is None:
        shown = f"the scheme {scheme!r}" if separator else "no scheme"
        raise UnknownStoreError(f"no store takes a URL with {shown}: a store URL is {accepted_urls()}")
    if not entry.accepts(url):
        raise UnknownStoreError(f"not a {entry.name} store URL: a store URL is {accepted_urls()}")
    return entry


def store_from_url(
    url: str,
    *,
    busy_timeout: float | None = None,
    server_selection_timeout: float | None = None,
    socket_timeout: float | None = None,
) -> SnapshotStore:
    """The store ``url`` names, not yet opened: a new ``MemorySnapshotStore`` each call for
    ``memory://``, a ``SQLiteSnapshotStore`` for ``sqlite:///path``, a ``MongoSnapshotStore`` for
    ``mongodb://`` and ``mongodb+srv://``. ``busy_timeout`` (SQLite), ``server_selection_timeout``
    and ``socket_timeout`` (MongoDB) are in seconds; ``None`` keeps the store's default, and a
    store ignores the others'.

    Raises:
        UnknownStoreError: No store takes ``url``; the message names the accepted forms.
    """
    options = StoreOptions(
        busy_timeout=busy_timeout,
        server_selection_timeout=server_selection_timeout,
        socket_timeout=socket_timeout,
    )
    return store_entry(url).create(url, options)


def store_address(url: str) -> str:
    """Where the store ``url`` names is, as messages name it, without a password: ``memory://``,
    a SQLite file's path, a MongoDB URI's hosts (``h1:27017,h2:27017``).

    Raises:
        UnknownStoreError: No store takes ``url``.
    """
    return store_entry(url).address(url)


def check_store_url(url: str) -> None:
    """Check ``url`` as its store will read it, without connecting: ``store_entry``, then the
    entry's own ``check_url`` (a MongoDB URI's options, with PyMongo's parser: ``check_mongodb_uri``).

    Raises:
        UnknownStoreError: No store takes ``url``; the message names the accepted forms.
        ValueError: Its store refuses it (``unknown option 'bogusOption'``); never the URL.
    """
    entry = store_entry(url)
    if entry.check_url is not None:
        entry.check_url(url)


def check_reachable(
    url: str, *, busy_timeout: float | None = None, server_selection_timeout: float | None = None
) -> None:
    """The start-up check of the store ``url`` names, before anything else uses it: a MongoDB
    server must answer a ping within ``server_selection_timeout`` seconds (``None``: 5); the memory
    and SQLite stores have nothing to reach (a SQLite file is checked when it is opened). The
    options are ``store_from_url``'s.

    Raises:
        UnknownStoreError: No store takes ``url``.
        StoreUnavailableError: The store does not answer; a short reason, never the URL.
        ValueError: The store refuses the URL itself (PyMongo's ``Bad database name``).
    """
    entry = store_entry(url)
    if entry.check_reachable is not None:
        options = StoreOptions(busy_timeout=busy_timeout, server_selection_timeout=server_selection_timeout)
        entry.check_reachable(url, options)


def check_mongodb_uri(uri: str) -> None:
    """Check a ``mongodb://`` or ``mongodb+srv://`` URI as PyMongo's client reads it, without
    connecting and without DNS lookups: its options (each, with ``pymongo.uri_parser``'s
    ``split_options`` and ``validate_options``, where the client would only warn and drop them),
    then, for ``mongodb://``, the hosts, credentials and database (``parse_uri``).

    Raises:
        ValueError: Its user information holds ``@``, ``/`` or ``?`` unescaped
            (``RESERVED_IN_USERINFO``), or PyMongo refuses it: ``unknown option 'bogusOption'``, an
            option's value, a repeated option, ``Bad database name``. The message never holds the
            URI, nor a part of its password.
    """
    import warnings

    from pymongo import uri_parser
    from pymongo.errors import ConfigurationError

    if holds_reserved(uri):  # PyMongo would read part of the password as a host, a path or options
        raise ValueError(RESERVED_IN_USERINFO)
    query = after_credentials(uri).partition("?")[2]
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # PyMongo warns of a repeated option, and keeps the last
        try:
            if query:
                options = uri_parser.split_options(query, validate=False, normalize=False)
                for key, value in options.items():
                    try:
                        uri_parser.validate_options({key: value}, warn=False)
                    except ConfigurationError as exc:
                        if str(exc).startswith("Unknown option"):
                            raise ValueError(f"unknown option {_as_written(key, query)!r}") from None
                        raise
                uri_parser.split_options(query, validate=True, warn=False)  # the rules across options
            if uri.startswith("mongodb://"):  # mongodb+srv:// would look its hosts up in DNS
                uri_parser.parse_uri(uri, validate=True, warn=False)
        except UserWarning as warning:
            raise ValueError(str(warning)) from None
        except (ConfigurationError, ValueError, TypeError) as exc:  # InvalidURI is a ConfigurationError
            raise ValueError(str(exc)) from None


def _as_written(key: str, query: str) -> str:
    """``key`` as the query string spells it (PyMongo's options compare their names lowercased)."""
    names = (pair.partition("=")[0] for pair in query.replace(";", "&").split("&"))
    return next((name for name in names if name.lower() == key.lower()), key)


def sqlite_path(url: str) -> Path | None:
    """The database file of a ``sqlite:///path`` URL (the path after the three slashes), else ``None``."""
    return Path(url.removeprefix(SQLITE_PREFIX)) if url.startswith(SQLITE_PREFIX) and url != SQLITE_PREFIX else None


__all__ = [
    "BY_SCHEME",
    "MEMORY_URL",
    "MONGODB_TIMEOUT",
    "RESERVED_IN_USERINFO",
    "SQLITE_PREFIX",
    "STORES",
    "StoreEntry",
    "StoreOptions",
    "UnknownStoreError",
    "accepted_urls",
    "check_mongodb_uri",
    "check_reachable",
    "check_store_url",
    "sqlite_path",
    "store_address",
    "store_entry",
    "store_from_url",
]
