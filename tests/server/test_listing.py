"""``suspendedRuns`` / ``suspendedRun`` / ``node`` over HTTP: order, filters, both paginations.

docs/api.md "Listing suspended runs" (Mastra's ``listSuspendedRuns()`` contract) and "Pagination"
(Relay cursors, argument errors).
"""

from __future__ import annotations

import asyncio
import base64
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from starlette.applications import Starlette

from storage import MongoSnapshotStore
from storage.mongo.transitions import _leaving

from .._graphql import (
    NODE,
    REFUND,
    REFUND_PROMPT,
    SUSPENDED_RUN,
    SUSPENDED_RUNS,
    WEATHER,
    WEATHER_PROMPT,
    GraphQLClient,
)

MASKED = "Unexpected error."

FROM_DATE_LITERAL = """
query { suspendedRuns(agentId: "refund-agent", filter: {fromDate: "2026-01-31T09:00:00"}) { totalCount } }
"""

AGENT_SUSPENDED_RUNS = """
query AgentRuns($first: Int) {
  agents { id suspendedRuns(first: $first) { totalCount nodes { runId agentId } } }
}
"""


async def _refund_runs(gql: GraphQLClient, count: int, **fields: Any) -> list[dict[str, Any]]:
    """``count`` suspended refund runs, oldest first, each created in a later millisecond."""
    runs = []
    for _ in range(count):
        runs.append(await gql.suspend(REFUND, REFUND_PROMPT, **fields))
        await asyncio.sleep(0.003)  # createdAt has millisecond precision: keep the order unambiguous
    created = [run["createdAt"] for run in runs]
    assert created == sorted(set(created)), created
    return runs


def _ids(runs: list[dict[str, Any]]) -> list[str]:
    return [run["runId"] for run in runs]


def _argument_error(errors: list[dict[str, Any]]) -> tuple[str, str, str]:
    """``(extensions.code, extensions.argument, message)`` of the single error."""
    [error] = errors
    return error["extensions"]["code"], error["extensions"].get("argument"), error["message"]


# -- order and scope -------------------------------------------------------------------------------


async def test_runs_are_listed_newest_first_and_only_under_their_own_agent(gql: GraphQLClient) -> None:
    # given three refund runs and, in between, a weather run
    first, second = await _refund_runs(gql, 2)
    weather = await gql.suspend(WEATHER, WEATHER_PROMPT)
    await asyncio.sleep(0.003)
    [third] = await _refund_runs(gql, 1)

    # when each agent lists its suspended runs
    refund_page = await gql.suspended_runs(REFUND)
    weather_page = await gql.suspended_runs(WEATHER)

    # then each sees only its own runs, newest first, with the total
    assert _ids([e["node"] for e in refund_page["edges"]]) == _ids([third, second, first])
    assert refund_page["totalCount"] == 3
    assert all(edge["node"]["agentId"] == REFUND for edge in refund_page["edges"])
    assert refund_page["pageInfo"]["hasNextPage"] is False
    assert refund_page["pageInfo"]["hasPreviousPage"] is False
    assert _ids([e["node"] for e in weather_page["edges"]]) == [weather["runId"]]
    assert weather_page["totalCount"] == 1
    # and the listed run is the run startRun returned
    assert refund_page["edges"][0]["node"] == third


async def test_agent_type_lists_the_same_runs_as_the_query_field(gql: GraphQLClient) -> None:
    # given two refund runs and one weather run
    refunds = await _refund_runs(gql, 2)
    weather = await gql.suspend(WEATHER, WEATHER_PROMPT)

    # when the agents are read with their suspended runs
    agents = {a["id"]: a for a in (await gql.data(AGENT_SUSPENDED_RUNS, first=10))["agents"]}

    # then every demo agent is there, each with its own runs newest first
    assert set(agents) == {REFUND, WEATHER, "support-supervisor"}
    assert agents[REFUND]["suspendedRuns"] == {
        "totalCount": 2,
        "nodes": [{"runId": r["runId"], "agentId": REFUND} for r in reversed(refunds)],
    }
    assert agents[WEATHER]["suspendedRuns"]["nodes"] == [{"runId": weather["runId"], "agentId": WEATHER}]
    assert agents["support-supervisor"]["suspendedRuns"] == {"totalCount": 0, "nodes": []}


