"""The run an agent is executing for, visible to its tools (used by ``delegate()``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .lifecycle import RunManager


@dataclass(frozen=True, kw_only=True)
class RunScope:
    """Which run of which manager the current agent call belongs to."""

    manager: RunManager
    agent_id: str
    run_id: str
    thread_id: str | None
    resource_id: str | None
    principal: str | None
    """Who caused this agent call (started the run, or made the decision that continued it)."""


_current: ContextVar[RunScope | None] = ContextVar("runsgate_run_scope", default=None)


@contextmanager
def entered(scope: RunScope) -> Iterator[None]:
    """Make ``scope`` current for the body (and for tasks it creates)."""
    token = _current.set(scope)
    try:
        yield
    finally:
        _current.reset(token)


def current_scope() -> RunScope:
    """The scope set by the ``RunManager`` running the current agent.

    Raises:
        RuntimeError: No runsgate ``RunManager`` is running an agent here.
    """
    scope = _current.get()
    if scope is None:
        raise RuntimeError("no runsgate run is active: run this agent through runtime.RunManager")
    return scope
