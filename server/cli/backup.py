"""``runsgate backup``: a consistent copy of a SQLite store while servers use it
(``storage.sqlite.file.backup``); any other store is refused with what to use instead (its registry
entry's ``backup_advice``)."""

from __future__ import annotations

import sys

from storage.registry import UnknownStoreError, sqlite_path, store_entry

from . import refused

REFUSED = 2
"""Exit status of a backup not attempted: a store URL that is not SQLite (``--store``, a line as
every invalid option's, showing the URL, its password masked), or files that refuse it (an
existing target, a missing store file, a file that is not a runsgate store)."""
FAILED = 1
"""Exit status of a copy that failed (nothing left behind)."""


def run_backup_command(store: str, to: str, *, force: bool = False) -> int:
    """Back the SQLite store ``store`` (a ``sqlite:///`` URL) up to the file ``to``; returns the
    exit status: 0, ``REFUSED`` (2) or ``FAILED`` (1), with one line on stderr saying why."""
    try:
        entry = store_entry(store)
    except UnknownStoreError as exc:
        return _say(refused("--store", str(exc), store), REFUSED)
    path = sqlite_path(store)
    if entry.name != "sqlite" or path is None:
        return _say(refused("--store", entry.backup_advice or "backup copies SQLite stores only", store), REFUSED)
    from storage.sqlite.file.backup import BackupFailedError, BackupRefusedError, backup

    try:
        result = backup(path, to, force=force)
    except BackupRefusedError as exc:
        return _say(f"refused: {exc}", REFUSED, option=False)
    except BackupFailedError as exc:
        return _say(f"failed: {exc}", FAILED, option=False)
    steps = "1 step" if result.steps == 1 else f"{result.steps:,} steps"
    print(f"backed up {path} to {result.target}: {result.size:,} bytes, {result.pages:,} pages in {steps}")
    return 0


def _say(line: str, status: int, *, option: bool = True) -> int:
    """Print ``line`` on stderr: a refused option as every invalid option is
    (``runsgate: invalid configuration: --store: ...``, ``server.cli.INVALID``), anything else as
    ``runsgate backup: refused: ...`` or ``runsgate backup: failed: ...``; returns ``status``."""
    from . import INVALID

    print(f"{INVALID if option else 'runsgate backup: '}{line}", file=sys.stderr)
    return status
