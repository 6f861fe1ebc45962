"""What a runsgate process runs besides its routes: the store, the ``RunManager``, the event feed,
the run updates feed, the sweeper and the webhook dispatcher, started and stopped together by
``Services``.

Also the start-time checks the CLI makes before serving (``tool_rules``, ``check_webhook_agents``,
``store_problem``) and ``make_store`` (docs/architecture.md "Where to change what").
"""

from __future__ import annotations

import asyncio
import gc
import logging
from types import TracebackType
from typing import TypedDict

from pydantic import TypeAdapter, ValidationError
from starlette.datastructures import State

from runtime import (
    ALL_SCOPES,
    AgentRegistry,
    EventFeed,
    RunManager,
    RunUpdateFeed,
    StalledRunSweeper,
    SubscriptionBudgets,
    ToolApprovalRule,
    WebhookDispatcher,
    default_tool_rules,
    load_registry,
    tool_rule_problems,
)
from runtime.access import Recipients
from runtime.notifying.email import EmailOutbox, Recipient
from runtime.notifying.notifier import DeadlineNotifier
from runtime.notifying.schedule import has_notices
from storage import NewerSchemaError, SnapshotStore, StoreUnavailableError, store_from_url

from .links import link_signer, recipient_principal
from .observability.metrics import count_webhook_attempt
from .settings import ConfigError, Settings, ToolRuleConfig, describe_error

logger = logging.getLogger("runsgate")


def make_store(settings: Settings) -> SnapshotStore:
    """The store ``settings.store_url`` names, not opened (``storage.store_from_url``): a SQLite
    file, MongoDB (waiting ``RUNSGATE_MONGODB_TIMEOUT`` seconds for a server, and
    ``RUNSGATE_MONGODB_SOCKET_TIMEOUT`` for an answer), or the in-memory store (lost on restart).

    A SQLite write waits for the database lock at most ``settings.sqlite_busy_timeout``.
    """
    return store_from_url(
        settings.store_url,
        busy_timeout=settings.sqlite_busy_timeout,
        server_selection_timeout=settings.mongodb_timeout,
        socket_timeout=settings.mongodb_socket_timeout,
    )


def store_problem(settings: Settings) -> str | None:
    """Why the configured SQLite store cannot be used, in one line naming the file, or ``None``.

    Opens the file once before serving (creating it and its tables if missing), so that a path
    that cannot be opened or written, a file that is not a runsgate database, or one of a newer
    schema version stops ``runsgate serve`` with one line instead of a failed lifespan. Other
    stores are checked by the lifespan.
    """
    if settings.sqlite_path is None:
        return None

    async def check() -> None:
        store = make_store(settings)
        await store.open()
        await store.close()

    try:
        asyncio.run(check())
    except (StoreUnavailableError, NewerSchemaError) as exc:
        return f"runsgate cannot start: {exc}"
    return None


def tool_rules(settings: Settings, agents: AgentRegistry) -> list[ToolApprovalRule]:
    """The per-tool rules in force: ``RUNSGATE_TOOL_RULES`` when set (even to ``[]``), else the
    agents' module's default rules (``TOOL_RULES`` beside the registry, e.g. the demo agents'),
    else none; checked against the registered agents' tools (``runtime.tool_rule_problems``).

    Raises:
        ConfigError: A rule is invalid or names a tool or argument the agents do not have, or
            (with ``RUNSGATE_SMTP_URL`` set) a recipient no email can reach; the message names
            ``RUNSGATE_TOOL_RULES`` (or the module whose ``TOOL_RULES`` it is).
            Also ``RUNSGATE_AGENTS`` unset, when the default rules are read.
    """
    configured: list[ToolRuleConfig] = settings.tool_rules
    source = "RUNSGATE_TOOL_RULES"
    if "tool_rules" not in settings.model_fields_set:
        path = settings.agents_path()
        try:
            defaults = default_tool_rules(path)
        except ValueError as exc:
            raise ConfigError(f"invalid configuration: RUNSGATE_AGENTS: {exc}") from None
        if defaults is not None:
            source = f"RUNSGATE_TOOL_RULES (unset: the default rules {path.partition(':')[0]}.TOOL_RULES)"
            try:
                configured = TypeAdapter(list[ToolRuleConfig]).validate_python(defaults)
            except ValidationError as exc:
                wrong = "; ".join(describe_error(e, f"rule {e['loc'][0] if e['loc'] else '?'}") for e in exc.errors())
                raise ConfigError(f"invalid configuration: {source}: {wrong}") from None
    rules = [ToolApprovalRule(**rule.model_dump()) for rule in configured]
    problems = tool_rule_problems(rules, agents) + _recipient_problems(settings, rules)
    if problems:
        raise ConfigError(f"invalid configuration: {source}: " + "; ".join(problems))
    return rules


