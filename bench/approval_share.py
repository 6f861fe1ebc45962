"""runsgate's own CPU per approval: ``./dev run python -m bench.approval_share [rounds] [approvals]``.

Side by side in one process and the same rounds (their order rotating): (a) the whole approval,
``approveToolCall`` → COMPLETED through the real app called as ASGI in process (memory store,
authentication off, ``bench.approval_cost.memory_app``), (a') the same approval through the runtime's
Python API (``RunManager.approve``: no HTTP nor GraphQL), (b) a bare pydantic-ai ``Agent.run`` of
the same demo refund agent (its ``FunctionModel`` and tools) continuing the same message history
with the one deferred approval, no events read, (c) the same run read as runsgate reads it
(``Agent.iter`` driven by ``runtime.running.internals.drive``: each node inside pydantic-ai's node
hooks, each running tool calls streamed, the model's answers read from its own stream by
``LiveAnswers``), (d) (c) with runsgate's call identities as a plain approval's continuation
gives them (``CallIdentity`` through ``LiveAnswers``, no capability), and (e) (b) with an
``event_stream_handler`` that reads every event (then pydantic-ai streams every answer through
the run). Runs and histories are made untimed.
Prints CPU ms per approval (``time.process_time``) for each round, the medians and the median of
per-round differences (issue 44's target: (a) ≤ (b) + 1 ms), and, independent of the machine's
load, the Python function calls per approval of each, by where the code lives.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from collections import Counter
from collections.abc import AsyncIterable, Awaitable, Callable
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.messages import AgentStreamEvent, ModelMessage
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

from .approval_cost import _approval, memory_app

PROMPT = "Please refund order 1042"
PLACES = (
    ("pydantic_ai", "/pydantic_ai/"),
    ("pydantic_graph", "/pydantic_graph/"),
    ("pydantic", "/pydantic/"),
    ("runsgate runtime", "/runtime/"),
    ("runsgate storage", "/storage/"),
    ("runsgate resolvers", "/resolvers/"),
    ("runsgate server", "/server/"),
    ("graphql-core", "/graphql/"),
    ("strawberry", "/strawberry/"),
    ("starlette", "/starlette/"),
    ("asyncio", "/asyncio/"),
)
"""Place -> path fragment of its code, first match wins; every other call is ``other``."""


async def _bare(
    number: int, *, streamed: bool = False, identified: bool = False, handled: bool = False
) -> Callable[[], Awaitable[None]]:
    """A refund run of the demo agent suspended on its approval (made now); the coroutine function
    that continues its history with the approval and checks the run finished (``streamed``: its
    events read as runsgate reads them; ``identified``: with runsgate's call identities, as a
    streamed one given through ``LiveAnswers``; ``handled``: with an ``event_stream_handler``)."""
    from runtime.demo.refund import refund_agent
    from runtime.running.identity import CallIdentity
    from runtime.running.internals import drive
    from runtime.updates.publishing import LiveAnswers

    started = await refund_agent.run(f"Please refund order {1042 + number % 2}")
    requests = started.output
    if not isinstance(requests, DeferredToolRequests):
        raise RuntimeError(f"the bare run did not suspend: {requests!r}")
    history: list[ModelMessage] = started.all_messages()
    results = DeferredToolResults(approvals={call.tool_call_id: True for call in requests.approvals})

    async def read(events: AsyncIterable[AgentStreamEvent]) -> None:
        async for _ in events:
            pass

    async def handler(_ctx: RunContext[Any], events: AsyncIterable[AgentStreamEvent]) -> None:
        await read(events)

    async def approve() -> None:
        identity = CallIdentity(run_id=f"bare-{number}") if identified else None
        capabilities = [identity] if identity is not None and not streamed else None
        chosen: dict[str, Any] = {"message_history": history, "deferred_tool_results": results}
        if not streamed:
            result = await refund_agent.run(
                **chosen, capabilities=capabilities, event_stream_handler=handler if handled else None
            )
        else:
            model = LiveAnswers(refund_agent.model, read)  # type: ignore[arg-type]
            model.identity = identity
            async with refund_agent.iter(**chosen, model=model, capabilities=capabilities) as run:
                await drive(run, read)
            assert run.result is not None
            result = run.result
        if not isinstance(result.output, str):
            raise RuntimeError(f"the bare continuation did not finish: {result.output!r}")

    return approve


async def _runtime_approval(runs: Any, number: int) -> Callable[[], Awaitable[None]]:
    """As ``bench.approval_cost._approval``, through the runtime's Python API (``RunManager``), no
    HTTP nor GraphQL: a refund run started (suspended); the coroutine function approving it."""
    started = await runs.start_run("refund-agent", f"Please refund order {1042 + number % 2}")
    call_id = started.run["toolCalls"][0]["toolCallId"]

    async def approve() -> None:
        outcome = await runs.approve("refund-agent", started.run_id, call_id)
        if outcome.status != "completed":
            raise RuntimeError(f"approve did not complete the run: {outcome}")
        await asyncio.sleep(0.001)  # as ``_approval``: what the approval left to background tasks

    return approve


Maker = Callable[[int], Awaitable[Callable[[], Awaitable[None]]]]


async def _cpu_ms(make: Maker, approvals: int) -> float:
    """CPU ms per approval over ``approvals`` fresh runs (made untimed)."""
    pending = [await make(n) for n in range(approvals)]
    began = time.process_time()
    for approve in pending:
        await approve()
    return (time.process_time() - began) * 1000 / approvals


async def _calls(make: Maker, approvals: int) -> Counter[str]:
    """Python function calls per approval (``sys.setprofile``; a coroutine resumed counts again), by place."""
    pending = [await make(n) for n in range(approvals)]
    counts: Counter[str] = Counter()

    def profile(frame: Any, event: str, _arg: Any) -> None:
        if event != "call":
            return
        path = frame.f_code.co_filename
        counts[next((name for name, fragment in PLACES if fragment in path), "other")] += 1

    for approve in pending:
        sys.setprofile(profile)
        try:
            await approve()
        finally:
            sys.setprofile(None)
    return Counter({place: count // approvals for place, count in counts.items()})


def sides(app: Any) -> dict[str, Maker]:
    """Each side of the module docstring, by name: the coroutine function making approval ``n``'s
    run (untimed) and answering the one that approves it (``app``: ``memory_app()``, started)."""

    async def whole(number: int) -> Callable[[], Awaitable[None]]:
        return await _approval(app, number)

    async def in_process(number: int) -> Callable[[], Awaitable[None]]:
        return await _runtime_approval(app.state.runs, number)

    async def streamed(number: int) -> Callable[[], Awaitable[None]]:
        return await _bare(number, streamed=True)

    async def identified(number: int) -> Callable[[], Awaitable[None]]:
        return await _bare(number, streamed=True, identified=True)

    async def handled(number: int) -> Callable[[], Awaitable[None]]:
        return await _bare(number, handled=True)

    return {
        "whole approval": whole,
        "RunManager.approve": in_process,
        "bare Agent.run": _bare,
        "bare, streamed": streamed,
        "bare, streamed, identified": identified,
        "bare, event_stream_handler": handled,
    }


async def measure(rounds: int = 10, approvals: int = 50) -> list[str]:
    """Lines of text: the figures of the module docstring."""
    app = memory_app()
    makers = sides(app)
    figures: dict[str, list[float]] = {name: [] for name in makers}
    async with app.router.lifespan_context(app):  # type: ignore[attr-defined]
        for make in makers.values():
            await _cpu_ms(make, 20)  # warm-up
        for number in range(rounds):
            order = list(makers.items())[number % len(makers) :] + list(makers.items())[: number % len(makers)]
            for name, make in order:
                figures[name].append(await _cpu_ms(make, approvals))
        calls = {name: await _calls(make, 10) for name, make in makers.items()}
    whole_ms, runtime_ms, bare_ms, streamed_ms, identified_ms, _handled = figures.values()
    gap = statistics.median(a - b for a, b in zip(whole_ms, bare_ms, strict=True))
    runtime_gap = statistics.median(r - b for r, b in zip(runtime_ms, bare_ms, strict=True))
    graphql = statistics.median(a - r for a, r in zip(whole_ms, runtime_ms, strict=True))
    streaming = statistics.median(s - b for s, b in zip(streamed_ms, bare_ms, strict=True))
    identity = statistics.median(i - s for i, s in zip(identified_ms, streamed_ms, strict=True))
    named = " / ".join(makers)
    lines = [f"rounds {rounds} x {approvals} approvals, CPU ms per approval ({named}):"]
    lines += [
        f"  round {n + 1}: " + " / ".join(f"{ms:.2f}" for ms in each)
        for n, each in enumerate(zip(*figures.values(), strict=True))
    ]
    lines += [
        "median " + ", ".join(f"{name} {statistics.median(ms):.2f} ms" for name, ms in figures.items()),
        "best " + ", ".join(f"{name} {min(ms):.2f} ms" for name, ms in figures.items()),
        f"whole - bare, median of rounds: {gap:.2f} ms (target <= 1 ms: {'met' if gap <= 1 else 'not met'})",
        f"RunManager.approve - bare, median of rounds: {runtime_gap:.2f} ms",
        f"whole - RunManager.approve (HTTP and GraphQL), median of rounds: {graphql:.2f} ms",
        f"bare, streamed - bare, median of rounds: {streaming:.2f} ms",
        f"bare, streamed, identified - bare, streamed, median of rounds: {identity:.2f} ms",
        f"Python calls per approval ({named}):",
    ]
    counted = list(calls.values())
    for place in sorted(set().union(*counted), key=lambda p: -counted[0][p]):
        lines.append(f"  {place:<20} " + " / ".join(f"{c[place]:6d}" for c in counted))
    lines.append(f"  {'total':<20} " + " / ".join(f"{sum(c.values()):6d}" for c in counted))
    return lines


def main(argv: list[str]) -> int:
    numbers = [int(a) for a in argv]
    print("\n".join(asyncio.run(measure(*numbers))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
