"""Which run events a subscriber may receive: the one place that decides it.

Events carry the run's ``resourceId``; the rule is ``runtime.can_see_run`` (the principal holds
``runs:read`` and may use that resource), the same as for every other read path, so a
subscriber never hears of a run it could not list. It is applied to each event as it arrives,
with the connection's principal (authenticated at ``connection_init``).
"""

from __future__ import annotations

from runtime import can_see_run
from storage import EventDocument

from ..context import Context


def can_see_event(context: Context, event: EventDocument) -> bool:
    """Whether the caller of ``context`` may receive ``event`` (SECURITY.md "Authorization").

    Events written before they carried ``resourceId`` count as runs of no resource: only
    principals allowed every resource see them.
    """
    return can_see_run(context.principal, event.get("resourceId"))


__all__ = ["can_see_event"]
