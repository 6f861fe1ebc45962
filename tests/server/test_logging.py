"""Request ids and JSON log lines of a real server process (its stderr, read from the log file).

Every HTTP request gets an id: the client's ``X-Request-ID`` when it is sane, else a fresh one;
it comes back in the ``X-Request-ID`` response header and is in every log line written while
the request is handled, including the masked-error line of an unexpected fault.
"""

from __future__ import annotations

import io
import logging
import re
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from asgi_correlation_id import correlation_id
from pymongo import MongoClient

from server.http.request_id import is_sane
from server.observability.logs import AccessFields, make_formatter, resolve_format

from .._graphql import AGENTS, REFUND, REFUND_PROMPT, START_RUN, SUSPENDED_RUNS, post
from .._servers import documentdb, runsgate_process, with_database
from ..conftest import IN_CI
from ._process import log_records, sample, scrape, wait_for_records

HEX_ID = re.compile(r"[0-9a-f]{32}")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """One runsgate process logging JSON at INFO; yields its URL and its log file (stdout + stderr)."""
    log = tmp_path_factory.mktemp("logging") / "runsgate.log"
    with runsgate_process(log, RUNSGATE_LOG_LEVEL="INFO", RUNSGATE_LOG_FORMAT="json") as url:
        yield url, log


@pytest.mark.process
def test_a_sane_request_id_comes_back_and_is_in_the_requests_log_lines(server: tuple[str, Path]) -> None:
    url, log = server
    request_id = f"client-{uuid.uuid4().hex[:12]}"

    # when a client sends its own X-Request-ID
    response = post(
        url, None, START_RUN, headers={"X-Request-ID": request_id}, input={"agentId": REFUND, "prompt": REFUND_PROMPT}
    )

    # then the response carries the same id
    assert response.status_code == 200
    assert response.headers["X-Request-ID"] == request_id
    # and the access line of that request carries it too
    lines = wait_for_records(log, lambda record: record["request_id"] == request_id)
    assert [record["logger"] for record in lines] == ["uvicorn.access"]
    assert "POST /graphql" in lines[0]["message"]
    # with the request's parts as fields
    assert (lines[0]["method"], lines[0]["path"], lines[0]["status"]) == ("POST", "/graphql", 200)
    assert lines[0]["client"].startswith("127.0.0.1:")


@pytest.mark.process
@pytest.mark.parametrize("sent", [None, "", 'has spaces and "quotes"', "x" * 129, "new\\nline"])
def test_a_missing_or_insane_request_id_is_replaced_by_a_fresh_one(server: tuple[str, Path], sent: str | None) -> None:
    url, log = server

    # when the request has no usable X-Request-ID
    headers = {} if sent is None else {"X-Request-ID": sent}
    first = post(url, None, AGENTS, headers=headers)
    second = post(url, None, AGENTS, headers=headers)

    # then each response has a fresh uuid4 hex id, different for each request
    ids = [first.headers["X-Request-ID"], second.headers["X-Request-ID"]]
    assert all(HEX_ID.fullmatch(value) for value in ids), ids
    assert ids[0] != ids[1]
    # and that is the id in the request's log line
    assert wait_for_records(log, lambda record: record["request_id"] == ids[1])


@pytest.mark.process
def test_every_log_line_is_one_json_object_with_the_documented_fields(server: tuple[str, Path]) -> None:
    url, log = server
    post(url, None, AGENTS)

    # when the log is read, then each line is an object with time, level, logger, message, request_id
    records = log_records(log)
    assert records
    for record in records:
        assert {"time", "level", "logger", "message", "request_id"} <= record.keys(), record
        assert "color_message" not in record
        assert datetime.fromisoformat(record["time"]).utcoffset() == UTC.utcoffset(None)
    # and lines logged outside a request (start-up) have a null request id
    startup = [record for record in records if record["message"].startswith("runsgate ready")]
    assert startup
    assert startup[0]["request_id"] is None
    assert startup[0]["level"] == "INFO"


