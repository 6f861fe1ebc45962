"""The GraphQL documents the benchmark sends (``/graphql``) and their bodies for ``/bench/raw-page``."""

from __future__ import annotations

import json
from typing import Any

PAGE = """
query Page($agentId: ID!, $first: Int, $after: String, $page: PageInput, $filter: SuspendedRunFilter) {
  suspendedRuns(agentId: $agentId, first: $first, after: $after, page: $page, filter: $filter) {
    edges {
      cursor
      node {
        runId status threadId resourceId createdAt suspendedAt
        toolCalls { toolCallId toolName args requiresApproval suspendPayload }
      }
    }
    pageInfo { hasNextPage endCursor }
  }
}
"""
"""A page of runs as a review UI asks for it: about a dozen fields per run, with its tool calls.
``bench/raw_page.py`` answers the same JSON for the same variables without GraphQL."""

START_REFUND = """
mutation Start($prompt: String!) {
  startRun(input: {agentId: "refund-agent", prompt: $prompt}) {
    __typename
    ... on RunOutcome { runId status run { toolCalls { toolCallId } } }
    ... on UserError { code message }
  }
}
"""

APPROVE = """
mutation Approve($runId: ID!, $toolCallId: ID!) {
  approveToolCall(input: {agentId: "refund-agent", runId: $runId, toolCallId: $toolCallId}) {
    __typename
    ... on RunOutcome { status output }
    ... on UserError { code message }
  }
}
"""

AGENT = "refund-agent"
PAGE_SIZE = 20


def page_body(**variables: Any) -> str:
    """The JSON body of one ``PAGE`` request (the same body goes to ``/bench/raw-page``)."""
    return json.dumps({"query": PAGE, "variables": {"agentId": AGENT, **variables}}, separators=(",", ":"))
