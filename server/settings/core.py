"""Settings: the one place that reads the environment (pydantic-settings).

Variables carry the ``RUNSGATE_`` prefix, plus the standard ``MONGODB_URI``; a ``.env`` file in
the working directory is read too. Invalid values fail at start with a message naming the
variable (``ConfigError``).

The store is named by one URL, ``RUNSGATE_STORE`` (or ``runsgate serve --store``): ``memory://``
(the default), ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db`` (SQLAlchemy's
convention: three slashes, then the path), or ``mongodb://``/``mongodb+srv://``. ``MONGODB_URI``
keeps working; set together with ``RUNSGATE_STORE``, both must name the same store.
"""

from __future__ import annotations

import json
import os
import socket
import uuid
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails
from pydantic_settings import NoDecode, SettingsConfigDict, SettingsError

from storage import registry, url_credentials

from .bounds import CENTURY, DAY, HOUR, MINUTE
from .links import LinkSettings
from .security import SecuritySettings
from .streams import StreamSettings
from .webhooks import WebhookSettings

SQLITE_MIN_BUSY_TIMEOUT = 0.25
"""Seconds: the least wait of a SQLite write for the file's lock (``Settings.sqlite_busy_timeout``),
so ``subscription_lookback`` is at least twice it on a SQLite store; a shorter wait fails writes
that merely overlap."""


OperationName = Annotated[str, Field(pattern=r"^[_A-Za-z][_0-9A-Za-z]{0,63}$")]
"""A GraphQL name of at most 64 characters (``RUNSGATE_METRICS_OPERATION_NAMES``)."""


class ConfigError(Exception):
    """Invalid configuration; the message names each offending environment variable."""


DEMO_AGENTS = "runtime.demo:AGENTS"
"""The demo agents' registry (``runtime/demo``, scripted models): what ``RUNSGATE_AGENTS`` names
to serve them, as ``./dev serve`` does for a local trial."""

NO_AGENTS = (
    "RUNSGATE_AGENTS is not set: name the agent registry to serve, package.module:attribute "
    f"(docs/writing-agents.md), or RUNSGATE_AGENTS={DEMO_AGENTS} for the demo agents, as ./dev serve does"
)
"""Why a start without ``RUNSGATE_AGENTS`` is refused."""


