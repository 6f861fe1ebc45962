"""``RUNSGATE_WEBHOOKS`` and ``RUNSGATE_PUBLIC_URL`` are checked at start (docs/webhooks.md
"Settings"): each problem is one line naming the receiver and key, exit status 2, and the
secret never appears in the message."""

from __future__ import annotations

import base64
import json
import logging
import socket
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from server.observability.logs import configure_logging
from server.settings import load_settings

from .._servers import free_port
from ._cli import serve_with_only

GOOD_SECRET = "whsec_" + base64.b64encode(b"k" * 32).decode()
"""A valid secret (32 bytes)."""


def _hook(**fields: Any) -> dict[str, Any]:
    return {"url": "https://hooks.example.com/runsgate", "secret": GOOD_SECRET, "events": ["run.suspended"], **fields}


@pytest.mark.parametrize(
    ("hooks", "expected", "secret"),
    [
        ([_hook(url="ftp://hooks.example.com/x")], "RUNSGATE_WEBHOOKS[0].url: must be an absolute", None),
        ([_hook(url="/relative")], "RUNSGATE_WEBHOOKS[0].url: must be an absolute", None),
        (
            [_hook(url="https://user:pw-in-url@hooks.example.com/")],
            "RUNSGATE_WEBHOOKS[0].url: must not carry credentials",
            None,
        ),
        ([_hook(), _hook(url="https://b.example.com/", events=["run.exploded"])], "RUNSGATE_WEBHOOKS[1].events", None),
        ([_hook(events=[])], "RUNSGATE_WEBHOOKS[0].events", None),
        (
            [{**_hook(), "agentID": ["refund-agent"]}],
            "RUNSGATE_WEBHOOKS[0].agentID: Extra inputs are not permitted",
            None,
        ),
        (
            [_hook(agentIds=["refund-agnet"])],
            "RUNSGATE_WEBHOOKS[0].agentIds: not registered agents: ['refund-agnet']",
            None,
        ),
        (
            [_hook(secret="plain-secret-value-0123456789abcdef")],
            "RUNSGATE_WEBHOOKS[0].secret: must start with whsec_",
            "plain-secret-value-0123456789abcdef",
        ),
        (
            [_hook(secret="whsec_" + base64.b64encode(b"short-key").decode())],
            "RUNSGATE_WEBHOOKS[0].secret: must encode 24 to 64 bytes (it encodes 9)",
            base64.b64encode(b"short-key").decode(),
        ),
        (
            [_hook(secret="whsec_not*base64*at*all*0123456789abcdef")],
            "RUNSGATE_WEBHOOKS[0].secret: must be whsec_ followed by standard base64",
            "not*base64*at*all",
        ),
        ([_hook(), _hook()], "RUNSGATE_WEBHOOKS: each receiver's url must appear once", None),
        (
            [{"url": "https://a.example.com/", "events": ["run.failed"]}],
            "RUNSGATE_WEBHOOKS[0].secret: Field required",
            None,
        ),
    ],
)
def test_a_bad_receiver_stops_the_server_with_one_line_that_never_shows_the_secret(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    hooks: list[dict[str, Any]],
    expected: str,
    secret: str | None,
) -> None:
    status = serve_with_only(monkeypatch, tmp_path, {"RUNSGATE_AUTH": "off", "RUNSGATE_WEBHOOKS": json.dumps(hooks)})

    out, err = capsys.readouterr()
    assert status == 2
    [line] = err.strip().splitlines()
    assert line.startswith("runsgate: invalid configuration: "), line
    assert expected in line
    if secret is not None:
        assert secret not in out + err
    assert GOOD_SECRET.removeprefix("whsec_") not in out + err


@pytest.mark.parametrize(
    ("variables", "expected"),
    [
        ({"RUNSGATE_WEBHOOKS": "[{"}, "RUNSGATE_WEBHOOKS: not valid JSON"),
        ({"RUNSGATE_PUBLIC_URL": "runs.example.com"}, "RUNSGATE_PUBLIC_URL: must be an absolute"),
        ({"RUNSGATE_WEBHOOK_RETRY_FOR": "0"}, "RUNSGATE_WEBHOOK_RETRY_FOR: Input should be greater than 0"),
        (
            {"RUNSGATE_WEBHOOK_DELIVERY_RETENTION": "5", "RUNSGATE_SUBSCRIPTION_LOOKBACK": "5"},
            "RUNSGATE_WEBHOOK_DELIVERY_RETENTION must exceed RUNSGATE_SUBSCRIPTION_LOOKBACK: the webhook "
            "dispatcher reads the events of that span again, and would send a deleted delivery once more "
            "(got RUNSGATE_WEBHOOK_DELIVERY_RETENTION=5.0, RUNSGATE_SUBSCRIPTION_LOOKBACK=5.0)",
        ),
    ],
)
def test_other_webhook_settings_are_checked_too(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    variables: dict[str, str],
    expected: str,
) -> None:
    assert serve_with_only(monkeypatch, tmp_path, {"RUNSGATE_AUTH": "off", **variables}) == 2
    assert expected in capsys.readouterr().err


def test_a_valid_receiver_keeps_its_secret_out_of_the_settings_repr() -> None:
    settings = load_settings(
        webhooks=[_hook(agentIds=["refund-agent"])], public_url="https://runs.example.com/", auth=False
    )

    [hook] = settings.webhooks
    endpoint = hook.to_endpoint()
    assert endpoint.secret == GOOD_SECRET
    assert endpoint.agent_ids == frozenset({"refund-agent"})
    assert GOOD_SECRET not in repr(settings)
    assert GOOD_SECRET not in repr(endpoint)
    assert settings.inbox_base_url == "https://runs.example.com"
    assert load_settings(auth=False, host="127.0.0.1", port=4100).inbox_base_url == "http://127.0.0.1:4100"


def test_request_urls_of_webhooks_stay_out_of_the_logs_unless_debugging() -> None:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        configure_logging("INFO", "text")
        assert not logging.getLogger("httpx2").isEnabledFor(logging.INFO)  # the webhooks client
        configure_logging("DEBUG", "text")
        assert logging.getLogger("httpx2").isEnabledFor(logging.INFO)
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.getLogger("httpx2").setLevel(logging.NOTSET)


def test_the_inbox_links_of_runsgate_serve_name_the_port_given_on_its_command_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import server.app

    served: dict[str, Any] = {}
    built = server.app.create_app
    monkeypatch.setattr("server.app.create_app", lambda settings: built(served.setdefault("settings", settings)))

    class Server:  # runsgate's uvicorn server, serving nothing
        started = True
        stopped = None

        def __init__(self, config: uvicorn.Config) -> None:
            served.update(port=config.port, listening=None)

        def run(self, sockets: list[socket.socket]) -> None:
            served["listening"] = [sock.getsockname()[1] for sock in sockets]

    monkeypatch.setattr("server.cli.serve.Server", Server)
    port = free_port()

    status = serve_with_only(monkeypatch, tmp_path, {"RUNSGATE_AUTH": "off"}, "--port", str(port))

    assert status == 0
    assert served["port"] == port
    assert served["listening"] == [port]  # the socket runsgate bound before anything else
    assert served["settings"].inbox_base_url == f"http://127.0.0.1:{port}"
