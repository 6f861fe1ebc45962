"""Publishing a continuation's updates (docs/architecture.md "Run updates").

``UpdateHub`` is this process's switchboard; each continuation running here publishes through an
``UpdatePublisher``, which reads the run's events (``read``: its model's answers, ``LiveAnswers``,
and its nodes that run tools): every update goes at once to this process's subscribers
(``Listener``s, bounded in bytes) and, coalesced into batches, to the store for other instances:
the first update with the claim, the first text delta at most ``first_text_delay`` seconds after
it (with the outcome, if the continuation ends by then), and the outcome at once (a completion's
in its store write), the rest at most once an interval.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import (
    AgentStreamEvent,
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelMessage,
    ModelResponse,
    PartDeltaEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolCallPart,
)
from pydantic_ai.models import Model, ModelRequestParameters
from pydantic_ai.settings import ModelSettings
from pydantic_core import to_jsonable_python

from storage import RunUpdateBatchDocument, RunUpdateLog, SnapshotDocument, ToolCallDocument

from ..running import internals
from ..running.execution import can_stream
from ..running.identity import IdentifyingModel
from ..subscription_budgets import OwnerBudget
from .listener import Listener
from .run_updates import (
    TEXT_CHARS,
    RunUpdate,
    UpdateKind,
    batch_documents,
    built,
    first_batch,
)

logger = logging.getLogger(__name__)

FIRST_TEXT_DELAY = 0.05
"""Seconds the first text delta waits before it is written, at most, by default
(``UpdateHub``'s ``first_text_delay``)."""


RunKey = tuple[str, str]
"""``(agentId, runId)``."""

_OUTCOMES: frozenset[str] = frozenset(("suspended", "completed", "failed"))


@dataclass(slots=True)
class _Published:
    """An update as published, built into a ``RunUpdate`` only when something reads it: a listener
    here, or the batch that stores it (``UpdatePublisher._built``)."""

    seq: int | None
    """Its place in the continuation (``None``: the outcome)."""
    kind: UpdateKind
    run: SnapshotDocument | None
    fields: dict[str, Any]
    at: float
    """``time.monotonic()`` when it was published: its ``at`` is counted back from the clock."""
    update: RunUpdate | None = None


class UpdateHub:
    """This process's live run updates (module docstring).

    Args:
        store: Where batches are written (the store's ``RunUpdateLog`` part).
        interval: Seconds between two batch writes of one continuation while it runs (the
            first update, the first ``text`` and the outcome do not wait for it).
        now: Aware UTC now (an update's ``at``).
        first_text_delay: Seconds the first ``text`` waits, at most and never beyond ``interval``,
            for the continuation to end: one that ends by then writes it with its outcome, in one
            store write instead of two; else it is written then, in a batch it ends.

    Raises:
        ValueError: ``interval`` is not positive, or ``first_text_delay`` is negative.
    """

    def __init__(
        self,
        store: RunUpdateLog,
        *,
        interval: float,
        now: Callable[[], datetime],
        first_text_delay: float = FIRST_TEXT_DELAY,
    ) -> None:
        if interval <= 0:
            raise ValueError("interval must be positive (seconds)")
        if first_text_delay < 0:
            raise ValueError("first_text_delay must be >= 0 (seconds)")
        self.first_text_delay = min(first_text_delay, interval)
        self.store = store
        self.interval = interval
        self.now = now
        self._listeners: dict[RunKey, set[Listener]] = {}
        self._publishers: dict[RunKey, list[UpdatePublisher]] = {}

    def listen(self, agent_id: str, run_id: str, *, max_bytes: int, budget: OwnerBudget | None = None) -> Listener:
        """Start receiving the run's updates published on this process: from now on, and those
        its continuations here published before and have not stored yet (``budget``: its owner's)."""
        listener = Listener(max_bytes, budget)
        for publisher in self._publishers.get((agent_id, run_id), ()):
            for update in publisher.built(publisher.unwritten):
                listener.offer(update)
        self._listeners.setdefault((agent_id, run_id), set()).add(listener)
        return listener

    def leave(self, agent_id: str, run_id: str, listener: Listener) -> None:
        """Stop ``listener`` (its bytes given back: ``Listener.close``)."""
        listener.close()
        listeners = self._listeners.get((agent_id, run_id))
        if listeners is not None:
            listeners.discard(listener)
            if not listeners:
                del self._listeners[(agent_id, run_id)]

    def is_listened(self, agent_id: str, run_id: str) -> bool:
        """Whether a subscriber on this process listens to the run's updates."""
        return (agent_id, run_id) in self._listeners

    def is_local(self, agent_id: str, run_id: str) -> bool:
        """Whether a continuation of the run is publishing on this process now."""
        return (agent_id, run_id) in self._publishers

    def publisher(
        self, agent_id: str, run_id: str, continuation_id: str, *, resumed: RunUpdate | None = None
    ) -> UpdatePublisher:
        """A publisher for the continuation ``continuation_id`` (the id of its ``resumed`` event),
        already started: its ``resumed`` update is sent (``resumed``: the one
        ``run_updates.resumed_update`` made, already stored with the claim, is only delivered here)."""
        publisher = UpdatePublisher(
            self, agent_id=agent_id, run_id=run_id, continuation_id=continuation_id, resumed=resumed
        )
        self._publishers.setdefault((agent_id, run_id), []).append(publisher)
        if resumed is None:
            publisher.publish("resumed")
        else:
            self.deliver(resumed)
        return publisher

    def deliver(self, update: RunUpdate) -> None:
        """Hand ``update`` to the run's listeners on this process."""
        for listener in list(self._listeners.get((update.agent_id, update.run_id), ())):
            listener.offer(update)

    def ended(self, publisher: UpdatePublisher) -> None:
        """``publisher``'s continuation publishes no more."""
        key = (publisher.agent_id, publisher.run_id)
        publishers = self._publishers.get(key, [])
        if publisher in publishers:
            publishers.remove(publisher)
        if not publishers:
            self._publishers.pop(key, None)


class UpdatePublisher:
    """The updates of one continuation (module docstring); ``finish`` or ``abort`` it."""

    def __init__(
        self, hub: UpdateHub, *, agent_id: str, run_id: str, continuation_id: str, resumed: RunUpdate | None = None
    ) -> None:
        self._hub = hub
        self.agent_id = agent_id
        self.run_id = run_id
        self.continuation_id = continuation_id
        self._seq = 0 if resumed is None else 1
        self._resumed_stored = resumed is not None
        """The first update (``resumed``) was stored with the claim: the next ones wait for the interval."""
        self._pending: list[_Published] = []
        self.unwritten: list[_Published] = []
        """Updates published and not stored yet (queued, or being written)."""
        self._wake = asyncio.Event()
        self._soon = asyncio.Event()
        """Write what is queued without waiting for the interval: set by the first ``text`` and by ``finish``."""
        self._texted = False
        self._first_text: _Published | None = None
        """The first ``text`` update while it waits for ``UpdateHub.first_text_delay`` (then written)."""
        self._ending = asyncio.Event()
        """Set by ``finish``, ``closing`` and ``abort``: the grace of the first text ends."""
        self._done = False
        self._closing = False
        """``closing``: the batch writer stops; the store's final write takes what is queued."""
        self.closed_out = False
        """``closed`` ended the continuation's updates (``finish`` has nothing left to do)."""
        self._outcome: RunUpdate | None = None
        self._declined: dict[str, tuple[str | None, str | None]] = {}
        """Call id -> ``(reason, decidedBy)`` of the declined calls this continuation answers (``answering``)."""
        self._unrun: dict[str, ToolCallPart] = {}
        """Calls pydantic-ai settles without running them, until their result says how (``_on``)."""
        self._task: asyncio.Task[None] | None = None  # the batch writer, from the first update queued
        # the batch writer's context: not the agent run's, whose RunContext holds this publisher (a cycle)
        self._context = contextvars.copy_context()

    def publish(self, kind: UpdateKind, *, run: SnapshotDocument | None = None, **fields: Any) -> None:
        """Send one update now to this process's subscribers, and queue it for the store: the
        continuation's first update (``resumed``, unless stored with the claim), its first ``text``
        and its outcome are written at once with what is queued before them, the others at most
        once per ``UpdateHub.interval``."""
        if self._done:
            return
        published = self._new(kind, run, fields)
        if (self.agent_id, self.run_id) in self._hub._listeners:  # is_listened, without a call per update
            for update in self.built([published]):
                self._hub.deliver(update)
        self._pending.append(published)
        self.unwritten.append(published)
        if self._task is None:
            name = f"runsgate-updates-{self.run_id}"
            self._task = asyncio.get_running_loop().create_task(self._flush(), name=name, context=self._context)
        if kind == "text" and not self._texted:  # the first delta, which other instances wait for
            self._texted = True
            self._first_text = published
            self._soon.set()
        self._wake.set()

    def _new(self, kind: UpdateKind, run: SnapshotDocument | None, fields: dict[str, Any]) -> _Published:
        """The next update of the continuation (its outcome, the last one, for an outcome ``kind``)."""
        seq = None
        if kind in _OUTCOMES:
            self._done = True
        else:
            seq = self._seq
            self._seq += 1
        return _Published(seq=seq, kind=kind, run=run, fields=fields, at=time.monotonic())

    def built(self, published: Sequence[_Published], now: datetime | None = None) -> list[RunUpdate]:
        """``published`` as ``RunUpdate``s, each built once, at the time it was published by the
        hub's clock (``_Published.at``, counted back from ``now``, the hub's now when ``None``)."""
        unbuilt = [p for p in published if p.update is None]
        if unbuilt:
            now, counted = self._hub.now() if now is None else now, time.monotonic()
            made = built(
                self.agent_id,
                self.run_id,
                self.continuation_id,
                [(p.seq, p.kind, _before(now, counted - p.at), p.run, p.fields) for p in unbuilt],
            )
            for p, update in zip(unbuilt, made, strict=True):
                p.update = update
        updates: list[RunUpdate] = []
        for p in published:  # a loop: a comprehension is a call into this module in Python 3.11
            if p.update is not None:
                updates.append(p.update)
        return updates

    def answering(self, calls: Sequence[ToolCallDocument]) -> None:
        """The decided calls whose answers this continuation gives the agent
        (``runtime.running.deferred.deferred_tool_results``): each declined one, never run, is published as
        ``tool_call_declined`` with its decision's reason and decider, never as started or ended. A
        delegated call is not: its tool runs, to forward the decision to the sub-run."""
        self._declined = {
            call["toolCallId"]: (decision["reason"], decision["decidedBy"])
            for call in calls
            if (decision := call["decision"]) is not None
            and decision["kind"] == "declined"
            and not call.get("delegated")
        }

    def reading(self, model: Model | str | None) -> Model | str | None:
        """``model`` as the run asks it, its answers read here (``LiveAnswers``); ``None``: none
        (pydantic-ai refuses it). ``model`` itself when the run's events are read by its
        ``event_stream_handler`` instead (``runtime.running.internals.PROBLEMS``)."""
        if model is None or internals.PROBLEMS:
            return model
        return LiveAnswers(model, self.read)

    async def read(self, stream: AsyncIterable[AgentStreamEvent]) -> None:
        """Publish what the events of ``stream`` (the model's answer, or a node running tools) say.
        Never raises for an event it cannot read (logged), so an update never fails a run."""
        async for event in stream:
            try:
                self._on(event)
            except Exception:
                logger.exception("run %s: an agent event could not be published", self.run_id)

    def _on(self, event: AgentStreamEvent) -> None:
        """Publish what ``event`` says. A call pydantic-ai settles without running it
        (``args_valid`` ``None``: it is followed by its result event) is held back until that
        result: a denied one (``outcome`` ``denied``) is ``tool_call_declined``, any other (a call
        skipped after the final result) is started, then ended."""
        if isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):  # most events
            text = event.delta.content_delta
            if len(text) <= TEXT_CHARS:
                self.publish("text", text=text)
            else:
                self._text(text)
        elif isinstance(event, PartStartEvent) and isinstance(event.part, TextPart):
            self._text(event.part.content)
        elif isinstance(event, FunctionToolCallEvent):
            if event.args_valid is None:
                self._unrun[event.part.tool_call_id] = event.part
            else:
                self._started(event.part)
        elif isinstance(event, FunctionToolResultEvent):
            returned = event.part
            unrun = self._unrun.pop(returned.tool_call_id, None)
            if unrun is not None and returned.outcome == "denied":
                reason, decided_by = self._declined.get(returned.tool_call_id, (returned.model_response_str(), None))
                self.publish(
                    "tool_call_declined",
                    tool_call_id=returned.tool_call_id,
                    tool_name=returned.tool_name,
                    reason=reason,
                    decided_by=decided_by,
                )
                return
            if unrun is not None:
                self._started(unrun)
            if returned.outcome == "success":
                ended: dict[str, Any] = {"result": to_jsonable_python(returned.content)}
            else:
                ended = {"error": returned.model_response_str()}
            self.publish("tool_call_ended", tool_call_id=returned.tool_call_id, tool_name=returned.tool_name, **ended)

    def _started(self, part: ToolCallPart) -> None:
        self.publish("tool_call_started", tool_call_id=part.tool_call_id, tool_name=part.tool_name, args=_args(part))

    def _text(self, text: str) -> None:
        for start in range(0, len(text), TEXT_CHARS):
            self.publish("text", text=text[start : start + TEXT_CHARS])

    async def finish(
        self, kind: UpdateKind | None = None, *, run: SnapshotDocument | None = None, **fields: Any
    ) -> None:
        """End the continuation's updates with the outcome ``kind`` (``None``: none, e.g. its claim
        was lost), written to the store with what is still queued, at once."""
        if kind is not None:
            self.publish(kind, run=run, **fields)
        self._done = True
        self._ending.set()
        self._soon.set()
        self._wake.set()
        try:
            if self._task is not None:
                await asyncio.shield(self._task)
        finally:
            self._hub.ended(self)

    async def closing(
        self, kind: UpdateKind, now: datetime | None = None, /, **fields: Any
    ) -> list[RunUpdateBatchDocument]:
        """Stop the batch writer (after the batch it writes) and return what is unwritten, ending
        with the outcome ``kind``, as the batches of the store's final write at ``now`` (``RunStore``'s
        ``updates``; ``None``: the hub's now); then call ``closed``. No subscriber sees it before."""
        self._closing = True
        self._ending.set()
        self._soon.set()
        self._wake.set()
        if self._task is not None:
            await asyncio.shield(self._task)
        now = self._hub.now() if now is None else now
        updates = self.built([*self._pending, self._new(kind, None, fields)], now)
        self._outcome = updates[-1]
        return batch_documents(self.agent_id, self.run_id, updates, now)

    async def closed(self, *, written: bool) -> None:
        """The final write after ``closing`` ended. ``written``: it stored those batches (the
        outcome is delivered now); else what was queued is written on its own, without the outcome."""
        try:
            if written and self._outcome is not None:
                self._hub.deliver(self._outcome)
            else:
                now = self._hub.now()
                await self._write(self.built(self._pending, now), now)
            self._pending.clear()
            self.unwritten.clear()
        finally:
            self.closed_out = True
            self._hub.ended(self)

    def abort(self) -> None:
        """Stop without writing what is queued (the continuation was cancelled)."""
        self._done = True
        self._ending.set()
        if self._task is not None:
            self._task.cancel()
        self._hub.ended(self)

    async def _flush(self) -> None:
        """Write one batch per wake-up, then wait for the interval (or ``_soon``): what is
        published while a batch is written waits for the next, unless the continuation finished,
        whose remaining updates are written at once."""
        if self._resumed_stored:
            await self._pause()
        while True:
            if not self._pending:
                await self._wake.wait()
            self._wake.clear()
            if self._closing:
                return
            if self._first_text is not None and not self._done and await self._grace():
                return
            if self._pending:
                now = self._hub.now()
                batch = first_batch(self.built(self._pending, now))
                text = None if self._first_text is None else self._first_text.update
                first = [i for i, update in enumerate(batch) if update is text]
                if first and not self._done:  # the first delta ends its batch
                    batch = batch[: first[0] + 1]
                self._first_text = None
                del self._pending[: len(batch)]
                await self._write(batch, now)
                del self.unwritten[: len(batch)]
            if self._done:
                if not self._pending:  # finished: what it queued is written
                    return
                continue
            await self._pause()

    async def _grace(self) -> bool:
        """Wait up to ``UpdateHub.first_text_delay`` for the continuation to end, so that one that
        ends by then writes its first delta with its outcome; ``True`` when ``closing`` took the queue."""
        if self._hub.first_text_delay > 0:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self._hub.first_text_delay):
                    await self._ending.wait()
        return self._closing

    async def _pause(self) -> None:
        """Coalesce what comes in the next interval (or until ``_soon``)."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self._hub.interval):
                await self._soon.wait()
        self._soon.clear()

    async def _write(self, updates: list[RunUpdate], now: datetime) -> None:
        """Store ``updates`` in their batches (``batch_documents``), written at ``now``."""
        for document in batch_documents(self.agent_id, self.run_id, updates, now):
            try:
                await self._hub.store.append_run_updates(document)
            except Exception:  # progress only: the outcome is in the event log too
                logger.warning(
                    "run %s: update(s) up to %s could not be stored", self.run_id, document["_id"], exc_info=True
                )


class LiveAnswers(IdentifyingModel):
    """A continuation's model, asked for whole answers: it streams each one all the same (given the
    run's context), hands its events to ``read`` as they arrive and answers with the streamed
    response, so pydantic-ai need not stream through the run (one that cannot stream answers whole;
    ``identity``, a model chosen instead: ``IdentifyingModel``)."""

    def __init__(self, wrapped: Model | str, read: internals.EventReader) -> None:
        super().__init__(wrapped)
        self._read = read
        self._streams = can_stream(self.wrapped)

    def rewrapping(self, model: Model) -> LiveAnswers:
        return LiveAnswers(model, self._read)

    async def answer(
        self,
        messages: list[ModelMessage],
        settings: ModelSettings | None,
        parameters: ModelRequestParameters,
        context: RunContext[Any] | None,
    ) -> ModelResponse:
        if not self._streams:
            return await super().answer(messages, settings, parameters, context)
        async with self.wrapped.request_stream(messages, settings, parameters, context) as stream:
            await self._read(stream)
        return stream.get()


def _before(now: datetime, seconds: float) -> datetime:
    """``seconds`` before ``now``, truncated to milliseconds (BSON's precision, as the clock's)."""
    at = now - timedelta(seconds=max(seconds, 0.0))
    return at.replace(microsecond=at.microsecond // 1000 * 1000)


def _args(part: ToolCallPart) -> Any:
    try:
        return to_jsonable_python(part.args_as_dict())
    except Exception:  # the model's arguments are not a JSON object: as it sent them
        return part.args if isinstance(part.args, str) else to_jsonable_python(part.args)


__all__ = ["LiveAnswers", "UpdateHub", "UpdatePublisher"]
