"""What an approval leaves to the cyclic garbage collector: none of runsgate's objects (a reference
cycle is freed only by a collection, which then walks all it holds: the run's whole agent graph)."""

from __future__ import annotations

import asyncio
import gc
import types
from collections.abc import Awaitable, Callable
from typing import Any

from runtime import RunManager
from runtime.continuing.claims import renewing

AGENT = "refund-agent"
OURS = ("runtime.", "storage.", "server.", "resolvers.")


def _ours(thing: Any) -> bool:
    """Whether ``thing`` is runsgate's: an instance of one of its classes, or its function, bound
    method, coroutine or closure cell holding one."""
    if isinstance(thing, types.CellType):
        try:
            thing = thing.cell_contents
        except ValueError:
            return False
    if isinstance(thing, types.MethodType):
        thing = thing.__func__
    if isinstance(thing, (types.FunctionType, types.CoroutineType)):
        module = getattr(thing, "__module__", None) or thing.__qualname__
        return module.startswith(OURS)
    return type(thing).__module__.startswith(OURS)


async def _left_in_cycles(body: Callable[[], Awaitable[None]]) -> list[str]:
    """The runsgate objects that ``body`` left in reference cycles, by type (the collector off
    while it runs, then one collection that keeps what it found; what was alive before is held
    meanwhile, so that garbage another test left is not counted)."""
    gc.collect()
    existing = gc.get_objects()
    gc.disable()
    try:
        await body()
        await asyncio.sleep(0.01)  # what the body left to tasks
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        found = [type(o).__qualname__ for o in gc.garbage if _ours(o)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    del existing
    gc.collect()
    return found


async def test_an_approval_leaves_no_reference_cycle_of_runsgate(manager: RunManager) -> None:
    # given a suspended refund run, after one approval that warmed every cache
    for _ in range(2):
        started = await manager.start_run(AGENT, "Please refund order 1042")
        assert started.run is not None
        call_id = started.run["toolCalls"][0]["toolCallId"]
        if _ == 0:
            await manager.approve(AGENT, started.run_id, call_id)

    # when it is approved to completion
    async def approve() -> None:
        outcome = await manager.approve(AGENT, started.run_id, call_id)
        assert outcome.status == "completed"

    # then nothing of runsgate's is left for the collector
    assert await _left_in_cycles(approve) == []


async def test_a_renewed_lease_leaves_no_reference_cycle() -> None:
    # given a lease renewed every minute
    async def renew() -> bool:
        return True

    # when a body runs under it
    async def body() -> None:
        async with renewing(renew, every=60.0, lease="test lease"):
            await asyncio.sleep(0)

    # then nothing of runsgate's is left for the collector
    assert await _left_in_cycles(body) == []
