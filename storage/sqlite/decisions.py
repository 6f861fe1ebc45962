"""The SQLite store's decisions (``record_decision``, ``record_approval``, ``record_notice``): the run's row and
its calls read under ``rules.pending_call`` (and ``rules.approvals_counted``) in one transaction,
then its calls, pending count and deadline rewritten with the events in the same one, with the
claim a last decision takes (``rules.last_pending``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from .. import rules
from ..documents import EventDocument, SnapshotDocument, ToolCallDocument
from ..protocol import ApprovalWrite, DecisionClaim, DecisionWrite, IdempotencyKeyTakenError, NoticeWrite, event_list
from ..rules import Condition
from . import conditions
from .connection import KEPT_HISTORY, _Connection
from .idempotency import reserve_key_in
from .rows import _COLUMNS, _calls, _calls_text, _deadline_ms, _ms, _snapshot


class _Decisions(_Connection):
    """``RunStore``'s decisions on a suspended run's calls."""

    async def record_decision(self, write: DecisionWrite) -> SnapshotDocument | None:
        claim, key = write.claim, write.key

        def write_in(db: sqlite3.Connection) -> tuple[SnapshotDocument | None, bytes | None]:
            found = self._calls_where(db, write.condition, also=write.claiming)
            if found is None:
                return None, None
            if key is not None:  # raising rolls this write back alone (``_write``)
                taken = reserve_key_in(db, key)
                if taken is not None:
                    raise IdempotencyKeyTakenError(taken)
            calls, claimed = found
            calls[write.index]["decision"] = write.decision
            calls[write.index].pop("reviewClaim", None)
            if claimed and claim is not None:
                events = [*write.events, *claim.events]
                written, history = self._write_calls(db, write.run_id, calls, write.now, events, claim=claim)
                self._updates_in(db, claim.updates)
                return written, history  # what the continuation loads next
            return self._write_calls(db, write.run_id, calls, write.now, write.events)[0], None

        written, history = await self._write(write_in)
        if written is not None and claim is not None and written["claim"] is not None:
            self._keep_history(write.agent_id, write.run_id, history, write.now, claim.until)
        return written

    async def record_approval(self, write: ApprovalWrite) -> SnapshotDocument | None:
        def approve(call: ToolCallDocument) -> None:
            call["approvals"] = [*(call.get("approvals") or []), write.approval]
            if write.ends_review_claim():
                call.pop("reviewClaim", None)
            if write.decision is not None:
                call["decision"] = write.decision

        return await self._change_call(write, approve, event_list(write.event))

    async def record_notice(self, write: NoticeWrite) -> SnapshotDocument | None:
        def notice(call: ToolCallDocument) -> None:
            call[write.notice] = True

        return await self._change_call(write, notice, [write.event])

    async def _change_call(
        self,
        write: ApprovalWrite | NoticeWrite,
        change: Callable[[ToolCallDocument], None],
        events: Sequence[EventDocument],
    ) -> SnapshotDocument | None:
        """One write: ``change`` call ``write.index`` of the run meeting ``write.condition``, then
        its calls (``_write_calls``) with ``events``; ``None`` (nothing written) when no run meets it."""

        def write_in(db: sqlite3.Connection) -> SnapshotDocument | None:
            found = self._calls_where(db, write.condition)
            if found is None:
                return None
            calls, _ = found
            change(calls[write.index])
            return self._write_calls(db, write.run_id, calls, write.now, events)[0]

        return await self._write(write_in)

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
    ) -> tuple[SnapshotDocument, bytes | None]:
        """Write the run's changed ``calls``, their pending count (``rules.pending_count``) and
        deadline (``rules.earliest_deadline``), with ``claim`` its claim (status ``resuming``),
        and ``events``, in the caller's transaction. Returns the run as written and, with
        ``claim``, its history as the continuation loads it next (``KEPT_HISTORY``; else ``None``)."""
        claiming, claim_params, kept = "", list[Any](), ""
        if claim is not None:
            claiming = "status = 'resuming', claim_by = ?, claim_until = ?, "
            claim_params = [claim.by, _ms(claim.until)]
            kept = f", {KEPT_HISTORY}"
        updated = db.execute(
            f"UPDATE run_snapshots SET {claiming}tool_calls = ?, pending_count = ?, updated_at = ?, "
            f"expires_at = ?, version = version + 1 WHERE run_id = ? RETURNING {_COLUMNS}{kept}",
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
        return _snapshot(updated[0]), None if claim is None else self._kept_in(updated[0])
