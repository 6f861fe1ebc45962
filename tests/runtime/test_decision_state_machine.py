"""A model-based test of decisions (issue 14, part 6; issue 41): a Hypothesis state machine drives
one run of ``mixed-agent`` (a tool asking two questions then needing an approval, next to a tool
approved first then asking a question) through random interleavings of approvals, declines,
valid and invalid resumes, late answers, wrong-kind decisions, graceful restarts (the SQLite
store and the manager closed, new ones opened on the same file) and retries after a failed
continuation. Two reviewers decide: each looks at the run now and then, and decides what it was
last shown (maybe long ago), naming the question or only the call, each with keys of its own.
After every step it checks:

- a decision recorded answered the very question its reviewer was shown (the ``decision``
  event names that ``questionId``); one shown a question no longer pending changes nothing;
- each tool body's side effect happens at most once per approval of its call, never after a
  decline of it;
- every listed pending call has a ``toolCallId`` and a ``questionId``;
- the listing, the run as read (``suspendedRun``), the GraphQL view of it, the events and the
  outcomes agree;
- a tool runs only with the arguments of the call that was decided (issue 24): beside the mixed
  run, runs of ``echo-agent`` (two approval calls under one model id, ``x``) and of
  ``echo-supervisor`` (two delegated calls under one model id, each with its own sub-run) are
  started, approved (with edited arguments or not), declined, and left to expire as time passes
  (a rule gives ``echo`` calls a deadline, approved on expiry above 500).

Bounded: derandomized, few examples and steps (well under 30 s).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, UserPromptPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.tools import DeferredToolRequests

from resolvers.types import SuspendedRun
from runtime import (
    AgentRegistry,
    AmbiguousToolCallError,
    InvalidResumeDataError,
    QuestionNotPendingError,
    RunManager,
    RunNotFoundError,
    RunNotReadyError,
    RunOutcome,
    ToolApprovalRule,
    ToolCallAlreadyDecidedError,
    WrongToolCallKindError,
    delegate,
)
from runtime.demo import AGENTS
from storage import RunFilter, SnapshotDocument, SQLiteSnapshotStore, ToolCallDocument

from . import agents

MIXED = "mixed-agent"

VALID_ANSWERS: dict[str, Any] = {"amount?": 7, "note?": "rent", "title?": "hello"}
INVALID_ANSWERS: dict[str, Any] = {"amount?": "seven", "note?": 3, "title?": ["x"]}


ECHOED: list[tuple[str, int]] = []
"""Every run of the ``echo`` tool's body: ``(ctx.tool_call_id, value)``."""


def _echo_script(tool: str) -> FunctionModel:
    """A model that calls ``tool`` once per number of its prompt, every call under the id ``x``."""

    async def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if any(isinstance(m, ModelResponse) for m in messages):
            return ModelResponse(parts=[TextPart("done")])
        prompt = next(
            p.content for m in messages if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, UserPromptPart)
        )
        values = [int(v) for v in str(prompt).split()]
        return ModelResponse(parts=[ToolCallPart(tool, {"value": v}, tool_call_id="x") for v in values])

    return FunctionModel(respond)


def _echo_agent(name: str) -> Agent[None, Any]:
    agent: Agent[None, Any] = Agent(_echo_script("echo"), name=name, output_type=[str, DeferredToolRequests])

    @agent.tool(requires_approval=True)
    async def echo(ctx: RunContext[None], value: int) -> str:
        ECHOED.append((str(ctx.tool_call_id), value))
        return f"echo {value}"

    return agent


echo_supervisor: Agent[None, Any] = Agent(
    _echo_script("ask_echo"), name="echo-supervisor", output_type=[str, DeferredToolRequests]
)


@echo_supervisor.tool
async def ask_echo(ctx: RunContext[None], value: int) -> Any:
    return await delegate(ctx, "echo-one", str(value))


