"""``resolvers.types.from_fields`` builds ``SuspendedRun`` and ``SuspendedToolCall`` without their
dataclass ``__init__``: the objects must be the ones ``__init__`` would build."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from resolvers.types import RunStatus, SuspendedRun, SuspendedToolCall
from storage import SnapshotDocument

from ..storage._contract import decision, snapshot, tool_call

AT = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def _documents() -> list[SnapshotDocument]:
    decided = tool_call("c2")
    decided["decision"] = decision("declined")
    plain = snapshot("r1", calls=[tool_call("c1"), decided, tool_call("c3", approval=False)])
    inner = snapshot("r2", thread=None, resource=None, calls=[])
    inner["parentRunId"] = "r0"
    inner["lastError"] = {"type": "TimeoutError", "message": "model timed out", "at": AT}
    inner["status"] = "failed"
    return [plain, inner]


@pytest.mark.parametrize("cls", [SuspendedRun, SuspendedToolCall])
def test_types_built_from_fields_have_no_post_init(cls: type) -> None:
    assert not hasattr(cls, "__post_init__")


@pytest.mark.parametrize("doc", _documents(), ids=["with calls", "inner, failed"])
def test_from_document_builds_what_init_builds(doc: SnapshotDocument) -> None:
    run = SuspendedRun.from_document(doc)

    # exactly the instance dict that __init__ makes from the same values (its fields in order;
    # fields outside __init__, such as Node's `_id` or the `events` resolver, set by neither)
    names = [field.name for field in dataclasses.fields(SuspendedRun) if field.init]
    assert list(vars(run)) == names
    assert vars(run) == vars(SuspendedRun(**{name: getattr(run, name) for name in names}))
    call_names = [field.name for field in dataclasses.fields(SuspendedToolCall) if field.init]
    for call in run.tool_calls:
        assert list(vars(call)) == call_names
        assert vars(call) == vars(SuspendedToolCall(**{name: getattr(call, name) for name in call_names}))

    # and the values are the document's
    assert (run.run_id, run.agent_id, run.parent_run_id) == (doc["_id"], doc["agentId"], doc["parentRunId"])
    assert run.status is RunStatus(doc["status"])
    assert [call.tool_call_id for call in run.tool_calls] == [call["toolCallId"] for call in doc["toolCalls"]]
    decided = [call.decision.kind.value for call in run.tool_calls if call.decision is not None]
    assert decided == [call["decision"]["kind"] for call in doc["toolCalls"] if call["decision"] is not None]
    assert (run.last_error is None) == (doc["lastError"] is None)