def _recipient_problems(settings: Settings, rules: list[ToolApprovalRule]) -> list[str]:
    """With ``RUNSGATE_SMTP_URL`` set, one line per recipient of ``rules`` without an address: a
    ``key:<name>`` no API key has (a typo), a key whose entry has no ``email``, a ``jwt:...``
    that ``RUNSGATE_RECIPIENTS`` does not list. Without SMTP no email is sent: none."""
    if settings.smtp_url is None:
        return []
    keys = {key.name: key for key in settings.api_keys}
    listed = {entry.principal for entry in settings.recipients}
    problems: dict[str, None] = {}
    for rule in rules:
        if not isinstance(rule.recipients, Recipients):
            continue
        for identity in (*rule.recipients.waiting, *rule.recipients.reminded, *rule.recipients.escalated):
            kind, _, name = identity.partition(":")
            if kind == "key" and name not in keys:
                problems[f"recipients {identity}: no API key of RUNSGATE_API_KEYS is named {name}"] = None
            elif kind == "key" and keys[name].email is None:
                problems[f"recipients {identity}: its RUNSGATE_API_KEYS entry has no email"] = None
            elif kind != "key" and identity not in listed:
                problems[f"recipients {identity}: no RUNSGATE_RECIPIENTS entry names it"] = None
    return list(problems)


def check_webhook_agents(settings: Settings, agents: AgentRegistry) -> None:
    """Every ``agentIds`` of ``RUNSGATE_WEBHOOKS`` names a registered agent (a typo would leave a
    receiver without the events it was meant to get).

    Raises:
        ConfigError: A receiver names an agent that is not registered.
    """
    for number, hook in enumerate(settings.webhooks):
        unknown = sorted(set(hook.agentIds or ()) - set(agents.ids()))
        if unknown:
            raise ConfigError(
                f"invalid configuration: RUNSGATE_WEBHOOKS[{number}].agentIds: not registered agents: {unknown}"
            )


