"""Every condition of ``storage.rules``, compiled to a MongoDB filter (``storage.mongo.conditions``),
finds on each MongoDB test server (DocumentDB, FerretDB 1.24) exactly the run documents that
``rules.matches`` accepts: hypothesis-generated documents in ``run_snapshots`` (with its indexes),
whose fields are set, null or missing, read through array indexes and compared at equal times.
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from storage import MongoSnapshotStore, rules
from storage.mongo import compiled

from ..conftest import open_store

pytestmark = pytest.mark.mongo

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TIMES = st.sampled_from([T0 + timedelta(seconds=s) for s in (0, 1, 2)])
"""Three instants (whole milliseconds, as stored), so that bounds meet stored values exactly."""
BOUNDS = st.sampled_from([T0 + timedelta(seconds=s, microseconds=us) for s in (0, 1, 2) for us in (-1, 0, 1)])
"""Bounds of the conditions: the stored instants, and a microsecond either side of each (the
stores keep whole milliseconds; a bound need not be one)."""


def maybe_null(values: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.none(), values)


CALLS = st.fixed_dictionaries(
    {"toolCallId": st.sampled_from(["c1", "c2"])},
    optional={
        "questionId": maybe_null(st.sampled_from(["q1", "q2"])),
        "decision": maybe_null(st.sampled_from([{"kind": "approved"}, {}, "resumed"])),
        "approvals": maybe_null(
            st.lists(st.fixed_dictionaries({"decidedBy": st.sampled_from(["a", "b"]), "decidedAt": TIMES}), max_size=3)
        ),
        "expiresAt": maybe_null(TIMES),
        "reminded": maybe_null(st.booleans()),
        "escalated": maybe_null(st.booleans()),
        "reviewClaim": maybe_null(
            st.fixed_dictionaries({"by": st.sampled_from(["i1", "i2"])}, optional={"until": maybe_null(TIMES)})
        ),
    },
)
"""A tool call as stored: each optional field missing, null or set (a decision of any shape)."""

RUNS = st.fixed_dictionaries(
    {
        "agentId": st.sampled_from(["a1", "a2"]),
        "status": st.sampled_from(["suspended", "resuming"]),
        "toolCalls": st.lists(CALLS, max_size=3),
    },
    optional={
        "pendingCount": st.integers(0, 2),
        "version": st.integers(0, 2),
        "claim": maybe_null(
            st.fixed_dictionaries({"by": st.sampled_from(["i1", "i2"])}, optional={"until": maybe_null(TIMES)})
        ),
        "lastError": maybe_null(st.just({"type": "RuntimeError", "message": "boom"})),
        "updatedAt": maybe_null(TIMES),
        "expiresAt": maybe_null(TIMES),
        "finishedAt": maybe_null(TIMES),
        "retentionFrom": maybe_null(TIMES),
    },
)
"""A run document as stored by any version: the fields the rules read, each possibly missing or null
(``finishedAt`` is an idempotency key's or a webhook delivery's, ``retentionFrom`` an event's: the
rules on them read one field)."""


ARGUMENTS = st.fixed_dictionaries(
    {
        "agent": st.sampled_from(["a1", "a2"]),
        "run": st.sampled_from(["r0", "r1", "r2"]),
        "by": st.sampled_from(["i1", "i2"]),
        "index": st.integers(0, 2),
        "call": st.sampled_from(["c1", "c2"]),
        "question": maybe_null(st.sampled_from(["q1", "q2"])),
        "count": st.integers(0, 3),
        "now": BOUNDS,
        "idle_before": BOUNDS,
        "version": maybe_null(st.integers(0, 2)),
        "notice": st.sampled_from(["reminded", "escalated"]),
    }
)
"""The arguments of the rules, from the same values as the documents."""


def every_rule(a: dict[str, Any]) -> dict[str, rules.Condition]:
    """Each condition of ``storage.rules`` on arguments ``a`` (``ARGUMENTS``), by its function's name."""
    return {
        "owned": rules.owned(a["agent"], a["run"]),
        "call_undecided": rules.call_undecided(a["index"], a["call"], a["question"]),
        "pending_call": rules.pending_call(a["agent"], a["run"], a["index"], a["call"], a["question"]),
        "approvals_counted": rules.approvals_counted(a["index"], a["count"]),
        "notice_unsent": rules.notice_unsent(a["index"], a["notice"]),
        "review_claim_write": rules.review_claim_write(
            a["agent"], a["run"], a["index"], a["call"], a["question"], a["count"]
        ),
        "review_claim_held": rules.review_claim_held(a["index"], a["by"]),
        "review_claim_open": rules.review_claim_open(a["index"], a["by"], a["now"]),
        "lease_lapsed": rules.lease_lapsed(a["now"]),
        "claimable": rules.claimable(a["now"], a["version"]),
        "last_pending": rules.last_pending(a["count"]),
        "held": rules.held(a["agent"], a["run"], a["by"]),
        "stalled": rules.stalled(a["now"], a["idle_before"]),
        "expired": rules.expired(a["now"]),
        "key_expired": rules.key_expired(a["now"]),
        "delivery_expired": rules.delivery_expired(a["now"]),
        "events_expired": rules.events_expired(a["now"]),
    }


