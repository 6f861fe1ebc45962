"""``needs_decision_context``: which continued runs get ``DecisionToolset``; ``RunCapability``.

The runs themselves are covered by the multi-question, delegation and approval tests; these
check the predicate on the ``DeferredToolResults`` shapes ``deferred_tool_results`` builds.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai.tools import DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.toolsets import FunctionToolset

from runtime.running.decision_toolset import DecisionToolset, RunCapability, needs_decision_context
from runtime.running.identity import CallIdentity


def _results(**calls: dict[str, Any] | None) -> DeferredToolResults:
    results = DeferredToolResults()
    for call_id, ours in calls.items():
        if ours is None:
            results.approvals[call_id] = ToolDenied("declined")
        else:
            results.approvals[call_id] = ToolApproved()
            results.metadata[call_id] = {"runsgate": ours}
    return results


def test_a_run_that_re_runs_no_call_or_only_plainly_approved_ones_does_without_it() -> None:
    assert not needs_decision_context(None)
    assert not needs_decision_context(_results(a=None))
    assert not needs_decision_context(_results(a={"decision": "approved", "approved": True, "answers": []}, b=None))


def test_a_call_with_answers_to_replay_or_not_approved_needs_it() -> None:
    approved = {"decision": "approved", "approved": True, "answers": []}
    resumed = {"decision": "resumed", "approved": False, "answers": [{"name": "Paris"}]}
    approved_after_answers = {"decision": "approved", "approved": True, "answers": [1]}
    delegated = {"decision": "approved", "approved": False, "answers": [], "call": {}}
    for ours in (resumed, approved_after_answers, delegated):
        assert needs_decision_context(_results(a=approved, b=ours))


def test_one_capability_gives_identities_and_wraps_the_tools() -> None:
    """pydantic-ai dispatches each hook, and wraps each node's event stream, once per capability:
    a run gets one of runsgate's, whichever it needs."""
    toolset = FunctionToolset[None]()
    assert CallIdentity(run_id="r").get_wrapper_toolset(toolset) is None
    assert isinstance(RunCapability(run_id="r"), CallIdentity)
    wrapped = RunCapability(run_id="r").get_wrapper_toolset(toolset)
    assert isinstance(wrapped, DecisionToolset)
    assert wrapped.wrapped is toolset
