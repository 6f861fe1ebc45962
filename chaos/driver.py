"""The chaos workload: starts runs and decides them through random instances, recording every
request and its response (the history the checker reads).

Concurrency is bounded (``concurrency`` runs at a time). Each run draws its choices from its own
generator (``seed`` and the run's number), so a seed gives the same workload; what the servers
answer under faults is not reproducible, and need not be.
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

from .agents import APPROVE, ASK, SUPERVISOR

_RESULT = "__typename ... on RunOutcome { runId status error } ... on UserError { code message }"
START = f"mutation($input: StartRunInput!) {{ startRun(input: $input) {{ {_RESULT} }} }}"
DECIDE = {
    op: f"mutation($input: {name}!) {{ {op}(input: $input) {{ {_RESULT} }} }}"
    for op, name in (
        ("approveToolCall", "ApproveToolCallInput"),
        ("declineToolCall", "DeclineToolCallInput"),
        ("resumeRun", "ResumeRunInput"),
        ("retryRun", "RetryRunInput"),
    )
}
RUN = (
    "query($agentId: ID!, $runId: ID!) { suspendedRun(agentId: $agentId, runId: $runId) { runId status "
    "lastError { type message } toolCalls { toolCallId toolName requiresApproval questionId suspendPayload "
    "decision { kind } } } }"
)
EVENTS = "query($agentId: ID!, $runId: ID!) { runEvents(agentId: $agentId, runId: $runId) { id type at by data } }"
LISTING = (
    "query($agentId: ID!, $after: String) { suspendedRuns(agentId: $agentId, first: 100, after: $after) { "
    "edges { node { runId status parentRunId createdAt lastError { type } "
    "toolCalls { toolCallId decision { kind } } } } "
    "pageInfo { hasNextPage endCursor } } }"
)
ATTEMPTS = 12
"""Tries of one request (same idempotency key) at least, before the driver may give up on it."""
QUIET = 15.0
"""Seconds in a row that the store must have been up (no store fault in progress) while a request
was retried, besides its ``ATTEMPTS`` tries, before the driver gives up on it."""
GIVE_UP_AFTER = 300.0
"""Seconds after its first try that a request is given up on, whatever the faults."""


@dataclass
class Driver:
    urls: list[str]
    seed: int
    concurrency: int = 8
    run_seconds: float = 90.0
    """How long one run is driven before the driver leaves it as it is."""
    timeout: float = 10.0
    backoff: float = 1.0
    """Scale of the pauses between tries (a test shortens them)."""
    store_calm: Callable[[], float] | None = None
    """Seconds since the last store fault ended (0 while one is in progress), from the fault
    injector (``Faults.store_calm``); None: no faults, the store counts as up all along."""
    quiet: float = QUIET
    give_up_after: float = GIVE_UP_AFTER
    history: list[dict[str, Any]] = field(default_factory=list)
    runs: dict[str, str] = field(default_factory=dict)
    """runId -> agentId of every run the driver started."""
    gave_up: list[dict[str, Any]] = field(default_factory=list)
    started_at: float = 0.0
    finished_at: float = 0.0
    _client: httpx.AsyncClient | None = None

    async def run(self, count: int | None, seconds: float | None, until: asyncio.Event | None = None) -> None:
        """Drive ``count`` runs, or start runs for ``seconds``; either way go on starting runs
        until ``until`` is set, if given."""
        self.started_at = time.monotonic()
        limits = httpx.Limits(max_connections=4 * self.concurrency)
        async with httpx.AsyncClient(timeout=self.timeout, limits=limits) as self._client:
            deadline = None if seconds is None else self.started_at + seconds
            numbers = itertools.count()

            def more(n: int) -> bool:
                if until is not None and not until.is_set():
                    return True
                if count is not None:
                    return n < count
                return deadline is not None and time.monotonic() <= deadline

            async def worker() -> None:
                while more(n := next(numbers)):
                    await self.drive(n)

            await asyncio.gather(*(worker() for _ in range(self.concurrency)))
        self.finished_at = time.monotonic()

    # -- requests --------------------------------------------------------------------------------

    async def request(
        self,
        rng: random.Random,
        op: str,
        query: str,
        variables: dict[str, Any],
        *,
        run_id: str | None,
        note: str = "",
        first_timeout: float | None = None,
        attempts: int = ATTEMPTS,
    ) -> dict[str, Any] | None:
        """Send until an answer comes (the same variables, hence the same idempotency key, each
        time, from a random instance). Every try is in the history.

        Without an answer (an HTTP error or timeout, a GraphQL error such as ``STORE_UNAVAILABLE``,
        a key still in flight) it tries again. It gives up, returns None and records the request in
        ``gave_up``, after at least ``attempts`` tries once the store has been up for ``quiet``
        seconds in a row during them (``store_calm``), or ``give_up_after`` seconds after the
        first try. ``attempts=1`` is a one-shot probe, never recorded."""
        assert self._client is not None
        first = time.monotonic()
        attempt = 0
        last = ""
        while True:
            url = rng.choice(self.urls)
            entry: dict[str, Any] = {
                "t": time.time(),
                "runId": run_id,
                "op": op,
                "note": note,
                "attempt": attempt,
                "instance": url,
                "variables": variables,
            }
            self.history.append(entry)
            timeout = first_timeout if attempt == 0 and first_timeout else self.timeout
            pause = min(0.1 * 2 ** min(attempt, 5), 2.0) * rng.uniform(0.5, 1.5)
            try:
                response = await self._client.post(
                    f"{url}/graphql", json={"query": query, "variables": variables}, timeout=timeout
                )
                body = response.json()
            except (httpx.HTTPError, ValueError) as exc:
                entry["error"] = last = f"{type(exc).__name__}: {exc}"
            else:
                entry["status"], entry["response"] = response.status_code, body
                data = body.get("data") if isinstance(body, dict) else None
                value = next(iter(data.values())) if data else None
                if body.get("errors") or not data:
                    last = str(body.get("errors"))[:300]
                elif isinstance(value, dict) and value.get("code") == "IDEMPOTENCY_KEY_REUSED":
                    last, pause = "IDEMPOTENCY_KEY_REUSED", min(0.2 * 2 ** min(attempt, 4), 2.0)
                else:
                    answer: dict[str, Any] = data
                    return answer
            attempt += 1
            if self._give_up(attempt, attempts, first):
                break
            await asyncio.sleep(pause * self.backoff)
        if attempts > 1:  # a one-shot probe (an impatient retry) may go unanswered
            self.gave_up.append(
                {
                    "runId": run_id,
                    "op": op,
                    "variables": variables,
                    "note": note,
                    "attempts": attempt,
                    "seconds": round(time.monotonic() - first, 1),
                    "last": last,
                }
            )
        return None

    def _give_up(self, tries: int, attempts: int, first: float) -> bool:
        """Whether a request unanswered after ``tries`` tries, the first at ``first``, ends."""
        now = time.monotonic()
        if tries < attempts:
            return False
        if attempts == 1 or now - first >= self.give_up_after:
            return True
        calm = float("inf") if self.store_calm is None else self.store_calm()
        return min(calm, now - first) >= self.quiet

    async def read_run(self, rng: random.Random, agent: str, run_id: str) -> tuple[bool, dict[str, Any] | None]:
        data = await self.request(rng, "suspendedRun", RUN, {"agentId": agent, "runId": run_id}, run_id=run_id)
        if data is None:
            return False, None
        return True, data["suspendedRun"]

    # -- one run ---------------------------------------------------------------------------------

    async def drive(self, n: int) -> None:
        rng = random.Random(f"{self.seed}/{n}")
        agent = rng.choice([APPROVE, APPROVE, ASK, SUPERVISOR])
        delay = round(rng.choice([0.0, 0.0, 0.05, 0.3]), 2)
        prompt = f"{rng.randint(1, 3) if agent == APPROVE else 1} {delay}"
        key = f"start-{uuid.UUID(int=rng.getrandbits(128)).hex}"
        data = await self.request(
            rng,
            "startRun",
            START,
            {"input": {"agentId": agent, "prompt": prompt, "idempotencyKey": key}},
            run_id=None,
            first_timeout=0.05 if rng.random() < 0.05 else None,
        )
        if data is None or data["startRun"]["__typename"] != "RunOutcome":
            return
        run_id = data["startRun"]["runId"]
        self.runs[run_id] = agent
        for entry in reversed(self.history):
            if entry["op"] == "startRun" and entry["variables"]["input"]["idempotencyKey"] == key:
                entry["runId"] = run_id
        deadline = time.monotonic() + self.run_seconds
        retried = False
        while time.monotonic() < deadline:
            ok, run = await self.read_run(rng, agent, run_id)
            if not ok:
                continue
            if run is None:
                return  # finished
            if run["status"] == "RESUMING":
                await asyncio.sleep(0.2)
                continue
            if run["lastError"] is not None:
                if retried or rng.random() < 0.5:
                    return  # stays FAILED, retryable
                retried = True
                await self.request(
                    rng, "retryRun", DECIDE["retryRun"], {"input": {"agentId": agent, "runId": run_id}}, run_id=run_id
                )
                continue
            pending = [call for call in run["toolCalls"] if call["decision"] is None]
            if not pending:
                await asyncio.sleep(0.3)  # decided, not claimed: the sweeper's
                continue
            if rng.random() < 0.03:
                return  # left waiting on purpose
            jobs = [self.decide(random.Random(rng.random()), agent, run_id, call) for call in pending]
            if rng.random() < 0.2:  # an impatient client retries the run while it is being decided
                jobs.append(self.impatient_retry(random.Random(rng.random()), agent, run_id))
            await asyncio.gather(*jobs)

    async def impatient_retry(self, rng: random.Random, agent: str, run_id: str) -> None:
        await asyncio.sleep(rng.uniform(0.0, 0.3))
        await self.request(
            rng,
            "retryRun",
            DECIDE["retryRun"],
            {"input": {"agentId": agent, "runId": run_id}},
            run_id=run_id,
            note="impatient",
            attempts=1,
        )

    async def decide(self, rng: random.Random, agent: str, run_id: str, call: dict[str, Any]) -> None:
        base = {"agentId": agent, "runId": run_id, "toolCallId": call["toolCallId"]}

        def key() -> str:
            return uuid.UUID(int=rng.getrandbits(128)).hex

        sends: list[Callable[[], Any]] = []
        if call["requiresApproval"]:
            op = "approveToolCall" if rng.random() < 0.75 else "declineToolCall"
            first = {"input": {**base, "idempotencyKey": key()}}
            if op == "declineToolCall":
                first["input"]["reason"] = "chaos says no"
            other = "declineToolCall" if rng.random() < 0.5 else "approveToolCall"
            dup = {
                "input": {**base, "idempotencyKey": key(), **({"reason": "dup"} if other == "declineToolCall" else {})}
            }
        else:
            op = other = "resumeRun"
            question = (call.get("suspendPayload") or {}).get("question")
            valid: Any = {"count": rng.randint(0, 9)} if question == "How many?" else rng.choice(["a", "b"])
            invalid: Any = {"count": "many"} if question == "How many?" else "c"
            if rng.random() < 0.25:
                await self.request(
                    rng,
                    op,
                    DECIDE[op],
                    {
                        "input": {
                            **base,
                            "resumeData": invalid,
                            "questionId": call["questionId"],
                            "idempotencyKey": key(),
                        }
                    },
                    run_id=run_id,
                    note="invalid",
                )
            first = {"input": {**base, "resumeData": valid, "questionId": call["questionId"], "idempotencyKey": key()}}
            dup = {"input": {**base, "resumeData": valid, "questionId": call["questionId"], "idempotencyKey": key()}}
        timeout = 0.05 if rng.random() < 0.1 else None
        sends.append(lambda: self.request(rng, op, DECIDE[op], first, run_id=run_id, first_timeout=timeout))
        if rng.random() < 0.15:
            sends.append(lambda: self.request(rng, other, DECIDE[other], dup, run_id=run_id, note="duplicate"))
        await asyncio.gather(*(send() for send in sends))
        if rng.random() < 0.15:
            await self.request(rng, op, DECIDE[op], first, run_id=run_id, note="replay")
