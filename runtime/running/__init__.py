"""Running: one pydantic-ai run of an agent, shared by starting and continuing (docs/architecture.md "Run lifecycle").

``execution`` runs the agent; ``identity`` gives each tool call its identity; ``deferred``
translates pydantic-ai's deferred calls to stored calls and decisions back to its results;
``scope`` is the run a tool call belongs to; ``suspension`` and ``delegation`` are what an agent's
tools call (``suspend()``, ``delegate()``).
"""
