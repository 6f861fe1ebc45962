"""``bench.pieces`` at a tiny size, so that it cannot rot: every piece can still be turned off
(each patch names an attribute that exists, or ``patched`` raises), and a piece turned off
really changes what a request does (no timing is asserted)."""

from __future__ import annotations

from pydantic_ai import models

from bench.pieces import PIECES, measure

models.ALLOW_MODEL_REQUESTS = False


async def test_every_piece_is_measured() -> None:
    rows = await measure(runs=30, requests=2, rounds=1)
    names = [row[0] for row in rows]
    assert names[2:] == [piece.name for piece in PIECES]
    for _name, with_it, without, _earned, calls_with, calls_without, _calls_earned in rows:
        assert min(with_it, without, calls_with, calls_without) > 0
    calls = {row[0]: (row[4], row[5]) for row in rows}
    # the control changes nothing; turning a piece of the fast path off adds calls
    assert calls[PIECES[0].name][0] == calls[PIECES[0].name][1]
    for name in (
        "compiled completion (and the root plans, which need it)",
        "prepared operations (and root plans, prepared requests)",
        "root plans",
        "the view's prepared requests",
    ):
        assert calls[name][1] > calls[name][0], name
