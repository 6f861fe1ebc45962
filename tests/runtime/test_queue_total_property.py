"""The queue's flat total equals a full read (issue 45 "Cost"): for random runs, calls, approvals,
starters, rules, principals and run filters, ``ReviewQueue.count`` (the kept count less the
refusals among ``refusal_candidates``' runs) equals the questions ``ReviewQueue.listed`` finds in
every matching run, the gate asked about each: on memory, SQLite and MongoDB (FerretDB 2.5).

One store per store kind; each example writes runs of two agents of its own and filters by them.
A run holds calls of several tools, and each tool is a tool of both agents (a rule may name one
agent): what a kept count per tool must get right, per agent, thread and resource.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from runtime import AgentRegistry, Principal, RunManager, ToolApprovalRule
from runtime.access import ALL_SCOPES
from runtime.demo import AGENTS
from runtime.reviewing.queue import QueueQuery
from storage import ApproverSeeingCount, QueueFilter, SnapshotDocument, SnapshotStore, ToolCallDocument, queue_key

from ..conftest import STORE_KINDS, open_store
from ..storage._contract import T0, snapshot

NAMES = ("alice", "bob")
TOOLS = ("issue_refund", "ask_city", "lookup_order")
SCOPES = ("refunds:approve", "cities:answer")
LIVE = datetime(2999, 1, 1, tzinfo=UTC)
"""A live review claim's ``until``."""
DECIDED: dict[str, Any] = {
    "kind": "approved",
    "decidedAt": T0,
    "decidedBy": "key:carol",
    "reason": None,
    "resumeData": None,
    "idempotencyKey": None,
}
"""A decided call's ``decision``."""


@st.composite
def _call(draw: st.DrawFn, number: int) -> ToolCallDocument:
    approval = draw(st.integers(0, 3)) > 0
    call: ToolCallDocument = {
        "toolCallId": f"c{number}",
        "toolName": draw(st.sampled_from(TOOLS)),
        "args": {"amount": draw(st.sampled_from([10, 600]))} if approval else None,
        "requiresApproval": approval,
        "suspendPayload": None if approval else {"question": "?"},
        "resumeSchema": None,
        "decision": None,
    }
    if draw(st.integers(0, 4)) == 0:
        call["decision"] = dict(DECIDED)  # type: ignore[typeddict-item]
    elif approval and draw(st.booleans()):
        call["approvalsRequired"] = 3
        approvers = draw(st.lists(st.sampled_from(["me", "other"]), max_size=2, unique=True))
        call["approvals"] = [{"decidedBy": who, "decidedAt": T0} for who in approvers]  # named in ``_doc``
    claim = draw(st.sampled_from([None, None, "me", "other", "lapsed"]))
    if claim is not None:  # a live one lapses in 2999; ``by`` named in ``_doc``
        until = T0 if claim == "lapsed" else LIVE
        call["reviewClaim"] = {"by": "other" if claim == "lapsed" else claim, "at": T0, "until": until}
    if draw(st.integers(0, 3)) == 0:
        call["escalated"] = True
    return call


@st.composite
def _run(draw: st.DrawFn, number: int) -> dict[str, Any]:
    calls = [draw(_call(n)) for n in range(draw(st.integers(1, 4)))]
    return {
        "number": number,
        "agent": draw(st.sampled_from("ab")),
        "thread": draw(st.sampled_from(["t1", "t2", None])),
        "resource": draw(st.sampled_from(["r1", "r2", None])),
        "calls": calls,
        "starter": draw(st.sampled_from(["me", "absent", None, "other"])),
        "status": draw(st.sampled_from(["suspended", "suspended", "suspended", "resuming"])),
        "sub": draw(st.integers(0, 6)) == 0,
    }


@st.composite
def _rule(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "tool": draw(st.sampled_from(TOOLS)),
        "scope": draw(st.sampled_from([*SCOPES, None])),
        "argument": draw(st.sampled_from([None, "amount"])),
        "approvals": draw(st.sampled_from([1, 2])),
        "separation_of_duties": draw(st.sampled_from([True, False])),
        "agent": draw(st.sampled_from([None, "a", "b"])),
    }


@dataclass
class World:
    runs: list[dict[str, Any]]
    rules: list[dict[str, Any]]
    name: str
    scopes: frozenset[str]
    resources: frozenset[str] | None
    agents: frozenset[str] | None
    thread: str | None
    resource: str | None
    questions: dict[str, Any] = field(default_factory=dict)
    """``QueueQuery``'s question filters (tools, review claims, escalation)."""


