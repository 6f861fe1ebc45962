"""What a runsgate process tells its operator: log lines (``logs``), ``GET /metrics``
(``metrics``), and OpenTelemetry tracing of requests, GraphQL operations and MongoDB commands
(``tracing``, with OpenTelemetry's instrumentations in ``_instrumented``)."""
