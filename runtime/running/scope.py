"""The run an agent is executing for, visible to its tools (used by ``delegate()``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol

from storage import SnapshotDocument

from ..outcome import RunOutcome


class SubRuns(Protocol):
    """What ``delegate()`` needs of the runtime running the supervisor (``RunManager``)."""

    def check_agent(self, agent_id: str) -> None:
        """Raises ``AgentNotFoundError`` when ``agent_id`` is not registered."""

    async def get_run(self, agent_id: str, run_id: str) -> SnapshotDocument | None:
        """The stored run, or ``None``."""

    async def finished_output(self, agent_id: str, run_id: str) -> tuple[Any] | None:
        """``(output,)`` when the event log says the run completed, else ``None``."""

    async def start_sub_run(self, agent_id: str, prompt: str, *, parent: RunScope, run_id: str) -> RunOutcome:
        """Start the sub-run ``run_id`` of ``parent``'s run (same thread, resource and principal)."""

    async def forward(self, inner: SnapshotDocument, index: int, answer: dict[str, Any]) -> RunOutcome:
        """Record the supervisor's decision ``answer`` on the sub-run's call at ``index`` (through
        the decision gate) and continue the sub-run once no call of it waits."""

    async def continue_sub_run(self, agent_id: str, run_id: str, principal: str | None) -> RunOutcome:
        """Continue a sub-run whose every call is decided (``RunManager.retry``)."""


@dataclass(frozen=True, kw_only=True)
class RunScope:
    """Which run of which runtime the current agent call belongs to."""

    runs: SubRuns
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
