"""The reviewers' queue, live: what each run event changes in one subscriber's queue.

A run event (every agent's, from the event log) names a run, and often one question of it. The
run is read once per event on this instance, for every subscriber (``LiveQueue``), and each
question concerned is told whole: ``entered`` or ``changed`` with its queue item when the queue
lists it for the subscriber (``ReviewQueue.page``'s rule, ``QueueQuery``'s filters), else
``left``. ``left`` is told only of a question the subscriber was told of, or that the gate would
let it decide (``ReviewQueue.may_decide``; once the run is gone, ``may_decide_tool``): a stream
never names a question its subscriber could not list.
"""

from __future__ import annotations

import asyncio
import functools
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
KEPT_READS = 64
"""Events whose run's read ``LiveQueue`` keeps for the watches that take them after the first."""

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


class LiveQueue:
    """The queue kept live on this instance: the watches of its subscribers, which share one read
    of each event's run.

    The first watch to take an event reads its run (``ReviewQueue.run``, in a task of its own, so
    a subscriber leaving mid-read ends no other's); the others take the same document. The
    ``kept`` latest events' reads are kept: a subscriber more than ``kept`` queue events behind
    the first reads the run itself, keeping nothing. At most ``kept`` documents are held.

    Args:
        queue: The queue (its rule and the store).
        kept: How many events' reads are kept.
    """

    def __init__(self, queue: ReviewQueue, *, kept: int = KEPT_READS) -> None:
        if kept < 1:
            raise ValueError("kept must be >= 1")
        self.queue = queue
        self._kept = kept
        self._reads: OrderedDict[str, asyncio.Task[SnapshotDocument | None]] = OrderedDict()
        """Event id -> the read of its run, oldest first."""

    def watch(self, principal: Principal, query: QueueQuery) -> QueueWatch:
        """A new subscriber's watch: ``principal``'s queue under ``query``'s filters."""
        return QueueWatch(self, principal, query)

    async def run_of(self, event: EventDocument) -> SnapshotDocument | None:
        """``event``'s run as stored once the event was taken (``None``: gone), read once for
        every watch of this instance that takes ``event`` while its read is kept.

        Raises:
            StoreUnavailableError: The store failed (every watch waiting on that read hears it;
                the next to take the event reads again).
        """
        event_id = event["_id"]
        read = self._reads.get(event_id)
        if read is None:
            read = asyncio.get_running_loop().create_task(self.queue.run(event["runId"]))
            read.add_done_callback(functools.partial(self._done, event_id))
            if len(self._reads) < self._kept or event_id > next(iter(self._reads)):
                self._reads[event_id] = read  # a straggler's read never displaces those ahead's
                while len(self._reads) > self._kept:
                    self._reads.popitem(last=False)
        return await asyncio.shield(read)

    def _done(self, event_id: str, read: asyncio.Task[SnapshotDocument | None]) -> None:
        failed = read.cancelled() or read.exception() is not None
        if failed and self._reads.get(event_id) is read:  # never kept: the next asks again
            del self._reads[event_id]


class QueueWatch:
    """One subscriber's view of the queue: which events concern it and what they change.

    Args:
        live: This instance's live queue (the queue, and the reads its watches share).
        principal: The subscriber.
        query: Its filters (``QueueQuery``).
    """

    def __init__(self, live: LiveQueue, principal: Principal, query: QueueQuery) -> None:
        self._live = live
        self._queue = live.queue
        self._principal = principal
        self._query = query
        self._told: OrderedDict[tuple[str, str], tuple[str, str]] = OrderedDict()
        """``(runId, questionId)`` -> ``(toolCallId, toolName)`` of each question last told as in
        the queue, oldest first."""

    def accepts(self, event: EventDocument) -> bool:
        """Whether ``event`` may change the subscriber's queue: a kind that does, a run it may see,
        and the query's filters on the run and on the tool it names (``QueueQuery.admits_run``,
        ``admits_tool``: the listing's own rule)."""
        query, tool = self._query, event["data"].get("toolName")
        return (
            event["type"] in QUEUE_EVENT_TYPES
            and can_see_run(self._principal, event.get("resourceId"))
            and query.admits_run(event["agentId"], event.get("threadId"), event.get("resourceId"))
            and (not isinstance(tool, str) or query.admits_tool(tool))
        )

    async def changes(self, event: EventDocument) -> list[QueueChange]:
        """What ``event`` (``accepts``) changes, its run read once for every watch of this
        instance (``LiveQueue.run_of``): one change for its question, or, when it names none, for
        each pending question of its run and each one told as in the queue.

        Raises:
            StoreUnavailableError: The store failed.
        """
        doc = await self._live.run_of(event)
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
        if event["type"] == "suspended" or not self._query.admits_tool(question.tool_name):
            return None  # it never was in the subscriber's queue
        if doc is not None and question.index is not None:
            could = await self._queue.may_decide(doc, question.index, self._principal) or (
                event["type"] == "approval" and event["by"] == self._principal.identity  # its approver's until now
            )
        else:
            could = self._queue.may_decide_tool(self._principal, event.get("resourceId"), question.tool_name)
        return "left" if could else None


__all__ = ["KEPT_READS", "QUEUE_EVENT_TYPES", "REMEMBERED", "ChangeKind", "LiveQueue", "QueueChange", "QueueWatch"]
