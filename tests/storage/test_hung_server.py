"""A MongoDB server that accepts commands and never answers them (a hung engine, a network that
drops replies) fails each command after ``socket_timeout`` seconds with
``StoreUnavailableError``, and the store works again once the server answers (docs/storage.md,
``MongoSnapshotStore``). The server is the suite's MongoDB behind a TCP proxy that can stop forwarding."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from storage import StoreUnavailableError

from .._processes import scaled
from .._servers import mongo_store

pytestmark = pytest.mark.mongo


class Proxy:
    """Forwards 127.0.0.1:``port`` to ``target``; while ``frozen``, holds every reply."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.flowing = asyncio.Event()
        self.flowing.set()
        self.port = 0
        self._tasks: set[asyncio.Task[None]] = set()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, held: bool) -> None:
        try:
            while data := await reader.read(65536):
                if held:
                    await self.flowing.wait()
                writer.write(data)
                await writer.drain()
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()

    async def _serve(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection(*self.target)
        for task in (
            asyncio.create_task(self._pipe(client_reader, server_writer, held=False)),
            asyncio.create_task(self._pipe(server_reader, client_writer, held=True)),
        ):
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def __aenter__(self) -> Proxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)


@pytest.fixture
async def proxied(mongodb_uri: str) -> AsyncIterator[tuple[Proxy, str]]:
    parts = urlsplit(mongodb_uri)
    async with Proxy((parts.hostname or "127.0.0.1", parts.port or 27017)) as proxy:
        netloc = f"127.0.0.1:{proxy.port}"
        yield proxy, urlunsplit(parts._replace(netloc=netloc)) + ("&" if parts.query else "?") + "directConnection=true"


async def test_a_command_on_a_server_that_never_answers_fails_after_the_socket_timeout(
    proxied: tuple[Proxy, str],
) -> None:
    proxy, uri = proxied
    store = mongo_store(uri, socket_timeout=scaled(3.0))  # a command answered at once: well within it
    await store.open()
    try:
        assert await store.get("agent", "run-1") is None

        proxy.flowing.clear()  # the server gets each command and its reply never comes
        async with asyncio.timeout(scaled(30)):
            with pytest.raises(StoreUnavailableError):
                await store.get("agent", "run-1")
            with pytest.raises(StoreUnavailableError):
                await store.ping()

        proxy.flowing.set()
        async with asyncio.timeout(scaled(30)):
            while True:  # a new connection answers at once; a held one once its reply is read
                try:
                    assert await store.get("agent", "run-1") is None
                    break
                except StoreUnavailableError:
                    await asyncio.sleep(0.1)
    finally:
        proxy.flowing.set()
        await store.close()
