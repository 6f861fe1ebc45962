"""``bench.approve_walk``: the runtime and storage part of one approval's walk goes one way (the
counts of stays into a module are what the walk's figures are made of; no timing asserted)."""

from __future__ import annotations

import pytest

from bench.approve_walk import Walk, walk


@pytest.fixture(scope="module")
async def traced() -> Walk:
    return await walk()


def test_the_walk_completes_the_run(traced: Walk) -> None:
    assert traced.stays[0].startswith("server.")
    assert "runtime.lifecycle" in traced.stays


def test_the_gate_is_entered_at_most_three_times(traced: Walk) -> None:
    # checking the run as first read, every check in one step (its verdict kept, the question read
    # once), then recording the decision: the owner of a call is read from the call itself
    assert traced.stays.count("runtime.deciding.gate") <= 3
    assert traced.stays.count("runtime.deciding.questions") <= 2


def test_the_continuation_is_entered_at_most_four_times(traced: Walk) -> None:
    # the decision's claims made, the claim offered to the decision's write, the continuation run
    # (twice: around the run's scope and publisher)
    assert traced.stays.count("runtime.continuing.continuation") <= 4


def test_the_run_updates_are_built_and_batched_in_one_stay(traced: Walk) -> None:
    # the continuation's closing builds its queued updates and their batches in one stay in
    # runtime.updates.run_updates, after the one that made the decision's ``resumed`` update
    assert traced.stays.count("runtime.updates.run_updates") <= 2


def test_the_idempotency_key_is_entered_at_most_four_times(traced: Walk) -> None:
    # the key looked up (around its fingerprint), its reservation made, its answer made: a write
    # that took either is acknowledged on the key's fields, without a call back
    assert traced.stays.count("runtime.idempotency") <= 4


def test_run_updates_are_encoded_without_a_call_into_storage(traced: Walk) -> None:
    # the request's body is read by storage.strict_json; the run's update batches are made of their
    # updates' texts, each made once (for its size too)
    assert traced.stays.count("storage.strict_json") <= 1


def test_the_publisher_is_entered_at_most_six_times(traced: Walk) -> None:
    # the claim's ``resumed`` update and its batch are data (``runtime.updates.run_updates``): the
    # publisher is entered for the continuation only (made, answering, the tools' and the model's
    # events, the closing)
    assert traced.stays.count("runtime.updates.publishing") <= 6


def test_the_memory_store_reindexes_a_run_in_one_stay_per_write(traced: Walk) -> None:
    # the decision's write and the completion's deletion each re-index the run by one call into
    # storage.memory.indexes (deadline, queue, decided, listing), never one module per index
    assert traced.stays.count("storage.memory.indexes") <= 2
    assert "storage.memory.deadlines" not in traced.stays


def test_the_request_asks_the_fast_path_and_the_cost_once_each(traced: Walk) -> None:
    # the prepared operations asked by the schema alone (the view checks the parameters with its
    # own check), their recorder entered with its making; the cost reported where it is found (the
    # number of agents read between); the schema's error masking composed once, not per request
    assert traced.stays.count("resolvers.fastpath.prepared") <= 1
    assert traced.stays.count("resolvers.documents.cost") <= 2
    assert "resolvers.errors" not in traced.stays


def test_a_store_applies_a_write_without_calling_back_into_it(traced: Walk) -> None:
    # a write's documents (the key's, the claim's) are fields made with it, as its conditions are:
    # storage.protocol.writes is entered where the key's reservation, the decision's write and the
    # completion's deletion are made, never by the store applying them
    assert traced.stays.count("storage.protocol.writes") <= 3


def test_the_walk_returns_at_most_66_times(traced: Walk) -> None:
    # issue 43's figure (docs/architecture.md "The approval's walk"); the target is 42
    assert traced.returns <= 66
