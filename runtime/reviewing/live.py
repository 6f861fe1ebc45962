"""The reviewers' queue, live: what each run event changes in one subscriber's queue.

A run event (every agent's, from the event log) names a run, and often one question of it. The
run is read as it is now and each question concerned is told whole: ``entered`` or ``changed``
with its queue item when the queue lists it for the subscriber (the same rule and filters as
``ReviewQueue.page``), else ``left``. ``left`` is told only of a question the subscriber was told
of, or that the gate would let it decide (``ReviewQueue.may_decide``; once the run is gone,
``may_decide_tool``): a stream never names a question its subscriber could not list.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Literal

from storage import EventDocument, SnapshotDocument

from ..access import Principal, can_see_run
from ..running.deferred import question_id
from .queue import QueueItem, QueueQuery, ReviewQueue

QUEUE_EVENT_TYPES = frozenset(
    {
        "suspended",
        "decision",
        "approval",
        "expired",
        "reminded",
        "escalated",
        "reviewClaimed",
        "reviewReleased",
        "resumed",
        "completed",
        "failed",
    }
)
"""The run events that may change a queue (``started`` and ``takeover`` never do)."""
REMEMBERED = 10_000
"""Questions one subscriber's stream remembers having told as in the queue (the oldest forgotten)."""

ChangeKind = Literal["entered", "changed", "left"]


@dataclass(frozen=True, kw_only=True)
class QueueChange:
    """One question's place in a subscriber's queue after ``event``."""

    kind: ChangeKind
    event: EventDocument
    number: int
    """Its place among the changes of ``event`` (0 first)."""
    agent_id: str
    run_id: str
    tool_call_id: str
    question_id: str
    tool_name: str
    item: QueueItem | None
    """``entered``/``changed``: the question as the queue lists it; ``left``: ``None``."""


@dataclass(frozen=True)
class _Question:
    tool_call_id: str
    question_id: str
    tool_name: str
    index: int | None
    """Its call's index in the stored run; ``None`` once the run is gone."""


class QueueWatch:
    """One subscriber's view of the queue: which events concern it and what they change.

    Args:
        queue: The queue (its rule and the store).
        principal: The subscriber.
        query: Its filters (``QueueQuery``).
    """

    def __init__(self, queue: ReviewQueue, principal: Principal, query: QueueQuery) -> None:
        self._queue = queue
        self._principal = principal
        self._query = query
        self._told: OrderedDict[tuple[str, str], tuple[str, str]] = OrderedDict()
        """``(runId, questionId)`` -> ``(toolCallId, toolName)`` of each question last told as in
        the queue, oldest first."""

    def accepts(self, event: EventDocument) -> bool:
        """Whether ``event`` may change the subscriber's queue: a kind that does, a run it may see,
        and the filters on the run (agents, thread, resource) and on the tool it names."""
        query, tool = self._query, event["data"].get("toolName")
        return (
            event["type"] in QUEUE_EVENT_TYPES
            and can_see_run(self._principal, event.get("resourceId"))
            and (query.agent_ids is None or event["agentId"] in query.agent_ids)
            and (query.thread_id is None or event.get("threadId") == query.thread_id)
            and (query.resource_id is None or event.get("resourceId") == query.resource_id)
            and (query.tool_names is None or tool is None or tool in query.tool_names)
        )

    async def changes(self, event: EventDocument) -> list[QueueChange]:
        """What ``event`` (``accepts``) changes, read from the store now: one change for its
        question, or, when it names none, for each pending question of its run and each one told
        as in the queue.

        Raises:
            StoreUnavailableError: The store failed.
        """
        doc = await self._queue.run(event["runId"])
        if doc is not None and doc["agentId"] != event["agentId"]:
            doc = None
        listed: dict[str, QueueItem] = {}
        if doc is not None:
            for item in await self._queue.listed(doc, self._principal, self._query):
                listed[question_id(item.run["toolCalls"][item.index])] = item
        found: list[QueueChange] = []
        for question in self._concerned(event, doc):
            kind = await self._kind(event, doc, question, listed.get(question.question_id))
            if kind is not None:
                found.append(
                    QueueChange(
                        kind=kind,
                        event=event,
                        number=len(found),
                        agent_id=event["agentId"],
                        run_id=event["runId"],
                        tool_call_id=question.tool_call_id,
                        question_id=question.question_id,
                        tool_name=question.tool_name,
                        item=listed.get(question.question_id),
                    )
                )
        return found

    def _concerned(self, event: EventDocument, doc: SnapshotDocument | None) -> list[_Question]:
        calls = [] if doc is None else doc["toolCalls"]
        named = event["data"].get("questionId")
        if isinstance(named, str):
            for index, call in enumerate(calls):
                if question_id(call) == named:
                    return [_Question(call["toolCallId"], named, call["toolName"], index)]
            data = event["data"]
            return [_Question(str(data.get("toolCallId")), named, str(data.get("toolName")), None)]
        questions = {  # the pending ones: a decided one was told of by its decision's event
            question_id(call): _Question(call["toolCallId"], question_id(call), call["toolName"], index)
            for index, call in enumerate(calls)
            if call["decision"] is None
        }
        for (run_id, told), (tool_call_id, tool_name) in list(self._told.items()):
            if run_id == event["runId"] and told not in questions:
                questions[told] = _Question(tool_call_id, told, tool_name, None)
        return list(questions.values())

    async def _kind(
        self, event: EventDocument, doc: SnapshotDocument | None, question: _Question, item: QueueItem | None
    ) -> ChangeKind | None:
        key = (event["runId"], question.question_id)
        if item is not None:
            told = key in self._told
            self._told[key] = (question.tool_call_id, question.tool_name)
            self._told.move_to_end(key)
            while len(self._told) > REMEMBERED:
                self._told.popitem(last=False)
            return "changed" if told and event["type"] != "suspended" else "entered"
        if key in self._told:
            del self._told[key]
            return "left"
        if event["type"] == "suspended" or (
            self._query.tool_names is not None and question.tool_name not in self._query.tool_names
        ):
            return None  # it never was in the subscriber's queue
        if doc is not None and question.index is not None:
            could = await self._queue.may_decide(doc, question.index, self._principal)
        else:
            could = self._queue.may_decide_tool(self._principal, event.get("resourceId"), question.tool_name)
        return "left" if could else None


__all__ = ["QUEUE_EVENT_TYPES", "REMEMBERED", "ChangeKind", "QueueChange", "QueueWatch"]