class Settings(SecuritySettings, WebhookSettings, StreamSettings, LinkSettings):
    """runsgate's configuration (docs/configuration.md lists the same table; the security
    settings come from ``SecuritySettings``, the webhook settings from ``WebhookSettings``, the
    per-principal bounds of WebSockets and subscriptions from ``StreamSettings``)."""

    model_config = SettingsConfigDict(env_prefix="RUNSGATE_", env_file=".env", extra="ignore")

    host: str = "127.0.0.1"
    """Interface ``runsgate serve`` listens on."""
    port: Annotated[int, Field(ge=0, le=65535)] = 4000
    """TCP port ``runsgate serve`` listens on."""
    store: str | None = None
    """The store's URL: ``memory://`` (the default), ``sqlite:///relative/path.db``,
    ``sqlite:////absolute/path.db`` or a ``mongodb://`` URI (then also ``mongodb_uri``)."""
    mongodb_uri: str | None = Field(default=None, validation_alias=AliasChoices("MONGODB_URI", "RUNSGATE_MONGODB_URI"))
    """``mongodb://`` URI; its path names the database (default ``runsgate``). Unset: ``store``."""
    mongodb_timeout: Annotated[float, Field(gt=0, le=HOUR, allow_inf_nan=False)] = 5.0
    """Seconds to wait for a reachable MongoDB server before an operation fails."""
    mongodb_socket_timeout: Annotated[float, Field(gt=0, le=HOUR, allow_inf_nan=False)] = 30.0
    """Seconds a MongoDB command waits for the server's answer (one that accepts it and never answers)."""
    agents: str | None = None
    """``package.module:attribute`` of the agent registry to serve (mapping id -> Agent, or agents
    with names). Required to serve (``agents_path``): no agents are served by default, not even
    the demo agents (``DEMO_AGENTS``)."""
    model: str | None = None
    """Overrides every agent's model, e.g. ``openai:gpt-4o-mini`` (needs the ``openai`` extra)."""
    max_page_size: Annotated[int, Field(ge=1, le=10_000)] = 100
    """Cap on ``first``/``last``/``perPage``, and the page size when none is given."""
    claim_ttl: Annotated[float, Field(gt=0, le=DAY, allow_inf_nan=False)] = 60.0
    """Seconds a claim on a continuing run lasts (renewed while it runs)."""
    review_claim_ttl: Annotated[float, Field(gt=0, le=DAY, allow_inf_nan=False)] = 900.0
    """Seconds a review claim (``claimReview``) lasts unless released, renewed or ended by the decision."""
    sweep_interval: Annotated[float, Field(ge=0, le=DAY, allow_inf_nan=False)] = 5.0
    """Seconds between two looks for stalled runs to take over (expired claims, decided runs
    nobody continued) and for calls past their deadline; ``0`` turns the sweeper off on this instance."""
    max_bulk_decisions: Annotated[int, Field(ge=1, le=10_000)] = 100
    """Most decisions in one ``decideToolCalls``; a longer list is refused, recording nothing."""
    bulk_concurrency: Annotated[int, Field(ge=1, le=1000)] = 8
    """Runs one instance decides (and so continues: model calls) at once for ``decideToolCalls``,
    over every batch it serves."""
    instance_id: str = Field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}")
    """This instance's id in claims and the audit log."""
    graphiql: bool = True
    """Serve the GraphiQL explorer on ``GET /graphql`` from a browser."""
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"] = "INFO"
    """Level of the log lines: ``DEBUG``, ``INFO``, ``WARNING``, ``ERROR`` or ``CRITICAL`` (any case)."""
    subscription_poll_interval: Annotated[float, Field(gt=0, le=HOUR, allow_inf_nan=False)] = 1.0
    """Seconds between two reads of an agent's event log while it has subscribers (one poller per agent)."""
    subscription_lookback: Annotated[float, Field(ge=0, le=HOUR, allow_inf_nan=False)] = 5.0
    """Seconds of event ids each poll reads again, to deliver events that became visible late."""
    run_updates_interval: Annotated[float, Field(gt=0, le=MINUTE, allow_inf_nan=False)] = 0.1
    """Seconds between two writes of a continuing run's update batches to the store (the first update
    is written at once, the rest with the outcome): what ``runUpdates`` subscribers on other instances
    read (docs/architecture.md "Run updates")."""
    run_updates_first_text_delay: Annotated[float, Field(ge=0, le=MINUTE, allow_inf_nan=False)] = 0.05
    """Seconds a continuation's first text delta waits, at most, before it is written to the store
    (never beyond ``run_updates_interval``): a run that ends by then writes it with its outcome, in
    one commit. Subscribers on this instance get every update at once (docs/architecture.md "Run
    updates")."""
    run_updates_poll_interval: Annotated[float, Field(gt=0, le=MINUTE, allow_inf_nan=False)] = 0.25
    """Seconds between two reads of a run's update batches by a ``runUpdates`` stream while its run
    continues on another instance (one read per stream)."""
    run_updates_max_buffer_bytes: Annotated[int, Field(ge=64 * 1024, le=64 * 1024 * 1024)] = 1024 * 1024
    """Bytes of updates one ``runUpdates`` stream holds waiting to be sent; a subscriber that falls
    further behind reads the rest from the store as it reads."""
    run_updates_retention: Annotated[float, Field(gt=0, le=CENTURY, allow_inf_nan=False)] = 3600.0
    """Seconds a run update batch stays in the store before the sweeper prunes it (needs
    ``RUNSGATE_SWEEP_INTERVAL`` > 0 on some instance)."""
    idempotency_key_retention: Annotated[float, Field(gt=0, le=CENTURY, allow_inf_nan=False)] = 86400.0
    """Seconds an idempotency key is kept after its answer was stored (Stripe's 24 hours) before the
    sweeper deletes it; a request repeated later is a new request (docs/guarantees.md). Needs
    ``RUNSGATE_SWEEP_INTERVAL`` > 0 on some instance."""
    event_retention: Annotated[float, Field(gt=0, le=CENTURY, allow_inf_nan=False)] = 2_592_000.0
    """Seconds a finished run's events are kept after its ``completed`` or ``failed`` event before
    the sweeper deletes them, while neither the run nor its supervisor's is stored (docs/guarantees.md
    "Events"); must be at least ``RUNSGATE_IDEMPOTENCY_KEY_RETENTION`` and exceed
    ``RUNSGATE_SUBSCRIPTION_LOOKBACK``. Needs ``RUNSGATE_SWEEP_INTERVAL`` > 0 on some instance."""
    ws_connection_init_timeout: Annotated[float, Field(gt=0, le=HOUR, allow_inf_nan=False)] = 10.0
    """Seconds a WebSocket client has to send ``connection_init`` before it is closed with 4408."""
    log_format: Literal["auto", "json", "text"] = "auto"
    """``json`` (one object per line), ``text``, or ``auto``: text on a terminal, else JSON."""
    metrics: bool = True
    """Serve Prometheus metrics on ``GET /metrics``."""
    metrics_operation_names: Annotated[list[OperationName], NoDecode, Field(max_length=200)] = Field(
        default_factory=list
    )
    """Operation names counted under their own name in ``/metrics``, besides those of runsgate's own
    clients (``resolvers.metrics.KNOWN_OPERATION_NAMES``); any other name is counted as ``other``,
    so the labels are the operator's choice, never a client's: comma-separated, or a JSON list."""
    tracing: Literal["auto", "otlp", "console", "off"] = "auto"
    """OpenTelemetry tracing: ``auto`` is ``otlp`` when an OTLP endpoint is set, else ``off``."""
    otel_exporter_otlp_endpoint: str | None = Field(default=None, validation_alias="OTEL_EXPORTER_OTLP_ENDPOINT")
    """The standard OTLP base URL (``/v1/traces`` is appended for traces)."""
    otel_exporter_otlp_traces_endpoint: str | None = Field(
        default=None, validation_alias="OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
    )
    """The standard OTLP traces URL, used as is (wins over ``OTEL_EXPORTER_OTLP_ENDPOINT``)."""
    seed_runs: Annotated[int, Field(ge=0)] = 0
    """Memory store only: generate this many suspended runs at start (``runtime/seed.py``; benchmarks)."""
    seed_agents: Annotated[int, Field(ge=1, le=2)] = 1
    """Memory store only: the seeded runs go to the first N of refund-agent, weather-agent."""
    seed_threads: Annotated[int, Field(ge=1)] = 100
    """Memory store only: distinct thread ids of the seeded runs."""
    compiled_execution: bool = True
    """Serve queries through the compiled execution path (``resolvers/fastpath/``; docs/architecture.md "Fast path"):
    compiled serializers complete objects whose selected fields are plain attributes, and a query
    document that executed before runs as a prepared operation, without Strawberry's parse,
    validation and extension steps (off while tracing is on). Same responses, less CPU per
    request. ``false`` takes Strawberry's pipeline for every request and executes every field
    through graphql-core."""
    worker_healthcheck_timeout: Annotated[float, Field(gt=0, le=HOUR, allow_inf_nan=False)] = 30.0
    """``runsgate serve --workers N``: seconds a worker has to answer uvicorn's health check, at
    start and then every half second, before uvicorn kills and replaces it (uvicorn's
    ``timeout_worker_healthcheck``, 5 s by default, is too short for a loaded machine)."""

    @property
    def otlp_traces_endpoint(self) -> str | None:
        """Where OTLP/HTTP spans go, from the standard variables; ``None``: the exporter's default."""
        if self.otel_exporter_otlp_traces_endpoint:
            return self.otel_exporter_otlp_traces_endpoint
        if self.otel_exporter_otlp_endpoint:
            return self.otel_exporter_otlp_endpoint.rstrip("/") + "/v1/traces"
        return None

    @property
    def trace_exporter(self) -> Literal["otlp", "console"] | None:
        """The span exporter tracing uses, or ``None`` when tracing is off (``tracing`` resolved)."""
        if self.tracing == "auto":
            return "otlp" if self.otlp_traces_endpoint else None
        return None if self.tracing == "off" else self.tracing

    @property
    def inbox_base_url(self) -> str:
        """Base URL of inbox links: ``public_url``, else ``http://{host}:{port}``."""
        return self.public_url or f"http://{self.host}:{self.port}"

    @field_validator("mongodb_uri")
    @classmethod
    def _mongodb_scheme(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("mongodb://", "mongodb+srv://")):
            raise ValueError("must start with mongodb:// or mongodb+srv://")
        if value:
            registry.check_mongodb_uri(value)
        return value or None

    @property
    def store_url(self) -> str:
        """The store in use: ``RUNSGATE_STORE``, else ``MONGODB_URI``, else ``memory://``."""
        return self.store or self.mongodb_uri or registry.MEMORY_URL

    @property
    def sqlite_busy_timeout(self) -> float:
        """Seconds a SQLite write waits for the file's lock: ``min(2 s, subscription_lookback / 2)``,
        so an event that waited is still within the subscription feed's lookback (docs/storage.md
        "Locks and the subscription lookback")."""
        from storage.sqlite import DEFAULT_BUSY_TIMEOUT

        return min(DEFAULT_BUSY_TIMEOUT, self.subscription_lookback / 2)

    @property
    def sqlite_path(self) -> Path | None:
        """The SQLite database file when the store is ``sqlite:///...``, else ``None``
        (``storage.registry.sqlite_path``)."""
        return registry.sqlite_path(self.store_url)

    @field_validator("store")
    @classmethod
    def _store_url(cls, value: str | None) -> str | None:
        if not value:
            return None
        try:
            registry.store_entry(value)  # which stores exist, and their URLs
        except registry.UnknownStoreError:
            raise ValueError(f"must be {registry.accepted_urls()}") from None
        registry.check_store_url(value)  # the store's own check of its URL (a MongoDB URI's options)
        return value

    @model_validator(mode="after")
    def _one_store(self) -> Settings:
        if self.store and self.mongodb_uri and self.store != self.mongodb_uri:
            raise ValueError(
                "RUNSGATE_STORE (or --store) and MONGODB_URI name different stores: set only one of them "
                "(RUNSGATE_STORE takes a mongodb:// URI too)" + self._shown_settings("store", "mongodb_uri")
            )
        if self.store and registry.store_entry(self.store).name == "mongodb":
            self.mongodb_uri = self.store  # MONGODB_URI's users read the MongoDB store's URL there
        if self.webhook_delivery_retention <= self.subscription_lookback:
            raise ValueError(
                "RUNSGATE_WEBHOOK_DELIVERY_RETENTION must exceed RUNSGATE_SUBSCRIPTION_LOOKBACK: the webhook "
                "dispatcher reads the events of that span again, and would send a deleted delivery once more"
                + self._shown_settings("webhook_delivery_retention", "subscription_lookback")
            )
        if self.idempotency_key_retention > self.event_retention:
            raise ValueError(
                "RUNSGATE_IDEMPOTENCY_KEY_RETENTION must not exceed RUNSGATE_EVENT_RETENTION: a repeated "
                "request answers from the run's events, which would be gone while its key is kept"
                + self._shown_settings("idempotency_key_retention", "event_retention")
            )
        if self.event_retention <= self.subscription_lookback:
            raise ValueError(
                "RUNSGATE_EVENT_RETENTION must exceed RUNSGATE_SUBSCRIPTION_LOOKBACK: the event feed reads "
                "the events of that span again" + self._shown_settings("event_retention", "subscription_lookback")
            )
        if self.sqlite_busy_timeout < SQLITE_MIN_BUSY_TIMEOUT and registry.store_entry(self.store_url).name == "sqlite":
            raise ValueError(
                f"RUNSGATE_SUBSCRIPTION_LOOKBACK must be at least {2 * SQLITE_MIN_BUSY_TIMEOUT:g} on a SQLite store: "
                "a write waits for the file's lock at most half of it, and a shorter wait fails writes that merely "
                "overlap" + self._shown_settings("subscription_lookback", "store_url")
            )
        if self.seed_runs and self.store_url != registry.MEMORY_URL:
            raise ValueError(
                "RUNSGATE_SEED_RUNS seeds the memory store only; for SQLite or MongoDB run "
                "`runsgate seed --runs N` instead" + self._shown_settings("seed_runs", "store_url")
            )
        return self

    def _shown_settings(self, *names: str) -> str:
        """`` (got RUNSGATE_A=1.0, RUNSGATE_B='x')``: the values of settings that refuse each other,
        for an error that names them, as ``describe_error`` shows a value (a URL's password masked;
        none of them a secret). ``store_url`` is shown as the store in use (``RUNSGATE_STORE``)."""
        shown = ", ".join(f"{variable_of(name.removesuffix('_url'))}={_shown(getattr(self, name))}" for name in names)
        return f" (got {shown})"

    @field_validator("metrics_operation_names", mode="before")
    @classmethod
    def _names_list(cls, value: object) -> object:
        if isinstance(value, str):
            text = value.strip()
            return json.loads(text) if text.startswith("[") else [n.strip() for n in text.split(",") if n.strip()]
        return value

    @field_validator("log_level", mode="before")
    @classmethod
    def _level_in_any_case(cls, value: object) -> object:
        return value.upper() if isinstance(value, str) else value

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str | None) -> str | None:
        """pydantic-ai's ``infer_model`` at start: an unknown model name, a provider whose package
        is not installed, or one missing its API key is refused here, not at the first run."""
        if not value:
            return None
        from pydantic_ai.models import infer_model

        try:
            infer_model(value)
        except Exception as exc:  # pydantic-ai's UserError, an ImportError, a provider's own error
            raise ValueError(f"pydantic-ai cannot use this model: {exc}") from None
        return value

    def agents_path(self) -> str:
        """``agents``, the registry to serve.

        Raises:
            ConfigError: ``RUNSGATE_AGENTS`` is not set (``NO_AGENTS``).
        """
        if self.agents is None:
            raise ConfigError(f"invalid configuration: {NO_AGENTS}")
        return self.agents

    @field_validator("agents")
    @classmethod
    def _import_path(cls, value: str | None) -> str | None:
        if value is None:
            return None
        module, _, attribute = value.partition(":")
        if not module or not attribute:
            raise ValueError("must look like package.module:attribute")
        return value


