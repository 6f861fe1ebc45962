"""No part of a URL's password is ever shown in a refusal line (issue 42, 4c; SECURITY.md).

Through the command's own entry point (``server.cli.main``, in-process as ``tests/server/_cli.py``
runs it), for every setting whose refused value is shown: the store URLs (``MONGODB_URI``,
``RUNSGATE_STORE``, ``--store`` of ``serve`` and ``seed``), ``runsgate backup --store`` and
``RUNSGATE_PUBLIC_URL``. Hypothesis makes passwords of any printable characters, ``@``, ``/``,
``?``, ``#`` and ``:`` among them, unescaped: the line is always the same, whatever the
password, so nothing of the password can be in it. ``tests/server/test_cli_lines.py`` runs the
issue's own examples as processes.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from uvicorn.supervisors import Multiprocess

from server.cli.main import main

PREFIX = "runsgate: invalid configuration: "
RESERVED = "the user name or password holds an unescaped '@', '/' or '?': percent-encode it (urllib.parse.quote_plus)"
"""runsgate's reason for a URL whose user information holds a character that ends it."""
PYMONGO_ESCAPE = "Username and password must be escaped according to RFC 3986, use urllib.parse.quote_plus"
UNKNOWN_OPTION = "unknown option 'bogusOption'"
BACKUP_ADVICE = (
    "backup copies SQLite stores only: back a MongoDB store up with mongodump --oplog (a replica set) or with "
    'your provider\'s snapshots (docs/operations.md "Backup and restore")'
)
CREDENTIALS = "must not carry credentials (user:password@) nor an '@'; authenticate receivers by the signature"

STORE_URL = "mongodb://admin:{}@127.0.0.1:1/db?bogusOption=1"
STORE_SHOWN = "'mongodb://admin:***@127.0.0.1:1/db?bogusOption=1'"

CASES: dict[str, tuple[list[str], str | None, str, str, set[str]]] = {
    "MONGODB_URI": (["serve"], "MONGODB_URI", STORE_URL, STORE_SHOWN, {RESERVED, PYMONGO_ESCAPE, UNKNOWN_OPTION}),
    "RUNSGATE_STORE": (
        ["serve"],
        "RUNSGATE_STORE",
        STORE_URL,
        STORE_SHOWN,
        {RESERVED, PYMONGO_ESCAPE, UNKNOWN_OPTION},
    ),
    "serve --store": (["serve", "--store"], None, STORE_URL, STORE_SHOWN, {RESERVED, PYMONGO_ESCAPE, UNKNOWN_OPTION}),
    "seed --store": (
        ["seed", "--runs", "3", "--store"],
        None,
        STORE_URL,
        STORE_SHOWN,
        {RESERVED, PYMONGO_ESCAPE, UNKNOWN_OPTION},
    ),
    "backup --store": (
        ["backup", "--to", "copy.db", "--store"],
        None,
        "mongodb://admin:{}@127.0.0.1:1/db",
        "'mongodb://admin:***@127.0.0.1:1/db'",
        {BACKUP_ADVICE},
    ),
    "RUNSGATE_PUBLIC_URL": (
        ["serve"],
        "RUNSGATE_PUBLIC_URL",
        "https://admin:{}@inbox.example/",
        "'https://admin:***@inbox.example/'",
        {CREDENTIALS},
    ),
}
"""Case -> (the command's arguments, the URL after them when no variable is named, the variable
naming the URL, the URL with ``{}`` for the password, the URL as the line must show it, the
reasons the line may give)."""

PASSWORDS = st.text(
    alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.sampled_from("@/?#:%é"),
    min_size=1,
    max_size=24,
)


def refusal_line(tmp_path: Path, arguments: list[str], variable: str | None, url: str) -> tuple[int, str]:
    """``runsgate ARGUMENTS [URL]`` in-process in ``tmp_path``, with only ``RUNSGATE_AUTH=off``,
    ``RUNSGATE_PORT=0`` and ``variable=url`` set (when named): its exit status and stderr."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("RUNSGATE_") or k == "MONGODB_URI"}
    for key in saved:
        del os.environ[key]
    os.environ.update({"RUNSGATE_AUTH": "off", "RUNSGATE_PORT": "0", **({variable: url} if variable else {})})
    err = io.StringIO()
    try:
        with contextlib.chdir(tmp_path), contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            status = main([*arguments, *([] if variable else [url])])
    finally:
        for key in [k for k in os.environ if k.startswith("RUNSGATE_") or k == "MONGODB_URI"]:
            del os.environ[key]
        os.environ.update(saved)
    return status, err.getvalue()


@pytest.fixture(autouse=True)
def never_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    """A URL the command accepted fails the test at once instead of serving."""

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("the command accepted the URL and started serving")

    monkeypatch.setattr(uvicorn.Server, "run", refuse)
    monkeypatch.setattr(Multiprocess, "run", refuse)


@pytest.mark.parametrize("case", list(CASES))
@settings(
    max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(password=PASSWORDS)
def test_the_refusal_line_is_the_same_whatever_the_password(tmp_path: Path, case: str, password: str) -> None:
    arguments, variable, url, shown, reasons = CASES[case]
    status, err = refusal_line(tmp_path, arguments, variable, url.format(password))
    # then the command refuses with one line, whose every part is known without the password
    assert status == 2, err
    assert err.count("\n") == 1, err
    named = variable or "--store"
    found = re.fullmatch(rf"{re.escape(PREFIX + named)}: (?P<reason>.*) \(got (?P<shown>.*)\)\n", err)
    assert found is not None, err
    assert found["shown"] == shown, err
    assert found["reason"] in reasons, err
    assert list(tmp_path.iterdir()) == [], "a refused command wrote nothing"


SECRET_OPTIONS = {
    "tlsCertificateKeyFilePassword": "tlsCertificateKeyFilePassword={}",
    "authMechanismProperties": "authMechanism=MONGODB-AWS&authMechanismProperties=AWS_SESSION_TOKEN:{}",
}
"""A secret a MongoDB URI's options may carry -> the options holding it at ``{}``."""


@pytest.mark.parametrize("option", list(SECRET_OPTIONS))
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    secret=st.text(
        alphabet=st.characters(min_codepoint=0x21, max_codepoint=0x7E, exclude_characters="&#'\""),
        min_size=1,
        max_size=24,
    )
)
def test_no_part_of_a_secret_in_the_uris_options_is_shown(tmp_path: Path, option: str, secret: str) -> None:
    options = SECRET_OPTIONS[option]
    url = f"mongodb://admin:pw@127.0.0.1:1/db?{options.format(secret)}&bogusOption=1"
    status, err = refusal_line(tmp_path, ["serve"], "MONGODB_URI", url)
    # then the line shows the option with its value masked, whatever the secret (one holding an
    # "@" makes the user information run to it: all of it is masked up to the secret's end)
    assert status == 2, err
    shown = options.replace("AWS_SESSION_TOKEN:{}", "{}").format("***")
    url_shown = "mongodb://admin:***" if "@" in secret else f"mongodb://admin:***@127.0.0.1:1/db?{shown}"
    assert f"(got '{url_shown}&bogusOption=1')\n" in err, err