CONDITION_TYPES = {"Condition", *(kind.__name__ for kind in (rules.AllOf, rules.AnyOf, rules.AtMost, rules.Before))}
CONDITION_TYPES |= {kind.__name__ for kind in (rules.Equals, rules.Length, rules.NoValue)}


def test_every_rule_of_storage_rules_is_checked() -> None:
    # the rules are the functions of storage.rules returning a condition, but its two combinators
    found = {
        name
        for name in rules.__all__
        if inspect.isfunction(function := getattr(rules, name))
        and function.__annotations__["return"] in CONDITION_TYPES
    } - {"all_of", "any_of"}
    some = {
        "agent": "a1",
        "run": "r0",
        "by": "i1",
        "index": 0,
        "call": "c1",
        "question": None,
        "count": 0,
        "notice": "reminded",
    }
    assert found == set(every_rule({**some, "now": T0, "idle_before": T0, "version": None}))


@pytest.fixture(params=["mongo", "ferretdb1"])
async def mongo(request: pytest.FixtureRequest) -> AsyncIterator[MongoSnapshotStore]:
    """The MongoDB store on each test server: DocumentDB (or ``MONGODB_URI``), then FerretDB 1.24."""
    async with open_store(request, request.param) as store:
        assert isinstance(store, MongoSnapshotStore)
        yield store


@settings(
    max_examples=60,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(docs=st.lists(RUNS, max_size=6), arguments=ARGUMENTS, pair=st.tuples(st.integers(0, 8), st.integers(0, 8)))
async def test_a_compiled_rule_finds_exactly_the_runs_it_matches(
    mongo: MongoSnapshotStore, docs: list[dict[str, Any]], arguments: dict[str, Any], pair: tuple[int, int]
) -> None:
    # given run documents in the store's collection (ids r0, r1, ...)
    runs = mongo.database["run_snapshots"]
    await runs.delete_many({})
    stored = [{"_id": f"r{i}", **doc} for i, doc in enumerate(docs)]
    if stored:
        await runs.insert_many(stored)
    # and two of the rules joined both ways, so that joined filters name the same fields
    conditions = every_rule(arguments)
    first, second = (list(conditions.values())[i] for i in pair)
    conditions |= {"both": rules.all_of(first, second), "either": rules.any_of(first, second)}

    # when each rule's compiled filter is sent
    found: dict[str, set[str]] = {}
    for name, condition in conditions.items():
        found[name] = {doc["_id"] async for doc in runs.find(compiled(condition), {"_id": 1})}

    # then it finds exactly the documents the rule's meaning accepts
    meant = {name: {doc["_id"] for doc in stored if rules.matches(c, doc)} for name, c in conditions.items()}
    assert found == meant
