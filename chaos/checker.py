"""The checker: reads the final state of every run after the workload drained and compares it
with the history of requests, the event log (``runEvents``), the listing and the tools' ledger.

Each rule that fails adds a violation naming the run; ``report`` attaches the run's full history
(its requests and responses, events, ledger lines) to each.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runtime.running.delegation import sub_run_id

from .agents import AGENTS, APPROVE, SUPERVISOR
from .driver import EVENTS, LISTING, RUN, Driver

ENDED = {"completed"}


@dataclass
class Violation:
    run_id: str
    rule: str
    detail: str


@dataclass
class Checker:
    driver: Driver
    ledger: Path
    violations: list[Violation] = field(default_factory=list)
    events: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    final: dict[str, dict[str, Any] | None] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    effects: dict[tuple[str, str], list[dict[str, Any]]] = field(default_factory=lambda: defaultdict(list))

    def flag(self, run_id: str, rule: str, detail: str) -> None:
        self.violations.append(Violation(run_id, rule, detail))

    async def read(self, agent: str, run_id: str) -> None:
        rng = random.Random(run_id)
        data = await self.driver.request(rng, "runEvents", EVENTS, {"agentId": agent, "runId": run_id}, run_id=run_id)
        self.events[run_id] = [] if data is None else data["runEvents"]
        data = await self.driver.request(rng, "suspendedRun", RUN, {"agentId": agent, "runId": run_id}, run_id=run_id)
        self.final[run_id] = None if data is None else data["suspendedRun"]

    async def listed(self, agent: str) -> dict[str, dict[str, Any]]:
        rng, after = random.Random(agent), None
        nodes: dict[str, dict[str, Any]] = {}
        while True:
            data = await self.driver.request(
                rng, "suspendedRuns", LISTING, {"agentId": agent, "after": after}, run_id=None
            )
            if data is None:
                return nodes
            page = data["suspendedRuns"]
            nodes.update({edge["node"]["runId"]: edge["node"] for edge in page["edges"]})
            if not page["pageInfo"]["hasNextPage"]:
                return nodes
            after = page["pageInfo"]["endCursor"]

    async def check(self) -> None:
        driver = self.driver
        for line in self.ledger.read_text(encoding="utf-8").splitlines():
            if line:
                row = json.loads(line)
                self.effects[(row["runId"], row["toolCallId"])].append(row)
        async with _client(driver):
            for run_id, agent in list(driver.runs.items()):
                await self.read(agent, run_id)
            listings = {agent: await self.listed(agent) for agent in sorted({*driver.runs.values(), *AGENTS})}
            for agent, listing in listings.items():
                for run_id in self.strays(listing):
                    await self.read(agent, run_id)  # its events, for the report
            # the sub-runs of supervisors, found from the supervisor's decisions
            subs: dict[str, str] = {}
            for run_id, agent in driver.runs.items():
                if agent == SUPERVISOR:
                    for event in self.events[run_id]:
                        if event["type"] == "decision":
                            sub = sub_run_id(run_id, event["data"]["toolCallId"])
                            if sub not in subs:
                                subs[sub] = run_id
                                await self.read(APPROVE, sub)
        for run_id, agent in driver.runs.items():
            self.check_run(run_id, agent, listings[agent])
        for sub, parent in subs.items():
            self.check_chain(sub)
            self.check_effects(sub, parent)
        for listing in listings.values():
            self.check_strays(listing)
        self.check_gave_up()

    def check_run(self, run_id: str, agent: str, listing: dict[str, dict[str, Any]]) -> None:
        events, final = self.events[run_id], self.final[run_id]
        types = [e["type"] for e in events]
        if not events:
            self.flag(run_id, "lost", "the run has no events")
        if final is None:
            self.outcomes["COMPLETED"] += 1
            if types and types[-1] == "failed" and "suspended" not in types:
                self.flag(run_id, "failed, not stored", f"FAILED at its start, yet nothing is stored to retry: {types}")
            elif "completed" not in types:
                self.flag(run_id, "lost", f"the snapshot is gone but no completed event was logged: {types}")
            if run_id in listing:
                self.flag(run_id, "listing", "listed after its snapshot was gone")
        else:
            pending = [c for c in final["toolCalls"] if c["decision"] is None]
            if final["status"] == "RESUMING":
                self.outcomes["RESUMING"] += 1
                self.flag(run_id, "stalled", "still RESUMING after the workload drained")
            elif final["lastError"] is not None:
                self.outcomes["FAILED"] += 1
            elif pending:
                self.outcomes["SUSPENDED"] += 1
            else:
                self.outcomes["STALLED"] += 1
                self.flag(run_id, "stalled", "every call decided, no error, and nobody continued the run")
            if "completed" in types:
                self.flag(run_id, "ended", "the run completed but is still stored, with calls listed as pending")
            if run_id not in listing:
                self.flag(run_id, "listing", "stored but missing from the listing")
        self.check_chain(run_id)
        self.check_decisions(run_id)
        self.check_effects(run_id, None)

    def strays(self, listing: dict[str, dict[str, Any]]) -> list[str]:
        """The listed runs that no start answered to the driver: neither a run it started nor a
        sub-run of one (``parentRunId``)."""
        known = self.driver.runs
        return [
            run_id
            for run_id, node in listing.items()
            if run_id not in known and (node.get("parentRunId") is None or node["parentRunId"] not in known)
        ]

    def check_strays(self, listing: dict[str, dict[str, Any]]) -> None:
        """``stray run``: a stored run that no start answered (a start repeated after its run was
        stored, which stored a second run; or a sub-run whose supervisor was never stored)."""
        for run_id in self.strays(listing):
            node = listing[run_id]
            parent = node.get("parentRunId")
            self.flag(
                run_id,
                "stray run",
                f"{node['status']} since {node.get('createdAt')}, "
                + (f"a sub-run of {parent}, which no start answered" if parent else "no start answered it"),
            )

    def check_chain(self, run_id: str) -> None:
        """One continuation at a time: a ``resumed`` follows the end of the last one, or a takeover
        of its claim by the instance that resumes."""
        holder: str | None = None
        taker: str | None = None
        superseded: set[str] = set()  # instances whose claim another took over
        last: str | None = None
        decided: set[str | None] = set()
        for event in self.events.get(run_id, []):
            kind, data = event["type"], event["data"] or {}
            previous_kind, last = last, kind
            if kind == "takeover":
                previous = (data.get("previousClaim") or {}).get("by")
                if holder is not None and previous != holder:
                    self.flag(
                        run_id,
                        "double continuation",
                        f"takeover {event['id']} took {previous}'s claim, held by {holder}",
                    )
                if previous:
                    superseded.add(previous)
                taker = event["by"]
            elif kind == "resumed":
                me = data.get("instanceId")
                if previous_kind == "suspended":  # nothing was decided since: a late event of a lost claim
                    self.flag(run_id, "stale resumed", f"{me} logged resumed ({event['id']}) right after suspended")
                    continue
                if holder is not None and taker != me:
                    if me in superseded:
                        self.flag(
                            run_id,
                            "stale resumed",
                            f"{me} logged resumed ({event['id']}) after its claim was taken over by {holder}",
                        )
                        continue
                    self.flag(run_id, "double continuation", f"{me} resumed ({event['id']}) while {holder} held it")
                holder, taker = me, None
            elif kind in ("suspended", "completed", "failed"):
                holder, taker = None, None
            elif kind == "decision" and holder is not None and data.get("toolCallId") in decided:
                # the call was decided before, so it suspended again: the continuation ended unlogged
                self.flag(
                    run_id,
                    "missing event",
                    f"{holder}'s continuation logged no suspended/completed/failed before decision {event['id']}",
                )
                holder, taker = None, None
            if kind == "decision":
                decided.add(data.get("toolCallId"))

    def check_decisions(self, run_id: str) -> None:
        acked: list[tuple[str, str]] = []
        maybe: set[tuple[str, str]] = set()
        kinds = {"approveToolCall": "approved", "declineToolCall": "declined", "resumeRun": "resumed"}
        for entry in self.driver.history:
            if entry["runId"] != run_id or entry["op"] not in kinds:
                continue
            call = entry["variables"]["input"]["toolCallId"]
            pair = (call, kinds[entry["op"]])
            if "response" not in entry or not (entry["response"].get("data")):
                maybe.add(pair)  # no answer: may or may not have been applied
                continue
            result = next(iter(entry["response"]["data"].values()))
            if result["__typename"] == "RunOutcome":
                acked.append(pair)
                maybe.add(pair)
            elif result["__typename"] == "IdempotencyKeyReused":
                maybe.add(pair)
        logged: dict[tuple[str, str | None], list[str]] = defaultdict(list)
        for event in self.events[run_id]:
            if event["type"] == "decision":
                data = event["data"]
                logged[(data["toolCallId"], data.get("questionId"))].append(data["kind"])
                if (data["toolCallId"], data["kind"]) not in maybe:
                    self.flag(run_id, "unacknowledged decision", f"{data} is logged but no request of it was answered")
        for question, decided in logged.items():
            if len(decided) > 1:
                self.flag(run_id, "two decisions", f"question {question} decided {decided}")
        seen = {(call, kind) for (call, _), kinds_ in logged.items() for kind in kinds_}
        for pair in acked:
            if pair not in seen:
                self.flag(run_id, "acknowledged decision missing", f"{pair} was answered with a RunOutcome, not logged")

    def check_effects(self, run_id: str, parent: str | None) -> None:
        events = self.events.get(run_id, [])
        takeovers = sum(e["type"] == "takeover" for e in events)
        if parent is not None:
            takeovers += sum(e["type"] == "takeover" for e in self.events.get(parent, []))
        decisions: dict[str, list[str]] = defaultdict(list)
        for event in events:
            if event["type"] == "decision":
                decisions[event["data"]["toolCallId"]].append(event["data"]["kind"])
        for (effect_run, call), rows in self.effects.items():
            if effect_run != run_id:
                continue
            kinds = decisions.get(call, [])
            if "declined" in kinds:
                self.flag(run_id, "effect after decline", f"{call} ran {len(rows)} time(s) after a decline")
            if not kinds:
                self.flag(run_id, "effect without decision", f"{call} ran {len(rows)} time(s), no decision logged")
            if len(rows) > 1 + takeovers:
                self.flag(
                    run_id, "effect repeated", f"{call} ran {len(rows)} times with {takeovers} takeover(s) in the log"
                )

    def check_gave_up(self) -> None:
        for entry in self.driver.gave_up:
            self.flag(
                entry["runId"] or "-",
                "request never answered",
                f"{entry['op']} {entry['note']} {entry['variables']}: {entry['attempts']} tries in "
                f"{entry['seconds']} s, the last answered {entry['last']}",
            )

    def report(self) -> dict[str, Any]:
        driver = self.driver
        decisions = sum(
            1
            for e in driver.history
            if e["op"] in ("approveToolCall", "declineToolCall", "resumeRun")
            and "response" in e
            and (next(iter((e["response"].get("data") or {"x": {}}).values())) or {}).get("__typename") == "RunOutcome"
        )
        elapsed = max(driver.finished_at - driver.started_at, 1e-9)
        by_run: dict[str, list[Violation]] = defaultdict(list)
        for v in self.violations:
            by_run[v.run_id].append(v)
        return {
            "runs": len(driver.runs),
            "outcomes": dict(self.outcomes),
            "requests": len(driver.history),
            "decisionsAcknowledged": decisions,
            "effects": sum(len(rows) for rows in self.effects.values()),
            "seconds": round(elapsed, 1),
            "runsPerSecond": round(len(driver.runs) / elapsed, 2),
            "decisionsPerSecond": round(decisions / elapsed, 2),
            "violationCount": len(self.violations),
            "violationsByRule": _count(v.rule for v in self.violations),
            "violations": [
                {
                    "runId": run_id,
                    "rules": [{"rule": v.rule, "detail": v.detail} for v in found],
                    "requests": [e for e in driver.history if e["runId"] == run_id],
                    "events": self.events.get(run_id, []),
                    "ledger": [row for (r, _), rows in self.effects.items() if r == run_id for row in rows],
                }
                for run_id, found in by_run.items()
            ],
        }


def _count(items: Any) -> dict[str, int]:
    counts: dict[str, int] = defaultdict(int)
    for item in items:
        counts[item] += 1
    return dict(counts)


class _client:
    """Open the driver's HTTP client again for the checker's reads."""

    def __init__(self, driver: Driver) -> None:
        self.driver = driver

    async def __aenter__(self) -> None:
        import httpx

        self.driver._client = httpx.AsyncClient(timeout=self.driver.timeout)

    async def __aexit__(self, *exc: object) -> None:
        assert self.driver._client is not None
        await self.driver._client.aclose()