ECHO_AGENTS = {
    "echo-agent": _echo_agent("echo-agent"),
    "echo-one": _echo_agent("echo-one"),
    "echo-supervisor": echo_supervisor,
}
ECHO_RULES = [
    ToolApprovalRule(tool="echo", expires_after=60),
    ToolApprovalRule(tool="echo", argument="value", above=500, expires_after=60, on_expiry="approve"),
]


class Clock:
    """The machine's clock: UTC now, moved by ``time_passes``."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset


WORLD = st.sampled_from(["as is", "as is", "restart", "model down", "model up"])
"""What happens to the world before a step (see ``DecisionMachine._disturb``)."""

REVIEWERS = st.sampled_from(["rev-a", "rev-b"])
"""Who decides: each decides what it was last shown (``DecisionMachine.look``)."""

REFUSED = (QuestionNotPendingError, ToolCallAlreadyDecidedError, RunNotFoundError)
"""What a reviewer deciding a question no longer pending is told."""


class DecisionMachine(RuleBasedStateMachine):
    """One ``mixed-agent`` run over a SQLite file, decided at random."""

    def __init__(self) -> None:
        super().__init__()
        agents.reset()
        self.loop = asyncio.new_event_loop()
        self.path = Path(DIRECTORY[0]) / f"machine-{id(self)}-{len(STARTED)}.db"
        STARTED.append(self.path)
        ECHOED.clear()
        self.clock = Clock()
        self.registry = AgentRegistry({**AGENTS, **agents.TEST_AGENTS, **ECHO_AGENTS})
        self.echo_runs: list[tuple[str, str]] = []
        """(agent id, run id) of the echo runs started."""
        self.allowed: dict[str, int] = {}
        """Call identity -> the value its tool may run with (its approval's, edited or not)."""
        self.values = iter(range(1, 10_000))
        self.store: SQLiteSnapshotStore | None = None
        self.manager = self._open()
        self.outcomes: list[RunOutcome] = []
        self.decisions: Counter[tuple[str, str]] = Counter()
        """(toolCallId, kind) -> decisions accepted."""
        self.asked: list[str] = []
        """Every questionId listed so far."""
        self.shown: dict[str, list[ToolCallDocument]] = {}
        """Reviewer -> the pending calls of the run it was last shown."""
        self.keys = iter(range(1, 100_000))
        started = self._run(self.manager.start_run(MIXED, "go"))
        assert started.status == "suspended"
        self.run_id = started.run_id
        self._saw(started)
        self.shown = {"rev-a": self._pending_now(), "rev-b": self._pending_now()}

    # -- helpers ---------------------------------------------------------------------------------
    def _run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    def _open(self) -> RunManager:
        store = SQLiteSnapshotStore(self.path)
        self._run(store.open())
        self.store = store
        return RunManager(store, self.registry, instance_id="machine", clock=self.clock, tool_rules=ECHO_RULES)

    def _doc(self) -> SnapshotDocument | None:
        doc: SnapshotDocument | None = self._run(self.manager.store.get(MIXED, self.run_id))
        return doc

    def _pending(self, *, approval: bool) -> list[ToolCallDocument]:
        return [c for c in self._pending_now() if c["requiresApproval"] == approval]

    def _pending_now(self) -> list[ToolCallDocument]:
        doc = self._doc()
        if doc is None or doc["lastError"] is not None:
            return []
        return [c for c in doc["toolCalls"] if c["decision"] is None]

    def _card(self, reviewer: str, pick: int, *, approval: bool) -> ToolCallDocument | None:
        """The card ``reviewer`` picks among those it was last shown waiting for ``approval``."""
        cards = [c for c in self.shown[reviewer] if c["requiresApproval"] == approval]
        return cards[pick % len(cards)] if cards else None

    def _decide_shown(
        self, reviewer: str, call: ToolCallDocument, kind: str, name_question: bool, **fields: Any
    ) -> None:
        """``reviewer`` decides the question of ``call`` it was shown: recorded on that very
        question, or refused having changed nothing when it no longer waits."""
        question = call.get("questionId")
        decide = {"approved": self.manager.approve, "declined": self.manager.decline, "resumed": self.manager.resume}
        named = {"question_id": question} if name_question else {}
        key = f"{reviewer}-{next(self.keys)}"
        before = self._doc()
        arguments: tuple[Any, ...] = (MIXED, self.run_id, call["toolCallId"])
        if kind == "resumed":
            arguments += (VALID_ANSWERS[call["suspendPayload"]["question"]],)
        try:
            outcome = self._run(decide[kind](*arguments, principal=reviewer, idempotency_key=key, **named, **fields))
        except REFUSED:
            self._unchanged(before)
            return
        events = self._run(self.manager.store.list_events(MIXED, self.run_id))
        recorded = [e for e in events if e["type"] == "decision" and e["data"]["toolCallId"] == call["toolCallId"]]
        assert (recorded[-1]["by"], recorded[-1]["data"]["questionId"]) == (reviewer, question), (
            "not the question shown"
        )
        self._decided(call, kind, outcome)

    def _saw(self, outcome: RunOutcome) -> None:
        self.outcomes.append(outcome)
        if outcome.run is not None:
            self.asked += [c.get("questionId", "") for c in outcome.run["toolCalls"]]

    def _decided(self, call: ToolCallDocument, kind: str, outcome: RunOutcome) -> None:
        self.decisions[(call["toolCallId"], kind)] += 1
        self._saw(outcome)

    def _unchanged(self, before: SnapshotDocument | None) -> None:
        after = self._doc()
        assert (after is None) == (before is None)
        if after is not None and before is not None:
            assert after["version"] == before["version"]
            assert after["toolCalls"] == before["toolCalls"]

    def _is_active(self) -> bool:
        doc = self._doc()
        return doc is not None and doc["lastError"] is None

    # -- rules -----------------------------------------------------------------------------------
    @rule(reviewer=REVIEWERS)
    def look(self, reviewer: str) -> None:
        """``reviewer`` opens the run: what it decides next is what it is shown now."""
        self.shown[reviewer] = self._pending_now()

    @precondition(lambda self: any(c["requiresApproval"] for cards in self.shown.values() for c in cards))
    @rule(reviewer=REVIEWERS, pick=st.integers(0, 3), name_question=st.booleans(), world=WORLD)
    def approve(self, reviewer: str, pick: int, name_question: bool, world: str) -> None:
        self._disturb(world)
        call = self._card(reviewer, pick, approval=True)
        if call is not None:
            self._decide_shown(reviewer, call, "approved", name_question)

    @precondition(lambda self: any(c["requiresApproval"] for cards in self.shown.values() for c in cards))
    @rule(reviewer=REVIEWERS, pick=st.integers(0, 3), name_question=st.booleans(), world=WORLD)
    def decline(self, reviewer: str, pick: int, name_question: bool, world: str) -> None:
        self._disturb(world)
        call = self._card(reviewer, pick, approval=True)
        if call is not None:
            self._decide_shown(reviewer, call, "declined", name_question, reason="no")

    @precondition(lambda self: any(not c["requiresApproval"] for cards in self.shown.values() for c in cards))
    @rule(reviewer=REVIEWERS, pick=st.integers(0, 3), name_question=st.booleans(), world=WORLD)
    def resume(self, reviewer: str, pick: int, name_question: bool, world: str) -> None:
        self._disturb(world)
        call = self._card(reviewer, pick, approval=False)
        if call is not None:
            self._decide_shown(reviewer, call, "resumed", name_question)

    @precondition(lambda self: bool(self._pending(approval=False)))
    @rule(pick=st.integers(0, 3))
    def resume_invalid(self, pick: int) -> None:
        calls = self._pending(approval=False)
        call = calls[pick % len(calls)]
        before = self._doc()
        with pytest.raises(InvalidResumeDataError):
            self._run(
                self.manager.resume(
                    MIXED,
                    self.run_id,
                    call["toolCallId"],
                    INVALID_ANSWERS[call["suspendPayload"]["question"]],
                    question_id=call["questionId"],
                )
            )
        self._unchanged(before)

    @precondition(lambda self: bool(self._pending(approval=True)))
    @rule(pick=st.integers(0, 3))
    def resume_an_approval(self, pick: int) -> None:
        calls = self._pending(approval=True)
        call = calls[pick % len(calls)]
        before = self._doc()
        with pytest.raises(WrongToolCallKindError):
            self._run(self.manager.resume(MIXED, self.run_id, call["toolCallId"], 1, question_id=call["questionId"]))
        self._unchanged(before)

    @precondition(lambda self: len(self.asked) > 1)
    @rule(pick=st.integers(0, 20))
    def late_answer(self, pick: int) -> None:
        doc = self._doc()
        waiting = {c.get("questionId") for c in doc["toolCalls"] if c["decision"] is None} if doc else set()
        stale = [q for q in self.asked if q not in waiting]
        if not stale:
            return
        before = doc
        refusals = (QuestionNotPendingError, ToolCallAlreadyDecidedError, WrongToolCallKindError, RunNotFoundError)
        with pytest.raises(refusals):
            self._run(self.manager.resume(MIXED, self.run_id, None, 1, question_id=stale[pick % len(stale)]))
        self._unchanged(before)

    # -- reused ids, delegation, expiry (issue 24) -----------------------------------------------
    def _echo_pending(self) -> list[tuple[str, str, ToolCallDocument]]:
        found = []
        for agent_id, run_id in self.echo_runs:
            doc: SnapshotDocument | None = self._run(self.manager.store.get(agent_id, run_id))
            if doc is not None and doc["lastError"] is None:
                found += [(agent_id, run_id, c) for c in doc["toolCalls"] if c["decision"] is None]
        return found

    def _allow(self, call: ToolCallDocument, value: int) -> None:
        """``call``'s tool may run with ``value``: for a delegated call, the sub-run's call."""
        delegated = call.get("delegatedTo")
        self.allowed[delegated["toolCallId"] if delegated else call["toolCallId"]] = value

    @precondition(lambda self: len(self.echo_runs) < 4)
    @rule(delegated=st.booleans(), large=st.booleans())
    def start_echo_run(self, delegated: bool, large: bool) -> None:
        base = 500 if large else 0
        values = [base + next(self.values), base + next(self.values)]
        agent_id = "echo-supervisor" if delegated else "echo-agent"
        outcome = self._run(self.manager.start_run(agent_id, " ".join(map(str, values))))
        assert outcome.status == "suspended", outcome
        assert outcome.run is not None
        calls = outcome.run["toolCalls"]
        assert [c["modelToolCallId"] for c in calls] == ["x", "x"]
        assert len({c["toolCallId"] for c in calls}) == 2
        assert sorted(c["args"]["value"] for c in calls) == sorted(values)
        self.echo_runs.append((agent_id, outcome.run_id))

    @precondition(lambda self: bool(self._echo_pending()))
    @rule(pick=st.integers(0, 7), how=st.sampled_from(["approve", "edit", "decline", "model id"]), world=WORLD)
    def decide_echo(self, pick: int, how: str, world: str) -> None:
        self._disturb(world)
        pending = self._echo_pending()
        if not pending:
            return
        agent_id, run_id, call = pending[pick % len(pending)]
        before: SnapshotDocument | None = self._run(self.manager.store.get(agent_id, run_id))
        if how == "decline":
            self._run(self.manager.decline(agent_id, run_id, call["toolCallId"], reason="no"))
        elif how == "model id":  # the id both calls of the turn share names neither
            waiting = [c for a, r, c in pending if r == run_id]
            if len(waiting) > 1:
                with pytest.raises(AmbiguousToolCallError):
                    self._run(self.manager.approve(agent_id, run_id, "x"))
                assert self._run(self.manager.store.get(agent_id, run_id))["version"] == before["version"]  # type: ignore[index]
        elif how == "edit":
            value = call["args"]["value"] + 1000
            self._allow(call, value)
            self._run(self.manager.approve(agent_id, run_id, call["toolCallId"], edited_args={"value": value}))
        else:
            self._allow(call, call["args"]["value"])
            self._run(self.manager.approve(agent_id, run_id, call["toolCallId"]))

    @precondition(lambda self: bool(self._echo_pending()))
    @rule()
    def time_passes(self) -> None:
        """A minute passes: the deadlines of the echo calls waiting now lapse, and a sweep applies them."""
        for _, _, call in self._echo_pending():
            if call.get("onExpiry") == "approve":
                self._allow(call, call["args"]["value"])
        self.clock.offset += timedelta(seconds=61)
        for doc in self._run(self.manager.store.list_expired_runs(now=self.manager.now(), limit=100)):
            self._run(self.manager.expire(doc))

    @invariant()
    def tools_run_only_with_the_arguments_decided(self) -> None:
        for call_id, times in Counter(call_id for call_id, _ in ECHOED).items():
            assert times == 1, (call_id, times)
        for call_id, value in ECHOED:
            assert self.allowed.get(call_id) == value, (call_id, value, self.allowed)

    def _disturb(self, world: str) -> None:
        """Before a step: a graceful restart (store and manager closed, new ones opened on the same
        file), the model going down or coming back, or nothing."""
        if world == "restart":
            assert self.store is not None
            self._run(self.store.close())
            self.manager = self._open()
        elif world in ("model down", "model up"):
            agents.SWITCHES["model_down"] = world == "model down"

    @precondition(lambda self: self._doc() is not None)
    @rule(world=WORLD)
    def retry(self, world: str) -> None:
        self._disturb(world)
        doc = self._doc()
        assert doc is not None
        if doc["pendingCount"] > 0:
            with pytest.raises(RunNotReadyError):
                self._run(self.manager.retry(MIXED, self.run_id))
            return
        self._saw(self._run(self.manager.retry(MIXED, self.run_id)))

    # -- invariants ------------------------------------------------------------------------------
    @invariant()
    def side_effects_follow_approvals(self) -> None:
        for call_id, times in Counter(agents.EFFECTS).items():
            assert times <= self.decisions[(call_id, "approved")], (call_id, times)
            assert self.decisions[(call_id, "declined")] == 0, call_id

    @invariant()
    def listing_run_events_and_outcomes_agree(self) -> None:
        doc = self._doc()
        listed = self._run(self.manager.store.list_runs(MIXED, RunFilter()))
        events = self._run(self.manager.store.list_events(MIXED, self.run_id))
        types = [e["type"] for e in events]
        last = self.outcomes[-1]
        assert types[0] == "started"
        decision_events = Counter(
            (e["data"]["toolCallId"], e["data"]["kind"]) for e in events if e["type"] == "decision"
        )
        assert decision_events == self.decisions
        if doc is None:
            assert listed == []
            assert last.status == "completed"
            assert types[-1] == "completed"
            # each tool got each answer at its own question (the model quotes the tools' results)
            output = str(last.output)
            assert "sent" not in output or "transfer: sent 7 to ACME (rent)" in output, output
            assert "published" not in output or "publish_post: published p1 as hello" in output, output
            return
        assert [d["_id"] for d in listed] == [self.run_id]
        assert listed[0]["toolCalls"] == doc["toolCalls"]
        assert doc["pendingCount"] == sum(c["decision"] is None for c in doc["toolCalls"])
        view = SuspendedRun.from_document(doc)
        for call, shown in zip(doc["toolCalls"], view.tool_calls, strict=True):
            assert call["toolCallId"]
            assert shown.tool_call_id
            assert shown.question_id
        if doc["lastError"] is not None:
            assert last.status == "failed"
            assert types[-1] == "failed"
        else:
            assert doc["status"] == "suspended"
            assert last.status == "suspended"
            assert last.run is not None
            assert last.run["toolCalls"] == doc["toolCalls"]

    def teardown(self) -> None:
        if self.store is not None:
            self._run(self.store.close())
        self.loop.close()
        agents.reset()


DIRECTORY: list[str] = []
STARTED: list[Path] = []

DecisionMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def test_decisions_keep_their_invariants_through_random_interleavings(tmp_path: Path) -> None:
    DIRECTORY[:] = [str(tmp_path)]
    DecisionMachine.TestCase().runTest()
