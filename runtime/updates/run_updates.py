"""A continuing run's progress as updates (docs/architecture.md "Run updates").

A continuation sends ``resumed``, then the model's ``text`` deltas and its tool calls'
``tool_call_started``/``tool_call_ended`` (a declined call, whose tool never runs:
``tool_call_declined``), then its outcome (``suspended``, ``completed`` or ``failed``). Update
ids are ``{continuationId}.{8-digit sequence}`` (the outcome ``{continuationId}.end``), so they
sort in the order they were sent (docs/architecture.md "Run updates").
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from storage import RunUpdateBatchDocument, SnapshotDocument, strict_json

UpdateKind = Literal[
    "resumed",
    "text",
    "tool_call_started",
    "tool_call_ended",
    "tool_call_declined",
    "suspended",
    "completed",
    "failed",
]

OUTCOME_KINDS: frozenset[str] = frozenset({"suspended", "completed", "failed"})
"""The kinds that end a continuation (a continuation whose new calls a policy all approved ends
without one: the next continuation's ``resumed`` follows)."""

UPDATE_ID = re.compile(r"^\d{20}-[0-9a-f]{12}\.(\d{8}|end)$")
"""Shape of an update id."""

MAX_UPDATE_BYTES = 64 * 1024
"""An update whose JSON is larger has its ``args``, ``result`` and ``output`` left out
(``truncated``): the full values are in the event log (``completed``) and the run's history."""

_ERROR_CHARS = 4096

_SEPARATORS = (",", ":")

TEXT_CHARS = 4096
"""Characters of text per ``text`` update at most (a longer delta is sent as several)."""

MAX_BATCH_BYTES = 256 * 1024
"""Bytes of updates per stored batch at most (a batch holds at least one update)."""


def update_id(continuation_id: str, seq: int) -> str:
    """The id of the ``seq``-th update (from 0, the ``resumed`` update) of a continuation."""
    return f"{continuation_id}.{seq:08d}"


def end_id(continuation_id: str) -> str:
    """The id of a continuation's outcome update: after each of its other updates."""
    return f"{continuation_id}.end"


def before_next(continuation_id: str) -> str:
    """A position after every update of ``continuation_id`` and before those of the next one."""
    return f"{continuation_id}/"


@dataclass(frozen=True, kw_only=True)
class RunUpdate:
    """One update of a continuing run (module docstring).

    ``text``: a ``text`` delta. ``tool_call_id`` (runsgate's call identity), ``tool_name``: the
    ``tool_call_*`` updates; ``args`` (a JSON value; the model's raw text when it is not JSON) for
    ``tool_call_started``; ``result`` (JSON) or ``error`` (what the model is told: a validation
    error or a ``ModelRetry``) for ``tool_call_ended``; ``reason`` (the decision's: a person's, or
    ``None`` when they gave none; an expiry's, what the model was told) and ``decided_by`` (a
    principal, ``expiry``, ``policy:<name>``) for ``tool_call_declined``. ``output`` (JSON): ``completed``.
    ``error`` (``"Type: message"``): ``failed``. ``run``: the stored run, for ``suspended`` and
    ``failed`` (read when the update is sent; never stored with it). ``at``: UTC.
    """

    id: str
    agent_id: str
    run_id: str
    continuation_id: str
    kind: UpdateKind
    at: datetime
    text: str | None = None
    tool_call_id: str | None = None
    tool_name: str | None = None
    args: Any = None
    result: Any = None
    error: str | None = None
    reason: str | None = None
    decided_by: str | None = None
    output: Any = None
    truncated: bool = False
    """``args``, ``result`` or ``output`` were left out: the update was over ``MAX_UPDATE_BYTES``."""
    run: SnapshotDocument | None = dataclasses.field(default=None, compare=False)

    @property
    def is_outcome(self) -> bool:
        """Whether it ends its continuation."""
        return self.kind in OUTCOME_KINDS

    def to_json(self) -> dict[str, Any]:
        """The stored form (``run`` left out; fields without a value omitted)."""
        data: dict[str, Any] = {
            "id": self.id,
            "continuationId": self.continuation_id,
            "kind": self.kind,
            "at": self.at.astimezone(UTC).isoformat(),
        }
        for key, value in (
            ("text", self.text),
            ("toolCallId", self.tool_call_id),
            ("toolName", self.tool_name),
            ("args", self.args),
            ("result", self.result),
            ("error", self.error),
            ("reason", self.reason),
            ("decidedBy", self.decided_by),
            ("output", self.output),
        ):
            if value is not None:
                data[key] = value
        if self.truncated:
            data["truncated"] = True
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any], *, agent_id: str, run_id: str) -> RunUpdate:
        """Inverse of ``to_json``."""
        return cls(
            id=data["id"],
            agent_id=agent_id,
            run_id=run_id,
            continuation_id=data["continuationId"],
            kind=data["kind"],
            at=datetime.fromisoformat(data["at"]).astimezone(UTC),
            text=data.get("text"),
            tool_call_id=data.get("toolCallId"),
            tool_name=data.get("toolName"),
            args=data.get("args"),
            result=data.get("result"),
            error=data.get("error"),
            reason=data.get("reason"),
            decided_by=data.get("decidedBy"),
            output=data.get("output"),
            truncated=bool(data.get("truncated", False)),
        )

    @functools.cached_property
    def stored(self) -> str:
        """Its JSON text as its batch stores it (``encode``): ``storage.strict_json.dumps_shown`` of
        ``to_json``, a float that is not finite written ``null``. ``json.dumps`` refusing such a
        float (``allow_nan=False``, as ``strict_json.dumps``) makes it for every other update
        without a call into ``storage``."""
        data = self.to_json()
        try:
            return json.dumps(data, allow_nan=False, ensure_ascii=False, separators=_SEPARATORS)
        except ValueError:
            return strict_json.dumps_shown(data, ensure_ascii=False, separators=_SEPARATORS)

    @functools.cached_property
    def size(self) -> int:
        """Bytes of its stored JSON (``stored``): what storing and buffering it costs."""
        return len(self.stored.encode())


