"""A webhook receiver for tests: a threaded ``http.server`` on loopback that verifies every
request with the ``standardwebhooks`` package (as any Standard Webhooks receiver would) and
answers as a test scripts it."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from ._processes import scaled

HANG = -1
"""A scripted answer: keep the connection open without answering (until the test ends)."""

Script = Callable[[str, int], int]
"""(webhook-id, how many times this id arrived before) -> the status to answer, or ``HANG``."""


def always(status: int) -> Script:
    return lambda _id, _seen: status


def fail_first(times: int, status: int = 500) -> Script:
    """Answer ``status`` to the first ``times`` arrivals of each webhook-id, then 200."""
    return lambda _id, seen: status if seen < times else 200


@dataclass(frozen=True)
class Received:
    webhook_id: str
    timestamp: int
    """The ``webhook-timestamp`` header (seconds since the epoch)."""
    received_at: float
    """``time.time()`` when it arrived."""
    signature: str
    verified: bool
    """The signature verified with the receiver's secret (``standardwebhooks.Webhook.verify``)."""
    body: str
    answered: int

    @property
    def payload(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.body)
        return loaded


class Receiver:
    """Collects every request POSTed to it (``received``), thread-safe."""

    def __init__(self, secret: str, script: Script) -> None:
        self.secret = secret
        self.script = script
        self.received: list[Received] = []
        self._lock = threading.Lock()
        self._release = threading.Event()
        self.url = ""

    def handle(self, headers: dict[str, str], body: bytes) -> int:
        text = body.decode()
        try:
            Webhook(self.secret).verify(text, headers)
            verified = True
        except (WebhookVerificationError, ValueError):
            verified = False
        webhook_id = headers.get("webhook-id", "")
        with self._lock:
            seen = sum(1 for r in self.received if r.webhook_id == webhook_id)
            answer = self.script(webhook_id, seen)
            self.received.append(
                Received(
                    webhook_id=webhook_id,
                    timestamp=int(headers.get("webhook-timestamp", "0")),
                    received_at=time.time(),
                    signature=headers.get("webhook-signature", ""),
                    verified=verified,
                    body=text,
                    answered=answer,
                )
            )
        if answer == HANG:
            self._release.wait(60)
        return answer

    def ids(self) -> Counter[str]:
        """How many times each webhook-id arrived."""
        with self._lock:
            return Counter(r.webhook_id for r in self.received)

    def of_type(self, event_type: str) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.payload["type"] == event_type]

    def wait_for(self, predicate: Callable[[Receiver], bool], timeout: float = 30.0) -> None:
        """Poll until ``predicate(self)`` holds; ``AssertionError`` with what arrived after ``scaled(timeout)`` s."""
        timeout = scaled(timeout)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if predicate(self):
                return
            time.sleep(0.05)
        raise AssertionError(
            f"not received within {timeout} s; got {[(r.webhook_id, r.answered) for r in self.received]}"
        )


@contextmanager
def receiving(secret: str, script: Script | None = None) -> Iterator[Receiver]:
    """A ``Receiver`` listening on a free loopback port (``receiver.url``) for the block;
    ``script`` defaults to answering 200."""
    receiver = Receiver(secret, script or always(200))

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            status = receiver.handle({k.lower(): v for k, v in self.headers.items()}, body)
            if status == HANG:
                return
            self.send_response(status)
            if 300 <= status < 400:
                self.send_header("location", "http://127.0.0.1:9/elsewhere")
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    receiver.url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        receiver._release.set()
        server.shutdown()
        server.server_close()


def new_secret() -> str:
    """A fresh ``whsec_`` secret of 32 random bytes."""
    import base64
    import os

    return "whsec_" + base64.b64encode(os.urandom(32)).decode()
