"""GraphQL object types (docs/api.md; names fixed: clients and checks rely on them)."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable, Iterable, Mapping
from datetime import datetime
from typing import Any, TypeVar, cast

import strawberry
from strawberry import relay

from storage import DecisionDocument, EventDocument, ReviewClaimDocument, SnapshotDocument, ToolCallDocument

from .access import CanRead
from .context import Info
from .reads.conversation import DEFAULT_MAX_BYTES, Conversation, run_conversation
from .scalars import JSON


@strawberry.enum(description="Where a run stands.")
class RunStatus(enum.Enum):
    SUSPENDED = "suspended"
    RESUMING = "resuming"
    COMPLETED = "completed"
    FAILED = "failed"


@strawberry.enum(description="What was decided on a pending tool call.")
class DecisionKind(enum.Enum):
    APPROVED = "approved"
    DECLINED = "declined"
    RESUMED = "resumed"


_T = TypeVar("_T")

ToolSchemas = Mapping[str, Mapping[str, dict[str, Any]] | None]
"""Agent id -> tool name -> parameters JSON Schema (``AgentRegistry.tool_schemas``)."""


def from_fields(cls: type[_T], fields: dict[str, Any]) -> _T:
    """An instance of the Strawberry type ``cls`` holding ``fields`` (Python name -> value), as
    its dataclass ``__init__`` builds it, without the keyword-argument call: a page of 20 runs
    builds 40 such objects, and the calls were 5% of its CPU time (bench/RESULTS.md).

    ``fields`` must name every ``__init__`` field of ``cls`` in order, and ``cls`` must have no
    ``__post_init__``; ``tests/resolvers/test_types.py`` checks both for every type built this
    way. The dict is the instance's own from then on.
    """
    instance = object.__new__(cls)
    instance.__dict__ = fields
    return instance


_RUN_STATUSES = {status.value: status for status in RunStatus}
_DECISION_KINDS = {kind.value: kind for kind in DecisionKind}
"""Stored value -> member: what ``RunStatus(value)`` returns, without ``EnumMeta.__call__`` (a page
converts 20+ of them). An unknown value raises ``KeyError`` instead of ``ValueError``; both are
masked as an unexpected fault."""


@strawberry.type(description="The decision recorded on a tool call (exactly one per call).")
class ToolCallDecision:
    kind: DecisionKind
    decided_at: datetime = strawberry.field(description="UTC.")
    decided_by: str | None = strawberry.field(description="The principal who decided.")
    reason: str | None = strawberry.field(description="Decline reason, passed to the model.")
    edited_args: JSON | None = strawberry.field(
        default=None,
        description="The arguments the approver replaced the model's with (approvals; null: not edited); "
        "the tool ran with them and the model's history shows them.",
    )

    @classmethod
    def from_document(cls, doc: DecisionDocument) -> ToolCallDecision:
        return cls(
            kind=_DECISION_KINDS[doc["kind"]],
            decided_at=doc["decidedAt"],
            decided_by=doc["decidedBy"],
            reason=doc["reason"],
            edited_args=doc.get("editedArgs"),
        )


@strawberry.type(description="One approval of a tool call that needs several (two-person approval).")
class Approval:
    decided_by: str | None = strawberry.field(description="The principal who approved.")
    decided_at: datetime = strawberry.field(description="UTC.")


def _approvals(doc: ToolCallDocument) -> list[Approval]:
    """The call's approvals; a call needing one approval lists its approval decision, once made."""
    stored = doc.get("approvals")
    if stored:
        return [Approval(decided_by=a["decidedBy"], decided_at=a["decidedAt"]) for a in stored]
    decision = doc["decision"]
    if doc.get("approvalsRequired", 1) <= 1 and decision is not None and decision["kind"] == "approved":
        return [Approval(decided_by=decision["decidedBy"], decided_at=decision["decidedAt"])]
    return []


