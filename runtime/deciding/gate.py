"""The decision gate: every decision on a tool call passes it (docs/architecture.md "The decision gate").

A person's decision (single, or an item of ``decideToolCalls``), a policy's automatic approval,
an expiry's fallback and a supervisor's decision forwarded to its sub-run all go through
``DecisionGate``. It finds the question the decision names (``questions``), applies every rule of
the agent that owns the tool (``rules``: scope, edits, approvals, amounts, deadlines), and records
the decision with its events through the store's one conditional write. It is the only place a
``decision``, ``approval`` or ``expired`` event is recorded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from storage import (
    EXPIRY_DECIDER,
    DecisionClaim,
    DecisionDocument,
    DecisionKind,
    EventDocument,
    SnapshotDocument,
    SnapshotStore,
    ToolCallDocument,
)
from storage.protocol import DecisionWrite
from storage.rules import call_expired

from .._json import jsonable
from ..access import Principal, ToolApprovalRule, check_decider
from ..errors import (
    ForbiddenError,
    RunNotReadyError,
    RunsgateError,
)
from ..events.journal import Journal, RunRef, stored_run
from ..idempotency import HeldKey
from ..registry import AgentRegistry
from ..reviewing.errors import ReviewAlreadyClaimedError, ReviewClaimRequiredError
from ..running.deferred import question_id
from ..running.identity import sub_run_id
from . import rules as R
from .approvals import record_approval
from .arguments import validate_edited_args
from .questions import (
    DecisionRequest,
    FirstQuestionAnswered,
    Questions,
    check_addressable,
    find_call,
    undecidable,
    validate_resume_data,
)
from .refusals import Decider, active_review_claim, refusal, repeated_approval

POLICY_PREFIX = "policy:"
"""``decidedBy`` of an automatic approval: ``policy:<rule name>``."""

_ATTEMPTS = 3
"""Conditional writes tried when the run changes between reading it and recording a decision."""


@dataclass(frozen=True, kw_only=True)
class Allowed:
    """What ``DecisionGate.allowed`` found on one read of the run."""

    index: int
    rules: tuple[ToolApprovalRule, ...]
    """The rules of the call's owner."""
    edited: Any
    """The edited arguments as the tool's validator reads them (``None``: not edited)."""
    required: R.Requirements
    """What the rules require of a decision with the arguments decided on (edited or not)."""
    scopes: list[str]
    """The scopes the rules require of this decision (held by the decider)."""
    verdict: Checked | RunsgateError | None = None
    """``check``'s answer on the same read, made with these checks (``None``: a call stored before
    calls had a ``questionNumber``, named without its question: ``check`` reads its trail first)."""


@dataclass(frozen=True, kw_only=True)
class Checked:
    """A request that passed the gate's checks on one read of the run."""

    index: int
    call: ToolCallDocument
    edited: Any
    """The edited arguments as the tool's validator reads them (``None``: not edited)."""
    scopes: list[str]
    """The scopes the rules require of this decision (checked held)."""
    claimant: str | None = None
    """The decider, when the decision takes the question's review claim as it is recorded: its
    write then needs no other principal's live claim (``rules.review_claim_open``)."""
    at: datetime
    """When the gate checked the run as read, by its clock: the decision's time (``decidedAt``)."""


ClaimOffer = Callable[[SnapshotDocument, int, DecisionDocument], DecisionClaim | None]
"""The claim a decision on call ``index`` of the run as read takes with it when it is the run's last
(``RunStore.record_decision``'s ``claim``), given the decision; ``None``: no claim."""