class Services:
    """The process's resources, as an async context manager: entering loads the agents, checks the
    rules and receivers, opens the store (``store``, or the one ``settings`` name), seeds it
    (``RUNSGATE_SEED_RUNS``), and starts the event feed, the sweeper (unless
    ``RUNSGATE_SWEEP_INTERVAL=0``) and the webhook dispatcher (when ``RUNSGATE_WEBHOOKS`` names
    receivers); leaving stops them in the reverse order and closes the store.

    Raises (on entering):
        ConfigError: ``RUNSGATE_AGENTS`` is not set, or the rules or the receivers name what the
            agents do not have.
        ValueError: ``RUNSGATE_AGENTS`` cannot be loaded (``runtime.load_registry``).
        NewerSchemaError: The store holds a newer ``schemaVersion`` (logged as CRITICAL too).
        StoreUnavailableError: The store cannot be opened.
    """

    def __init__(self, settings: Settings, *, store: SnapshotStore | None = None) -> None:
        self.settings = settings
        self.store = store if store is not None else make_store(settings)
        self.webhook_endpoints = {w.to_endpoint().id: w.url for w in settings.webhooks}
        """Receiver id -> URL, for the ``webhookDeliveries`` query."""
        self._tasks: list[asyncio.Task[None]] = []
        self._dispatcher: WebhookDispatcher | None = None
        self._runs: RunManager | None = None
        self._events: EventFeed | None = None
        self._run_updates: RunUpdateFeed | None = None

    @property
    def runs(self) -> RunManager:
        """The ``RunManager`` (only while entered)."""
        assert self._runs is not None, "Services not started"
        return self._runs

    @property
    def events(self) -> EventFeed:
        """The event feed of the subscriptions (only while entered)."""
        assert self._events is not None, "Services not started"
        return self._events

    @property
    def run_updates(self) -> RunUpdateFeed:
        """The feed of ``runUpdates`` (only while entered)."""
        assert self._run_updates is not None, "Services not started"
        return self._run_updates

    def expose(self, state: State) -> None:
        """Put them where requests find them: ``settings``, ``store``, ``runs`` (and its
        ``agents``), ``events``, ``run_updates`` and ``webhook_endpoints`` of the app's ``state``."""
        state.settings = self.settings
        state.store = self.store
        state.runs = self.runs
        state.agents = self.runs.agents
        state.events = self.events
        state.run_updates = self.run_updates
        state.webhook_endpoints = self.webhook_endpoints

    async def __aenter__(self) -> Services:
        settings = self.settings
        agents = load_registry(settings.agents_path())
        rules = tool_rules(settings, agents)  # refused before the store is opened
        check_webhook_agents(settings, agents)
        try:
            await self.store.open()
        except NewerSchemaError as exc:
            logger.critical("runsgate cannot start: %s", exc)
            raise
        try:
            await self._start(agents, rules)
        except BaseException:
            await self._stop()
            raise
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        await self._stop()

    async def _start(self, agents: AgentRegistry, rules: list[ToolApprovalRule]) -> None:
        settings, store = self.settings, self.store
        if settings.seed_runs:
            await _seed(store, settings)
        self._runs = RunManager(
            store,
            agents,
            instance_id=settings.instance_id,
            claim_ttl=settings.claim_ttl,
            model=settings.model,
            tool_rules=rules,
            bulk_concurrency=settings.bulk_concurrency,
            update_interval=settings.run_updates_interval,
            first_text_delay=settings.run_updates_first_text_delay,
            review_claim_ttl=settings.review_claim_ttl,
        )
        budgets = SubscriptionBudgets(
            replay_bytes=settings.max_replay_bytes_per_principal,
            queued_bytes=settings.max_queued_bytes_per_principal,
            rate=settings.max_subscription_rate_per_principal,
        )
        self._events = EventFeed(
            store,
            poll_interval=settings.subscription_poll_interval,
            lookback=settings.subscription_lookback,
            budgets=budgets,
        )
        self._run_updates = RunUpdateFeed(
            self._runs,
            self._events,
            poll_interval=settings.run_updates_poll_interval,
            max_buffer_bytes=settings.run_updates_max_buffer_bytes,
        )
        logger.info(
            "runsgate ready: store=%s agents=%s instance=%s",
            type(store).__name__,
            ",".join(agents.ids()),
            settings.instance_id,
        )
        if not settings.auth:
            logger.warning(
                "authentication is OFF: anyone who can reach %s may read and decide every run "
                "(allowed on loopback only; set RUNSGATE_API_KEYS or a JWT for anything else)",
                settings.host,
            )
        if settings.smtp_url is None and (unmailed := _unmailed(rules)):
            logger.warning(
                "RUNSGATE_SMTP_URL is not set: the recipients of tool rules %s get no email (no email when a "
                "question waits, no reminder, no escalation); the queue and webhooks still tell",
                ", ".join(unmailed),
            )
        for unnamed in _unnamed_scopes(settings, rules):
            logger.warning("%s", unnamed)
        if settings.sweep_interval > 0:
            sweeper = StalledRunSweeper(
                self._runs,
                interval=settings.sweep_interval,
                update_retention=settings.run_updates_retention,
                key_retention=settings.idempotency_key_retention,
                delivery_retention=settings.webhook_delivery_retention,
                event_retention=settings.event_retention,
            )
            self._tasks.append(asyncio.create_task(sweeper.run_forever(), name="runsgate-sweeper"))
        loop = _loop(settings)
        outbox = _email_outbox(settings, rules, store, self._runs)
        if has_notices(rules):
            notifier = DeadlineNotifier(
                store,
                rules=rules,
                agent_ids=agents.ids(),
                lookback=settings.subscription_lookback,
                **loop,
                on_event=None if outbox is None else outbox.on_event,
            )
            self._tasks.append(asyncio.create_task(notifier.run_forever(), name="runsgate-notices"))
        if outbox is not None:
            self._tasks.append(asyncio.create_task(outbox.run_forever(), name="runsgate-email"))
        if settings.webhooks:
            self._dispatcher = WebhookDispatcher(
                store,
                agent_ids=agents.ids(),
                endpoints=[webhook.to_endpoint() for webhook in settings.webhooks],
                public_url=settings.inbox_base_url,
                lookback=settings.subscription_lookback,
                retry=settings.retry_policy,
                connect_timeout=settings.webhook_connect_timeout,
                read_timeout=settings.webhook_read_timeout,
                on_attempt=count_webhook_attempt,
                **loop,
            )
            self._tasks.append(asyncio.create_task(self._dispatcher.run_forever(), name="runsgate-webhooks"))
            logger.info("webhooks: %d receiver(s)", len(settings.webhooks))

    async def _stop(self) -> None:
        """The sweeper, then the dispatcher, the ``RunManager`` (its queued continuations are left
        to the sweepers) and the event feed are stopped, then the store closed."""
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
            await asyncio.wait([task])
        if self._dispatcher is not None:
            await self._dispatcher.close()
            self._dispatcher = None
        if self._runs is not None:
            await self._runs.close()
        if self._events is not None:
            await self._events.close()
        await self.store.close()


