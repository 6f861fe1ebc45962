"""HTTP/WebSocket serving: the Starlette app (``server.app``), its settings (``server.settings``)
and the command line (``server.cli``).

Importing the package imports none of them: ``runsgate``'s entry point (``server.cli.main``) reads and
checks the settings before the app and the agents are imported, and so does each
``--workers`` process before it answers uvicorn's health check.
"""
