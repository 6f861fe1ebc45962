"""``MemorySnapshotStore``: the embedded default store, lost when the process ends
(docs/storage.md "Stores").

Same semantics and contract tests as the other stores; each method runs without awaiting in
between, so every write is atomic within the event loop. One module per part (``runs``,
``events``, ``keys``, ``deliveries``, ``run_updates``, ``review``), joined in ``store``; the
runs' indexes in ``indexes``, re-read by one call per write; listing reads sorted per-filter
keys (``storage._listing_index``): O(log n + page) per page. Every condition comes from
``storage.rules``, applied by ``rules.matches``.
"""

from .store import MemorySnapshotStore

__all__ = ["MemorySnapshotStore"]
