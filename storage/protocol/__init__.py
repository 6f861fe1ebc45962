"""The store protocols: where suspended runs live (docs/storage.md "Stores").

``RunStore`` (snapshots and histories), ``EventLog`` (the audit log), ``IdempotencyKeys``,
``WebhookDeliveries`` and ``RunUpdateLog`` (batches of ``runUpdates``), one per aggregate and
one module each; ``SnapshotStore`` is all five plus open, close and ping, implemented by one
class per store. Every method naming a run is scoped by ``agent_id``; a write that changes a
run takes the event recording it (``event=``), one unit of work (docs/storage.md). The errors
are in ``errors``, the listing's filter and order in ``filters``, each write as one value in
``writes``.
"""

from .deliveries import WebhookDeliveries
from .errors import DuplicateRunError, NewerSchemaError, StoreUnavailableError
from .events import EventLog, event_list, event_size
from .filters import EVERY_RUN, DeliveryListing, EventsAfter, RunFilter, RunPage, SortKey, sort_key
from .keys import IdempotencyKeys, IdempotencyKeyTakenError
from .review import (
    ApproverSeeingCount,
    QueueFilter,
    QueueKey,
    ReviewCandidates,
    ReviewQueueStore,
    queue_key,
    review_marks,
)
from .run_updates import RunUpdateLog
from .runs import RunStore
from .store import SnapshotStore
from .writes import (
    ApprovalWrite,
    ClaimedDeletion,
    ClaimedReplacement,
    ClaimRelease,
    ClaimRenewal,
    ClaimWrite,
    DecisionClaim,
    DecisionWrite,
    DeliveryLease,
    KeyAnswer,
    KeyReservation,
    NoticeWrite,
    ReviewClaimWrite,
    WebhookAttempt,
)

__all__ = [
    "EVERY_RUN",
    "ApprovalWrite",
    "ApproverSeeingCount",
    "ClaimRelease",
    "ClaimRenewal",
    "ClaimWrite",
    "ClaimedDeletion",
    "ClaimedReplacement",
    "DecisionClaim",
    "DecisionWrite",
    "DeliveryLease",
    "DeliveryListing",
    "DuplicateRunError",
    "EventLog",
    "EventsAfter",
    "IdempotencyKeyTakenError",
    "IdempotencyKeys",
    "KeyAnswer",
    "KeyReservation",
    "NewerSchemaError",
    "NoticeWrite",
    "QueueFilter",
    "QueueKey",
    "ReviewCandidates",
    "ReviewClaimWrite",
    "ReviewQueueStore",
    "RunFilter",
    "RunPage",
    "RunStore",
    "RunUpdateLog",
    "SnapshotStore",
    "SortKey",
    "StoreUnavailableError",
    "WebhookAttempt",
    "WebhookDeliveries",
    "event_list",
    "event_size",
    "queue_key",
    "review_marks",
    "sort_key",
]