@strawberry.type(description="A tool call of a suspended run, waiting for an approval or for resume data.")
class SuspendedToolCall:
    tool_call_id: strawberry.ID | None = strawberry.field(
        description="The call's identity, unique for the run's whole life: runsgate's own, not the model's (see "
        "`modelToolCallId`). Decisions name the call by it."
    )
    model_tool_call_id: strawberry.ID | None = strawberry.field(
        description="The id the model gave the call, as its provider knows it. Models may reuse an id (within a turn, "
        "or turn after turn): a decision naming it reaches the call only while no other pending call has it "
        "(`AmbiguousToolCall` otherwise)."
    )
    tool_name: str | None
    args: JSON | None = strawberry.field(description="The model's arguments (approval suspensions).")
    requires_approval: bool = strawberry.field(description="True when the call waits for approve/decline.")
    suspend_payload: JSON | None = strawberry.field(description="What the tool passed to `suspend()`.")
    resume_schema: JSON | None = strawberry.field(description="JSON Schema the resume data must satisfy.")
    decision: ToolCallDecision | None = strawberry.field(description="Null until decided.")
    question_id: strawberry.ID = strawberry.field(
        description="The question (decision point) the call waits on: new each time the same call suspends "
        "again (a tool's next `suspend()`, or an approval it needs after an answer). Pass it to `resumeRun` "
        "so a late or duplicate answer is refused (`QuestionNotPending`) instead of answering the next one."
    )
    approval_metadata: JSON | None = strawberry.field(
        description="What the tool passed to `ApprovalRequired(metadata=...)`, for the reviewer (approvals)."
    )
    # deadlines (issue 18 part 2)
    expires_at: datetime | None = strawberry.field(
        description="UTC deadline of the question, set by a tool rule's `expiresAfter`: after it the sweeper "
        'records the rule\'s fallback (`decidedBy: "expiry"`). Null without a deadline.'
    )
    approvals_required: int = strawberry.field(
        description="Distinct principals whose approval the call needs (a `RUNSGATE_TOOL_RULES` rule's "
        "`approvals`); 1 for most calls. The call runs after the last one; one decline ends it. Set from the "
        "rules of the agent whose tool it is, also on a supervisor's delegated call."
    )
    required_scopes: list[str] = strawberry.field(
        description="The scopes beyond `runs:decide` that approving (or resuming) the call needs, from the "
        "`RUNSGATE_TOOL_RULES` rules of the agent whose tool it is (also on a supervisor's delegated call), as "
        "they applied to the model's arguments when it suspended; empty for most calls. Edited arguments are "
        "checked again. Declining needs none."
    )
    approvals: list[Approval] = strawberry.field(
        description="The approvals recorded so far, in order, one per principal (for a call needing one "
        "approval, its approval decision once made)."
    )
    args_schema: JSON | None = strawberry.field(
        description="JSON Schema of the tool's parameters as pydantic-ai publishes it, for an approval of a "
        "function tool (null for a call waiting for resume data, a supervisor's delegated call, or a tool "
        "that cannot be listed before its agent runs). Informative: the server still validates "
        "`editedArgs` with the tool's own validator (`InvalidToolArguments`)."
    )

    @classmethod
    def from_document(
        cls, doc: ToolCallDocument, tools: Mapping[str, dict[str, Any]] | None = None
    ) -> SuspendedToolCall:
        """The call of ``doc``; ``tools`` (tool name -> parameters schema) are its agent's."""
        decision = doc["decision"]
        schema = None
        if tools is not None and doc["requiresApproval"] and not doc.get("delegated"):
            schema = tools.get(doc["toolName"])
        return from_fields(
            cls,
            {
                "tool_call_id": doc["toolCallId"],
                "model_tool_call_id": doc.get("modelToolCallId") or doc["toolCallId"],
                "tool_name": doc["toolName"],
                "args": doc["args"],
                "requires_approval": doc["requiresApproval"],
                "suspend_payload": doc["suspendPayload"],
                "resume_schema": doc["resumeSchema"],
                "decision": None if decision is None else ToolCallDecision.from_document(decision),
                "question_id": doc.get("questionId") or doc["toolCallId"],
                "approval_metadata": doc.get("approvalMetadata"),
                "expires_at": doc.get("expiresAt"),
                "approvals_required": doc.get("approvalsRequired", 1),
                "required_scopes": doc.get("requiredScopes") or [],
                "approvals": _approvals(doc),
                "args_schema": schema,
            },
        )