async def test_suspended_run_returns_the_run_and_null_for_another_agents_run(gql: GraphQLClient) -> None:
    # given a refund run and a weather run
    refund = await gql.suspend(REFUND, REFUND_PROMPT)
    weather = await gql.suspend(WEATHER, WEATHER_PROMPT)

    # when each is looked up under its agent, under the other agent, and by an unknown id
    # then only the owner sees it
    assert await gql.suspended_run(REFUND, refund["runId"]) == refund
    assert await gql.suspended_run(WEATHER, weather["runId"]) == weather
    assert await gql.suspended_run(WEATHER, refund["runId"]) is None
    assert await gql.suspended_run(REFUND, weather["runId"]) is None
    assert await gql.suspended_run(REFUND, "0" * 32) is None


async def test_node_returns_the_run_by_its_global_id(gql: GraphQLClient) -> None:
    # given a suspended refund run
    run = await gql.suspend(REFUND, REFUND_PROMPT)

    # when it is fetched through node() with its global id
    node = (await gql.data(NODE, id=run["id"]))["node"]

    # then it is the same run
    assert node["__typename"] == "SuspendedRun"
    assert node["id"] == run["id"]
    assert node["id"] != run["runId"]
    assert {k: v for k, v in node.items() if k != "__typename"} == run


async def test_node_of_a_run_that_finished_is_null(gql: GraphQLClient) -> None:
    # given a refund run that was approved and so finished
    run = await gql.suspend(REFUND, REFUND_PROMPT)
    assert (await gql.approve(REFUND, run["runId"], run["toolCalls"][0]["toolCallId"]))["status"] == "COMPLETED"

    # when it is fetched through node()
    body = await gql.execute(NODE, id=run["id"])

    # then there is no such node, and no error; the answer reports its cost (1 node + 5 tool calls
    # of 5 points: the call, its decision and 3 JSON values; docs/api.md "Query cost")
    assert body == {
        "data": {"node": None},
        "extensions": {"cost": {"requestedQueryCost": 26, "maximumAvailable": 10_000}},
    }


async def test_a_run_whose_completion_is_recorded_is_neither_listed_nor_counted(
    app: Starlette, gql: GraphQLClient
) -> None:
    # given two suspended refund runs, the newer one finished: on MongoDB its completion recorded
    # inside the snapshot (a process died before appending the event and deleting the snapshot)
    waiting, finished = await _refund_runs(gql, 2)
    store = app.state.store
    if isinstance(store, MongoSnapshotStore):
        completed = {"_id": "0-completed", "runId": finished["runId"], "agentId": REFUND, "threadId": None}
        completed |= {"resourceId": None, "type": "completed", "at": datetime.now(UTC), "by": None, "data": {}}
        # as delete_claimed's first write records it (with the run's removal from the kept counts)
        await store.database["run_snapshots"].update_one({"_id": finished["runId"]}, _leaving(completed))
    else:
        call_id = finished["toolCalls"][0]["toolCallId"]
        assert (await gql.approve(REFUND, finished["runId"], call_id))["status"] == "COMPLETED"

    # when the runs are read, listed and counted
    read = await gql.suspended_run(REFUND, finished["runId"])
    connection = await gql.suspended_runs(REFUND, first=10)

    # then the finished run reads as gone and only the waiting one is listed and counted
    assert read is None
    assert [node["runId"] for node in connection["nodes"]] == [waiting["runId"]]
    assert connection["totalCount"] == 1


async def test_node_with_an_id_that_is_not_a_global_id_is_bad_user_input(gql: GraphQLClient) -> None:
    # given a suspended refund run
    await gql.suspend(REFUND, REFUND_PROMPT)

    # when node() is given an id this API never made
    data, errors = await gql.errors(NODE, id="garbage")

    # then there is no node, and the error names the `id` argument (not a masked server fault)
    assert data == {"node": None}
    code, named, message = _argument_error(errors)
    assert (code, named) == ("BAD_USER_INPUT", "id")
    assert message != MASKED


