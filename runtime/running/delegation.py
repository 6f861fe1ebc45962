"""``delegate()``: a supervisor's tool hands a request to a sub-agent (docs/writing-agents.md "Supervisors").

The sub-agent runs as its own run (``parentRunId``: the supervisor's), whose id is derived from
the supervisor's run and call (``sub_run_id``). When it suspends, the supervisor's call suspends
too, showing the sub-run's pending call; it is decided only through the supervisor's call, and
the decision is forwarded through the decision gate. Details: docs/writing-agents.md "Supervisors".
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.exceptions import CallDeferred

from storage import SnapshotDocument, ToolCallDocument

from .._json import canonical_json
from ..outcome import RunOutcome
from . import metadata as _metadata
from .deferred import question_id
from .identity import sub_run_id
from .scope import SubRuns, current_scope


class DelegationError(RuntimeError):
    """The sub-run failed or is out of reach; the supervisor's run fails and can be retried."""


async def delegate(ctx: RunContext[Any], agent_id: str, prompt: str) -> Any:
    """Run ``prompt`` on the sub-agent ``agent_id`` from a tool of a supervisor (``ctx``, the
    tool's run context); return the sub-run's final output (JSON-safe)::

        @supervisor.tool
        async def ask_refund_agent(ctx: RunContext[None], request: str) -> Any:
            return await delegate(ctx, "refund-agent", request)

    Raises:
        CallDeferred: The sub-run waits: the supervisor's call shows the sub-run's question, and
            the decision on it is forwarded to the sub-run, through the sub-agent's rules.
        DelegationError: The sub-run failed, vanished or is being continued elsewhere.
        AgentNotFoundError: ``agent_id`` is not registered.
        RuntimeError: No ``RunManager`` runs the calling agent.
    """
    scope = current_scope()
    runs = scope.runs
    if ctx.tool_call_id is None:
        raise RuntimeError("delegate() must be called from inside a tool")
    run_id = sub_run_id(scope.run_id, ctx.tool_call_id)
    answer = _metadata.section(ctx.tool_call_metadata)
    inner = await runs.get_run(agent_id, run_id)
    if inner is not None:
        outcome = await _answer(runs, inner, answer)
    elif (finished := await runs.finished_output(agent_id, run_id)) is not None:
        return finished[0]
    elif answer is not None and "decision" in answer:
        raise DelegationError(f"sub-run {run_id!r} of agent {agent_id!r} is gone and left no output")
    else:
        runs.check_agent(agent_id)
        outcome = await runs.start_sub_run(agent_id, prompt, parent=scope, run_id=run_id)
    return _settle(outcome)


async def _answer(runs: SubRuns, inner: SnapshotDocument, answer: dict[str, Any] | None) -> RunOutcome:
    """Forward the supervisor's decision to the sub-run call it was shown, or move the sub-run on."""
    agent_id, run_id = inner["agentId"], inner["_id"]
    calls = inner["toolCalls"]
    pending = [i for i, c in enumerate(calls) if c["decision"] is None]
    if answer is not None and "decision" in answer:
        asked = answer.get("questionId")
        target = next((i for i in pending if asked is not None and question_id(calls[i]) == asked), None)
        if target is None:  # a supervisor call stored before calls had question ids
            target = next((i for i in pending if _same_call(calls[i], answer.get("call"))), None)
        if target is not None:
            return await runs.forward(inner, target, answer)
    if pending:
        # The decision was for a call the sub-run already moved past: ask about the next one.
        return RunOutcome(run_id=run_id, agent_id=agent_id, status="suspended", run=inner)
    return await runs.continue_sub_run(agent_id, run_id, answer.get("decidedBy") if answer else None)


def _same_call(call: ToolCallDocument, shown: Any) -> bool:
    if not isinstance(shown, dict):
        return False
    return canonical_json([call["toolName"], call["args"], call["suspendPayload"]]) == canonical_json(
        [shown.get("toolName"), shown.get("args"), shown.get("suspendPayload")]
    )


def _settle(outcome: RunOutcome) -> Any:
    if outcome.status == "completed":
        return outcome.output
    if outcome.status == "suspended" and outcome.run is not None:
        pending = [c for c in outcome.run["toolCalls"] if c["decision"] is None]
        if pending:
            call = pending[0]
            raise CallDeferred(
                metadata=_metadata.wrap(
                    {
                        "delegated": {
                            "agentId": outcome.agent_id,
                            "runId": outcome.run_id,
                            "toolCallId": call["toolCallId"],
                            "questionId": question_id(call),
                        },
                        "toolName": call["toolName"],
                        "args": call["args"],
                        "requiresApproval": call["requiresApproval"],
                        "suspendPayload": call["suspendPayload"],
                        "resumeSchema": call["resumeSchema"],
                        "approvalMetadata": call.get("approvalMetadata"),
                    }
                ),
                kind="question",
            )
    if outcome.status == "failed":
        raise DelegationError(f"sub-run {outcome.run_id!r} of agent {outcome.agent_id!r} failed: {outcome.error}")
    raise DelegationError(
        f"sub-run {outcome.run_id!r} of agent {outcome.agent_id!r} is being continued elsewhere; retry later"
    )


__all__ = ["DelegationError", "delegate", "sub_run_id"]