class DecisionGate:
    """Finds, checks and records decisions (module docstring).

    Args:
        store: Where runs and events live.
        agents: The registered agents (their tools' validators).
        rules: Every per-tool rule (``RUNSGATE_TOOL_RULES``).
        journal: Builds the events.
        now: Aware UTC now at millisecond precision.
    """

    def __init__(
        self,
        *,
        store: SnapshotStore,
        agents: AgentRegistry,
        rules: Sequence[ToolApprovalRule],
        journal: Journal,
        now: Callable[[], datetime],
    ) -> None:
        self._store = store
        self._questions = Questions(store)
        self._agents = agents
        self._rules = tuple(rules)
        self._journal = journal
        self._now = now

    @property
    def rules(self) -> tuple[ToolApprovalRule, ...]:
        """Every per-tool rule."""
        return self._rules

    # -- a run suspending ------------------------------------------------------------------------
    def suspending(
        self, run: RunRef, calls: list[ToolCallDocument], *, parent_run_id: str | None, suspended_at: datetime
    ) -> tuple[EventDocument | None, list[EventDocument]]:
        """Prepare the calls of a run that suspends (in place), from the rules of each call's owner:
        ``requiredScopes``, ``approvalsRequired``, deadlines (not on a sub-run's calls: the
        supervisor's call holds them), and the decisions of policies that approve a call.

        Returns:
            The run's ``suspended`` event (``None`` when no call is left waiting: it continues at
            once) and one ``decision`` event per call a policy approved, to be written with the
            snapshot in one unit of work.
        """
        approved: list[tuple[ToolCallDocument, str | None]] = []
        for call in calls:
            if call["decision"] is not None:
                continue
            rules = R.covering(self._rules, R.owner(run.agent_id, call))
            tool, args = call["toolName"], call["args"]
            if scopes := R.required_scopes(rules, tool, args):
                call["requiredScopes"] = scopes
            if not call["requiresApproval"]:
                continue
            required = R.approvals_required(rules, tool, args)
            if required > 1:
                call["approvalsRequired"] = required
            deadline = R.deadline_for(rules, tool, args) if parent_run_id is None else None
            if deadline is not None:
                call["expiresAt"] = suspended_at + deadline.after
                call["onExpiry"] = deadline.on_expiry
            rule = None if call.get("delegated") else R.auto_approving_rule(rules, tool, args)
            if rule is not None:
                decider = Decider(name=f"{POLICY_PREFIX}{rule.name}", kind="policy")
                call["decision"] = _decision(DecisionRequest(kind="approved", tool_call_id=None), decider, suspended_at)
                approved.append((call, rule.name))
        suspension = None
        if any(call["decision"] is None for call in calls):  # built first: the decisions are listed after it
            suspension = self._journal.suspended_event(run, calls)
            suspension["at"] = suspended_at
        made = []
        for call, rule_name in approved:
            decision = call["decision"]
            assert decision is not None
            made.append(self._journal.decision_event(run, call, decision, rule=rule_name))
        return suspension, made

    # -- a decision on a stored run --------------------------------------------------------------
    async def allowed(self, doc: SnapshotDocument, request: DecisionRequest, decider: Decider) -> Allowed | None:
        """Whether ``decider`` may decide on ``doc``'s call as ``request`` asks, checked on the run as
        first read, before an idempotency key is looked at (a replay of a decision made is
        answered, but never to a caller the rules refuse): the principal's resources, and the
        scopes and edits the rules of the call's owner allow, on the edited arguments as the
        tool's validator reads them. The rest of ``check``'s checks are made on the same read, and
        their answer kept (``Allowed.verdict``, raised by ``check``). ``None`` when the request
        names no call of ``doc`` (``check`` reports it).

        Raises:
            RunNotFoundError: The run is outside the principal's resources.
            DecideThroughSupervisorError: ``check_addressable``, whatever call the request names.
            InvalidToolArgumentsError: The edited arguments fail the tool's validator.
            ForbiddenError: The decider lacks ``runs:decide`` or a scope a rule needs
                (``required_scope``), or a rule forbids the edit.
        """
        at = self._now()
        check_decider(doc, decider.principal)
        check_addressable(doc, forwarded=decider.kind == "supervisor")
        try:
            index = find_call(doc, request)
        except (RunsgateError, FirstQuestionAnswered):
            return None
        undecided = undecidable(doc, index, request)  # read with the call: kept for ``_verdict``
        call = doc["toolCalls"][index]
        owner = R.owner(doc["agentId"], call) if R.owner_known(call) else await self._owner(doc, call)
        rules = R.covering(self._rules, owner)
        tool = call["toolName"]
        edited = None
        if request.edited_args is not None and call["requiresApproval"]:
            edited = jsonable(validate_edited_args(self._agents.get_agent(owner), tool, request.edited_args))
        required = R.requirements(rules, tool, call["args"] if edited is None else edited)
        refused = refusal(doc, call, required, decider, request.kind)
        if refused is not None:
            raise refused
        if edited is not None and R.edit_forbidden(rules, tool, call["args"], edited):
            raise ForbiddenError(f"the arguments of {tool!r} may not be edited")
        scopes = required.scopes if request.kind != "declined" else []
        verdict = None
        if request.question_id is not None or "questionNumber" in call:  # else ``check`` reads the trail first
            verdict = await self._verdict(doc, index, request, decider, edited, required, scopes, at, undecided)
        return Allowed(index=index, rules=rules, edited=edited, required=required, scopes=scopes, verdict=verdict)

    async def may_decide(self, doc: SnapshotDocument, index: int, principal: Principal) -> bool:
        """Whether ``principal`` may approve (or resume) call ``index`` of ``doc`` with the model's
        arguments (``refusal_of`` finds no refusal; the reviewers' queue lists only such questions)."""
        return await self.refusal_of(doc, index, principal) is None

    async def refusal_of(
        self, doc: SnapshotDocument, index: int, principal: Principal, kind: DecisionKind | None = None
    ) -> RunsgateError | None:
        """Why ``principal`` may not approve or resume (or ``kind``) call ``index`` of ``doc`` with
        the model's arguments, as ``allowed`` would find, or ``None``: ``RunNotFoundError`` (not its
        resources), ``DecideThroughSupervisorError`` (a sub-run), ``ForbiddenError`` (``runs:decide``,
        a rule's scope), ``SeparationOfDutiesError``, ``DuplicateApproverError``. Raises nothing."""
        try:
            check_decider(doc, principal)
            if doc["parentRunId"] is not None:
                check_addressable(doc, forwarded=False)
        except RunsgateError as refused:
            return refused
        call = doc["toolCalls"][index]
        owner = R.owner(doc["agentId"], call) if R.owner_known(call) else await self._owner(doc, call)
        rules = R.covering(self._rules, owner)
        kind = kind or ("approved" if call["requiresApproval"] else "resumed")
        decider = Decider(name=principal.identity, principal=principal)
        return refusal(doc, call, R.requirements(rules, call["toolName"], call["args"]), decider, kind) or (
            repeated_approval(doc, call, decider.name) if kind == "approved" else None
        )

    def may_decide_tool(self, principal: Principal, resource_id: str | None, tool_name: str) -> bool:
        """Whether ``principal`` may decide some call of ``tool_name`` in a run of ``resource_id``
        whatever its arguments and agent: it may use the resource and holds every scope any rule of
        the tool names (what is known of a question once its run is gone: no more than
        ``may_decide`` allows)."""
        return principal.may_use_resource(resource_id) and all(
            principal.has_scope(rule.scope) for rule in self._rules if rule.tool == tool_name and rule.scope
        )

    async def check(
        self, doc: SnapshotDocument, request: DecisionRequest, decider: Decider, *, allowed: Allowed | None = None
    ) -> Checked:
        """Check ``request`` by ``decider`` on ``doc``, as read for the decision; nothing is written.
        ``allowed``: ``self.allowed`` of the same read, when already made.

        Raises:
            The errors of ``allowed``, and:
            DecideThroughSupervisorError: ``check_addressable``, before any call is looked up.
            QuestionNotPendingError, ToolCallAlreadyDecidedError, ToolCallNotFoundError,
                AmbiguousToolCallError: ``Questions.asked``.
            ForbiddenError: An edit of a call needing several approvals, or one that would need
                more; a forwarded decision with fewer approvers than the call needs.
            WrongToolCallKindError, ToolCallAlreadyDecidedError: ``undecidable``.
            DuplicateApproverError: The decider gave one of the call's approvals already.
            ReviewClaimRequiredError: A rule requires the review claim, not held by the decider.
            ForbiddenError, SeparationOfDutiesError, ReviewAlreadyClaimedError: The same rule, with
                ``request.claiming_review``: ``claimReview``'s refusals. InvalidResumeDataError.
        """
        if allowed is None or allowed.verdict is None:
            index = await self._questions.asked(doc, request, decider.principal, forwarded=decider.kind == "supervisor")
            if allowed is None or allowed.index != index:
                allowed = await self.allowed(doc, request, decider)
                assert allowed is not None  # find_call found the call
        verdict = allowed.verdict
        if verdict is None:  # a call without ``questionNumber``: its trail was read by ``Questions.asked``
            index, at = allowed.index, self._now()
            undecided = undecidable(doc, index, request)
            verdict = await self._verdict(
                doc, index, request, decider, allowed.edited, allowed.required, allowed.scopes, at, undecided
            )
        if isinstance(verdict, RunsgateError):
            raise verdict
        return verdict

    async def _verdict(
        self,
        doc: SnapshotDocument,
        index: int,
        request: DecisionRequest,
        decider: Decider,
        edited: Any,
        needs: R.Requirements,
        scopes: list[str],
        at: datetime,
        undecided: RunsgateError | None,
    ) -> Checked | RunsgateError:
        """``check``'s checks after ``allowed``'s, on the call at ``index`` (``needs``: what its rules
        require; ``undecided``: ``undecidable``'s answer on it) at ``at``: the checked
        request, or the refusal ``check`` raises (returned, not raised)."""
        call = doc["toolCalls"][index]
        tool, required = call["toolName"], call.get("approvalsRequired", 1)
        if edited is not None and decider.kind != "supervisor":  # a forwarded edit was checked on the supervisor's call
            if required > 1:
                return ForbiddenError(
                    f"{tool!r} needs {required} approvals of the same arguments: approve it without editedArgs, "
                    "or decline it"
                )
            if needs.approvals > required:
                return ForbiddenError(
                    f"{tool!r} with these editedArgs needs several approvals: approve the model's arguments, or "
                    "decline it and let the agent ask again"
                )
        if decider.kind == "supervisor" and request.kind == "approved":
            approvers = len(set(decider.approvers))
            needed = max(required, needs.approvals)
            if approvers < needed:
                return ForbiddenError(
                    f"{tool!r} needs {needed} approvals; the supervisor's call forwarded {approvers}: decline it "
                    "and let the agent ask again"
                )
        if undecided is not None:
            return undecided
        approved_before = request.kind == "approved" and call.get("approvals")  # only a call of several has any
        if approved_before and (repeated := repeated_approval(doc, call, decider.name)) is not None:
            return repeated  # before the claim: claiming could not let it approve again
        claimant = None
        if decider.kind == "person" and decider.principal is not None and needs.review_claim:
            claim = active_review_claim(call, at)
            if request.claiming_review:  # as ``claimReview`` would, then the decision in one write
                refused = await self.refusal_of(doc, index, decider.principal)
                if refused is not None:
                    return refused
                if claim is not None and claim["by"] != decider.name:
                    return ReviewAlreadyClaimedError(doc["_id"], call["toolCallId"], question_id(call), claim)
                claimant = decider.name
            elif claim is None or claim["by"] != decider.name:
                return ReviewClaimRequiredError(doc["_id"], call["toolCallId"], claim)
        if request.kind == "resumed":
            try:
                validate_resume_data(call["resumeSchema"], request.resume_data)
            except RunsgateError as invalid:
                return invalid
        return Checked(index=index, call=call, edited=edited, scopes=scopes, claimant=claimant, at=at)

    async def _owner(self, doc: SnapshotDocument, call: ToolCallDocument) -> str:
        """The agent whose tool ``call`` runs (``rules.owner``); for a delegated call stored before
        schema version 3 (no ``delegatedTo``, ``rules.owner_known``), the agent of the sub-run it waits on."""
        if not R.owner_known(call):
            found = await self._store.get_many([sub_run_id(doc["_id"], call["toolCallId"])])
            if found:
                return found[0]["agentId"]
        return R.owner(doc["agentId"], call)

    async def decide(
        self,
        agent_id: str,
        run_id: str,
        request: DecisionRequest,
        decider: Decider,
        *,
        read: SnapshotDocument | None = None,
        allowed: Allowed | None = None,
        claim: ClaimOffer | None = None,
        key: HeldKey | None = None,
    ) -> SnapshotDocument:
        """Check and record ``request`` by ``decider``: one conditional write with its events.

        ``read`` (and ``allowed``, its first check) is the run as already read; after a conflicting
        write it is read and checked again, ``_ATTEMPTS`` times in all. ``claim``: what a single
        decision of the run's last question claims with it (the run returned is then ``resuming``).
        ``key``: the request's idempotency key, reserved by the decision's write when deferred.

        Returns:
            The run as written.

        Raises:
            The errors of ``check``; ``Questions.gone``'s for a run no longer stored;
            RunNotReadyError (the run kept changing), IdempotencyKeyTakenError.
        """
        for attempt in range(_ATTEMPTS):
            doc = read if attempt == 0 and read is not None else await self._store.get(agent_id, run_id)
            if doc is None:
                raise await self._questions.gone(agent_id, run_id, request, decider.principal)
            passed = await self.check(doc, request, decider, allowed=allowed if attempt == 0 else None)
            updated = await self._record(doc, request, decider, passed, claim, key)
            if updated is not None:
                return updated
        raise RunNotReadyError(run_id, f"Run {run_id!r} kept changing while recording the decision; try again.")

    async def _record(
        self,
        doc: SnapshotDocument,
        request: DecisionRequest,
        decider: Decider,
        checked: Checked,
        claim: ClaimOffer | None = None,
        key: HeldKey | None = None,
    ) -> SnapshotDocument | None:
        now, call, index = checked.at, checked.call, checked.index
        edit = request.edited_args if checked.edited is not None else None
        decision = _decision(request, decider, now, edited=edit, scopes=checked.scopes)
        run = stored_run(doc, decider.name)
        extra: dict[str, Any] = {}
        if checked.edited is not None:
            extra = {"originalArgs": call["args"], "editedArgs": edit}
        if decider.kind == "supervisor" and decider.approvers:
            extra["approvals"] = list(decider.approvers)
        required = call.get("approvalsRequired", 1)
        if request.kind == "approved" and decider.kind == "person" and required > 1:
            if key is not None:
                await key.reserve()
            return await record_approval(self._store, self._journal, doc, run, index, decision, checked.claimant)
        preceding = [self._journal.expired_event(run, call, now)] if decider.kind == "expiry" else []  # ids in order
        event = self._journal.decision_event(run, call, decision, **extra)
        reservation = None if key is None else key.reservation(now)
        write = DecisionWrite(
            agent_id=doc["agentId"],
            run_id=doc["_id"],
            index=index,
            tool_call_id=call["toolCallId"],
            question_id=call.get("questionId"),
            decision=decision,
            now=now,
            event=event,
            preceding_events=preceding,
            claim=None if claim is None else claim(doc, index, decision),
            key=reservation,
            claimant=checked.claimant,
        )
        written = await self._store.record_decision(write)
        if written is not None and reservation is not None and key is not None:
            key.reserved = True
        return written

    # -- deadlines -------------------------------------------------------------------------------
    async def expire(self, doc: SnapshotDocument) -> SnapshotDocument | None:
        """Record the fallback of every call of ``doc`` whose deadline passed, ``decidedBy``
        ``expiry``, as any decision is (``check``, then the conditional write on the call's
        question, with an ``expired`` event before the ``decision`` event). An ``approve`` fallback
        on a call whose rules need a scope or several approvers declines it instead. A call
        decided meanwhile is left as it is. ``None`` when nothing was recorded, else the run as
        last written."""
        now, updated = self._now(), None
        for call in doc["toolCalls"]:
            if not call_expired(call, now):
                continue
            current = updated or doc
            rules = R.covering(self._rules, await self._owner(current, call))
            fallback_approves = call.get("onExpiry") == "approve"
            approve = fallback_approves and not R.restricted(rules, call["toolName"], call["args"])
            request = DecisionRequest(
                kind="approved" if approve else "declined",
                tool_call_id=call["toolCallId"],
                question_id=question_id(call),
                reason=None if approve else R.expiry_reason(call, restricted=fallback_approves),
            )
            decider = Decider(name=EXPIRY_DECIDER, kind="expiry")
            try:
                checked = await self.check(current, request, decider)
            except RunsgateError:  # decided meanwhile, or the call moved on: the first decision wins
                continue
            written = await self._record(current, request, decider, checked)
            if written is not None:
                updated = written
        return updated


def _decision(
    request: DecisionRequest, decider: Decider, at: datetime, *, edited: Any = None, scopes: Sequence[str] = ()
) -> DecisionDocument:
    decision: DecisionDocument = {
        "kind": request.kind,
        "decidedAt": at,
        "decidedBy": decider.name,
        "reason": request.reason if request.kind == "declined" else None,
        "resumeData": request.resume_data if request.kind == "resumed" else None,
        "idempotencyKey": request.idempotency_key,
    }
    if edited is not None:
        decision["editedArgs"] = edited
    if scopes:
        decision["scopes"] = list(scopes)
    return decision


__all__ = ["POLICY_PREFIX", "Allowed", "Checked", "Decider", "DecisionGate"]