async def test_node_with_the_global_id_of_another_type_is_null(gql: GraphQLClient) -> None:
    # given a suspended refund run
    run = await gql.suspend(REFUND, REFUND_PROMPT)

    # when node() is given a well-formed global id of a type that is no Node here ("Agent:<runId>")
    agent_id = base64.b64encode(f"Agent:{run['runId']}".encode()).decode()
    body = await gql.execute(NODE, id=agent_id)

    # then there is no such node, and no error; the answer reports its cost (1 node + 5 tool calls
    # of 5 points: the call, its decision and 3 JSON values; docs/api.md "Query cost")
    assert body == {
        "data": {"node": None},
        "extensions": {"cost": {"requestedQueryCost": 26, "maximumAvailable": 10_000}},
    }


# -- filters ---------------------------------------------------------------------------------------


@pytest.fixture
async def scoped_runs(gql: GraphQLClient) -> dict[str, dict[str, Any]]:
    """Five refund runs, oldest first r1..r5, in threads / resources; a weather run in thread t1."""
    scopes = [
        ("r1", {"threadId": "t1", "resourceId": "alice"}),
        ("r2", {"threadId": "t1", "resourceId": "bob"}),
        ("r3", {"threadId": "t2", "resourceId": "alice"}),
        ("r4", {}),
        ("r5", {"threadId": "t1", "resourceId": "alice"}),
    ]
    runs = {}
    for name, fields in scopes:
        [runs[name]] = await _refund_runs(gql, 1, **fields)
    await gql.suspend(WEATHER, WEATHER_PROMPT, threadId="t1", resourceId="alice")
    return runs


@pytest.mark.parametrize(
    ("run_filter", "expected"),
    [
        ({"threadId": "t1"}, ["r5", "r2", "r1"]),
        ({"threadId": "t2"}, ["r3"]),
        ({"threadId": "none"}, []),
        ({"resourceId": "alice"}, ["r5", "r3", "r1"]),
        ({"threadId": "t1", "resourceId": "alice"}, ["r5", "r1"]),
        ({"threadId": "t2", "resourceId": "bob"}, []),
        ({"fromDate": "r2"}, ["r5", "r4", "r3", "r2"]),
        ({"toDate": "r4"}, ["r4", "r3", "r2", "r1"]),
        ({"fromDate": "r2", "toDate": "r4"}, ["r4", "r3", "r2"]),
        ({"fromDate": "r3", "toDate": "r3"}, ["r3"]),
        ({"threadId": "t1", "fromDate": "r2", "toDate": "r5"}, ["r5", "r2"]),
        ({"threadId": "t1", "resourceId": "alice", "fromDate": "r2"}, ["r5"]),
        ({"resourceId": "alice", "toDate": "r4"}, ["r3", "r1"]),
        ({}, ["r5", "r4", "r3", "r2", "r1"]),
    ],
)
async def test_filters_select_runs_by_thread_resource_and_inclusive_creation_dates(
    gql: GraphQLClient,
    scoped_runs: dict[str, dict[str, Any]],
    run_filter: dict[str, str],
    expected: list[str],
) -> None:
    # given five refund runs r1..r5 in various threads and resources (and a weather run in t1)
    # when listing with a filter whose date bounds are the exact createdAt of runs
    variables = {
        key: scoped_runs[value]["createdAt"] if key.endswith("Date") else value for key, value in run_filter.items()
    }
    page = await gql.suspended_runs(REFUND, filter=variables)

    # then exactly the matching refund runs are listed newest first, and counted
    assert _ids([e["node"] for e in page["edges"]]) == [scoped_runs[name]["runId"] for name in expected]
    assert page["totalCount"] == len(expected)


async def test_date_bounds_with_another_offset_are_the_same_instant(
    gql: GraphQLClient, scoped_runs: dict[str, dict[str, Any]]
) -> None:
    # given r3's creation time written with a +02:00 offset
    created = datetime.fromisoformat(scoped_runs["r3"]["createdAt"])
    shifted = created.astimezone(timezone(timedelta(hours=2))).isoformat(timespec="milliseconds")
    assert shifted.endswith("+02:00")

    # when it is used as both bounds
    page = await gql.suspended_runs(REFUND, filter={"fromDate": shifted, "toDate": shifted})

    # then r3 alone is listed
    assert _ids([e["node"] for e in page["edges"]]) == [scoped_runs["r3"]["runId"]]
    assert page["totalCount"] == 1


