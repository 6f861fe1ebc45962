"""OpenTelemetry tracing of HTTP requests, GraphQL operations and MongoDB commands, only when configured.

``RUNSGATE_TRACING``: ``auto`` (on when an ``OTEL_EXPORTER_OTLP_*ENDPOINT`` is set), ``otlp``,
``console`` or ``off``; when off nothing of OpenTelemetry is imported. When on, with a provider of
its own flushed at shutdown (``Tracing.shutdown``): the ASGI instrumentation's middleware, Strawberry's
``OpenTelemetryExtension``, and on a MongoDB store the PyMongo instrumentation
(``_instrumented``). Needs the ``otel`` extra. Spans and variables: docs/operations.md "Tracing".
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from starlette.middleware import Middleware
from strawberry.extensions import SchemaExtension

from storage.registry import store_entry

from ..settings import ConfigError, Settings

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanLimits, TracerProvider


@dataclass(kw_only=True)
class Tracing:
    """What tracing adds to the app: schema extensions, the outermost middleware, and a provider
    to flush at shutdown."""

    extensions: list[Callable[[], SchemaExtension]] = field(default_factory=list)
    middleware: list[Middleware] = field(default_factory=list)
    provider: TracerProvider | None = None

    @property
    def enabled(self) -> bool:
        return self.provider is not None

    def shutdown(self) -> None:
        """Export the spans still buffered and stop the exporter (no-op when tracing is off)."""
        if self.provider is not None:
            from ._instrumented import stop_pymongo

            stop_pymongo(self.provider)
            self.provider.shutdown()


MAX_ATTRIBUTE_CHARS = 4096
"""Characters of a span attribute kept unless the standard ``OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT`` or
``OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT`` says otherwise: a span holds the operation's whole
document and each field's arguments, and the exporter queues 2048 spans."""


def span_limits() -> SpanLimits:
    """OpenTelemetry's span limits, attributes cut at ``MAX_ATTRIBUTE_CHARS`` by default."""
    from opentelemetry.sdk.trace import SpanLimits

    configured = any(
        os.environ.get(name) for name in ("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT")
    )
    return SpanLimits() if configured else SpanLimits(max_span_attribute_length=MAX_ATTRIBUTE_CHARS)


def start_tracing(settings: Settings) -> Tracing:
    """Build the tracer provider, the schema extension and the ASGI middleware when tracing is
    configured; on a MongoDB store (``settings.store_url``), trace PyMongo's commands on it too.

    Returns:
        An empty ``Tracing`` when off (nothing imported).

    Raises:
        ConfigError: Tracing is configured but the ``otel`` extra is not installed.
    """
    exporter_kind = settings.trace_exporter
    if exporter_kind is None:
        return Tracing()
    try:
        from functools import partial

        from opentelemetry.sdk.resources import SERVICE_INSTANCE_ID, SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
        from strawberry.extensions.tracing import OpenTelemetryExtension

        from ._instrumented import asgi_middleware, trace_pymongo
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise ConfigError(
            f"RUNSGATE_TRACING: tracing needs the otel extra (pip install 'runsgate[otel]'): {exc}"
        ) from None
    resource = Resource.create({SERVICE_INSTANCE_ID: settings.instance_id})
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "runsgate"}))
    exporter: SpanExporter
    if exporter_kind == "console":
        exporter = ConsoleSpanExporter()
    else:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter(endpoint=settings.otlp_traces_endpoint)
    provider = TracerProvider(resource=resource, span_limits=span_limits())
    provider.add_span_processor(BatchSpanProcessor(exporter))
    if store_entry(settings.store_url).name == "mongodb":  # else PyMongo is never imported
        trace_pymongo(provider)
    return Tracing(
        extensions=[partial(OpenTelemetryExtension, tracer_provider=provider)],
        middleware=[asgi_middleware(provider)],
        provider=provider,
    )
