"""When a waiting question is reminded and escalated, and who is told: ``notices_for`` reads the
tool rules (``remindAfter``, ``escalateAfter``, ``recipients``) covering a call, as
``runtime.deciding.rules.deadline_for`` reads ``expiresAfter``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from storage import NoticeKind

from ..access import Recipients, ToolApprovalRule

Moment = Literal["waiting", "reminded", "escalated"]
"""When recipients are told: the question starts to wait, is reminded, is escalated."""


@dataclass(frozen=True)
class Notices:
    """The notices of one call (``notices_for``).

    Attributes:
        after: Seconds after the question starts to wait, per notice (``reminded``,
            ``escalated``); a notice without a rule setting it is absent.
        recipients: Principal identities told, per moment, each once, in rule order.
    """

    after: dict[NoticeKind, timedelta]
    recipients: dict[Moment, tuple[str, ...]]

    def told(self, moment: Moment) -> tuple[str, ...]:
        """The identities told at ``moment`` (empty: nobody)."""
        return self.recipients.get(moment, ())


def notices_for(rules: Sequence[ToolApprovalRule], tool_name: str | None, args: Any) -> Notices:
    """The notices of a call of ``tool_name`` with ``args`` under ``rules`` (those covering its
    owner, ``runtime.deciding.rules.covering``): of the rules that apply and set ``remind_after``
    (``escalate_after``), the shortest wins; recipients are those of every rule that applies."""
    after: dict[NoticeKind, timedelta] = {}
    told: dict[Moment, dict[str, None]] = {"waiting": {}, "reminded": {}, "escalated": {}}
    for rule in rules:
        if not rule.applies(tool_name, args):
            continue
        timed: tuple[tuple[NoticeKind, float | None], ...] = (
            ("reminded", rule.remind_after),
            ("escalated", rule.escalate_after),
        )
        for notice, seconds in timed:
            if seconds is not None:
                wait = timedelta(seconds=seconds)
                after[notice] = min(after.get(notice, wait), wait)
        recipients = rule.recipients
        if isinstance(recipients, Recipients):
            for moment in told:
                told[moment].update(dict.fromkeys(getattr(recipients, moment)))
    return Notices(after=after, recipients={m: tuple(names) for m, names in told.items() if names})


def has_notices(rules: Sequence[ToolApprovalRule]) -> bool:
    """Whether any of ``rules`` reminds, escalates or names recipients."""
    return any(
        rule.remind_after is not None or rule.escalate_after is not None or rule.recipients is not None
        for rule in rules
    )


__all__ = ["Moment", "Notices", "has_notices", "notices_for"]