@strawberry.type(description="Why continuing a run last failed; the run stays stored and can be retried.")
class RunError:
    type: str = strawberry.field(description="Exception type name.")
    message: str
    at: datetime = strawberry.field(description="UTC.")


@strawberry.type(description="One entry of a run's audit trail.")
class RunEvent:
    id: strawberry.ID = strawberry.field(
        description="Time-ordered; pass it as `afterEventId` to resume a subscription after this event."
    )
    type: str = strawberry.field(
        description="started, suspended, decision, approval, resumed, completed, failed, takeover, expired, "
        "reminded or escalated."
    )
    at: datetime = strawberry.field(description="UTC.")
    by: str | None = strawberry.field(description="The principal or instance that caused it.")
    data: JSON
    run_id: strawberry.ID = strawberry.field(description="The run the event belongs to.")
    thread_id: str | None = strawberry.field(default=None, description="The run's memory thread.")
    resource_id: str | None = strawberry.field(default=None, description="The run's resource.")

    @classmethod
    def from_document(cls, doc: EventDocument) -> RunEvent:
        return cls(
            id=strawberry.ID(doc["_id"]),
            type=doc["type"],
            at=doc["at"],
            by=doc["by"],
            data=cast(JSON, doc["data"]),
            run_id=strawberry.ID(doc["runId"]),
            thread_id=doc.get("threadId"),
            resource_id=doc.get("resourceId"),
        )


@strawberry.federation.type(keys=["runId"], description="A suspended run: an agent run waiting for a person.")
class SuspendedRun(relay.Node):
    run_id: strawberry.ID
    agent_id: strawberry.ID
    status: RunStatus
    thread_id: str | None
    resource_id: str | None
    parent_run_id: strawberry.ID | None = strawberry.field(description="Set on a sub-agent's inner run.")
    created_at: datetime = strawberry.field(description="UTC; the `fromDate`/`toDate` filters apply to it.")
    suspended_at: datetime = strawberry.field(description="UTC.")
    tool_calls: list[SuspendedToolCall]
    last_error: RunError | None = strawberry.field(description="Set when continuing the run failed.")
    # deadlines (issue 18 part 2)
    expires_at: datetime | None = strawberry.field(
        description="UTC; the earliest `expiresAt` of the calls still waiting (null without one); the "
        "`expiresBefore` filter applies to it."
    )

    @classmethod
    def resolve_id(cls, root: SuspendedRun, *, info: Info) -> str:
        return str(root.run_id)

    @classmethod
    def from_document(cls, doc: SnapshotDocument, schemas: ToolSchemas | None = None) -> SuspendedRun:
        """The run of ``doc``; ``schemas`` give its calls' ``argsSchema`` (absent: all null)."""
        error = doc["lastError"]
        tools = None if schemas is None else schemas.get(doc["agentId"])
        return from_fields(
            cls,
            {
                "run_id": doc["_id"],
                "agent_id": doc["agentId"],
                "status": _RUN_STATUSES[doc["status"]],
                "thread_id": doc["threadId"],
                "resource_id": doc["resourceId"],
                "parent_run_id": doc["parentRunId"],
                "created_at": doc["createdAt"],
                "suspended_at": doc["suspendedAt"],
                "tool_calls": [SuspendedToolCall.from_document(c, tools) for c in doc["toolCalls"]],
                "last_error": None
                if error is None
                else RunError(type=error["type"], message=error["message"], at=error["at"]),
                "expires_at": doc.get("expiresAt"),
            },
        )

    @strawberry.field(
        description="The run's audit trail, oldest first; needs `runs:read` (also in a decision's outcome).",
        permission_classes=[CanRead],
    )
    async def events(self, info: Info) -> list[RunEvent]:
        docs = await info.context.loaders.events_by_run.load((str(self.agent_id), str(self.run_id)))
        return [RunEvent.from_document(d) for d in docs]

    @strawberry.field(
        description="The conversation that led to the pending calls (prompts, the model's text and tool calls, "
        "the tools' results), from the stored history: at most `maxBytes` UTF-8 bytes of text (1 to 1048576), "
        "keeping its beginning and end and saying where it was cut. Read only when selected; needs `runs:read`. "
        "Null once the run is gone.",
        permission_classes=[CanRead],
    )
    async def conversation(self, info: Info, max_bytes: int = DEFAULT_MAX_BYTES) -> Conversation | None:
        return await run_conversation(
            info,
            agent_id=str(self.agent_id),
            run_id=str(self.run_id),
            resource_id=self.resource_id,
            max_bytes=max_bytes,
        )

    @classmethod
    async def resolve_nodes(  # type: ignore[override]
        cls, *, info: Info, node_ids: Iterable[str], required: bool = False
    ) -> list[SuspendedRun | None]:
        docs = [await info.context.loaders.run_by_id.load(node_id) for node_id in node_ids]
        schemas = info.context.agents.tool_schemas()
        return [None if doc is None else cls.from_document(doc, schemas) for doc in docs]

    @classmethod
    async def resolve_reference(cls, info: Info, **representation: Any) -> SuspendedRun | None:
        """Federation ``_entities``: batched through the request's run loader (one query); a run
        the principal may not see resolves to null (the loader is restricted to its resources)."""
        if not info.context.principal.has_scope("runs:read"):
            return None
        doc = await info.context.loaders.run_by_id.load(str(representation["runId"]))
        return None if doc is None else cls.from_document(doc, info.context.agents.tool_schemas())


