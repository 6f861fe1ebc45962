"""Continuing: how a run whose every question was decided continues (docs/architecture.md "Continue").

``continuation`` (``Continuation``) claims the run, runs the agent again on its history with the
decisions (``runtime.running``) and stores what it ends with; ``claims`` keeps the claim alive;
``queued`` runs continuations of decisions that did not wait for them.
"""
