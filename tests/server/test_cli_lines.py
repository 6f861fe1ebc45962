"""What ``runsgate`` prints, run as a user runs it (issue 25 item 4), each as a process in its own group.

- Once the socket listens: one line with the GraphQL and inbox URLs, also with ``--workers``.
- SIGINT (Ctrl-C, to the whole group) or SIGTERM (to the command): one last line
  ``runsgate stopped (SIGINT)``, no traceback, and the process ends by that signal.
- Every refusal with exit status 2 is one line ``runsgate: invalid configuration: ...``: argparse's
  errors, ``--workers``, ``seed``, a MongoDB URI option PyMongo does not know (no ``UserWarning``).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .. import _processes
from .._processes import scaled
from .._servers import free_port, log_tail, runsgate_servers, server_env

pytestmark = pytest.mark.process

RUNSGATE = str(Path(sys.executable).with_name("runsgate"))
"""The installed ``runsgate`` entry point, as a user starts it."""

PREFIX = "runsgate: invalid configuration: "
ACCEPTED = "memory://, sqlite:///relative/path.db, sqlite:////absolute/path.db or a mongodb:// URI"


def _refused(tmp_path: Path, *args: str, **variables: str) -> str:
    """The one stderr line of ``runsgate ARGS`` (in ``tmp_path``, with only ``variables`` set),
    which must exit with status 2, print nothing on stdout and no warning or traceback."""
    result = _processes.run(
        [RUNSGATE, *args],
        cwd=tmp_path,
        env=server_env(RUNSGATE_AUTH="off", RUNSGATE_PORT=str(free_port()), **variables),
        capture_output=True,
        text=True,
        timeout=120,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert result.stdout == "", output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, output
    assert lines[0].startswith(PREFIX), output
    for noise in ("Traceback", "Warning", "Value error", "usage:"):
        assert noise not in output
    return lines[0]


REFUSALS = {
    "serve --port abc": (["serve", "--port", "abc"], {}, f"{PREFIX}--port: invalid int value: 'abc'"),
    "serve --bogus": (["serve", "--bogus"], {}, f"{PREFIX}unrecognized arguments: --bogus"),
    "an unknown command": (["sevre"], {}, f"{PREFIX}command: invalid choice: 'sevre' (choose from "),
    "seed without --runs": (["seed"], {}, f"{PREFIX}the following arguments are required: --runs"),
    "--workers 0": (
        ["serve", "--workers", "0", "--store", "sqlite:///./runsgate.db"],
        {},
        f"{PREFIX}--workers: must be at least 1 (got 0)",
    ),
    "--workers 2 on the memory store": (
        ["serve", "--workers", "2"],
        {},
        f"{PREFIX}--workers 2 needs a store the processes can share: the memory store",
    ),
    "seed on the memory store": (["seed", "--runs", "3"], {}, f"{PREFIX}the store is the memory store"),
    "seed --runs -1": (
        ["seed", "--runs", "-1", "--store", "sqlite:///./seeded.db"],
        {},
        f"{PREFIX}--runs: must be >= 0 (got -1)",
    ),
    "seed --store foo://x": (["seed", "--runs", "3", "--store", "foo://x"], {}, f"{PREFIX}--store: must be "),
    "seed --store memory://": (
        ["seed", "--runs", "3", "--store", "memory://"],
        {},
        f"{PREFIX}--store: the store is the memory store, which lives inside the server process",
    ),
    "backup --store memory://": (
        ["backup", "--store", "memory://", "--to", "copy.db"],
        {},
        f"{PREFIX}--store: the memory store lives inside the server process",
    ),
}
"""Case -> (arguments, settings, the line's beginning)."""


@pytest.mark.parametrize("case", list(REFUSALS))
def test_every_refusal_with_status_2_is_one_line_saying_invalid_configuration(tmp_path: Path, case: str) -> None:
    args, variables, beginning = REFUSALS[case]
    line = _refused(tmp_path, *args, **variables)
    assert line.startswith(beginning), line


def test_a_setting_that_is_not_json_shows_the_refused_value(tmp_path: Path) -> None:
    line = _refused(tmp_path, "serve", RUNSGATE_TOOL_RULES="[{tool")
    assert line.endswith("(got '[{tool')"), line


def test_a_secret_setting_that_is_not_json_is_not_shown(tmp_path: Path) -> None:
    line = _refused(tmp_path, "serve", RUNSGATE_API_KEYS='[{"name": "hunter2')
    assert line.startswith(f"{PREFIX}RUNSGATE_API_KEYS: not valid JSON"), line
    assert "hunter2" not in line


def test_backup_shows_a_refused_store_url_as_serve_does_its_password_masked(tmp_path: Path) -> None:
    url = "postgres://alice:hunter2@db.example/runsgate"
    shown = "(got 'postgres://alice:***@db.example/runsgate')"

    serving = _refused(tmp_path, "serve", "--store", url)
    backing_up = _refused(tmp_path, "backup", "--store", url, "--to", "copy.db")

    assert serving == f"{PREFIX}--store: must be {ACCEPTED} {shown}", serving
    assert backing_up == (
        f"{PREFIX}--store: no store takes a URL with the scheme 'postgres': a store URL is {ACCEPTED} {shown}"
    ), backing_up
    assert "hunter2" not in serving + backing_up
    assert list(tmp_path.iterdir()) == []


PASSWORD_CASES = {
    "@ in MONGODB_URI": (["serve"], {"MONGODB_URI": "mongodb://admin:p@ssW0rdS3cret@127.0.0.1:1/db"}),
    "/ in RUNSGATE_STORE": (["serve"], {"RUNSGATE_STORE": "mongodb://admin:p/ssW0rdS3cret@127.0.0.1:1/db"}),
    "? in serve --store": (["serve", "--store", "mongodb://admin:p?ssW0rdS3cret@127.0.0.1:1/db"], {}),
    "# in backup --store": (
        ["backup", "--store", "mongodb://admin:p#ssW0rdS3cret@127.0.0.1:1/db", "--to", "copy.db"],
        {},
    ),
}
"""Case -> (arguments, settings): issue 42's passwords, each holding a character that ends a URL's
user information under RFC 3986, unescaped."""


@pytest.mark.parametrize("case", list(PASSWORD_CASES))
def test_no_part_of_a_password_holding_a_reserved_character_is_shown(tmp_path: Path, case: str) -> None:
    args, variables = PASSWORD_CASES[case]
    line = _refused(tmp_path, *args, **variables)
    assert line.endswith("(got 'mongodb://admin:***@127.0.0.1:1/db')"), line
    for part in ("ssW0rdS3cret", "p@s", "p/s", "p?s", "p#s"):
        assert part not in line, line
    assert list(tmp_path.iterdir()) == []


URI = "mongodb://alice:hunter2@127.0.0.1:1/runsgate?bogusOption=1"
SHOWN = "(got 'mongodb://alice:***@127.0.0.1:1/runsgate?bogusOption=1')"


@pytest.mark.parametrize(
    ("args", "variables", "named"),
    [
        (["serve"], {"MONGODB_URI": URI}, "MONGODB_URI"),
        (["serve"], {"RUNSGATE_STORE": URI}, "RUNSGATE_STORE"),
        (["serve", "--store", URI], {}, "--store"),
        (["seed", "--runs", "3", "--store", URI], {}, "--store"),
    ],
    ids=["MONGODB_URI", "RUNSGATE_STORE", "--store", "seed --store"],
)
def test_an_unknown_mongodb_uri_option_is_refused_naming_the_setting_as_given(
    tmp_path: Path, args: list[str], variables: dict[str, str], named: str
) -> None:
    line = _refused(tmp_path, *args, **variables)
    assert line == f"{PREFIX}{named}: unknown option 'bogusOption' {SHOWN}", line


@pytest.mark.parametrize(
    ("query", "reason"),
    [
        ("tls=maybe", "The value of tls must be 'true' or 'false'"),
        ("w=1&w=2", "Duplicate URI option 'w'."),
        ("authSource=", "the authSource database cannot be an empty string"),
    ],
)
def test_a_mongodb_uri_option_pymongo_refuses_is_refused_with_pymongos_reason(
    tmp_path: Path, query: str, reason: str
) -> None:
    uri = f"mongodb://alice:hunter2@127.0.0.1:1/runsgate?{query}"
    line = _refused(tmp_path, "serve", MONGODB_URI=uri)
    assert line == f"{PREFIX}MONGODB_URI: {reason} (got '{uri.replace('hunter2', '***')}')", line


def test_an_unknown_option_of_an_srv_uri_is_refused_before_any_lookup(tmp_path: Path) -> None:
    uri = "mongodb+srv://alice:hunter2@cluster0.example.invalid/runsgate?bogusOption=1"
    started = time.monotonic()
    line = _refused(tmp_path, "serve", MONGODB_URI=uri)
    assert line == f"{PREFIX}MONGODB_URI: unknown option 'bogusOption' (got '{uri.replace('hunter2', '***')}')"
    assert time.monotonic() - started < scaled(30)


def _text_lines(log: Path) -> list[str]:
    """The log's lines without their time, level and logger (``TEXT_FORMAT``): the messages."""
    return [re.sub(r"^\S+ \S+ \S+ \S+ \[[^\]]*\] ", "", line) for line in log.read_text().splitlines()]


STOPS = {
    "one process, Ctrl-C": ([], signal.SIGINT, True),
    "one process, SIGTERM": ([], signal.SIGTERM, False),
    "two workers, Ctrl-C": (["--workers", "2"], signal.SIGINT, True),
    "two workers, SIGTERM": (["--workers", "2"], signal.SIGTERM, False),
}
"""Case -> (options, signal, sent to the whole group as a terminal's Ctrl-C does, else to the command)."""


@pytest.mark.parametrize("case", list(STOPS))
def test_serve_says_where_it_listens_and_ends_with_one_line_by_the_signal(tmp_path: Path, case: str) -> None:
    options, sig, to_group = STOPS[case]
    log = tmp_path / "runsgate.log"
    # given `runsgate serve` running, one process or two workers on a SQLite file
    with runsgate_servers(
        [log],
        [RUNSGATE, "serve", *options],
        RUNSGATE_STORE=f"sqlite:///{tmp_path / 'runsgate.db'}",
        RUNSGATE_LOG_LEVEL="INFO",
        RUNSGATE_LOG_FORMAT="text",
    ) as (server,):
        # then it said once where it listens, with the GraphQL and inbox URLs
        url = server.url
        listening = f"runsgate listening on {url}: GraphQL at {url}/graphql, inbox at {url}/inbox"
        assert _text_lines(log).count(listening) == 1, log_tail(log)

        # when it is stopped by the signal
        time.sleep(1)  # the workers' lines are written
        if to_group:
            os.killpg(server.process.pid, sig)
        else:
            server.process.send_signal(sig)
        try:
            status = server.process.wait(timeout=scaled(60))
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running 60 s after {sig.name}\n{log_tail(log)}")

    # then it ended by that signal (a shell reports 128 + the signal), its last line saying so
    assert status == -sig, log_tail(log)
    lines = _text_lines(log)
    assert lines[-1] == f"runsgate stopped ({sig.name})", log_tail(log)
    assert lines.count(lines[-1]) == 1, log_tail(log)
    assert "Traceback" not in log.read_text(), log_tail(log)


SERVES = "runsgate serves the agents of RUNSGATE_AGENTS={}: {}"
"""The line that names the agents a start serves (the registry, then the agent ids, sorted)."""


@pytest.mark.parametrize(
    ("registry", "ids"),
    [
        ("runtime.demo:AGENTS", "refund-agent, support-supervisor, weather-agent"),
        ("tests._json_agent:AGENTS", "json-echo, refund-agent, support-supervisor, weather-agent"),
    ],
)
def test_serve_says_which_agents_it_serves(tmp_path: Path, registry: str, ids: str) -> None:
    log = tmp_path / "runsgate.log"
    # when runsgate serve starts with RUNSGATE_AGENTS naming a registry
    with runsgate_servers(
        [log], [RUNSGATE, "serve"], RUNSGATE_AGENTS=registry, RUNSGATE_LOG_LEVEL="INFO", RUNSGATE_LOG_FORMAT="text"
    ):
        lines = _text_lines(log)
    # then one line names it and the agents it serves
    assert lines.count(SERVES.format(registry, ids)) == 1, log_tail(log)