@strawberry.type(
    description="Who is reviewing a pending question, for a bounded time: advice to other reviewers, not a lock "
    "(anyone may still decide, unless a rule requires the review claim). It ends with the decision, a "
    "`releaseReview`, or at `until`."
)
class ReviewClaim:
    by: str = strawberry.field(description="The reviewing principal (`key:<name>`, `jwt:<sub>`...).")
    since: datetime = strawberry.field(description="UTC; when it claimed the question.")
    until: datetime = strawberry.field(description="UTC; when the review claim lapses unless claimed again.")

    @strawberry.field(description="Whether the caller holds it.")
    def by_me(self, info: Info) -> bool:
        return info.context.principal.identity == self.by

    @classmethod
    def from_document(cls, doc: ReviewClaimDocument) -> ReviewClaim:
        return cls(by=doc["by"], since=doc["at"], until=doc["until"])


@strawberry.type(description="Relay page info.")
class PageInfo:
    has_next_page: bool
    has_previous_page: bool
    start_cursor: str | None
    end_cursor: str | None

    @classmethod
    def forward(cls, start: str | None, end: str | None, *, more: bool, after: str | None) -> PageInfo:
        """The page info of a forward-only page (``first``/``after``): its first and last
        cursors, whether more follow, and a previous page whenever ``after`` was given."""
        return cls(has_next_page=more, has_previous_page=after is not None, start_cursor=start, end_cursor=end)


@strawberry.type(description="A suspended run and its opaque cursor.")
class SuspendedRunEdge:
    cursor: str
    node: SuspendedRun


@strawberry.type(description="A page of suspended runs, newest first (`createdAt` desc, then `runId` desc).")
class SuspendedRunConnection:
    edges: list[SuspendedRunEdge]
    page_info: PageInfo
    count_runs: strawberry.Private[Callable[[], Awaitable[int]]]

    @strawberry.field(description="The runs of this page (same as `edges.node`).")
    def nodes(self) -> list[SuspendedRun]:
        return [edge.node for edge in self.edges]

    @strawberry.field(
        description="Number of matching runs before pagination (Mastra's `total`); counted only when selected."
    )
    async def total_count(self) -> int:
        return await self.count_runs()