SECRET_SETTINGS = frozenset({"jwt_secret", "api_keys", "webhooks", "link_secret", "recipients"})
"""Settings whose refused value a configuration error never shows: they hold a secret, key
hashes, or webhook secrets. Any other value is shown, a URL's password masked (``_shown``)."""


def _shown(value: object) -> str:
    """``value`` as an error shows it: quoted, the user information of a URL in it masked up to
    its last ``@`` (``storage.url_credentials.masked``: ``user:***@host``), so no part of a
    password is shown whatever it holds."""
    if isinstance(value, str):
        return repr(url_credentials.masked(value))
    return url_credentials.masked(json.dumps(value, default=str))


def variable_of(field: str) -> str:
    """The environment variable of the ``Settings`` field ``field``: ``MONGODB_URI`` for
    ``mongodb_uri`` (its alias), else ``RUNSGATE_`` and the field's name in capitals."""
    return "MONGODB_URI" if field in {"mongodb_uri", "MONGODB_URI"} else f"RUNSGATE_{field.upper()}"


def describe_error(error: ErrorDetails, variable: str, *, secret: bool = False) -> str:
    """One pydantic error as a line of a configuration error: ``VARIABLE: why (got VALUE)``.

    ``variable`` names what the user set (``RUNSGATE_PORT``, ``--store``, ``RUNSGATE_TOOL_RULES[0].scope``);
    the reason is pydantic's message without its ``Value error, `` prefix; the refused value is
    left out when ``secret``.
    """
    message = error["msg"]
    if error["type"] in {"value_error", "assertion_error"} and "error" in error.get("ctx", {}):
        message = str(error["ctx"]["error"])
    shown = "" if secret or "input" not in error else f" (got {_shown(error['input'])})"
    return f"{variable}: {message}{shown}" if variable else message


