"""Strawberry's ``OpenTelemetryExtension``, continuing the caller's trace (W3C ``traceparent``).

Imported by ``server.observability.tracing`` only when tracing is on: importing it loads OpenTelemetry.
"""

from __future__ import annotations

from collections.abc import Generator

from opentelemetry import context as otel_context
from opentelemetry import propagate
from strawberry.extensions.tracing import OpenTelemetryExtension


class TracedOperations(OpenTelemetryExtension):
    """Each operation's span is a child of the span named by the request's ``traceparent``.

    The headers are read with the globally configured propagators (W3C trace context and
    baggage unless ``OTEL_PROPAGATORS`` says otherwise). Without such a header the operation
    starts a new trace.
    """

    def on_operation(self) -> Generator[None, None, None]:
        request = getattr(self.execution_context.context, "request", None)
        headers = getattr(request, "headers", None)
        token = otel_context.attach(propagate.extract(headers)) if headers is not None else None
        try:
            yield from super().on_operation()
        finally:
            if token is not None:
                otel_context.detach(token)
