"""OpenTelemetry's instrumentations, as runsgate turns them on when tracing is on: ASGI requests
(``opentelemetry-instrumentation-asgi``, a middleware per app) and PyMongo commands
(``opentelemetry-instrumentation-pymongo``, once per process, through ``ACTIVE``).

Imported by ``server.observability.tracing`` only when tracing is on: importing it loads
OpenTelemetry. Which spans each makes: docs/operations.md "Tracing".
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.asgi import OpenTelemetryMiddleware
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.util.http import parse_excluded_urls
from starlette.middleware import Middleware

EXCLUDED_URLS = "/healthz,/readyz,/metrics"
"""Requests that get no span unless ``OTEL_PYTHON_ASGI_EXCLUDED_URLS`` (or the shared
``OTEL_PYTHON_EXCLUDED_URLS``) names others: probes and scrapes, many and uneventful."""


def asgi_middleware(provider: TracerProvider) -> Middleware:
    """The ASGI instrumentation's middleware over ``provider``: one SERVER span per HTTP request or
    WebSocket (``POST /graphql``), continuing the caller's trace (W3C ``traceparent``, or the
    propagators of ``OTEL_PROPAGATORS``); no span per message sent or received."""
    excluded = (
        os.environ.get("OTEL_PYTHON_ASGI_EXCLUDED_URLS") or os.environ.get("OTEL_PYTHON_EXCLUDED_URLS") or EXCLUDED_URLS
    )
    return Middleware(
        OpenTelemetryMiddleware,
        tracer_provider=provider,
        excluded_urls=parse_excluded_urls(excluded),
        exclude_spans=["receive", "send"],
    )


class _ActiveTracer(trace.Tracer):
    """A tracer of the provider active when each span starts (``ActiveProvider.provider``), or
    no-op while none is."""

    def __init__(self, owner: ActiveProvider, name: str, version: str | None, schema_url: str | None) -> None:
        self._owner, self._name, self._version, self._schema_url = owner, name, version, schema_url

    def _current(self) -> trace.Tracer:
        provider = self._owner.provider
        if provider is None:
            return trace.NoOpTracer()
        return provider.get_tracer(self._name, self._version, self._schema_url)

    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        return self._current().start_span(*args, **kwargs)

    @contextmanager
    def start_as_current_span(self, *args: Any, **kwargs: Any) -> Iterator[trace.Span]:  # type: ignore[override]
        with self._current().start_as_current_span(*args, **kwargs) as span:
            yield span


class ActiveProvider(trace.TracerProvider):
    """The process's one provider for the instrumentations installed once per process: its
    tracers start their spans on the provider of the app whose tracing is on (``provider``)."""

    def __init__(self) -> None:
        self.provider: TracerProvider | None = None

    def get_tracer(
        self,
        instrumenting_module_name: str,
        instrumenting_library_version: str | None = None,
        schema_url: str | None = None,
        attributes: Any = None,
    ) -> trace.Tracer:
        return _ActiveTracer(self, instrumenting_module_name, instrumenting_library_version, schema_url)


ACTIVE = ActiveProvider()


def trace_pymongo(provider: TracerProvider) -> None:
    """Make ``provider`` the one PyMongo's commands are traced on: one CLIENT span per command
    (``<database>.<command>``), a child of the span current when it was sent. Installs the
    instrumentation (a global command listener) the first time."""
    from opentelemetry.instrumentation.pymongo import PymongoInstrumentor

    ACTIVE.provider = provider
    instrumentor = PymongoInstrumentor()
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(tracer_provider=ACTIVE)


def stop_pymongo(provider: TracerProvider) -> None:
    """PyMongo's commands are no longer traced on ``provider`` (no-op when another is active)."""
    if ACTIVE.provider is provider:
        ACTIVE.provider = None
