"""The walk of one approval through runsgate's modules: ``./dev run python -m bench.approve_walk [--list]``.

The real app, called in process over HTTP (httpx's ASGI transport), with authentication on (an
API key holding every scope), compiled execution on (the default), the memory store and the demo
refund agent: a run is started, then its last pending call is approved with an idempotency key,
and the continuation runs to ``COMPLETED``, no update batch written while it runs
(``UPDATES_WAIT``). While the approval's request runs, ``sys.setprofile`` records every Python
call into a product module (``server``, ``resolvers``, ``runtime``, ``storage``; ``runtime.demo``
excluded; a coroutine or generator resumed is not a call); consecutive calls into one module
count as one stay.

Prints the modules visited, the stays, and the returns (stays into a module already visited:
stays minus modules); ``--list`` prints the stays in order too (docs/architecture.md "The
approval's walk").
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

import httpx

PRODUCT = ("server", "resolvers", "runtime", "storage")
EXCLUDED = ("runtime.demo",)
UPDATES_WAIT = 60.0
"""Seconds the run's update batches wait (``RUNSGATE_RUN_UPDATES_INTERVAL`` and its first text
delay): longer than the traced run takes on any machine, so no batch is written while it runs,
as on a quiet machine with the defaults, and the walk does not depend on the load."""
KEY = "rg_bench_walk_0123456789abcdefghijklmnopqrstuvwxyz"

START = """
mutation Start($key: String!) {
  startRun(input: {agentId: "refund-agent", prompt: "Please refund order 1042", idempotencyKey: $key}) {
    __typename
    ... on RunOutcome { runId status run { toolCalls { toolCallId questionId } } }
    ... on UserError { code message }
  }
}
"""

APPROVE = """
mutation Approve($runId: ID!, $toolCallId: ID!, $key: String!) {
  approveToolCall(input: {agentId: "refund-agent", runId: $runId, toolCallId: $toolCallId, idempotencyKey: $key}) {
    __typename
    ... on RunOutcome { status output }
    ... on UserError { code message }
  }
}
"""


@dataclass(frozen=True)
class Walk:
    """The product modules one approval called into, in order, consecutive repeats merged."""

    stays: list[str]

    @property
    def modules(self) -> int:
        return len(set(self.stays))

    @property
    def returns(self) -> int:
        """Stays into a module visited before."""
        return len(self.stays) - self.modules


def _product_module(frame: FrameType) -> str | None:
    name = frame.f_globals.get("__name__", "")
    if not isinstance(name, str) or name.split(".", 1)[0] not in PRODUCT:
        return None
    if name.startswith(EXCLUDED):
        return None
    return name


async def walk() -> Walk:
    """Trace one approval (module docstring)."""
    from server.app import create_app
    from server.auth import hash_api_key
    from server.settings import ApiKeyConfig, Settings

    entry = {"name": "walker", "hash": hash_api_key(KEY), "scopes": ["runs:read", "runs:decide", "runs:start"]}
    settings = Settings(
        mongodb_uri=None,
        store=None,
        agents="runtime.demo:AGENTS",
        tool_rules=[],
        api_keys=[ApiKeyConfig.model_validate({**entry, "resources": "*"})],
        run_updates_interval=UPDATES_WAIT,
        run_updates_first_text_delay=UPDATES_WAIT,
    )
    app = create_app(settings)
    headers = {"Authorization": f"Bearer {KEY}"}
    stays: list[str] = []
    entered: set[FrameType] = set()  # a coroutine or generator resumed is not a new call

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event != "call" or frame in entered:
            return
        entered.add(frame)
        module = _product_module(frame)
        if module is not None and (not stays or stays[-1] != module):
            stays.append(module)

    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost", headers=headers) as client:
            for round_ in range(2):  # the first warms the caches (documents, validation)
                started = (
                    await client.post("/graphql", json={"query": START, "variables": {"key": f"start-{round_}"}})
                ).json()["data"]["startRun"]
                call = started["run"]["toolCalls"][-1]
                body = {
                    "query": APPROVE,
                    "variables": {"runId": started["runId"], "toolCallId": call["toolCallId"], "key": f"a-{round_}"},
                }
                stays.clear()
                entered.clear()
                sys.setprofile(profile)
                try:
                    answer = (await client.post("/graphql", json=body)).json()
                finally:
                    sys.setprofile(None)
                outcome = answer["data"]["approveToolCall"]
                if outcome.get("status") != "COMPLETED":
                    raise RuntimeError(f"the approval did not complete the run: {answer}")
    return Walk(stays=list(stays))


def main(argv: Sequence[str]) -> int:
    traced = asyncio.run(walk())
    if "--list" in argv:
        for number, module in enumerate(traced.stays, 1):
            print(f"{number:4d}  {module}")
    print(f"modules {traced.modules}, stays {len(traced.stays)}, returns {traced.returns}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
