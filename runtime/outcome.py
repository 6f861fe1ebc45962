"""``RunOutcome``: what a run did after a runtime call (docs/api.md "Mutations")."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from storage import SnapshotDocument

from ._json import snapshot_from_json, snapshot_to_json

OutcomeStatus = Literal["suspended", "resuming", "completed", "failed"]
"""``suspended``: waiting (for other decisions, or suspended again); ``resuming``: another
instance is continuing the run; ``completed``: finished, snapshot deleted; ``failed``:
continuing raised, the run stays stored with its decisions and ``lastError``."""


@dataclass(kw_only=True)
class RunOutcome:
    """The result of ``start_run``, a decision, or ``retry``."""

    run_id: str
    agent_id: str
    status: OutcomeStatus
    output: Any = None
    """The agent's final output as JSON-safe data, when ``completed``."""
    error: str | None = None
    """``"ExceptionType: message"``, when ``failed``."""
    run: SnapshotDocument | None = None
    """The stored run while it is ``suspended`` (or, after a failure, as stored with ``lastError``)."""

    def to_json(self) -> dict[str, Any]:
        """JSON-safe dict (datetimes as RFC 3339 UTC strings), for idempotency storage."""
        return {
            "runId": self.run_id,
            "agentId": self.agent_id,
            "status": self.status,
            "output": self.output,
            "error": self.error,
            "run": None if self.run is None else snapshot_to_json(self.run),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunOutcome:
        """Inverse of ``to_json``; the run's datetimes come back as aware UTC ``datetime``s."""
        return cls(
            run_id=data["runId"],
            agent_id=data["agentId"],
            status=data["status"],
            output=data.get("output"),
            error=data.get("error"),
            run=None if data.get("run") is None else snapshot_from_json(data["run"]),
        )


__all__ = ["OutcomeStatus", "RunOutcome"]