worlds = st.builds(
    World,
    runs=st.integers(1, 10).flatmap(lambda n: st.tuples(*(_run(i) for i in range(n))).map(list)),
    rules=st.lists(_rule(), min_size=1, max_size=3),
    name=st.sampled_from(NAMES),
    scopes=st.frozensets(st.sampled_from(SCOPES)),
    resources=st.sampled_from([None, None, frozenset({"r1"}), frozenset({"r1", "r2"}), frozenset()]),
    agents=st.sampled_from([None, None, frozenset("a"), frozenset("b")]),
    thread=st.sampled_from([None, None, "t1"]),
    resource=st.sampled_from([None, None, "r1"]),
    questions=st.one_of(
        st.just({}),
        st.dictionaries(st.sampled_from(["claimed_by_me", "unclaimed", "escalated"]), st.booleans(), max_size=1),
        st.fixed_dictionaries({"tool_names": st.frozensets(st.sampled_from(TOOLS), min_size=1)}),
        st.fixed_dictionaries(
            {},
            optional={
                "tool_names": st.frozensets(st.sampled_from(TOOLS)),
                "claimed_by_me": st.booleans(),
                "unclaimed": st.booleans(),
                "escalated": st.booleans(),
            },
        ),
    ),
)


def _alone(starter: str, rule: dict[str, Any], approvals: list[str] | None = None) -> World:
    """One run of one pending refund of $600 and one rule: an example that only one part of
    ``refusal_candidates`` finds refused."""
    call: dict[str, Any] = {
        "toolCallId": "c0",
        "toolName": "issue_refund",
        "args": {"amount": 600},
        "requiresApproval": True,
        "suspendPayload": None,
        "resumeSchema": None,
        "decision": None,
    }
    if approvals is not None:
        call["approvalsRequired"], call["approvals"] = 3, [{"decidedBy": who, "decidedAt": T0} for who in approvals]
    run = {"number": 0, "agent": "a", "thread": "t1", "resource": "r1", "calls": [call], "starter": starter}
    plain = {"tool": "issue_refund", "scope": None, "argument": None, "approvals": 1, "separation_of_duties": False}
    return World(
        runs=[{**run, "status": "suspended", "sub": False}],
        rules=[{**plain, "agent": None, **rule}],
        name="alice",
        scopes=frozenset(),
        resources=None,
        agents=None,
        thread=None,
        resource=None,
    )


EXAMPLES = [
    _alone("absent", {"separation_of_duties": True}),
    _alone("me", {"separation_of_duties": True}),
    _alone("other", {"approvals": 2}, approvals=["me"]),
    _alone("other", {}, approvals=["me"]),  # the rule asking for several approvers is gone
    _alone("other", {"scope": "refunds:approve"}),
]
"""One example per part of ``refusal_candidates``: leaving a part out fails one of them."""


def _questioned(questions: dict[str, Any]) -> World:
    """``_alone``'s run with three more pending calls (escalated, claimed live by another, claimed
    by the caller, and a lapsed claim), beside a plain run, filtered by ``questions``: an example
    of each question filter's candidate runs and corrections."""
    world = _alone("other", {})
    [call] = world.runs[0]["calls"]
    marked = [
        {**call, "toolCallId": "c1", "escalated": True},
        {**call, "toolCallId": "c2", "reviewClaim": {"by": "other", "at": T0, "until": LIVE}},
        {**call, "toolCallId": "c3", "reviewClaim": {"by": "me", "at": T0, "until": LIVE}},
        {**call, "toolCallId": "c4", "reviewClaim": {"by": "other", "at": T0, "until": T0}},
    ]
    plain = {**world.runs[0], "number": 1, "calls": [call]}
    world.runs = [{**world.runs[0], "calls": [call, *marked]}, plain]
    world.questions = questions
    return world


EXAMPLES += [
    _questioned({name: value}) for name in ("claimed_by_me", "unclaimed", "escalated") for value in (True, False)
]
EXAMPLES.append(_questioned({"tool_names": frozenset({"issue_refund"}), "unclaimed": True, "escalated": False}))


def _tools(questions: dict[str, Any], agents: frozenset[str] | None = None) -> World:
    """Runs of both agents, each holding calls of several tools (one decided), a sub-run, and a
    rule refusing the caller the refunds of agent ``a`` only (a scope it lacks), filtered by
    ``questions`` and ``agents``: a per-tool count must be kept per agent, count a tool's every
    pending call of a run, and be corrected per agent."""
    world = _alone("other", {"scope": "refunds:approve", "agent": "a"})
    [call] = world.runs[0]["calls"]

    def calls(*names: str) -> list[dict[str, Any]]:
        return [{**call, "toolCallId": f"c{n}", "toolName": name} for n, name in enumerate(names)]

    first = calls("issue_refund", "ask_city", "issue_refund", "lookup_order", "ask_city")
    first[3]["decision"] = dict(DECIDED)
    run = world.runs[0]
    world.runs = [
        {**run, "calls": first},
        {**run, "number": 1, "agent": "b", "calls": calls("issue_refund", "ask_city", "issue_refund")},
        {**run, "number": 2, "agent": "b", "calls": calls("lookup_order", "issue_refund"), "sub": True},
        {**run, "number": 3, "agent": "b", "calls": calls("lookup_order"), "status": "resuming"},
    ]
    world.questions, world.agents = questions, agents
    return world


