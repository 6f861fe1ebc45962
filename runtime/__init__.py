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
    WEBHOOKS_READ,
    Principal,
    ToolApprovalRule,
    can_see_run,
)
from .deciding.rules import missing_approval_scope, tool_rule_problems
from .errors import (
    AgentNotFoundError,
    AmbiguousToolCallError,
    DecideThroughSupervisorError,
    DuplicateApproverError,
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
from .events.feed import EventFeed, EventFeedClosedError, EventFeedOverflowError, EventPredicate
from .lifecycle import BulkDecision, Caller, DecisionWait, RunManager
from .outcome import OutcomeStatus, RunOutcome
from .registry import AgentRegistry, AnyAgent, default_tool_rules, load_registry
from .running.delegation import DelegationError, delegate, sub_run_id
from .running.suspension import suspend
from .subscription_budgets import REPLAY_PAGE_BYTES, SubscriptionBudgets
from .sweeper import StalledRunSweeper
from .updates.feed import RunUpdateFeed
from .updates.publishing import UpdateHub
from .updates.run_updates import UPDATE_ID, RunUpdate, UpdateKind
from .webhooks.dispatcher import WebhookDispatcher
from .webhooks.messages import WEBHOOK_EVENTS, RetryPolicy, WebhookEndpoint

__all__ = [
    "ALL_SCOPES",
    "ANONYMOUS",
    "DECIDE",
    "READ",
    "REPLAY_PAGE_BYTES",
    "START",
    "UNAUTHENTICATED",
    "UPDATE_ID",
    "WEBHOOKS_READ",
    "WEBHOOK_EVENTS",
    "AgentNotFoundError",
    "AgentRegistry",
    "AmbiguousToolCallError",
    "AnyAgent",
    "BulkDecision",
    "Caller",
    "DecideThroughSupervisorError",
    "DecisionWait",
    "DelegationError",
    "DuplicateApproverError",
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
    "RetryPolicy",
    "RunManager",
    "RunNotFoundError",
    "RunNotReadyError",
    "RunOutcome",
    "RunUpdate",
    "RunUpdateFeed",
    "RunsgateError",
    "StalledRunSweeper",
    "SubscriptionBudgets",
    "ToolApprovalRule",
    "ToolArgumentProblem",
    "ToolCallAlreadyDecidedError",
    "ToolCallNotFoundError",
    "UpdateHub",
    "UpdateKind",
    "WebhookDispatcher",
    "WebhookEndpoint",
    "WrongToolCallKindError",
    "can_see_run",
    "default_tool_rules",
    "delegate",
    "load_registry",
    "missing_approval_scope",
    "sub_run_id",
    "suspend",
    "tool_rule_problems",
]
