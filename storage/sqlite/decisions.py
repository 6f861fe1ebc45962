"""The SQLite store's decisions (``record_decision``, ``record_approval``): the run's row and
its calls read under ``rules.pending_call`` (and ``rules.approvals_counted``) in one transaction,
then its calls, pending count and deadline rewritten with the events in the same one, with the
claim a last decision takes (``rules.last_pending``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .. import rules
from ..documents import ApprovalDocument, DecisionDocument, EventDocument, SnapshotDocument, ToolCallDocument
from ..protocol import DecisionClaim, IdempotencyKeyTakenError, KeyReservation, event_list
from ..rules import Condition
from . import conditions
from .connection import _Connection
from .idempotency import reserve_key_in
from .rows import _COLUMNS, _calls, _calls_text, _deadline_ms, _ms, _snapshot


class _Decisions(_Connection):
    """``RunStore``'s decisions on a suspended run's calls."""

    async def record_decision(
        self,
        agent_id: str,
        run_id: str,
        *,
        index: int,
        tool_call_id: str,
        question_id: str | None = None,
        decision: DecisionDocument,
        now: datetime,
        event: EventDocument | None = None,
        preceding_events: Sequence[EventDocument] = (),
        claim: DecisionClaim | None = None,
        key: KeyReservation | None = None,
    ) -> SnapshotDocument | None:
        pending = rules.pending_call(agent_id, run_id, index, tool_call_id, question_id)
        events = [*preceding_events, *event_list(event)]
        ready = None if claim is None else rules.last_pending(claim.version)

        def write(db: sqlite3.Connection) -> SnapshotDocument | None:
            found = self._calls_where(db, pending, also=ready)
            if found is None:
                return None
            if key is not None:  # raising rolls this write back alone (``_write``)
                taken = reserve_key_in(db, key.key_id, key.fingerprint, key.now, by=key.by, until=key.until)
                if taken is not None:
                    raise IdempotencyKeyTakenError(taken)
            calls, claimed = found
            calls[index]["decision"] = decision
            calls[index].pop("reviewClaim", None)
            if claimed and claim is not None:
                written = self._write_calls(db, run_id, calls, now, [*events, *claim.events], claim=claim)
                self._updates_in(db, claim.updates)
                return written
            return self._write_calls(db, run_id, calls, now, events)

        return await self._write(write)

    async def record_approval(
        self,
        agent_id: str,
        run_id: str,
        *,
        index: int,
        tool_call_id: str,
        question_id: str | None = None,
        approval: ApprovalDocument,
        approvals_before: int,
        decision: DecisionDocument | None,
        now: datetime,
        event: EventDocument | Sequence[EventDocument] | None = None,
    ) -> SnapshotDocument | None:
        counted = rules.all_of(
            rules.pending_call(agent_id, run_id, index, tool_call_id, question_id),
            rules.approvals_counted(index, approvals_before),
        )

        def write(db: sqlite3.Connection) -> SnapshotDocument | None:
            found = self._calls_where(db, counted)
            if found is None:
                return None
            calls, _ = found
            call = calls[index]
            call["approvals"] = [*(call.get("approvals") or []), approval]
            if decision is not None:
                call["decision"] = decision
                call.pop("reviewClaim", None)
            return self._write_calls(db, run_id, calls, now, event_list(event))

        return await self._write(write)

    @staticmethod
    def _calls_where(
        db: sqlite3.Connection, condition: Condition, *, also: Condition | None = None
    ) -> tuple[list[ToolCallDocument], bool] | None:
        """The calls of the run meeting ``condition``, read in the caller's transaction: its part
        on columns in SQL, its part on ``toolCalls`` on the decoded calls (``conditions.split``);
        ``None`` when no run meets it. Else the calls, and whether the run meets ``also`` too (a
        condition on columns; ``False`` without it)."""
        on_columns, on_calls = conditions.split(condition)
        sql, params = conditions.where(on_columns)
        extra, extra_params = ("0", []) if also is None else conditions.where(also)
        rows = db.execute(
            f"SELECT tool_calls, {extra} FROM run_snapshots WHERE {sql}", (*extra_params, *params)
        ).fetchall()
        if not rows:
            return None
        calls = _calls(rows[0][0])
        if not conditions.calls_match(on_calls, calls):
            return None
        return calls, bool(rows[0][1])

    def _write_calls(
        self,
        db: sqlite3.Connection,
        run_id: str,
        calls: list[ToolCallDocument],
        now: datetime,
        events: Sequence[EventDocument],
        *,
        claim: DecisionClaim | None = None,
    ) -> SnapshotDocument:
        """Write the run's changed ``calls``, their pending count (``rules.pending_count``) and
        deadline (``rules.earliest_deadline``), with ``claim`` its claim (status ``resuming``),
        and ``events``, in the caller's transaction."""
        claiming, claim_params = "", list[Any]()
        if claim is not None:
            claiming = "status = 'resuming', claim_by = ?, claim_until = ?, "
            claim_params = [claim.by, _ms(claim.until)]
        updated = db.execute(
            f"UPDATE run_snapshots SET {claiming}tool_calls = ?, pending_count = ?, updated_at = ?, "
            f"expires_at = ?, version = version + 1 WHERE run_id = ? RETURNING {_COLUMNS}",
            (
                *claim_params,
                _calls_text(calls),
                rules.pending_count(calls),
                _ms(now),
                _deadline_ms(calls),
                run_id,
            ),
        ).fetchall()
        self._append_in(db, events)
        return _snapshot(updated[0])
