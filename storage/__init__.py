"""Storage of suspended-run snapshots (docs/storage.md): the protocol, its three stores (memory,
SQLite, MongoDB), the conditions they apply (``rules``) and the registry making a store from its
URL (``store_from_url``).

Nothing here imports Strawberry, Starlette or pydantic-ai.
"""

from typing import TYPE_CHECKING, Any

from ._query import to_bson_precision, utcnow
from .documents import (
    EXPIRY_DECIDER,
    SCHEMA_VERSION,
    ApprovalDocument,
    ClaimDocument,
    DecisionDocument,
    DecisionKind,
    DelegationDocument,
    EventDocument,
    EventType,
    ExpiryAction,
    IdempotencyDocument,
    NoticeKind,
    ReviewClaimDocument,
    RunErrorDocument,
    RunStatus,
    RunUpdateBatchDocument,
    SnapshotDocument,
    ToolCallDocument,
    WebhookDeliveryDocument,
    WebhookDeliveryStatus,
    pending_delivery,
)
from .memory import MemorySnapshotStore
from .protocol import (
    ApproverSeeingCount,
    DecisionClaim,
    DuplicateRunError,
    EventLog,
    IdempotencyKeys,
    IdempotencyKeyTakenError,
    KeyAnswer,
    KeyReservation,
    NewerSchemaError,
    QueueFilter,
    QueueKey,
    ReviewCandidates,
    RunFilter,
    RunStore,
    RunUpdateLog,
    SnapshotStore,
    SortKey,
    StoreUnavailableError,
    WebhookDeliveries,
    event_list,
    event_size,
    queue_key,
    review_marks,
    sort_key,
)
from .registry import UnknownStoreError, store_from_url
from .rules import earliest_deadline
from .sqlite import SQLiteSnapshotStore

if TYPE_CHECKING:
    from .mongo import MongoSnapshotStore


def __getattr__(name: str) -> Any:
    """``MongoSnapshotStore`` is imported on first use: PyMongo and GridFS take a good part of a
    second to import, which a server on the memory or SQLite store never needs."""
    if name == "MongoSnapshotStore":
        from .mongo import MongoSnapshotStore

        return MongoSnapshotStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "EXPIRY_DECIDER",
    "SCHEMA_VERSION",
    "ApprovalDocument",
    "ApproverSeeingCount",
    "ClaimDocument",
    "DecisionClaim",
    "DecisionDocument",
    "DecisionKind",
    "DelegationDocument",
    "DuplicateRunError",
    "EventDocument",
    "EventLog",
    "EventType",
    "ExpiryAction",
    "IdempotencyDocument",
    "IdempotencyKeyTakenError",
    "IdempotencyKeys",
    "KeyAnswer",
    "KeyReservation",
    "MemorySnapshotStore",
    "MongoSnapshotStore",
    "NewerSchemaError",
    "NoticeKind",
    "QueueFilter",
    "QueueKey",
    "ReviewCandidates",
    "ReviewClaimDocument",
    "RunErrorDocument",
    "RunFilter",
    "RunStatus",
    "RunStore",
    "RunUpdateBatchDocument",
    "RunUpdateLog",
    "SQLiteSnapshotStore",
    "SnapshotDocument",
    "SnapshotStore",
    "SortKey",
    "StoreUnavailableError",
    "ToolCallDocument",
    "UnknownStoreError",
    "WebhookDeliveries",
    "WebhookDeliveryDocument",
    "WebhookDeliveryStatus",
    "earliest_deadline",
    "event_list",
    "event_size",
    "pending_delivery",
    "queue_key",
    "review_marks",
    "sort_key",
    "store_from_url",
    "to_bson_precision",
    "utcnow",
]