@pytest.mark.parametrize("bound", ["fromDate", "toDate"])
async def test_a_date_without_offset_is_rejected_and_nothing_is_listed(gql: GraphQLClient, bound: str) -> None:
    # given a suspended refund run
    await gql.suspend(REFUND, REFUND_PROMPT)

    # when the filter carries a date-time with no UTC offset
    data, errors = await gql.errors(SUSPENDED_RUNS, agentId=REFUND, filter={bound: "2026-01-31T09:00:00"})

    # then the request is rejected with one error, and nothing is listed
    assert data is None
    assert len(errors) == 1
    assert "path" not in errors[0]


@pytest.mark.parametrize(
    ("document", "variables", "explains"),
    [
        (SUSPENDED_RUNS, {"agentId": REFUND, "filter": {"fromDate": "2026-01-31T09:00:00"}}, "offset"),
        (SUSPENDED_RUNS, {"agentId": REFUND, "filter": {"toDate": "2026-02-31T09:00:00Z"}}, "2026-02-31"),
        (SUSPENDED_RUNS, {"agentId": REFUND, "first": "ten"}, "Int"),
        (FROM_DATE_LITERAL, {}, "offset"),
    ],
)
async def test_a_malformed_argument_value_is_reported_not_masked(
    gql: GraphQLClient, document: str, variables: dict[str, Any], explains: str
) -> None:
    # given a suspended refund run
    await gql.suspend(REFUND, REFUND_PROMPT)

    # when an argument value does not coerce to its type (a malformed request, not a server fault)
    data, errors = await gql.errors(document, **variables)

    # then nothing is listed and the error says what is wrong with the value
    assert data is None
    [error] = errors
    assert error["message"] != MASKED
    assert explains in error["message"]


# -- seed pagination: page / perPage ---------------------------------------------------------------


async def test_page_and_per_page_slice_the_runs_and_total_counts_them_all(gql: GraphQLClient) -> None:
    # given five refund runs r1..r5
    r1, r2, r3, r4, r5 = await _refund_runs(gql, 5)

    # when pages of two are read, and a page past the end
    pages = [await gql.suspended_runs(REFUND, page={"page": n, "perPage": 2}) for n in range(4)]

    # then pages 0, 1, 2 hold the runs newest first, the page past the end none, all with the true total
    assert [_ids([e["node"] for e in p["edges"]]) for p in pages] == [
        _ids([r5, r4]),
        _ids([r3, r2]),
        _ids([r1]),
        [],
    ]
    assert [p["totalCount"] for p in pages] == [5, 5, 5, 5]
    assert [p["pageInfo"]["hasNextPage"] for p in pages] == [True, True, False, False]
    assert [p["pageInfo"]["hasPreviousPage"] for p in pages] == [False, True, True, True]
    assert pages[3]["pageInfo"]["startCursor"] is None
    assert pages[3]["pageInfo"]["endCursor"] is None


async def test_total_counts_the_filtered_runs_before_pagination(
    gql: GraphQLClient, scoped_runs: dict[str, dict[str, Any]]
) -> None:
    # given r1..r5, three of them in thread t1
    # when the second page of one run is read in thread t1
    page = await gql.suspended_runs(REFUND, filter={"threadId": "t1"}, page={"page": 1, "perPage": 1})

    # then it holds r2 and the total is the three matches
    assert _ids([e["node"] for e in page["edges"]]) == [scoped_runs["r2"]["runId"]]
    assert page["totalCount"] == 3


@pytest.mark.parametrize(
    ("page", "argument"),
    [
        ({"page": 0, "perPage": 0}, "page.perPage"),
        ({"page": 0, "perPage": -3}, "page.perPage"),
        ({"page": -1, "perPage": 10}, "page.page"),
        ({"page": 0, "perPage": 101}, "page.perPage"),
    ],
)
async def test_invalid_page_arguments_are_bad_user_input_naming_the_argument(
    gql: GraphQLClient, page: dict[str, int], argument: str
) -> None:
    # given a suspended refund run
    await gql.suspend(REFUND, REFUND_PROMPT)

    # when the page arguments break Mastra's rules (or the cap of 100)
    data, errors = await gql.errors(SUSPENDED_RUNS, agentId=REFUND, page=page)

    # then nothing is listed and the error names the argument
    assert data is None
    code, named, message = _argument_error(errors)
    assert code == "BAD_USER_INPUT"
    assert named == argument
    assert argument.split(".")[-1] in message


