"""``schema.graphql`` is the schema printed from the code; it must never be stale."""

from __future__ import annotations

from pathlib import Path

from strawberry.printer import print_schema

from resolvers import schema

SCHEMA_FILE = Path(__file__).resolve().parents[2] / "schema.graphql"


def test_checked_in_schema_matches_the_code() -> None:
    printed = print_schema(schema)

    assert SCHEMA_FILE.read_text().strip() == printed.strip(), "schema.graphql is stale: run ./dev schema"


def test_schema_keeps_the_fixed_names_of_the_design() -> None:
    sdl = print_schema(schema)

    for fragment in (
        "suspendedRuns(agentId: ID!, filter: SuspendedRunFilter = null, page: PageInput = null, "
        "first: Int = null, after: String = null, last: Int = null, before: String = null): "
        "SuspendedRunConnection!",
        "suspendedRun(agentId: ID!, runId: ID!): SuspendedRun",
        'type SuspendedRun implements Node @key(fields: "runId")',
        "union DecisionResult = RunOutcome | AgentNotFound | RunNotFound | ToolCallNotFound | "
        "ToolCallAlreadyDecided | WrongToolCallKind | AmbiguousToolCall | InvalidResumeData",
        "startRun(input: StartRunInput!): StartRunResult!",
        "resumeRun(input: ResumeRunInput!): DecisionResult!",
        "totalCount: Int!",
    ):
        assert fragment in sdl, fragment