def built(
    agent_id: str,
    run_id: str,
    continuation_id: str,
    published: Sequence[tuple[int | None, UpdateKind, datetime, SnapshotDocument | None, dict[str, Any]]],
) -> list[RunUpdate]:
    """The updates of ``continuation_id`` published as ``(seq, kind, at, run, fields)``: ``seq``
    the update's place (``update_id``; ``None``: the outcome, ``end_id``), ``at`` UTC, ``fields``
    the rest of ``RunUpdate``'s; each ``capped`` (a ``text`` delta needs none: the publisher cuts
    text into ``TEXT_CHARS``)."""
    made = []
    for seq, kind, at, run, fields in published:
        ident = end_id(continuation_id) if seq is None else update_id(continuation_id, seq)
        update = RunUpdate(
            id=ident,
            agent_id=agent_id,
            run_id=run_id,
            continuation_id=continuation_id,
            kind=kind,
            at=at,
            run=run,
            **fields,
        )
        made.append(update if kind == "text" else capped(update))
    return made


def capped(update: RunUpdate) -> RunUpdate:
    """``update`` within ``MAX_UPDATE_BYTES``: its ``args``, ``result`` and ``output`` left out
    (``truncated``) when it is larger, its ``error`` and ``reason`` cut to 4,096 characters. (A
    ``text`` delta is never cut: the publisher splits long text into deltas of ``TEXT_CHARS``.)"""
    if update.error is not None and len(update.error) > _ERROR_CHARS:
        update = dataclasses.replace(update, error=update.error[:_ERROR_CHARS] + "…")
    if update.reason is not None and len(update.reason) > _ERROR_CHARS:
        update = dataclasses.replace(update, reason=update.reason[:_ERROR_CHARS] + "…")
    if update.size <= MAX_UPDATE_BYTES:
        return update
    return dataclasses.replace(update, args=None, result=None, output=None, truncated=True)


def encode(updates: list[RunUpdate]) -> str:
    """The JSON text a batch stores (``RunUpdateBatchDocument.updates``): RFC 8259 JSON, the array
    of its updates' ``stored`` texts (a float that is not finite, a tool's result, written
    ``null``, as every reply shows it), each made once."""
    return "[" + ",".join([u.stored for u in updates]) + "]"


def first_batch(pending: list[RunUpdate]) -> list[RunUpdate]:
    """The first updates of ``pending`` that fit in ``MAX_BATCH_BYTES`` (at least one)."""
    size, count = 0, 0
    for update in pending:
        size += update.size
        if count and size > MAX_BATCH_BYTES:
            break
        count += 1
    return pending[:count]


def batch_documents(agent_id: str, run_id: str, updates: list[RunUpdate], at: datetime) -> list[RunUpdateBatchDocument]:
    """``updates`` (in order) as the batches that store them (``first_batch`` after
    ``first_batch``), written at ``at`` (UTC)."""
    documents: list[RunUpdateBatchDocument] = []
    rest = updates
    while rest:
        batch = first_batch(rest)
        rest = rest[len(batch) :]
        documents.append(
            {"_id": batch[-1].id, "agentId": agent_id, "runId": run_id, "at": at, "updates": encode(batch)}
        )
    return documents


def resumed_update(
    agent_id: str, run_id: str, continuation_id: str, at: datetime
) -> tuple[RunUpdate, RunUpdateBatchDocument]:
    """The ``resumed`` update of the continuation ``continuation_id`` at ``at`` (UTC) and its batch,
    to store with the claim (``RunStore.claim``'s ``updates``, ``DecisionClaim.updates``) before
    ``UpdateHub.publisher(resumed=...)`` delivers it."""
    update = RunUpdate(
        id=update_id(continuation_id, 0),
        agent_id=agent_id,
        run_id=run_id,
        continuation_id=continuation_id,
        kind="resumed",
        at=at,
    )
    return update, batch_documents(agent_id, run_id, [update], at)[0]


def decode(text: str, *, agent_id: str, run_id: str) -> list[RunUpdate]:
    """Inverse of ``encode``."""
    return [RunUpdate.from_json(item, agent_id=agent_id, run_id=run_id) for item in json.loads(text)]


__all__ = [
    "MAX_BATCH_BYTES",
    "MAX_UPDATE_BYTES",
    "OUTCOME_KINDS",
    "TEXT_CHARS",
    "UPDATE_ID",
    "RunUpdate",
    "UpdateKind",
    "batch_documents",
    "before_next",
    "built",
    "capped",
    "decode",
    "encode",
    "end_id",
    "first_batch",
    "resumed_update",
    "update_id",
]