EXAMPLES += [
    _tools({"tool_names": frozenset(tools)}, agents)
    for tools in (["issue_refund"], ["ask_city"], ["issue_refund", "lookup_order"], TOOLS)
    for agents in (None, frozenset("a"), frozenset("b"))
]
EXAMPLES.append(_tools({"tool_names": frozenset({"issue_refund", "ask_city"}), "claimed_by_me": False}))


def _doc(run: dict[str, Any], prefix: str, me: str) -> SnapshotDocument:
    """The run's document; ``me``/``other``: the principal's identity, another's."""
    names = {"me": f"key:{me}", "other": f"key:{me}-other"}
    calls = [
        {**call, "approvals": [{**a, "decidedBy": names[a["decidedBy"]]} for a in call["approvals"]]}  # type: ignore[typeddict-item]
        if "approvals" in call
        else call
        for call in run["calls"]
    ]
    calls = [
        {**call, "reviewClaim": {**call["reviewClaim"], "by": names[call["reviewClaim"]["by"]]}}
        if "reviewClaim" in call
        else call
        for call in calls
    ]
    doc = snapshot(
        f"{prefix}-{run['number']}",
        agent_id=f"{prefix}-{run['agent']}",
        thread=run["thread"],
        resource=run["resource"],
        calls=calls,  # type: ignore[arg-type]
    )
    doc["pendingCount"] = sum(call["decision"] is None for call in run["calls"])
    doc["status"] = run["status"]
    if run["sub"]:
        doc["parentRunId"] = f"{prefix}-parent"
    if run["starter"] != "absent":
        doc["startedBy"] = None if run["starter"] is None else names[run["starter"]]
    return doc


async def _full_read(manager: RunManager, principal: Principal, query: QueueQuery) -> int:
    """The oracle: every matching run read in queue order, each question asked of the gate."""
    store_filter: QueueFilter = query.store_filter(principal.resources)
    total, after = 0, None
    while docs := await manager.store.list_review_runs(store_filter, limit=50, after=after):
        for doc in docs:
            total += len(await manager.review_queue.listed(doc, principal, query))
        after = queue_key(docs[-1])
    return total


async def _check(store: SnapshotStore, world: World, prefix: str) -> None:
    for run in world.runs:
        await store.insert(_doc(run, prefix, world.name), b"[]")
    rules = [
        ToolApprovalRule(
            tool=rule["tool"],
            scope=rule["scope"],
            argument=rule["argument"],
            above=500 if rule["argument"] else None,
            approvals=rule["approvals"],
            separation_of_duties=rule["separation_of_duties"],
            agent_id=None if rule["agent"] is None else f"{prefix}-{rule['agent']}",
        )
        for rule in world.rules
    ]
    manager = RunManager(store, AgentRegistry(AGENTS), instance_id="a", tool_rules=rules)
    principal = Principal(
        name=world.name, scopes=ALL_SCOPES | world.scopes, resources=world.resources, credential="key"
    )
    query = QueueQuery(
        agent_ids=frozenset(f"{prefix}-{agent}" for agent in (world.agents or "ab")),
        thread_id=world.thread,
        resource_id=world.resource,
        **world.questions,
    )
    assert await manager.review_queue.count(principal, query) == await _full_read(manager, principal, query)


def _examples(test: Any) -> Any:
    for world in EXAMPLES:
        test = example(world=world)(test)
    return test


@pytest.mark.parametrize("kind", STORE_KINDS)
def test_the_flat_total_equals_the_full_read(request: pytest.FixtureRequest, kind: str) -> None:
    numbers = itertools.count()
    with asyncio.Runner() as runner:
        stack = contextlib.AsyncExitStack()
        store = runner.run(stack.enter_async_context(open_store(request, kind)))
        try:

            @settings(
                max_examples=100 if kind == "memory" else 40,
                deadline=None,
                derandomize=True,
                suppress_health_check=[HealthCheck.too_slow],
            )
            @given(world=worlds)
            @_examples
            def check(world: World) -> None:
                runner.run(_check(store, world, f"x{next(numbers)}"))

            check()
        finally:
            runner.run(stack.aclose())


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("mongo", marks=pytest.mark.mongo)])
def test_a_count_told_no_approval_waits_fails_the_property(
    request: pytest.FixtureRequest, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    approved = EXAMPLES[2]  # the caller's first of two approvals: the gate refuses it the question
    with asyncio.Runner() as runner:
        stack = contextlib.AsyncExitStack()
        store = runner.run(stack.enter_async_context(open_store(request, kind)))
        try:
            assert isinstance(store, ApproverSeeingCount)
            runner.run(_check(store, approved, "seen"))
            seeing = type(store).count_review_questions_seeing

            async def unseen(self: Any, queue_filter: QueueFilter, approver: str) -> tuple[int, bool]:
                return (await seeing(self, queue_filter, approver))[0], False

            # a store answering "no run holds an approval by the caller" wrongly: the total counts
            # the refused question, and the property's example finds it
            monkeypatch.setattr(type(store), "count_review_questions_seeing", unseen)
            with pytest.raises(AssertionError):
                runner.run(_check(store, approved, "unseen"))
        finally:
            runner.run(stack.aclose())
