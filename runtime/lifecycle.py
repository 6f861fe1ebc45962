"""``RunManager``: start, decide, continue, fail and retry agent runs (docs/architecture.md "Run lifecycle").

A run that ends with pending deferred tool calls is stored as a snapshot; a decision is one
conditional update on one call; when every call is decided one instance claims the run and
continues it with pydantic-ai; a finished run's snapshot is deleted; a failed continuation
keeps every decision, records ``lastError`` and can be retried. Every step is appended to
the event log.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic_ai.models import Model

from storage import (
    EXPIRY_DECIDER,
    SCHEMA_VERSION,
    ApprovalDocument,
    DecisionDocument,
    DecisionKind,
    DuplicateRunError,
    EventDocument,
    IdempotencyDocument,
    SnapshotDocument,
    SnapshotStore,
    StoreUnavailableError,
    ToolCallDocument,
    earliest_deadline,
    to_bson_precision,
    utcnow,
)

from ._arguments import validate_edited_args
from ._continuation import Continuation
from ._decisions import DecisionRequest, select_call, validate_resume_data
from ._deferred import question_id, tool_call_documents
from ._execution import Finished, run_agent
from ._expiry import expired_calls, expiry_decision, set_deadlines
from ._fair_slots import FairSlots
from ._idempotency import IdempotencyGuard
from ._journal import Journal
from ._json import fingerprint, jsonable
from ._scope import RunScope
from .access import Principal, ToolApprovalRule, check_decision, check_start
from .errors import DuplicateApproverError, ForbiddenError, RunNotFoundError, RunNotReadyError, RunsgateError
from .outcome import RunOutcome
from .policy import apply_rules, approvals_required
from .registry import AgentRegistry

_DECISION_ATTEMPTS = 3
"""Conditional writes tried when the run changes between reading it and recording a decision."""

Caller = Principal | str | None
"""Who asks for a start or a decision (the ``principal`` argument of ``RunManager``'s methods).

A ``Principal`` (an API caller, authenticated by ``server/``) is held to its resources and to
the per-tool approval rules; its ``identity`` is recorded (``decidedBy``, the audit log) and
owns the idempotency keys it sends. A plain
name is recorded without checks: an internal caller, such as ``delegate()`` forwarding a
decision already made (and checked) on the supervisor's call, or the seed. ``None``: nobody.
"""


def _split(caller: Caller) -> tuple[str | None, Principal | None]:
    """The name to record, and the principal to check (``None``: an internal caller)."""
    if isinstance(caller, Principal):
        return caller.identity, caller
    return caller, None


def _owned(operation: str, owner: str | None) -> str:
    """``operation`` scoped to the identity ``owner``: an idempotency key belongs to one
    identity (JSON-quoted, so no identity and key can spell another's)."""
    return operation if owner is None else f"{operation}@{json.dumps(owner)}"


class RunManager:
    """The run lifecycle over a ``SnapshotStore`` (docs/architecture.md); safe to share by many instances.

    Args:
        store: Where suspended runs, events and idempotency keys live (opened by the caller).
        agents: The registered agents.
        instance_id: Id of this server instance, recorded in claims.
        claim_ttl: Seconds a claim lasts; renewed every ``claim_ttl / 3`` seconds while the
            run continues. After it expires another instance may take the run over (``retry``).
        model: When set, overrides every agent's model (config ``RUNSGATE_MODEL``, e.g.
            ``"openai:gpt-4o-mini"``).
        clock: Returns aware UTC now; stored datetimes are truncated to milliseconds.
        in_flight_wait: Seconds a request waits for a first request with the same
            idempotency key that is still running. Its reservation of the key is a lease of
            ``claim_ttl`` seconds, renewed while it runs: once a dead request's lease lapsed, a
            retry takes the key over (``runtime._idempotency``).
        tool_rules: Extra scopes a ``Principal`` needs to approve or resume calls of given
            tools, the deadlines of their approvals, automatic approvals and approvals by
            several principals (config ``RUNSGATE_TOOL_RULES``; ``runtime.access.ToolApprovalRule``,
            ``runtime.policy``).
        bulk_concurrency: Runs ``decide_many`` decides (and so continues) at once, over every
            batch of this manager (config ``RUNSGATE_BULK_CONCURRENCY``).
    """

    def __init__(
        self,
        store: SnapshotStore,
        agents: AgentRegistry,
        *,
        instance_id: str,
        claim_ttl: float = 60.0,
        model: Model | str | None = None,
        clock: Callable[[], datetime] = utcnow,
        in_flight_wait: float = 2.0,
        tool_rules: Iterable[ToolApprovalRule] = (),
        bulk_concurrency: int = 8,
    ) -> None:
        self._store = store
        self._bulk_slots = FairSlots(bulk_concurrency)  # shared fairly among the principals deciding
        self._tool_rules = tuple(tool_rules)
        self._agents = agents
        self._instance_id = instance_id
        self._claim_ttl = claim_ttl
        self._model = model
        self._clock = clock
        self._idempotency = IdempotencyGuard(
            store, self._now, in_flight_wait=in_flight_wait, owner=instance_id, lease=claim_ttl
        )
        self._journal = Journal(store, self._now)
        self._continuation = Continuation(
            store=store,
            agents=agents,
            journal=self._journal,
            instance_id=instance_id,
            claim_ttl=claim_ttl,
            model=model,
            now=self._now,
            scope_of=functools.partial(_scope_of, self),
            suspension_events=self._suspension_events,
            tool_rules=self._tool_rules,
        )

    @property
    def store(self) -> SnapshotStore:
        """The store runs are kept in."""
        return self._store

    @property
    def agents(self) -> AgentRegistry:
        """The registered agents."""
        return self._agents

    @property
    def instance_id(self) -> str:
        """This instance's id, as written in claims."""
        return self._instance_id

    @property
    def tool_rules(self) -> tuple[ToolApprovalRule, ...]:
        """The per-tool approval rules ``Principal`` callers are held to."""
        return self._tool_rules

    @property
    def claim_ttl(self) -> float:
        """Seconds a claim lasts."""
        return self._claim_ttl

    def now(self) -> datetime:
        """This manager's clock: aware UTC now at millisecond (BSON) precision."""
        return to_bson_precision(self._clock())

    def _now(self) -> datetime:
        return self.now()

    # -- start -----------------------------------------------------------------------------------
    async def start_run(
        self,
        agent_id: str,
        prompt: str,
        *,
        thread_id: str | None = None,
        resource_id: str | None = None,
        idempotency_key: str | None = None,
        principal: Caller = None,
        parent_run_id: str | None = None,
        run_id: str | None = None,
    ) -> RunOutcome:
        """Run an agent on ``prompt``; store the run if it suspends (docs/architecture.md "Start").

        Args:
            agent_id: The registered agent to run.
            prompt: The user prompt.
            thread_id: Memory thread the run belongs to (a listing filter).
            resource_id: Memory resource the run belongs to (a listing filter).
            idempotency_key: Repeating the call with this key returns the first outcome.
            principal: Who starts the run (``Caller``; its name goes to the audit log). A
                ``Principal`` limited to some resources starts runs of those resources only.
            parent_run_id: The supervisor run this sub-run serves (``delegate()``).
            run_id: The run's id; a fresh uuid4 hex by default. Must be unused.

        Returns:
            ``completed`` with the output (nothing stored), ``suspended`` with the stored run,
            or ``failed`` with the error (nothing stored): the agent failed, or the store
            refused the suspended run (e.g. a snapshot over MongoDB's 16 MB document limit);
            either way the event log gets a ``failed`` event after ``started``.

        Raises:
            ForbiddenError: ``resource_id`` is missing or not one of the ``Principal``'s
                resources (checked first; nothing is written).
            AgentNotFoundError: No agent ``agent_id``.
            IdempotencyKeyReusedError: ``idempotency_key`` was used for another request.
            StoreUnavailableError: The store could not be reached or written, here or inside
                the run (a sub-run's start): nothing of the run is stored; repeat the start.
            DuplicateRunError: ``run_id`` is already stored.
        """
        principal, caller = _split(principal)
        if caller is not None:
            check_start(caller, resource_id)
        arguments = {
            "prompt": prompt,
            "threadId": thread_id,
            "resourceId": resource_id,
            "parentRunId": parent_run_id,
            "runId": run_id,
            "principal": principal,
        }
        scope_args = {"thread_id": thread_id, "resource_id": resource_id, "principal": principal}
        action = functools.partial(self._start, agent_id, prompt, run_id, parent_run_id, scope_args)
        return await self._idempotency.run(
            agent_id=agent_id,
            operation=_owned("startRun", principal),
            key=idempotency_key,
            arguments=arguments,
            action=action,
        )

    async def _start(
        self,
        agent_id: str,
        prompt: str,
        run_id: str | None,
        parent_run_id: str | None,
        scope_args: dict[str, Any],
    ) -> RunOutcome:
        agent = self._agents.get_agent(agent_id)
        scope = RunScope(manager=self, agent_id=agent_id, run_id=run_id or uuid.uuid4().hex, **scope_args)
        started = self._now()
        await self._journal.event(
            scope,
            "started",
            by=scope.principal,
            at=started,
            data={"prompt": prompt, "parentRunId": parent_run_id, "instanceId": self._instance_id},
        )
        try:
            ran = await run_agent(agent, scope, model=self._model, prompt=prompt)
        except StoreUnavailableError:
            # The store failed inside the run (a supervisor's delegate() could not store its
            # sub-run): nothing of this run is stored, so FAILED would leave nothing to retry.
            # The client gets STORE_UNAVAILABLE and repeats the start.
            raise
        except Exception as exc:
            return await self._journal.failed(scope, exc, run=None)
        if isinstance(ran, Finished):
            return await self._journal.completed(scope, ran.output)
        calls = tool_call_documents(ran.requests, ran.messages)
        set_deadlines(calls, self._tool_rules, agent_id=agent_id, parent_run_id=parent_run_id, suspended_at=started)
        suspension, decisions = self._suspension_events(scope, calls)
        pending = sum(1 for call in calls if call["decision"] is None)
        doc: SnapshotDocument = {
            "_id": scope.run_id,
            "agentId": agent_id,
            "threadId": scope.thread_id,
            "resourceId": scope.resource_id,
            "parentRunId": parent_run_id,
            "status": "suspended",
            "createdAt": started,
            "suspendedAt": started,
            "updatedAt": started,
            "toolCalls": calls,
            "pendingCount": pending,
            "version": 1,
            "claim": None,
            "lastError": None,
            "schemaVersion": SCHEMA_VERSION,
            "historyId": uuid.uuid4().hex,
        }
        deadline = earliest_deadline(calls)
        if deadline is not None:
            doc["expiresAt"] = deadline
        try:
            await self._store.insert(doc, ran.history, event=[*([suspension] if suspension else []), *decisions])
        except (StoreUnavailableError, DuplicateRunError):
            raise
        except Exception as exc:  # the store refused the run (e.g. over its document size): it failed
            return await self._journal.failed(scope, exc, run=None)
        if suspension is None:  # every call was approved by a policy: continue at once
            return await self._continuation.run(doc, scope.principal)
        return await self._journal.suspended(scope, doc, event=suspension)

    def _suspension_events(
        self, scope: RunScope, calls: list[ToolCallDocument]
    ) -> tuple[EventDocument | None, list[EventDocument]]:
        """Apply the approval policies to the calls of a run that is suspending
        (``runtime.policy.apply_rules``, in place), then build the events to write with the
        snapshot: its ``suspended`` event (``None`` when no call is left waiting: the run is
        continued at once) and one ``decision`` event per call a policy approved, ``by``
        ``policy:<rule name>``."""
        now = self._now()
        made = apply_rules(calls, [r for r in self._tool_rules if r.covers_agent(scope.agent_id)], now)
        pending = any(call["decision"] is None for call in calls)
        suspension = self._journal.suspended_event(scope, calls) if pending else None
        if suspension is not None:  # one moment: the decisions are listed after it by their later ids
            suspension["at"] = now
        decisions = [
            self._journal.new_event(
                scope,
                "decision",
                by=made_one.decided_by,
                at=now,
                data={**_decision_data(calls[made_one.index], "approved", None), "rule": made_one.rule.name},
            )
            for made_one in made
        ]
        return suspension, decisions

    # -- decide ----------------------------------------------------------------------------------
    async def approve(
        self,
        agent_id: str,
        run_id: str,
        tool_call_id: str,
        *,
        principal: Caller = None,
        idempotency_key: str | None = None,
        through_supervisor: bool = False,
        edited_args: Any = None,
    ) -> RunOutcome:
        """Approve a call waiting for approval; the tool runs when the run continues.

        Args:
            edited_args: Arguments (a JSON object) the tool runs with instead of the model's;
                ``None`` keeps the model's. Checked before anything is recorded by the tool's own
                argument validator (``runtime._arguments``); the per-tool rules are evaluated on
                them. The stored history's tool call is given them, so the model sees what ran,
                and every later re-run of the call uses them.
            principal: Who decides (``Caller``); its name is recorded as ``decidedBy``. A
                ``Principal`` is checked on the run as read for the decision
                (``runtime.access.check_decision``): a run outside its resources is
                ``RunNotFoundError`` (before the idempotency key is looked at, so nothing is
                written and nothing leaks), a call whose tool has a rule it does not satisfy
                is ``ForbiddenError``.
            through_supervisor: Only for ``delegate()``, forwarding the decision made on the
                supervisor's call to the sub-run it waits on.

        Returns:
            ``suspended`` while other calls wait (or the run suspended again), else the
            continuation's ``completed`` / ``failed`` / ``resuming``.

        Raises:
            AgentNotFoundError, RunNotFoundError, ForbiddenError, ToolCallNotFoundError,
            WrongToolCallKindError (the call waits for resume data),
            ToolCallAlreadyDecidedError (with the winning decision), IdempotencyKeyReusedError.
            DecideThroughSupervisorError: The run is a sub-agent's inner run (``parentRunId``
                set): it is decided through its supervisor's run only.
            InvalidToolArgumentsError: ``edited_args`` fail the tool's validator (one problem per
                error, with its path); nothing is recorded.
            ForbiddenError: Also when a rule with ``allow_edits=False`` forbids the edit.
        """
        name, caller = _split(principal)
        request = DecisionRequest(
            kind="approved",
            tool_call_id=tool_call_id,
            edited_args=None if edited_args is None else jsonable(edited_args),
            principal=name,
            idempotency_key=idempotency_key,
            through_supervisor=through_supervisor,
        )
        return await self._decide_once(agent_id, run_id, "approveToolCall", request, caller)

    async def decline(
        self,
        agent_id: str,
        run_id: str,
        tool_call_id: str,
        *,
        reason: str | None = None,
        principal: Caller = None,
        idempotency_key: str | None = None,
        through_supervisor: bool = False,
    ) -> RunOutcome:
        """Decline a call waiting for approval; the tool never runs, the model reads ``reason``.

        A decline is final for that call: it is never run, even if it had answered questions.
        Returns and raises as ``approve`` (a ``Principal`` needs no per-tool scope to decline).
        """
        name, caller = _split(principal)
        request = DecisionRequest(
            kind="declined",
            tool_call_id=tool_call_id,
            reason=reason,
            principal=name,
            idempotency_key=idempotency_key,
            through_supervisor=through_supervisor,
        )
        return await self._decide_once(agent_id, run_id, "declineToolCall", request, caller)

    async def resume(
        self,
        agent_id: str,
        run_id: str,
        tool_call_id: str | None,
        resume_data: Any,
        *,
        principal: Caller = None,
        idempotency_key: str | None = None,
        question_id: str | None = None,
        through_supervisor: bool = False,
    ) -> RunOutcome:
        """Answer the question a call that ``suspend()``-ed waits on with ``resume_data``
        (Mastra's ``resumeStream()``). A resume never approves: a call that then needs an
        approval suspends the run again, waiting for ``approve``.

        Args:
            tool_call_id: The call; ``None`` for the only call waiting for resume data (or the
                call whose question ``question_id`` names).
            resume_data: JSON data, validated against the ``resumeSchema`` of the question it
                answers, if it has one.
            question_id: The question answered (the call's ``questionId`` as listed); ``None``
                for the one the call waits on now. Naming it makes a late or duplicate answer
                fail instead of answering the next question.
            through_supervisor: As ``approve``.
            principal: As ``approve``; the per-tool rules apply to resuming as to approving
                (without ``tool_call_id``, to every call waiting for resume data).

        Returns:
            As ``approve``.

        Raises:
            AmbiguousToolCallError: ``tool_call_id`` is ``None`` and several calls wait.
            InvalidResumeDataError: The data fails the schema (one problem per error, with
                its path); nothing is recorded.
            QuestionNotPendingError: ``question_id`` is not the question the call waits on.
            WrongToolCallKindError: The call waits for an approval.
            And the errors of ``approve``.
        """
        name, caller = _split(principal)
        request = DecisionRequest(
            kind="resumed",
            tool_call_id=tool_call_id,
            question_id=question_id,
            resume_data=jsonable(resume_data),
            principal=name,
            idempotency_key=idempotency_key,
            through_supervisor=through_supervisor,
        )
        return await self._decide_once(agent_id, run_id, "resumeRun", request, caller)

    async def _decide_once(
        self, agent_id: str, run_id: str, operation: str, request: DecisionRequest, caller: Principal | None
    ) -> RunOutcome:
        # The one read the decision starts from, made before the idempotency key is looked at:
        # a run the caller may not decide on is refused here, having written nothing, and the
        # key's record (another principal's, or a replay) is never consulted for it.
        doc = await self._store.get(agent_id, run_id)
        validated = None
        if doc is not None:
            validated = self._check(caller, doc, request)
        elif caller is not None and caller.resources is not None and request.idempotency_key is not None:
            # A replay of a finished run: re-checked against what the caller may see now (its
            # events are stored by resource), so a replay never shows a run now hidden.
            events = await self._store.list_events_of_runs(agent_id, [run_id], resource_ids=caller.resources)
            if not events:
                raise RunNotFoundError(agent_id, run_id)
        arguments = {
            "runId": run_id,
            "toolCallId": request.tool_call_id,
            **({"questionId": request.question_id} if request.question_id is not None else {}),
            "reason": request.reason,
            "resumeData": request.resume_data,
            **({"editedArgs": request.edited_args} if request.edited_args is not None else {}),
            "principal": request.principal,
        }
        return await self._idempotency.run(
            agent_id=agent_id,
            operation=_owned(operation, request.principal),
            key=request.idempotency_key,
            arguments=arguments,
            action=functools.partial(self._decide, agent_id, run_id, request, caller, doc, validated),
        )

    def _check(self, caller: Principal | None, doc: SnapshotDocument, request: DecisionRequest) -> Any:
        """Check ``request`` on ``doc`` for ``caller`` (``runtime.access.check_decision``), with its
        edited arguments checked by the tool's validator first; returns them as the validator
        reads them (``_validated_edit``), ``None`` without an edit."""
        edited = request.edited_args
        if edited is not None:
            if caller is not None:  # a hidden run is reported missing before its tool's arguments are read
                check_decision(caller, self._tool_rules, doc, request.tool_call_id, approving=False)
            edited = self._validated_edit(doc, request)
        if caller is not None:
            approving = request.kind != "declined"
            check_decision(caller, self._tool_rules, doc, request.tool_call_id, approving=approving, edited_args=edited)
        return edited

    def _validated_edit(self, doc: SnapshotDocument, request: DecisionRequest) -> Any:
        """``request.edited_args`` as the tool's validator reads them (what the tool will run with,
        as JSON), which the per-tool rules are evaluated on; as sent when the call is not found
        (``select_call`` then reports it).

        Raises:
            InvalidToolArgumentsError: They fail the validator.
        """
        call = next((c for c in doc["toolCalls"] if c["toolCallId"] == request.tool_call_id), None)
        if call is None or not call["requiresApproval"]:
            return request.edited_args
        agent = self._agents.get_agent(doc["agentId"])
        return jsonable(validate_edited_args(agent, call["toolName"], request.edited_args))

    async def _decide(
        self,
        agent_id: str,
        run_id: str,
        request: DecisionRequest,
        caller: Principal | None,
        read: SnapshotDocument | None,
        validated: Any,
    ) -> RunOutcome:
        self._agents.get_agent(agent_id)
        for attempt in range(_DECISION_ATTEMPTS):
            # The first attempt decides on the document already read and checked; after a
            # conflicting write the run is read again and checked again.
            doc = read if attempt == 0 else await self._store.get(agent_id, run_id)
            if doc is None:
                raise RunNotFoundError(agent_id, run_id)
            if attempt > 0:
                validated = self._check(caller, doc, request)
            index, call = select_call(doc, request)
            if request.kind == "resumed":
                validate_resume_data(call["resumeSchema"], request.resume_data)
            now = self._now()
            decision: DecisionDocument = {
                "kind": request.kind,
                "decidedAt": now,
                "decidedBy": request.principal,
                "reason": request.reason,
                "resumeData": request.resume_data,
                "idempotencyKey": request.idempotency_key,
            }
            scope = _scope_of(self, doc, request.principal)
            required = call.get("approvalsRequired", 1)
            edit: dict[str, Any] = {}
            if request.edited_args is not None:
                if required > 1:
                    raise ForbiddenError(
                        f"{call['toolName']!r} needs {required} approvals of the same arguments: "
                        "approve it without editedArgs, or decline it"
                    )
                rules = [rule for rule in self._tool_rules if rule.covers_agent(agent_id)]
                if approvals_required(rules, call["toolName"], validated) > required:
                    raise ForbiddenError(
                        f"{call['toolName']!r} with these editedArgs needs several approvals: approve the "
                        "model's arguments, or decline it and let the agent ask again"
                    )
                decision["editedArgs"] = request.edited_args
                edit = {"originalArgs": call["args"], "editedArgs": request.edited_args}
            if request.kind == "approved" and required > 1 and not request.through_supervisor:
                updated = await self._record_approval(scope, doc, index, request, decision)
            else:
                event = self._journal.new_event(  # written with the decision, one unit of work
                    scope,
                    "decision",
                    by=request.principal or "anonymous",
                    at=now,
                    data={**_decision_data(call, request.kind, request.reason), **edit},
                )
                updated = await self._store.record_decision(
                    agent_id,
                    run_id,
                    index=index,
                    tool_call_id=call["toolCallId"],
                    question_id=call.get("questionId"),
                    decision=decision,
                    now=now,
                    event=event,
                )
            if updated is not None:
                break
        else:
            raise RunNotReadyError(run_id, f"Run {run_id!r} kept changing while recording the decision; try again.")
        if updated["pendingCount"] > 0:
            return RunOutcome(run_id=run_id, agent_id=agent_id, status="suspended", run=updated)
        return await self._continuation.run(updated, request.principal)

    async def _record_approval(
        self,
        scope: RunScope,
        doc: SnapshotDocument,
        index: int,
        request: DecisionRequest,
        decision: DecisionDocument,
    ) -> SnapshotDocument | None:
        """Record one approval of a call that needs several (two-person approval): with its
        ``approval`` event, and, when it is the last one needed, with the decision and its event
        too (one unit of work). ``None`` when the run changed since ``doc`` was read.

        Raises:
            DuplicateApproverError: ``request.principal`` approved this call already.
        """
        call = doc["toolCalls"][index]
        required = call.get("approvalsRequired", 1)
        approvals = call.get("approvals") or []
        if any(approval["decidedBy"] == request.principal for approval in approvals):
            raise DuplicateApproverError(doc["_id"], call["toolCallId"], request.principal, required)
        approval: ApprovalDocument = {"decidedBy": request.principal, "decidedAt": decision["decidedAt"]}
        last = len(approvals) + 1 >= required
        approval_event = self._journal.new_event(
            scope,
            "approval",
            by=request.principal or "anonymous",
            at=decision["decidedAt"],
            data={
                **_decision_data(call, "approved", None),
                "approvals": len(approvals) + 1,
                "approvalsRequired": required,
            },
        )
        events = [approval_event]
        if last:
            events.append(
                self._journal.new_event(
                    scope,
                    "decision",
                    by=request.principal or "anonymous",
                    at=decision["decidedAt"],
                    data=_decision_data(call, "approved", None),
                )
            )
        return await self._store.record_approval(
            doc["agentId"],
            doc["_id"],
            index=index,
            tool_call_id=call["toolCallId"],
            question_id=call.get("questionId"),
            approval=approval,
            approvals_before=len(approvals),
            decision=decision if last else None,
            now=decision["decidedAt"],
            event=events,
        )

    # -- decide in bulk --------------------------------------------------------------------------
    async def decide_many(
        self,
        agent_id: str,
        decisions: Sequence[BulkDecision],
        *,
        principal: Caller = None,
        idempotency_key: str | None = None,
    ) -> list[RunOutcome | RunsgateError]:
        """Record many decisions on calls of ``agent_id``'s runs (``decideToolCalls``).

        Each decision is the one ``approve``, ``decline`` or ``resume`` would record, with the same
        checks (a ``Principal`` is held to its resources and the per-tool rules, per item), and is
        independent: one item's error does not stop the others. Items on one run are recorded in
        their order, one after the other, so the item that decides a run's last pending call
        continues it, once (the others answer ``suspended``); runs are decided concurrently, at most
        ``bulk_concurrency`` at a time on this instance (every batch shares that bound, a freed slot
        going to the principal deciding that holds the fewest: ``runtime._fair_slots``), so a batch
        never starts more continuations (model calls) at once, nor keeps another principal's waiting.

        Args:
            decisions: At most the server's limit (``RUNSGATE_MAX_BULK_DECISIONS``, checked by
                the caller).
            idempotency_key: Repeating the batch with this key (and the same decisions) returns
                the first answers, errors included, also after a restart with a persistent store.
                Each item is recorded under a key derived from it (``<key>/<index>``), so a batch
                repeated after it was interrupted records each decision still exactly once.

        Returns:
            One answer per decision, in their order: the ``RunOutcome`` of ``approve`` (or
            ``decline``, ``resume``), or the domain error that item got (nothing recorded for it).

            When every item was refused, nothing was recorded and the key is released (a repeat
            decides again), as for a single decision.

        Raises:
            AgentNotFoundError: No agent ``agent_id`` (nothing is read or written).
            IdempotencyKeyReusedError: ``idempotency_key`` was used for another batch, or its
                first request still runs.
        """
        self._agents.get_agent(agent_id)  # an unknown agent: refused before the key is reserved
        name, caller = _split(principal)
        arguments = {"decisions": [dataclasses.asdict(item) for item in decisions], "principal": name}
        try:
            return await self._idempotency.once(
                agent_id=agent_id,
                operation=_owned("decideToolCalls", name),
                key=idempotency_key,
                arguments=arguments,
                action=functools.partial(self._decide_all, agent_id, decisions, name, caller, idempotency_key),
                encode=_encode_answers,
                decode=_decode_answers,
            )
        except _NothingRecorded as refused:  # the key was released: a refused request writes nothing
            return refused.answers

    async def _decide_all(
        self,
        agent_id: str,
        decisions: Sequence[BulkDecision],
        name: str | None,
        caller: Principal | None,
        key: str | None,
    ) -> list[RunOutcome | RunsgateError]:
        answers: list[RunOutcome | RunsgateError | None] = [None] * len(decisions)
        by_run: dict[str, list[int]] = {}
        for index, item in enumerate(decisions):
            by_run.setdefault(item.run_id, []).append(index)

        async def decide_run(indexes: list[int]) -> None:
            async with self._bulk_slots.slot(name):
                for index in indexes:
                    item = decisions[index]
                    request = DecisionRequest(
                        kind=item.kind,
                        tool_call_id=item.tool_call_id,
                        reason=item.reason if item.kind == "declined" else None,
                        resume_data=jsonable(item.resume_data) if item.kind == "resumed" else None,
                        edited_args=jsonable(item.edited_args) if item.kind == "approved" else None,
                        principal=name,
                        idempotency_key=None if key is None else f"{key}/{index}",
                    )
                    try:
                        answers[index] = await self._decide_once(
                            agent_id, item.run_id, "decideToolCalls.item", request, caller
                        )
                    except RunsgateError as error:
                        answers[index] = error

        try:
            async with asyncio.TaskGroup() as group:
                for indexes in by_run.values():
                    group.create_task(decide_run(indexes))
        except BaseExceptionGroup as failed:  # an unexpected error (a store outage): the batch fails with it
            raise failed.exceptions[0] from None
        done = [answer for answer in answers if answer is not None]
        if all(isinstance(answer, RunsgateError) for answer in done):
            raise _NothingRecorded(done)
        return done

    # -- continue --------------------------------------------------------------------------------
    async def retry(self, agent_id: str, run_id: str, *, principal: Caller = None) -> RunOutcome:
        """Continue a run whose every call is decided, after a failure or a crash.

        Also takes over a run whose claim expired (the instance continuing it died). A
        ``Principal`` (``Caller``) retries only runs of its resources: any other run is
        ``RunNotFoundError``, as a missing one.

        Returns:
            ``completed``, ``suspended`` (suspended again), ``failed`` or ``resuming``.

        Raises:
            AgentNotFoundError, RunNotFoundError.
            RunNotReadyError: Calls still wait for decisions, or another instance holds an
                unexpired claim on the run.
        """
        principal, caller = _split(principal)
        self._agents.get_agent(agent_id)
        doc = await self._store.get(agent_id, run_id)
        if doc is None:
            raise RunNotFoundError(agent_id, run_id)
        if caller is not None:
            check_decision(caller, self._tool_rules, doc, None, approving=False)
        if doc["pendingCount"] > 0:
            raise RunNotReadyError(
                run_id, f"Run {run_id!r} still has {doc['pendingCount']} tool call(s) waiting for a decision."
            )
        claim = doc["claim"]
        if doc["status"] == "resuming" and claim is not None and claim["until"] >= self._now():
            raise RunNotReadyError(
                run_id,
                f"Run {run_id!r} is being continued by another instance (claim until {claim['until']}).",
            )
        return await self._continuation.run(doc, principal)

    async def take_over(self, doc: SnapshotDocument) -> RunOutcome:
        """Continue a stalled run found by ``StalledRunSweeper`` (``SnapshotStore.list_stalled_runs``).

        Logs a ``takeover`` event by this instance, then continues as ``retry`` does. The claim's
        compare-and-set makes only one instance win; the others get ``resuming``.

        Raises:
            AgentNotFoundError: The run's agent is not registered on this instance.
        """
        return await self._continuation.run(doc, None, takeover=True)

    async def expire(self, doc: SnapshotDocument) -> RunOutcome | None:
        """Apply the fallback of every call of ``doc`` whose deadline passed (found by
        ``StalledRunSweeper`` through ``SnapshotStore.list_expired_runs``).

        Each is recorded as a human decision is, by the store's conditional write on the call's
        question (``record_decision``): ``decidedBy`` ``expiry``, the call's ``onExpiry``
        (declined with a reason telling the model the request expired, or approved), an
        ``expired`` event before the ``decision`` event, in one unit of work. A call decided
        meanwhile (by a person, or another instance's sweeper) is left as it is: the first
        recorded decision wins. When no call is left waiting, the run continues as after a
        person's last decision.

        Returns:
            ``None`` when nothing was recorded, else ``suspended`` while other calls wait, or
            the continuation's outcome.

        Raises:
            AgentNotFoundError: The run's agent is not registered on this instance.
        """
        agent_id, run_id = doc["agentId"], doc["_id"]
        self._agents.get_agent(agent_id)
        now = self._now()
        scope = _scope_of(self, doc, EXPIRY_DECIDER)
        updated: SnapshotDocument | None = None
        for index, call in expired_calls(doc, now):
            decision = expiry_decision(call, now)
            details = {"toolCallId": call["toolCallId"], "questionId": question_id(call), "toolName": call["toolName"]}
            expired = self._journal.new_event(
                scope,
                "expired",
                by=EXPIRY_DECIDER,
                at=now,
                data={
                    **details,
                    "expiresAt": call["expiresAt"].isoformat(),
                    "onExpiry": call.get("onExpiry", "decline"),
                },
            )
            recorded = self._journal.new_event(
                scope,
                "decision",
                by=EXPIRY_DECIDER,
                at=now,
                data={
                    **details,
                    "kind": decision["kind"],
                    "reason": decision["reason"],
                    "argsFingerprint": fingerprint(call["args"]),
                },
            )
            written = await self._store.record_decision(
                agent_id,
                run_id,
                index=index,
                tool_call_id=call["toolCallId"],
                question_id=call.get("questionId"),
                decision=decision,
                now=now,
                event=recorded,
                preceding_events=[expired],
            )
            if written is not None:
                updated = written
        if updated is None:
            return None
        if updated["pendingCount"] > 0:
            return RunOutcome(run_id=run_id, agent_id=agent_id, status="suspended", run=updated)
        return await self._continuation.run(updated, EXPIRY_DECIDER)


def _decision_data(call: ToolCallDocument, kind: str, reason: str | None) -> dict[str, Any]:
    """The ``data`` of a ``decision`` (or ``approval``) event on ``call``."""
    return {
        "toolCallId": call["toolCallId"],
        "questionId": question_id(call),
        "toolName": call["toolName"],
        "kind": kind,
        "reason": reason,
        "argsFingerprint": fingerprint(call["args"]),
    }


class _NothingRecorded(Exception):
    """Every item of a batch was refused: nothing was recorded, so its idempotency key is released
    (as a single decision's is) and the answers are returned as they are."""

    def __init__(self, answers: list[RunOutcome | RunsgateError]) -> None:
        super().__init__("every decision of the batch was refused")
        self.answers = answers


@dataclass(frozen=True, kw_only=True)
class BulkDecision:
    """One item of ``RunManager.decide_many``: approve, decline or resume one call.

    Attributes:
        kind: ``approved``, ``declined`` or ``resumed``.
        reason: Passed to the model (``declined`` only; ignored otherwise).
        edited_args: Arguments the tool runs with instead of the model's (``approved`` only).
        resume_data: The answer (``resumed`` only).
    """

    run_id: str
    tool_call_id: str
    kind: DecisionKind
    reason: str | None = None
    edited_args: Any = None
    resume_data: Any = None


def _encode_answers(answers: list[RunOutcome | RunsgateError]) -> dict[str, Any]:
    return {
        "answers": [
            {"error": a.to_json()} if isinstance(a, RunsgateError) else {"outcome": a.to_json()} for a in answers
        ]
    }


def _decode_answers(stored: IdempotencyDocument) -> list[RunOutcome | RunsgateError]:
    result = stored["result"]
    assert result is not None
    return [
        RunsgateError.from_json(a["error"]) if "error" in a else RunOutcome.from_json(a["outcome"])
        for a in result["answers"]
    ]


def _scope_of(manager: RunManager, doc: SnapshotDocument, principal: str | None) -> RunScope:
    return RunScope(
        manager=manager,
        agent_id=doc["agentId"],
        run_id=doc["_id"],
        thread_id=doc["threadId"],
        resource_id=doc["resourceId"],
        principal=principal,
    )


__all__ = ["BulkDecision", "Caller", "RunManager"]