async def test_mixing_page_and_cursor_pagination_is_rejected(gql: GraphQLClient) -> None:
    # given a suspended refund run
    await gql.suspend(REFUND, REFUND_PROMPT)

    # when both `page` and `first` are given
    data, errors = await gql.errors(SUSPENDED_RUNS, agentId=REFUND, page={"page": 0, "perPage": 5}, first=5)

    # then the request is rejected, naming both
    assert data is None
    code, named, message = _argument_error(errors)
    assert code == "BAD_USER_INPUT"
    assert named == "page"
    assert "page" in message
    assert "first" in message


async def test_listing_an_unknown_agent_is_agent_not_found(gql: GraphQLClient) -> None:
    # given no agent "nope"
    # when its runs are listed
    data, errors = await gql.errors(SUSPENDED_RUNS, agentId="nope")

    # then the error is AGENT_NOT_FOUND on agentId
    assert data is None
    code, named, message = _argument_error(errors)
    assert code == "AGENT_NOT_FOUND"
    assert named == "agentId"
    # and the message lists the agents the caller may use
    assert message == (
        "No agent is registered with id 'nope'; known agents: refund-agent, support-supervisor, weather-agent."
    )


async def test_a_from_date_after_the_to_date_is_bad_user_input(
    gql: GraphQLClient, scoped_runs: dict[str, dict[str, Any]]
) -> None:
    # given runs r1..r5
    # when fromDate (r4) is later than toDate (r2)
    data, errors = await gql.errors(
        SUSPENDED_RUNS,
        agentId=REFUND,
        filter={"fromDate": scoped_runs["r4"]["createdAt"], "toDate": scoped_runs["r2"]["createdAt"]},
    )

    # then the request is rejected naming the filter bound
    assert data is None
    code, named, message = _argument_error(errors)
    assert (code, named) == ("BAD_USER_INPUT", "filter.fromDate")
    assert "fromDate" in message


async def test_the_largest_allowed_page_is_accepted(gql: GraphQLClient) -> None:
    # given two refund runs
    runs = await _refund_runs(gql, 2)

    # when a page of 100 (the cap) is asked, in both styles
    seed = await gql.suspended_runs(REFUND, page={"page": 0, "perPage": 100})
    relay = await gql.suspended_runs(REFUND, first=100)

    # then both answer every run
    assert _ids([e["node"] for e in seed["edges"]]) == _ids(runs[::-1])
    assert _ids([e["node"] for e in relay["edges"]]) == _ids(runs[::-1])


async def test_suspended_run_of_an_unknown_agent_is_agent_not_found(gql: GraphQLClient) -> None:
    # given no agent "nope"
    # when one of its runs is looked up
    data, errors = await gql.errors(SUSPENDED_RUN, agentId="nope", runId="0" * 32)

    # then the error is AGENT_NOT_FOUND on agentId
    assert data == {"suspendedRun": None}
    code, named, message = _argument_error(errors)
    assert (code, named) == ("AGENT_NOT_FOUND", "agentId")
    assert message == (
        "No agent is registered with id 'nope'; known agents: refund-agent, support-supervisor, weather-agent."
    )


# -- Relay cursors ---------------------------------------------------------------------------------


async def test_first_after_walks_every_run_once_in_order(gql: GraphQLClient) -> None:
    # given five refund runs and a weather run
    runs = await _refund_runs(gql, 5)
    await gql.suspend(WEATHER, WEATHER_PROMPT)

    # when walking forward two at a time from the start
    pages = []
    after = None
    while True:
        page = await gql.suspended_runs(REFUND, first=2, after=after)
        pages.append(page)
        if not page["pageInfo"]["hasNextPage"]:
            break
        after = page["pageInfo"]["endCursor"]
        assert len(pages) < 10, "the walk does not end"

    # then each run comes once, newest first, and pageInfo tells where each page stands
    walked = [_ids([e["node"] for e in p["edges"]]) for p in pages]
    assert walked == [_ids(runs[4:2:-1]), _ids(runs[2:0:-1]), _ids(runs[0:1])]
    assert [p["pageInfo"]["hasPreviousPage"] for p in pages] == [False, True, True]
    assert [p["pageInfo"]["hasNextPage"] for p in pages] == [True, True, False]
    for p in pages:
        assert p["pageInfo"]["startCursor"] == p["edges"][0]["cursor"]
        assert p["pageInfo"]["endCursor"] == p["edges"][-1]["cursor"]
        assert p["totalCount"] == 5


