"""A gRPC server that is not Temporal's test server and will not list search attributes:
it answers a client's connect (GetSystemInfo, the first call on a connection) with an
empty reply, and every later call with one status (PERMISSION_DENIED, as a server's
authorizer tells credentials without an operator's role; UNIMPLEMENTED, as a gateway
without the operator service does). No Temporal server we can start refuses the list:
the dev server lists them and the time-skipping server is the test server, so this one
speaks just enough HTTP/2 (RFC 9113) over a real socket for the SDK's client to meet it.
Headers are sent as HPACK literals (RFC 7541 6.2.2), never Huffman-coded."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
DATA, HEADERS, SETTINGS, PING, GOAWAY, WINDOW_UPDATE, CONTINUATION = 0, 1, 4, 6, 7, 8, 9
END_STREAM = ACK = 0x1
END_HEADERS = 0x4
GRPC = (b"content-type", b"application/grpc")


def frame(kind: int, flags: int, stream: int, payload: bytes = b"") -> bytes:
    return (
        len(payload).to_bytes(3, "big") + bytes([kind, flags]) + stream.to_bytes(4, "big") + payload
    )


def header_block(*fields: tuple[bytes, bytes], status: bool = True) -> bytes:
    """`:status: 200` (static table index 8) and literal fields without indexing."""
    block = b"\x88" if status else b""
    for name, value in fields:
        block += b"\x00" + bytes([len(name)]) + name + bytes([len(value)]) + value
    return block


class UnlistingServer:
    def __init__(self, status: int) -> None:
        self.status = status  # a gRPC status code: 7 PERMISSION_DENIED, 12 UNIMPLEMENTED
        self.refused = 0
        self._connections: dict[asyncio.Task[None], asyncio.StreamWriter] = {}

    def _answer(self, stream: int, first: bool) -> bytes:
        if first:  # the connect's GetSystemInfo: an empty message, status OK
            return (
                frame(HEADERS, END_HEADERS, stream, header_block(GRPC))
                + frame(DATA, 0, stream, b"\x00" * 5)
                + frame(
                    HEADERS,
                    END_HEADERS | END_STREAM,
                    stream,
                    header_block((b"grpc-status", b"0"), status=False),
                )
            )
        self.refused += 1
        status = (b"grpc-status", str(self.status).encode())
        message = (b"grpc-message", b"not for these credentials")
        return frame(HEADERS, END_HEADERS | END_STREAM, stream, header_block(GRPC, status, message))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections[task] = writer
        calls = 0
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            if await reader.readexactly(len(PREFACE)) != PREFACE:
                return
            writer.write(frame(SETTINGS, 0, 0))
            while True:
                head = await reader.readexactly(9)
                length, kind, flags = int.from_bytes(head[:3], "big"), head[3], head[4]
                stream = int.from_bytes(head[5:], "big") & 0x7FFFFFFF
                payload = await reader.readexactly(length)
                if kind == SETTINGS and not flags & ACK:
                    writer.write(frame(SETTINGS, ACK, 0))
                elif kind == PING and not flags & ACK:
                    writer.write(frame(PING, ACK, 0, payload))
                elif kind == DATA and length:  # keep the connection's window open
                    writer.write(frame(WINDOW_UPDATE, 0, 0, length.to_bytes(4, "big")))
                elif kind in (HEADERS, CONTINUATION) and flags & END_HEADERS:
                    writer.write(self._answer(stream, first=calls == 0))
                    calls += 1
                elif kind == GOAWAY:
                    return
                await writer.drain()

    @contextlib.asynccontextmanager
    async def serving(self) -> AsyncIterator[str]:
        """The server on a free local port: its address, for Client.connect."""
        server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        try:
            yield f"127.0.0.1:{server.sockets[0].getsockname()[1]}"
        finally:
            server.close()
            for writer in self._connections.values():
                writer.close()
            if self._connections:  # each reader ends, so its handler returns before the loop
                await asyncio.wait(self._connections, timeout=10)
            await server.wait_closed()
