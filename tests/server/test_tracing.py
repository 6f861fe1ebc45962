"""OpenTelemetry tracing: spans of a real server process reach an OTLP/HTTP receiver.

The test runs a small OTLP/HTTP receiver (``POST /v1/traces``, protobuf, decoded with
``opentelemetry-proto``), starts runsgate with the standard ``OTEL_EXPORTER_OTLP_ENDPOINT``
pointing at it, runs a named query with a W3C ``traceparent`` header, stops the server (which
flushes the batch exporter) and checks the spans that arrived: the request's, the operation's
and its children. Without an endpoint, the app
has no tracing extension at all.
"""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from starlette.applications import Starlette
from strawberry.extensions.tracing import OpenTelemetryExtension

from server.app import create_app
from server.observability.tracing import start_tracing
from server.settings import DEMO_AGENTS, Settings

from .._graphql import graphql_schema, post
from .._servers import runsgate_process

TRACED_QUERY = "query TracedAgents { agents { id } }"
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"


class _Receiver(ThreadingHTTPServer):
    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _OtlpHandler)
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []


class _OtlpHandler(BaseHTTPRequestHandler):
    server: _Receiver

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        self.server.paths.append(self.path)
        self.server.requests.append(request)
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    server = _Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.process
def test_spans_of_a_query_reach_the_otlp_endpoint(receiver: _Receiver, tmp_path: Path) -> None:
    # given a server whose standard OTLP endpoint is the receiver
    endpoint = f"http://127.0.0.1:{receiver.server_address[1]}"
    with runsgate_process(tmp_path / "runsgate.log", OTEL_EXPORTER_OTLP_ENDPOINT=endpoint) as url:
        # when a named query runs, called from a span of another service (W3C traceparent)
        response = post(url, None, TRACED_QUERY, headers={"traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"})
        assert response.status_code == 200, response.text
        assert response.json()["data"]["agents"]
    # (leaving the block stops the server, which flushes the exporter)

    # then its spans arrived at /v1/traces, from service "runsgate"
    assert receiver.paths
    assert set(receiver.paths) == {"/v1/traces"}
    spans = []
    for request in receiver.requests:
        for resource_spans in request.resource_spans:
            attributes = {kv.key: kv.value.string_value for kv in resource_spans.resource.attributes}
            assert attributes["service.name"] == "runsgate"
            assert attributes["service.instance.id"]
            spans += [span for scope in resource_spans.scope_spans for span in scope.spans]
    by_name = {span.name: span for span in spans}
    operation = by_name["GraphQL Query: TracedAgents"]
    # and the request's span (ASGI instrumentation) continues the caller's trace, as a child of its
    # span, and holds the operation's span
    request = by_name["POST /graphql"]
    assert request.trace_id.hex() == CALLER_TRACE
    assert request.parent_span_id.hex() == CALLER_SPAN
    assert operation.trace_id.hex() == CALLER_TRACE
    assert operation.parent_span_id == request.span_id
    # and the operation span is the parent of the parsing, validation and resolver spans, in one trace
    for child in ("GraphQL Parsing", "GraphQL Validation", "GraphQL Resolving: agents"):
        assert by_name[child].parent_span_id == operation.span_id, child
        assert by_name[child].trace_id == operation.trace_id, child


def _schema_extensions(app: Starlette) -> list[Any]:
    return list(graphql_schema(app).extensions)


def _is_tracing(extension: Any) -> bool:
    factory = getattr(extension, "func", extension)
    return isinstance(factory, type) and issubclass(factory, OpenTelemetryExtension)


def test_without_an_endpoint_there_is_no_tracing_extension() -> None:
    # given no OTLP endpoint and RUNSGATE_TRACING=auto
    settings = Settings(
        agents=DEMO_AGENTS,
        otel_exporter_otlp_endpoint=None,
        otel_exporter_otlp_traces_endpoint=None,
        tracing="auto",
        auth=False,
    )

    # then tracing is off and the schema has no tracing extension
    assert not start_tracing(settings).enabled
    assert not [extension for extension in _schema_extensions(create_app(settings)) if _is_tracing(extension)]


async def test_tracing_is_turned_on_by_an_endpoint_or_the_setting_and_off_by_the_setting() -> None:
    base = {"otel_exporter_otlp_endpoint": None, "otel_exporter_otlp_traces_endpoint": None}
    on_by_endpoint = Settings(**{**base, "otel_exporter_otlp_endpoint": "http://127.0.0.1:1/"})
    assert on_by_endpoint.trace_exporter == "otlp"
    assert on_by_endpoint.otlp_traces_endpoint == "http://127.0.0.1:1/v1/traces"
    traces_wins = Settings(**{**base, "otel_exporter_otlp_traces_endpoint": "http://h:2/t", "tracing": "otlp"})
    assert traces_wins.otlp_traces_endpoint == "http://h:2/t"
    assert Settings(**{**base, "otel_exporter_otlp_endpoint": "http://h:3", "tracing": "off"}).trace_exporter is None

    # when RUNSGATE_TRACING=console, then the app's schema has the tracing extension
    app = create_app(Settings(agents=DEMO_AGENTS, **{**base, "tracing": "console"}, auth=False))
    async with app.router.lifespan_context(app):  # its end shuts the tracer provider down
        assert [extension for extension in _schema_extensions(app) if _is_tracing(extension)]


def test_a_span_keeps_at_most_4096_characters_of_any_attribute() -> None:
    # the operation span holds the client's whole document (Strawberry's "query" attribute), and
    # the exporter's queue holds 2048 spans: with a 600 KB document in each, more than a gigabyte
    base = {"otel_exporter_otlp_endpoint": None, "otel_exporter_otlp_traces_endpoint": None}
    tracing = start_tracing(Settings(**{**base, "tracing": "console"}, auth=False, mongodb_uri=None))
    assert tracing.provider is not None
    try:
        with tracing.provider.get_tracer("test").start_as_current_span("GraphQL Query: Long") as span:
            span.set_attribute("query", "x" * 600_000)
            kept = span.attributes["query"]  # type: ignore[attr-defined]
    finally:
        tracing.shutdown()

    assert isinstance(kept, str)
    assert len(kept) == 4096
