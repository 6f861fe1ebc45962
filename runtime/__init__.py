"""The run lifecycle of runsgate (docs/architecture.md "Run lifecycle"): agents, suspension, decisions, continuation.

Plain async Python over a ``storage.SnapshotStore``; knows nothing of GraphQL or HTTP.
"""

from .access import (
    ALL_SCOPES,
    ANONYMOUS,
    DECIDE,
    READ,
    START,
    UNAUTHENTICATED,
    Principal,
    ToolApprovalRule,
    can_see_run,
    missing_approval_scope,
)
from .delegation import DelegationError, delegate, sub_run_id
from .errors import (
    AgentNotFoundError,
    AmbiguousToolCallError,
    DecideThroughSupervisorError,
    ErrorCode,
    ForbiddenError,
    IdempotencyKeyReusedError,
    InvalidResumeDataError,
    InvalidToolArgumentsError,
    QuestionNotPendingError,
    ResumeDataProblem,
    RunNotFoundError,
    RunNotReadyError,
    RunsgateError,
    ToolArgumentProblem,
    ToolCallAlreadyDecidedError,
    ToolCallNotFoundError,
    WrongToolCallKindError,
)
from .event_feed import EventFeed, EventFeedClosedError, EventFeedOverflowError, EventPredicate
from .lifecycle import BulkDecision, Caller, RunManager
from .outcome import OutcomeStatus, RunOutcome
from .registry import AgentRegistry, AnyAgent, load_registry
from .suspension import suspend
from .sweeper import StalledRunSweeper

__all__ = [
    "ALL_SCOPES",
    "ANONYMOUS",
    "DECIDE",
    "READ",
    "START",
    "UNAUTHENTICATED",
    "AgentNotFoundError",
    "AgentRegistry",
    "AmbiguousToolCallError",
    "AnyAgent",
    "BulkDecision",
    "Caller",
    "DecideThroughSupervisorError",
    "DelegationError",
    "ErrorCode",
    "EventFeed",
    "EventFeedClosedError",
    "EventFeedOverflowError",
    "EventPredicate",
    "ForbiddenError",
    "IdempotencyKeyReusedError",
    "InvalidResumeDataError",
    "InvalidToolArgumentsError",
    "OutcomeStatus",
    "Principal",
    "QuestionNotPendingError",
    "ResumeDataProblem",
    "RunManager",
    "RunNotFoundError",
    "RunNotReadyError",
    "RunOutcome",
    "RunsgateError",
    "StalledRunSweeper",
    "ToolApprovalRule",
    "ToolArgumentProblem",
    "ToolCallAlreadyDecidedError",
    "ToolCallNotFoundError",
    "WrongToolCallKindError",
    "can_see_run",
    "delegate",
    "load_registry",
    "missing_approval_scope",
    "sub_run_id",
    "suspend",
]