class _Loop(TypedDict):
    """What each background loop (notices, email, webhooks) is given alike."""

    instance_id: str
    """This instance's id in the loop's leases."""
    poll_interval: float
    """Seconds between two rounds (``RUNSGATE_WEBHOOK_POLL_INTERVAL``)."""


def _loop(settings: Settings) -> _Loop:
    return _Loop(instance_id=settings.instance_id, poll_interval=settings.webhook_poll_interval)


def _unmailed(rules: list[ToolApprovalRule]) -> list[str]:
    """Each rule of ``rules`` naming recipients, as ``<name> (<tool>)``, or ``#<place, from 1> (<tool>)``."""
    return [
        f"{rule.name or f'#{place}'} ({rule.tool})"
        for place, rule in enumerate(rules, 1)
        if isinstance(rule.recipients, Recipients)
        and (rule.recipients.waiting or rule.recipients.reminded or rule.recipients.escalated)
    ]


def _unnamed_scopes(settings: Settings, rules: list[ToolApprovalRule]) -> list[str]:
    """One line per custom scope (not one of ``ALL_SCOPES``) an API key or a
    ``RUNSGATE_RECIPIENTS`` entry holds but no rule of ``rules`` names: it grants nothing."""
    named = sorted({rule.scope for rule in rules if rule.scope})
    said = f"tool rules name {', '.join(named)}" if named else "no tool rule names a scope"
    holders = [(f"API key {key.name}", key.scopes) for key in settings.api_keys]
    holders += [(f"recipient {entry.principal}", entry.scopes) for entry in settings.recipients]
    return [
        f"the scope {scope!r} of {holder} is not one of runsgate's own scopes and no tool rule names it: "
        f"it grants nothing ({said})"
        for holder, scopes in holders
        for scope in scopes
        if scope not in ALL_SCOPES and scope not in named
    ]


def _email_outbox(
    settings: Settings, rules: list[ToolApprovalRule], store: SnapshotStore, runs: RunManager
) -> EmailOutbox | None:
    """The email outbox of ``RUNSGATE_SMTP_URL`` (``None`` without it): recipients from the API
    keys with an ``email`` (``key:<name>``) and ``RUNSGATE_RECIPIENTS``, each with the grants its
    links decide with (``recipient_principal``); the gate's refusal leaves a recipient out."""
    signer = link_signer(settings)
    if settings.smtp_url is None or signer is None:
        return None
    addresses = {f"key:{key.name}": key.email for key in settings.api_keys if key.email is not None}
    addresses.update({entry.principal: entry.email for entry in settings.recipients})
    recipients = {
        identity: Recipient(address, principal)
        for identity, address in addresses.items()
        if (principal := recipient_principal(settings, identity)) is not None
    }
    return EmailOutbox(
        store,
        rules=rules,
        recipients=recipients,
        refusal_of=runs.review_queue.refusal_of,
        signer=signer,
        public_url=settings.inbox_base_url,
        smtp_url=settings.smtp_url,
        sender=settings.smtp_from,
        retry=settings.retry_policy,
        **_loop(settings),
    )


async def _seed(store: SnapshotStore, settings: Settings) -> None:
    """``RUNSGATE_SEED_RUNS``: fill the memory store with generated runs before serving (benchmarks)."""
    from runtime.seed import SeedPlan, seed_store

    plan = SeedPlan(runs=settings.seed_runs, agents=settings.seed_agents, threads=settings.seed_threads)
    logger.info("seeding %d suspended runs into the memory store", plan.runs)
    await seed_store(store, plan)
    # The generated runs live as long as the process: move them to the permanent generation, so
    # the cyclic collector never walks a million documents again (pauses of seconds otherwise).
    gc.collect()
    gc.freeze()


__all__ = ["Services", "check_webhook_agents", "make_store", "store_problem", "tool_rules"]
