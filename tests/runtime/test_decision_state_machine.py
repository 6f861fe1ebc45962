"""A model-based test of decisions (issue 14, part 6): a Hypothesis state machine drives one run
of ``mixed-agent`` (a tool asking two questions then needing an approval, next to a tool
approved first then asking a question) through random interleavings of approvals, declines,
valid and invalid resumes, late answers, wrong-kind decisions, graceful restarts (the SQLite
store and the manager closed, new ones opened on the same file) and retries after a failed
continuation, and checks after every step:

- each tool body's side effect happens at most once per approval of its call, never after a
  decline of it;
- every listed pending call has a ``toolCallId`` and a ``questionId``;
- the listing, the run as read (``suspendedRun``), the GraphQL view of it, the events and the
  outcomes agree.

Bounded: derandomized, few examples and steps (well under 30 s).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from resolvers.types import SuspendedRun
from runtime import (
    AgentRegistry,
    InvalidResumeDataError,
    QuestionNotPendingError,
    RunManager,
    RunNotFoundError,
    RunNotReadyError,
    RunOutcome,
    ToolCallAlreadyDecidedError,
    WrongToolCallKindError,
)
from runtime.demo import AGENTS
from storage import RunFilter, SnapshotDocument, SQLiteSnapshotStore, ToolCallDocument

from . import agents

MIXED = "mixed-agent"

VALID_ANSWERS: dict[str, Any] = {"amount?": 7, "note?": "rent", "title?": "hello"}
INVALID_ANSWERS: dict[str, Any] = {"amount?": "seven", "note?": 3, "title?": ["x"]}


WORLD = st.sampled_from(["as is", "as is", "restart", "model down", "model up"])
"""What happens to the world before a step (see ``DecisionMachine._disturb``)."""


class DecisionMachine(RuleBasedStateMachine):
    """One ``mixed-agent`` run over a SQLite file, decided at random."""

    def __init__(self) -> None:
        super().__init__()
        agents.reset()
        self.loop = asyncio.new_event_loop()
        self.path = Path(DIRECTORY[0]) / f"machine-{id(self)}-{len(STARTED)}.db"
        STARTED.append(self.path)
        self.registry = AgentRegistry({**AGENTS, **agents.TEST_AGENTS})
        self.store: SQLiteSnapshotStore | None = None
        self.manager = self._open()
        self.outcomes: list[RunOutcome] = []
        self.decisions: Counter[tuple[str, str]] = Counter()
        """(toolCallId, kind) -> decisions accepted."""
        self.asked: list[str] = []
        """Every questionId listed so far."""
        started = self._run(self.manager.start_run(MIXED, "go"))
        assert started.status == "suspended"
        self.run_id = started.run_id
        self._saw(started)

    # -- helpers ---------------------------------------------------------------------------------
    def _run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    def _open(self) -> RunManager:
        store = SQLiteSnapshotStore(self.path)
        self._run(store.open())
        self.store = store
        return RunManager(store, self.registry, instance_id="machine")

    def _doc(self) -> SnapshotDocument | None:
        doc: SnapshotDocument | None = self._run(self.manager.store.get(MIXED, self.run_id))
        return doc

    def _pending(self, *, approval: bool) -> list[ToolCallDocument]:
        doc = self._doc()
        if doc is None or doc["lastError"] is not None:
            return []
        return [c for c in doc["toolCalls"] if c["decision"] is None and c["requiresApproval"] == approval]

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
    @precondition(lambda self: bool(self._pending(approval=True)))
    @rule(pick=st.integers(0, 3), world=WORLD)
    def approve(self, pick: int, world: str) -> None:
        self._disturb(world)
        calls = self._pending(approval=True)
        call = calls[pick % len(calls)]
        outcome = self._run(self.manager.approve(MIXED, self.run_id, call["toolCallId"]))
        self._decided(call, "approved", outcome)

    @precondition(lambda self: bool(self._pending(approval=True)))
    @rule(pick=st.integers(0, 3), world=WORLD)
    def decline(self, pick: int, world: str) -> None:
        self._disturb(world)
        calls = self._pending(approval=True)
        call = calls[pick % len(calls)]
        outcome = self._run(self.manager.decline(MIXED, self.run_id, call["toolCallId"], reason="no"))
        self._decided(call, "declined", outcome)

    @precondition(lambda self: bool(self._pending(approval=False)))
    @rule(pick=st.integers(0, 3), name_question=st.booleans(), world=WORLD)
    def resume(self, pick: int, name_question: bool, world: str) -> None:
        self._disturb(world)
        calls = self._pending(approval=False)
        call = calls[pick % len(calls)]
        data = VALID_ANSWERS[call["suspendPayload"]["question"]]
        question = call.get("questionId") if name_question else None
        outcome = self._run(self.manager.resume(MIXED, self.run_id, call["toolCallId"], data, question_id=question))
        self._decided(call, "resumed", outcome)

    @precondition(lambda self: bool(self._pending(approval=False)))
    @rule(pick=st.integers(0, 3))
    def resume_invalid(self, pick: int) -> None:
        calls = self._pending(approval=False)
        call = calls[pick % len(calls)]
        before = self._doc()
        with pytest.raises(InvalidResumeDataError):
            self._run(
                self.manager.resume(
                    MIXED, self.run_id, call["toolCallId"], INVALID_ANSWERS[call["suspendPayload"]["question"]]
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
            self._run(self.manager.resume(MIXED, self.run_id, call["toolCallId"], 1))
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