async def test_last_before_walks_every_run_once_from_the_end(gql: GraphQLClient) -> None:
    # given five refund runs r1..r5 (listed r5..r1)
    runs = await _refund_runs(gql, 5)

    # when walking backward two at a time from the end
    pages = []
    before = None
    while True:
        page = await gql.suspended_runs(REFUND, last=2, before=before)
        pages.append(page)
        if not page["pageInfo"]["hasPreviousPage"]:
            break
        before = page["pageInfo"]["startCursor"]
        assert len(pages) < 10, "the walk does not end"

    # then the pages hold the runs in listing order, from the oldest pair back to the newest run
    walked = [_ids([e["node"] for e in p["edges"]]) for p in pages]
    assert walked == [_ids([runs[1], runs[0]]), _ids([runs[3], runs[2]]), _ids([runs[4]])]
    assert [p["pageInfo"]["hasPreviousPage"] for p in pages] == [True, True, False]
    assert [p["pageInfo"]["hasNextPage"] for p in pages] == [False, True, True]


async def test_a_cursor_walk_is_stable_while_runs_are_added_and_removed(gql: GraphQLClient) -> None:
    # given four refund runs r1..r4, and the first page of two read (r4, r3)
    r1, r2, r3, r4 = await _refund_runs(gql, 4)
    first_page = await gql.suspended_runs(REFUND, first=2)
    assert _ids([e["node"] for e in first_page["edges"]]) == _ids([r4, r3])

    # when a newer run is added and r4 (already read) finishes, then the walk goes on
    await gql.suspend(REFUND, REFUND_PROMPT)
    approved = await gql.approve(REFUND, r4["runId"], r4["toolCalls"][0]["toolCallId"])
    assert approved["status"] == "COMPLETED"
    rest = await gql.suspended_runs(REFUND, first=2, after=first_page["pageInfo"]["endCursor"])

    # then the next page is r2, r1: nothing skipped, nothing repeated
    assert _ids([e["node"] for e in rest["edges"]]) == _ids([r2, r1])
    assert rest["pageInfo"]["hasNextPage"] is False
    assert rest["pageInfo"]["hasPreviousPage"] is True


@pytest.mark.parametrize("argument", ["after", "before"])
@pytest.mark.parametrize("cursor", ["garbage!", "bm90LWpzb24", "WyJ4IiwgMV0"])
async def test_a_cursor_not_made_by_the_api_is_bad_user_input(gql: GraphQLClient, argument: str, cursor: str) -> None:
    # given a suspended refund run
    await gql.suspend(REFUND, REFUND_PROMPT)

    # when the listing is given a cursor the API never returned
    data, errors = await gql.errors(SUSPENDED_RUNS, agentId=REFUND, **{argument: cursor})

    # then the request is rejected, naming the cursor argument
    assert data is None
    code, named, message = _argument_error(errors)
    assert code == "BAD_USER_INPUT"
    assert named == argument
    assert argument in message


@pytest.mark.parametrize(
    ("arguments", "argument"),
    [
        ({"first": 101}, "first"),
        ({"first": -1}, "first"),
        ({"last": 101}, "last"),
        ({"first": 1, "last": 1}, "last"),
    ],
)
async def test_invalid_cursor_page_sizes_are_bad_user_input(
    gql: GraphQLClient, arguments: dict[str, int], argument: str
) -> None:
    # given a suspended refund run
    await gql.suspend(REFUND, REFUND_PROMPT)

    # when the page size is out of range, or first and last are mixed
    data, errors = await gql.errors(SUSPENDED_RUNS, agentId=REFUND, **arguments)

    # then the request is rejected naming the argument
    assert data is None
    code, named, message = _argument_error(errors)
    assert code == "BAD_USER_INPUT"
    assert named == argument
    assert argument in message
