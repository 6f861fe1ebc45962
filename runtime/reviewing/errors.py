"""The domain errors of the reviewers' queue: separation of duties and review claims (docs/api.md
"Errors"); ``resolvers.errors`` gives each its GraphQL type."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from storage import ReviewClaimDocument

from .._json import rfc3339
from ..errors import ErrorCode, RunsgateError


class SeparationOfDutiesError(RunsgateError):
    """A rule's separation of duties: the principal who started the run (``started_by``; ``None``
    when the run does not record it) may not approve or edit this call; nothing was recorded."""

    code = ErrorCode.SEPARATION_OF_DUTIES

    def __init__(self, run_id: str, tool_call_id: str, started_by: str | None, known: bool = True) -> None:
        if known:
            message = (
                f"{started_by or 'This caller'} started run {run_id!r}, so may not approve or edit its tool call "
                f"{tool_call_id!r} (separation of duties); another principal may, or anyone may decline it."
            )
        else:
            message = (
                f"Run {run_id!r} does not record who started it (stored before schema version 5), so no one may "
                f"approve its tool call {tool_call_id!r} under separation of duties; decline it, and the agent "
                "may ask again in a new run."
            )
        super().__init__(message)
        self.run_id = run_id
        self.tool_call_id = tool_call_id
        self.started_by = started_by
        self.known = known

    def details(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "tool_call_id": self.tool_call_id,
            "started_by": self.started_by,
            "known": self.known,
        }


class ReviewClaimRequiredError(RunsgateError):
    """A rule requires the decider to hold the question's review claim, and it does not (``claim``:
    the review claim another principal holds, or ``None``); nothing was recorded."""

    code = ErrorCode.REVIEW_CLAIM_REQUIRED

    def __init__(self, run_id: str, tool_call_id: str, claim: ReviewClaimDocument | None) -> None:
        held = "" if claim is None else f" ({claim['by']} holds it since {rfc3339(claim['at'])})"
        super().__init__(
            f"Deciding tool call {tool_call_id!r} of run {run_id!r} needs its review claim{held}: claimReview it first."
        )
        self.run_id = run_id
        self.tool_call_id = tool_call_id
        self.claim = claim

    def details(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "tool_call_id": self.tool_call_id, "claim": _claim_json(self.claim)}

    @classmethod
    def _from_details(cls, details: dict[str, Any]) -> RunsgateError:
        return cls(details["run_id"], details["tool_call_id"], _claim_from_json(details.get("claim")))


class ReviewAlreadyClaimedError(RunsgateError):
    """Another principal holds the question's review claim (``claim``), until it releases it, it
    lapses or the question is decided; nothing was recorded. A review claim is advice: deciding
    the question stays open."""

    code = ErrorCode.REVIEW_ALREADY_CLAIMED

    def __init__(self, run_id: str, tool_call_id: str, question_id: str, claim: ReviewClaimDocument) -> None:
        super().__init__(
            f"{claim['by']} has been reviewing question {question_id!r} of tool call {tool_call_id!r} of run "
            f"{run_id!r} since {rfc3339(claim['at'])} (until {rfc3339(claim['until'])})."
        )
        self.run_id = run_id
        self.tool_call_id = tool_call_id
        self.question_id = question_id
        self.claim = claim

    def details(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "tool_call_id": self.tool_call_id,
            "question_id": self.question_id,
            "claim": _claim_json(self.claim),
        }

    @classmethod
    def _from_details(cls, details: dict[str, Any]) -> RunsgateError:
        claim = _claim_from_json(details["claim"])
        assert claim is not None
        return cls(details["run_id"], details["tool_call_id"], details["question_id"], claim)


class ReviewClaimNotHeldError(RunsgateError):
    """``releaseReview`` by a principal that does not hold the question's review claim (another
    does, or none is held); nothing was recorded."""

    code = ErrorCode.REVIEW_CLAIM_NOT_HELD

    def __init__(self, run_id: str, tool_call_id: str, question_id: str) -> None:
        super().__init__(
            f"This caller holds no review claim on question {question_id!r} of tool call {tool_call_id!r} of run "
            f"{run_id!r}."
        )
        self.run_id = run_id
        self.tool_call_id = tool_call_id
        self.question_id = question_id

    def details(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "tool_call_id": self.tool_call_id, "question_id": self.question_id}


def _claim_json(claim: ReviewClaimDocument | None) -> dict[str, Any] | None:
    if claim is None:
        return None
    return {"by": claim["by"], "at": rfc3339(claim["at"]), "until": rfc3339(claim["until"])}


def _claim_from_json(data: dict[str, Any] | None) -> ReviewClaimDocument | None:
    if data is None:
        return None
    return {"by": data["by"], "at": datetime.fromisoformat(data["at"]), "until": datetime.fromisoformat(data["until"])}


__all__ = [
    "ReviewAlreadyClaimedError",
    "ReviewClaimNotHeldError",
    "ReviewClaimRequiredError",
    "SeparationOfDutiesError",
]
