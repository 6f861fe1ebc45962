"""The run lifecycle of runsgate (DESIGN.md §4): agents, suspension, decisions, continuation.

Plain async Python over a ``storage.SnapshotStore``; knows nothing of GraphQL or HTTP.
"""

from .delegation import DelegationError, delegate, sub_run_id
from .errors import (
    AgentNotFoundError,
    AmbiguousToolCallError,
    ErrorCode,
    IdempotencyKeyReusedError,
    InvalidResumeDataError,
    ResumeDataProblem,
    RunNotFoundError,
    RunNotReadyError,
    RunsgateError,
    ToolCallAlreadyDecidedError,
    ToolCallNotFoundError,
    WrongToolCallKindError,
)
from .event_feed import EventFeed, EventFeedClosedError, EventFeedOverflowError, EventPredicate
from .lifecycle import RunManager
from .outcome import OutcomeStatus, RunOutcome
from .registry import AgentRegistry, AnyAgent, load_registry
from .suspension import suspend
from .sweeper import StalledRunSweeper

__all__ = [
    "AgentNotFoundError",
    "AgentRegistry",
    "AmbiguousToolCallError",
    "AnyAgent",
    "DelegationError",
    "ErrorCode",
    "EventFeed",
    "EventFeedClosedError",
    "EventFeedOverflowError",
    "EventPredicate",
    "IdempotencyKeyReusedError",
    "InvalidResumeDataError",
    "OutcomeStatus",
    "ResumeDataProblem",
    "RunManager",
    "RunNotFoundError",
    "RunNotReadyError",
    "RunOutcome",
    "RunsgateError",
    "StalledRunSweeper",
    "ToolCallAlreadyDecidedError",
    "ToolCallNotFoundError",
    "WrongToolCallKindError",
    "delegate",
    "load_registry",
    "sub_run_id",
    "suspend",
]
