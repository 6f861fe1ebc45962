"""Storage of suspended-run snapshots (docs/storage.md): the protocol and its three stores
(memory, SQLite, MongoDB).

Nothing here imports Strawberry, Starlette or pydantic-ai.
"""

from ._query import to_bson_precision, utcnow
from .documents import (
    EXPIRY_DECIDER,
    SCHEMA_VERSION,
    ApprovalDocument,
    ClaimDocument,
    DecisionDocument,
    DecisionKind,
    EventDocument,
    EventType,
    ExpiryAction,
    IdempotencyDocument,
    RunErrorDocument,
    RunStatus,
    SnapshotDocument,
    ToolCallDocument,
    WebhookDeliveryDocument,
    WebhookDeliveryStatus,
    earliest_deadline,
)
from .memory import MemorySnapshotStore
from .mongo import MongoSnapshotStore
from .protocol import (
    DuplicateRunError,
    EventLog,
    IdempotencyKeys,
    NewerSchemaError,
    RunFilter,
    RunStore,
    SnapshotStore,
    SortKey,
    StoreUnavailableError,
    WebhookDeliveries,
    event_list,
    sort_key,
)
from .sqlite import SQLiteSnapshotStore

__all__ = [
    "EXPIRY_DECIDER",
    "SCHEMA_VERSION",
    "ApprovalDocument",
    "ClaimDocument",
    "DecisionDocument",
    "DecisionKind",
    "DuplicateRunError",
    "EventDocument",
    "EventLog",
    "EventType",
    "ExpiryAction",
    "IdempotencyDocument",
    "IdempotencyKeys",
    "MemorySnapshotStore",
    "MongoSnapshotStore",
    "NewerSchemaError",
    "RunErrorDocument",
    "RunFilter",
    "RunStatus",
    "RunStore",
    "SQLiteSnapshotStore",
    "SnapshotDocument",
    "SnapshotStore",
    "SortKey",
    "StoreUnavailableError",
    "ToolCallDocument",
    "WebhookDeliveries",
    "WebhookDeliveryDocument",
    "WebhookDeliveryStatus",
    "earliest_deadline",
    "event_list",
    "sort_key",
    "to_bson_precision",
    "utcnow",
]