@pytest.mark.process
def test_a_masked_error_and_a_store_outage_are_logged_with_the_request_id(tmp_path: Path) -> None:
    # given a server on a MongoDB server holding one corrupt snapshot (no toolCalls, no threadId...)
    log = tmp_path / "runsgate.log"
    try:
        database = documentdb()
        base_uri = database.__enter__()
    except RuntimeError as exc:
        if IN_CI:
            pytest.fail(f"no MongoDB test server: {exc}")
        pytest.skip(f"no MongoDB test server: {exc}")
    stopped = False
    try:
        uri = with_database(base_uri)
        with MongoClient(uri) as client:
            client.get_default_database()["run_snapshots"].insert_one(
                {"_id": "corrupt", "agentId": REFUND, "createdAt": datetime.now(UTC), "schemaVersion": 1}
            )
        variables = {
            "MONGODB_URI": uri,
            "RUNSGATE_MONGODB_TIMEOUT": "1",
            "RUNSGATE_LOG_FORMAT": "json",
            "RUNSGATE_LOG_LEVEL": "INFO",
        }
        with runsgate_process(log, **variables) as url:
            assert scrape(url)[sample("runsgate_store_up")] == 1

            # when a query meets the corrupt document (an unexpected fault)
            request_id = f"masked-{uuid.uuid4().hex[:8]}"
            response = post(url, None, SUSPENDED_RUNS, headers={"X-Request-ID": request_id}, agentId=REFUND)

            # then the client sees only the masked message
            body: dict[str, Any] = response.json()
            assert [error["message"] for error in body["errors"]] == ["Unexpected error."]
            assert "KeyError" not in response.text
            # and the log has the fault, with its traceback, under the request's id
            # (runsgate's masked-error line, and strawberry's own error line)
            wait_for_records(log, lambda r: r["request_id"] == request_id and r["logger"] == "runsgate.graphql")
            faults = {
                r["logger"]: r for r in log_records(log) if r["request_id"] == request_id and r["level"] == "ERROR"
            }
            assert "runsgate.graphql" in faults, faults
            assert faults["runsgate.graphql"]["message"].startswith("unexpected error in ['suspendedRuns']")
            assert "KeyError" in faults["runsgate.graphql"]["exc_info"]

            # when the store goes away and a query needs it
            database.__exit__(None, None, None)
            stopped = True
            request_id = f"outage-{uuid.uuid4().hex[:8]}"
            response = post(url, None, SUSPENDED_RUNS, headers={"X-Request-ID": request_id}, agentId=REFUND)

            # then the client is told the store is unavailable (not masked, no internals)
            body = response.json()
            assert [(e["message"], e["extensions"]["code"]) for e in body["errors"]] == [
                ("The run store is unavailable; try again shortly.", "STORE_UNAVAILABLE")
            ]
            assert "ServerSelectionTimeoutError" not in response.text
            # and the log says so under the request's id
            wait_for_records(log, lambda r: r["request_id"] == request_id and r["logger"] == "runsgate.graphql")
            outage = [
                (r["level"], r["message"])
                for r in log_records(log)
                if r["request_id"] == request_id and r["message"].startswith("store unavailable in ['suspendedRuns']")
            ]
            assert [level for level, _ in outage] == ["WARNING"], outage
            # and /metrics says the store is down, with no stale per-agent counts
            metrics = scrape(url)
            assert metrics[sample("runsgate_store_up")] == 0
            assert not [key for key in metrics if key[0] == "runsgate_suspended_runs"]
    finally:
        if not stopped:
            database.__exit__(None, None, None)


def test_sane_request_ids() -> None:
    assert is_sane("abc-123")
    assert is_sane("0af7651916cd43dd8448eb211c80319c")
    assert is_sane("req_1:a/b+c=d@e.f")
    assert not is_sane("")
    assert not is_sane("a b")
    assert not is_sane("x" * 129)
    assert not is_sane('"quoted"')


def test_the_text_format_is_one_line_with_the_request_id_in_brackets() -> None:
    formatter = make_formatter("text")
    record = logging.LogRecord("runsgate.test", logging.WARNING, __file__, 1, "hello %s", ("world",), None)
    token = correlation_id.set("rid-7")
    try:
        record.correlation_id = correlation_id.get()
        line = formatter.format(record)
    finally:
        correlation_id.reset(token)
    assert line.endswith(" WARNING runsgate.test [rid-7] hello world")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_auto_format_is_text_on_a_terminal_and_json_otherwise() -> None:
    assert resolve_format("auto", _Terminal()) == "text"
    assert resolve_format("auto", io.StringIO()) == "json"
    assert resolve_format("json", _Terminal()) == "json"
    assert resolve_format("text", io.StringIO()) == "text"


def test_text_lines_escape_control_characters_in_messages_and_keep_tracebacks() -> None:
    formatter = make_formatter("text")
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord(
            "runsgate", logging.INFO, __file__, 1, "op %s", ("Q\nFORGED 1 INFO x",), sys.exc_info()
        )
    record.correlation_id = "-"
    line = formatter.format(record)
    first, *rest = line.splitlines()
    assert first.endswith("op Q\\nFORGED 1 INFO x")
    assert rest[0] == "Traceback (most recent call last):"


def test_access_lines_redact_a_credential_in_the_query_string() -> None:
    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "GET", "/graphql?query=%7B%7D&access_token=secret-value", "1.1", 400),
        None,
    )
    AccessFields().filter(record)
    assert "secret-value" not in record.getMessage()
    assert "access_token=REDACTED" in record.getMessage()
