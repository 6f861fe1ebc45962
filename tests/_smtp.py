"""A receiving SMTP server for tests: ``aiosmtpd``'s ``Controller`` on a free loopback port,
keeping every message it got (``Inbox``)."""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from email import message_from_bytes
from email.message import Message
from typing import Any

from aiosmtpd.controller import Controller


class Inbox:
    """The messages the SMTP server got."""

    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(message_from_bytes(envelope.content))
        return "250 OK"

    def to(self, address: str) -> list[Message]:
        return [m for m in self.messages if m["To"] == address]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def smtp_server() -> Iterator[tuple[Inbox, int]]:
    """An SMTP server on 127.0.0.1 for the block: its ``Inbox`` and port."""
    inbox = Inbox()
    # aiosmtpd logs each connection at INFO from its own thread, which may outlive the test whose
    # captured stream a handler writes to ("--- Logging error ---" in the suite's output)
    logging.getLogger("mail.log").setLevel(logging.WARNING)
    controller = Controller(inbox, hostname="127.0.0.1", port=_free_port())
    controller.start()
    try:
        yield inbox, controller.port
    finally:
        controller.stop()