def load_settings(**overrides: object) -> Settings:
    """Read the settings from the environment; ``overrides`` (command-line options, by field
    name: ``store`` is ``--store``) win over it and are validated the same way.

    Raises:
        ConfigError: A variable or option is invalid; the message names it (an override by its
            option, ``--store``), says why and shows the refused value, except for
            ``SECRET_SETTINGS`` and a URL's password.
    """
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except SettingsError as exc:  # a value that is not valid JSON for a list setting
        field = str(exc).split('"')[1] if str(exc).count('"') >= 2 else "?"
        cause = exc.__cause__
        shown = ""
        if isinstance(cause, json.JSONDecodeError):
            shown = f" ({cause})"
            if field not in SECRET_SETTINGS:
                shown += f" (got {_shown(cause.doc)})"
        raise ConfigError(f"invalid configuration: RUNSGATE_{field.upper()}: not valid JSON{shown}") from None
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            if not error["loc"]:  # a rule across several variables; its message names them
                problems.append(describe_error(error, "", secret=True))
                continue
            field = str(error["loc"][0])
            variable = "--" + field.replace("_", "-") if field in overrides else variable_of(field)
            if len(error["loc"]) > 1:  # a list setting: which item, which key
                variable += f"[{error['loc'][1]}]" + "".join(f".{part}" for part in error["loc"][2:])
            problems.append(describe_error(error, variable, secret=field in SECRET_SETTINGS))
        raise ConfigError("invalid configuration: " + "; ".join(problems)) from None
