"""What a runsgate process tells its operator: log lines (``logs``), ``GET /metrics``
(``metrics``), and OpenTelemetry tracing of GraphQL operations (``tracing``,
``_traced_operations``)."""
