"""``decideToolCalls``: many approve / decline / resume decisions in one request (docs/api.md)."""

from __future__ import annotations

import strawberry

from runtime import BulkDecision, RunsgateError
from runtime import RunOutcome as DomainOutcome
from storage import DecisionKind as StoredKind

from ..access import CanDecide
from ..context import Info
from ..errors import QueryArgumentError
from ..inputs import DecideToolCallsInput, ToolCallDecisionInput
from ..metrics import DECISIONS, DecisionKind, decision_outcome
from ..types import DecisionKind as Kind
from ._results import DecisionResult, RunOutcome, decision_error

_KINDS: dict[Kind, tuple[StoredKind, DecisionKind]] = {
    Kind.APPROVED: ("approved", "approve"),
    Kind.DECLINED: ("declined", "decline"),
    Kind.RESUMED: ("resumed", "resume"),
}
_ONLY_WITH = {"reason": Kind.DECLINED, "editedArgs": Kind.APPROVED, "resumeData": Kind.RESUMED}


@strawberry.type(description="The answer to each decision of `decideToolCalls`, in the order they were given.")
class DecideToolCallsResult:
    results: list[DecisionResult]


def check(info: Info, input: DecideToolCallsInput) -> None:
    """The whole batch's input checks, before anything is read or written (every value was held
    to its limit in bytes before: ``resolvers.documents.limits.InputLimits``).

    Raises:
        QueryArgumentError: ``BAD_USER_INPUT``: no decision, or more than
            ``RUNSGATE_MAX_BULK_DECISIONS``, or an item giving a field its kind does not take
            (``reason`` is for DECLINED only...), or a RESUMED item without ``resumeData``.
    """
    limit = info.context.limits.max_bulk_decisions
    if not input.decisions:
        raise QueryArgumentError("`input.decisions` is empty: give at least one decision", argument="input.decisions")
    if len(input.decisions) > limit:
        raise QueryArgumentError(
            f"`input.decisions` has {len(input.decisions)} items; at most {limit} are accepted",
            argument="input.decisions",
        )
    for index, item in enumerate(input.decisions):
        at = f"input.decisions[{index}]"
        given = {"reason": item.reason, "editedArgs": item.edited_args, "resumeData": item.resume_data}
        for field, value in given.items():
            if value is not None and item.kind != _ONLY_WITH[field]:
                raise QueryArgumentError(
                    f"`{at}.{field}` is for {_ONLY_WITH[field].name} decisions only", argument=f"{at}.{field}"
                )
        if item.kind == Kind.RESUMED and item.resume_data is None:
            raise QueryArgumentError(
                f"`{at}.resumeData` is required for RESUMED decisions", argument=f"{at}.resumeData"
            )


def _decision(item: ToolCallDecisionInput) -> BulkDecision:
    return BulkDecision(
        run_id=str(item.run_id),
        tool_call_id=str(item.tool_call_id),
        kind=_KINDS[item.kind][0],
        reason=item.reason,
        edited_args=item.edited_args,
        resume_data=item.resume_data,
        question_id=None if item.question_id is None else str(item.question_id),
    )


@strawberry.mutation(
    description="Approve, decline or resume many tool calls of one agent at once. Each decision is checked and "
    "recorded on its own, exactly once (one item's error does not stop the others); a run whose calls the "
    "batch decides continues once. Answers in input order.",
    permission_classes=[CanDecide],
)
async def decide_tool_calls(info: Info, input: DecideToolCallsInput) -> DecideToolCallsResult:
    check(info, input)
    context = info.context
    answers: list[DomainOutcome | RunsgateError]
    try:
        answers = await context.runs.decide_many(
            str(input.agent_id),
            [_decision(item) for item in input.decisions],
            principal=context.principal,
            idempotency_key=input.idempotency_key,
            wait_for=input.wait_for.wait,
        )
    except RunsgateError as error:  # the batch's key was reused: every item answers it, nothing recorded
        answers = [error] * len(input.decisions)
    results: list[DecisionResult] = []
    for item, answer in zip(input.decisions, answers, strict=True):
        label = _KINDS[item.kind][1]
        if isinstance(answer, RunsgateError):
            DECISIONS.labels(label, decision_outcome(answer.code)).inc()
            results.append(decision_error(answer))
        else:
            DECISIONS.labels(label, "recorded").inc()
            results.append(RunOutcome.from_domain(answer, info.context.agents.tool_schemas()))
    return DecideToolCallsResult(results=results)
