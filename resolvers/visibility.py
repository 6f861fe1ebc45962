"""Which run events a subscriber may receive: the one place that decides it.

Events carry the run's ``resourceId`` so that a later security change can hide the runs of other
resources from a subscriber; wire that rule here, the subscription resolver asks nothing else.
"""

from __future__ import annotations

from storage import EventDocument

from .context import Context


def can_see_event(context: Context, event: EventDocument) -> bool:
    """Whether the caller of ``context`` may receive ``event`` (``event.get("resourceId")`` is the run's
    resource). Everything is visible until authentication exists."""
    return True


__all__ = ["can_see_event"]
