"""The ``/graphql`` endpoint: Strawberry's ASGI view as runsgate serves it (``graphql_view``),
its GraphQL-over-HTTP fixes (``conformance``) and request errors (``request_errors``), the
offline GraphiQL page (``graphiql``), the fast path's HTTP half (``prepared_http``), the
``graphql-transport-ws`` handler (``ws_handler``) and authentication in front (``authenticated``)."""
