"""``bench.approval_gc`` at a tiny size (no timing asserted): every side is measured in the same
rounds, and what an approval leaves in reference cycles is counted."""

from __future__ import annotations

from pydantic_ai import models

from bench.approval_gc import measure

models.ALLOW_MODEL_REQUESTS = False


async def test_every_side_is_measured_with_its_collections_and_cycles() -> None:
    lines = await measure(rounds=2, approvals=2)
    assert lines[0] == "rounds 2 x 2 approvals, per approval, medians of rounds:"
    for side in ("whole approval", "RunManager.approve", "bare, streamed"):
        measured = [line for line in lines if line.strip().startswith(side)]
        assert len(measured) == 2
        assert "in the collector" in measured[0]
        assert "collections gen0" in measured[0]
        assert "objects; runsgate's: " in measured[1]
