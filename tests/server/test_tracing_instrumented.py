"""OpenTelemetry's instrumentations when tracing is on, over HTTP with the SDK's in-memory exporter:
the ASGI request span continues the caller's trace and holds the GraphQL operation's span, and on
a MongoDB store each PyMongo command is a span under the request's (docs/operations.md "Tracing")."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

import httpx
import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from server.app import create_app
from server.settings import DEMO_AGENTS, Settings

from .._graphql import graphql_schema

TRACED_QUERY = "query TracedRuns { agents { id suspendedRuns(first: 1) { totalCount } } }"
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"


@asynccontextmanager
async def traced_app(**settings: object) -> AsyncIterator[tuple[httpx.AsyncClient, InMemorySpanExporter]]:
    """An app with tracing on (console exporter, plus an in-memory one), its lifespan running, and
    an httpx client over it."""
    base: dict[str, object] = {
        "agents": DEMO_AGENTS,
        "auth": False,
        "tracing": "console",
        "otel_exporter_otlp_endpoint": None,
        "otel_exporter_otlp_traces_endpoint": None,
    }
    app = create_app(Settings(**{**base, **settings}))  # type: ignore[arg-type]
    exporter = InMemorySpanExporter()
    # the provider tracing built: the one its schema extension was given
    (provider,) = {getattr(e, "keywords", {}).get("tracer_provider") for e in graphql_schema(app).extensions} - {None}
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    async with app.router.lifespan_context(app):
        try:
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://localhost") as http:
                yield http, exporter
        finally:
            if settings.get("mongodb_uri"):
                await app.state.store.drop_all()


def _by_name(spans: Sequence[ReadableSpan]) -> dict[str, ReadableSpan]:
    return {span.name: span for span in spans}


def _parent(span: ReadableSpan) -> int | None:
    return span.parent.span_id if span.parent is not None else None


async def test_a_request_span_continues_the_callers_trace_and_holds_the_operations() -> None:
    async with traced_app() as (http, exporter):
        # when a named query is posted from a span of another service (W3C traceparent)
        response = await http.post("/graphql", json={"query": TRACED_QUERY}, headers={"traceparent": TRACEPARENT})
        assert response.status_code == 200, response.text
        # and a probe and a scrape are answered
        assert (await http.get("/healthz")).status_code == 200

        spans = _by_name(exporter.get_finished_spans())
    # then the ASGI instrumentation made the request's SERVER span, a child of the caller's span
    request = spans["POST /graphql"]
    assert request.kind == SpanKind.SERVER
    assert request.context is not None
    assert format(request.context.trace_id, "032x") == CALLER_TRACE
    assert format(_parent(request) or 0, "016x") == CALLER_SPAN
    assert request.attributes is not None
    assert request.attributes.get("http.response.status_code", request.attributes.get("http.status_code")) == 200
    # and the operation's span is the request span's child, in the same trace
    operation = spans["GraphQL Query: TracedRuns"]
    assert operation.context is not None
    assert operation.context.trace_id == request.context.trace_id
    assert _parent(operation) == request.context.span_id
    # and no message of the request got a span of its own, nor did the probe
    assert not [name for name in spans if name.endswith((" send", " receive")) or "healthz" in name], list(spans)


@pytest.mark.mongo
async def test_each_pymongo_command_is_a_span_of_the_request_that_sent_it(mongodb_uri: str) -> None:
    async with traced_app(mongodb_uri=mongodb_uri) as (http, exporter):
        exporter.clear()  # the store's opening (indexes) belongs to no request
        # when a query that counts stored runs is posted
        response = await http.post("/graphql", json={"query": TRACED_QUERY}, headers={"traceparent": TRACEPARENT})
        assert response.status_code == 200, response.text
        assert "errors" not in response.json(), response.json()

        spans = exporter.get_finished_spans()
    # then PyMongo's commands are CLIENT spans of the MongoDB system, in the caller's trace
    commands = [span for span in spans if span.kind == SpanKind.CLIENT]
    assert commands, [span.name for span in spans]
    ids = {span.context.span_id: span for span in spans if span.context is not None}
    request = _by_name(spans)["POST /graphql"]
    assert request.context is not None
    for command in commands:
        assert command.attributes is not None
        assert command.attributes.get("db.system", command.attributes.get("db.system.name")) == "mongodb"
        assert command.context is not None
        assert format(command.context.trace_id, "032x") == CALLER_TRACE
        # and each one's parents lead up to the request's span
        parent = _parent(command)
        while parent is not None and parent != request.context.span_id:
            parent = _parent(ids[parent])
        assert parent == request.context.span_id, command.name
