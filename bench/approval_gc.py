"""The cyclic garbage collector's share of an approval: ``./dev run python -m bench.approval_gc [rounds] [approvals]``.

In one process, as ``bench.approval_share`` (its sides, the memory store, the app started as
``runsgate serve`` starts one: ``bench.approval_cost.memory_app``): the whole approval over ASGI,
``RunManager.approve``, and the bare pydantic-ai run of the same history read as runsgate reads it
(``bare, streamed``), in rounds whose order rotates, on fresh runs made untimed. For each side, per
approval: CPU ms (``time.process_time``), CPU ms inside the collector (``gc.callbacks``, from a
collection's start to its stop) and the collections of each generation. Then, with the collector
off while the approvals run, the objects they left in reference cycles (one collection with
``gc.DEBUG_SAVEALL``): freed only by the collector, which walks all they hold; and those of them
that are runsgate's (its classes, functions, closures), by type.
"""

from __future__ import annotations

import asyncio
import gc
import statistics
import sys
import time
import types
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from .approval_cost import memory_app
from .approval_share import sides

Maker = Callable[[int], Awaitable[Callable[[], Awaitable[None]]]]
SIDES = ("whole approval", "RunManager.approve", "bare, streamed")
"""The sides of ``bench.approval_share`` measured here."""
OURS = ("runtime.", "storage.", "server.", "resolvers.")
"""Module prefixes of runsgate's code (``_ours``)."""


@dataclass
class _Collector:
    """Collections seen through ``gc.callbacks`` while ``on``: CPU seconds inside them, count per generation."""

    on: bool = False
    seconds: float = 0.0
    collections: list[int] = field(default_factory=lambda: [0, 0, 0])
    _began: float = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if not self.on:
            return
        if phase == "start":
            self._began = time.process_time()
        else:
            self.seconds += time.process_time() - self._began
            self.collections[info["generation"]] += 1

    def reset(self) -> None:
        self.seconds, self.collections = 0.0, [0, 0, 0]


async def _round(make: Maker, approvals: int, collector: _Collector) -> tuple[float, float, list[float]]:
    """CPU ms per approval, of it ms in the collector, and collections per approval of each generation."""
    pending = [await make(n) for n in range(approvals)]
    collector.reset()
    collector.on = True
    began = time.process_time()
    try:
        for approve in pending:
            await approve()
    finally:
        spent = time.process_time() - began
        collector.on = False
    per = [c / approvals for c in collector.collections]
    return spent * 1000 / approvals, collector.seconds * 1000 / approvals, per


def _ours(thing: Any) -> str | None:
    """The type's name of ``thing`` when it is runsgate's (an instance of one of its classes, its
    function, bound method or coroutine, or a closure cell holding one), else ``None``."""
    if isinstance(thing, types.CellType):
        try:
            thing = thing.cell_contents
        except ValueError:
            return None
    if isinstance(thing, types.MethodType):
        thing = thing.__func__
    if isinstance(thing, (types.FunctionType, types.CoroutineType)):
        module = getattr(thing, "__module__", None) or ""
        return thing.__qualname__ if module.startswith(OURS) else None
    return type(thing).__qualname__ if type(thing).__module__.startswith(OURS) else None


async def left_in_cycles(make: Maker, approvals: int) -> tuple[float, Counter[str]]:
    """Objects per approval that ``approvals`` approvals left in reference cycles (the collector
    off while they run), and runsgate's among them by type (counts over all the approvals)."""
    pending = [await make(n) for n in range(approvals)]
    gc.collect()
    gc.disable()
    try:
        for approve in pending:
            await approve()
        del pending
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        found = len(gc.garbage)
        ours = Counter(name for name in map(_ours, gc.garbage) if name is not None)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    gc.collect()
    return found / approvals, ours


async def measure(rounds: int = 6, approvals: int = 100) -> list[str]:
    """Lines of text: the figures of the module docstring, medians over the rounds."""
    app = memory_app()
    makers = {name: make for name, make in sides(app).items() if name in SIDES}
    figures: dict[str, list[tuple[float, float, list[float]]]] = {name: [] for name in makers}
    collector = _Collector()
    gc.callbacks.append(collector)
    try:
        async with app.router.lifespan_context(app):  # type: ignore[attr-defined]
            for make in makers.values():
                await _round(make, 10, collector)  # warm-up
            for number in range(rounds):
                items = list(makers.items())
                for name, make in items[number % len(items) :] + items[: number % len(items)]:
                    figures[name].append(await _round(make, approvals, collector))
            cycles = {name: await left_in_cycles(make, min(approvals, 20)) for name, make in makers.items()}
    finally:
        gc.callbacks.remove(collector)
    lines = [f"rounds {rounds} x {approvals} approvals, per approval, medians of rounds:"]
    for name, each in figures.items():
        cpu, in_gc = statistics.median(f[0] for f in each), statistics.median(f[1] for f in each)
        per = [statistics.median(f[2][g] for f in each) for g in range(3)]
        spread = f"{min(f[1] for f in each):.3f}-{max(f[1] for f in each):.3f}"
        lines.append(
            f"  {name:<20} CPU {cpu:.2f} ms, in the collector {in_gc:.3f} ms (rounds {spread}), "
            f"collections gen0 {per[0]:.2f} gen1 {per[1]:.3f} gen2 {per[2]:.3f}"
        )
    lines.append("left in reference cycles per approval (collector off), and runsgate's objects among them:")
    for name, (found, ours) in cycles.items():
        named = ", ".join(f"{kind} {count}" for kind, count in ours.most_common(8)) or "none"
        lines.append(f"  {name:<20} {found:.1f} objects; runsgate's: {named}")
    return lines


def main(argv: list[str]) -> int:
    numbers = [int(a) for a in argv]
    print("\n".join(asyncio.run(measure(*numbers))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
