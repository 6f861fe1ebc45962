"""``bench.approval_share`` at a tiny size (no timing asserted): every side runs in the same rounds,
the bare run continues the demo's history to its answer, and the call counts show that the whole
approval makes every call the bare run makes, and runsgate's own on top; the call identities are
counted on their own."""

from __future__ import annotations

from pydantic_ai import models

from bench.approval_share import _bare, _calls, measure

models.ALLOW_MODEL_REQUESTS = False


async def test_the_bare_run_continues_the_history_to_its_answer() -> None:
    approve = await _bare(0)
    await approve()
    counts = await _calls(_bare, 1)
    assert counts["pydantic_ai"] > 0
    assert counts["runsgate runtime"] < 50  # the demo's tools and script only


async def test_both_sides_are_measured_in_the_same_rounds() -> None:
    lines = await measure(rounds=2, approvals=2)
    rounds = [line for line in lines if line.strip().startswith("round ")]
    assert len(rounds) == 2
    assert any(line.startswith("whole - bare, median of rounds: ") for line in lines)
    totals = next(line for line in lines if line.strip().startswith("total")).split()
    whole, runtime, bare, streamed = int(totals[1]), int(totals[3]), int(totals[5]), int(totals[7])
    assert whole > runtime > streamed > bare > 0  # HTTP and GraphQL, then runsgate's runtime and store
    assert any(line.startswith("whole - RunManager.approve (HTTP and GraphQL), median of rounds: ") for line in lines)


async def test_the_call_identitys_capability_is_counted_on_its_own() -> None:
    lines = await measure(rounds=1, approvals=1)
    totals = next(line for line in lines if line.strip().startswith("total")).split()
    whole, identified = int(totals[1]), int(totals[9])
    assert whole > identified
    # given by the run's model, the identities are a few calls of runsgate's, fewer than the
    # totals' own spread between runs: counted where they are made
    runtime = next(line for line in lines if line.strip().startswith("runsgate runtime")).split()
    streamed_own, identified_own = int(runtime[8]), int(runtime[10])
    assert identified_own > streamed_own
    assert any(line.startswith("bare, streamed, identified - bare, streamed, median of rounds: ") for line in lines)
