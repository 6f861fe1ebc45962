"""``POST /bench/raw-page``: the benchmark's listing page without GraphQL (docs/benchmarks.md).

Mounted by the benchmark's own launcher (``bench.serve``), never by the product. It takes the same JSON body as the
benchmark's GraphQL request (``bench/queries.py``: ``query`` is ignored; ``variables`` has
``agentId``, ``first``, ``after``, ``filter.threadId`` or ``page``), makes the same store calls
as the ``suspendedRuns`` resolver, and answers the same ``data`` as ``/graphql`` does for
``bench.queries.PAGE`` (without its ``extensions.cost``), encoded by orjson like ``/graphql``.
Comparing the two measures what the GraphQL layer costs.
"""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from resolvers.reads.pagination import decode_cursor, encode_cursor
from resolvers.scalars import serialize_datetime
from storage import RunFilter, SnapshotDocument, sort_key
from storage.protocol import RunPage


def _node(doc: SnapshotDocument) -> dict[str, Any]:
    return {
        "runId": doc["_id"],
        "status": doc["status"].upper(),
        "threadId": doc["threadId"],
        "resourceId": doc["resourceId"],
        "createdAt": serialize_datetime(doc["createdAt"]),
        "suspendedAt": serialize_datetime(doc["suspendedAt"]),
        "toolCalls": [
            {
                "toolCallId": call["toolCallId"],
                "toolName": call["toolName"],
                "args": call["args"],
                "requiresApproval": call["requiresApproval"],
                "suspendPayload": call["suspendPayload"],
            }
            for call in doc["toolCalls"]
        ],
    }


async def raw_page(request: Request) -> Response:
    """One page of ``suspendedRuns`` as ``bench.queries.PAGE`` selects it, built by hand."""
    variables = (await request.json()).get("variables") or {}
    store = request.app.state.store
    thread = (variables.get("filter") or {}).get("threadId")
    page = variables.get("page")
    limit = page["perPage"] if page else variables.get("first") or request.app.state.settings.max_page_size
    skip = page["page"] * page["perPage"] if page else 0
    after = variables.get("after")
    docs = await store.list_runs(
        variables["agentId"],
        RunFilter(thread_id=thread),
        RunPage(limit=limit + 1, skip=skip, after=None if after is None else decode_cursor(after, argument="after")),
    )
    has_next = len(docs) > limit
    edges = [{"cursor": encode_cursor(sort_key(d)), "node": _node(d)} for d in docs[:limit]]
    return Response(
        orjson.dumps(
            {
                "data": {
                    "suspendedRuns": {
                        "edges": edges,
                        "pageInfo": {"hasNextPage": has_next, "endCursor": edges[-1]["cursor"] if edges else None},
                    }
                }
            }
        ),
        media_type="application/json",
    )


__all__ = ["raw_page"]
