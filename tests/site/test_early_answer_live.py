"""An answer sent before the request body was read (the 413 of a body over the limit, a 404 to
a POST) says `Connection: close`, and the server closes cleanly after it, through a real
gunicorn started as `make run` starts it: a client reusing its connection is never reset.
Before (gunicorn drains 64 KiB of an unread body, then closes a connection it had announced
as keep-alive), the second request on the connection failed with RemoteDisconnected or a
broken pipe every time here, and an 8 MB body broke the first request itself."""

from __future__ import annotations

import http.client
import io
import json
import socket
from typing import Any

import pytest

from rlark_site.earlyanswer import CloseAfterEarlyAnswer, _TrackedInput, drain
from tests.site.live_web import LiveWeb

ROUNDS = 20
OVER_LIMIT = 3_000_000  # DATA_UPLOAD_MAX_MEMORY_SIZE is 2.5 MB
JSON = {"Content-Type": "application/json"}
HEALTHY = b'{"status": "ok"}'


def _post(connection: http.client.HTTPConnection, path: str, size: int
          ) -> http.client.HTTPResponse:
    connection.request("POST", path, body=b"{" + b" " * (size - 2) + b"}", headers=JSON)
    return connection.getresponse()


def test_a_413_closes_and_the_reused_connection_answers_cleanly(live_web: LiveWeb) -> None:
    connection = live_web.connection()
    try:
        for _ in range(ROUNDS):
            refused = _post(connection, "/api/v1/jobs/", OVER_LIMIT)
            assert (refused.status, refused.getheader("Connection")) == (413, "close")
            assert "detail" in json.loads(refused.read())
            connection.request("GET", "/health/live")  # the same client, as a program reuses it
            again = connection.getresponse()
            assert (again.status, again.read()) == (200, HEALTHY)
    finally:
        connection.close()


def test_a_body_larger_than_the_socket_buffers_still_gets_its_413(live_web: LiveWeb) -> None:
    """8 MB does not fit the kernel's buffers: the server must read it (and drop it) after
    answering, or the client is reset while it still sends."""
    connection = live_web.connection()
    try:
        for _ in range(3):
            refused = _post(connection, "/api/v1/jobs/", 8_000_000)
            assert (refused.status, refused.getheader("Connection")) == (413, "close")
            refused.read()
    finally:
        connection.close()


def test_the_server_really_closes_after_an_early_answer(live_web: LiveWeb) -> None:
    """On the raw socket: the answer, then the end of the stream (a FIN), not a reset."""
    body = b"{" + b" " * (OVER_LIMIT - 2) + b"}"
    head = (f"POST /api/v1/jobs/ HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
            f"\r\nContent-Length: {len(body)}\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", live_web.port), timeout=30) as sock:
        sock.sendall(head + body)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    assert received.startswith(b"HTTP/1.1 413 ") and b"\r\nConnection: close\r\n" in received


def test_any_answer_before_the_body_is_read_closes_too(live_web: LiveWeb) -> None:
    connection = live_web.connection()
    try:
        for _ in range(5):
            missing = _post(connection, "/api/v1/no-such-endpoint/", 1_000_000)
            assert (missing.status, missing.getheader("Connection")) == (404, "close")
            missing.read()
            connection.request("GET", "/health/live")
            assert connection.getresponse().read() == HEALTHY
    finally:
        connection.close()


def test_an_answer_after_the_body_was_read_keeps_the_connection(live_web: LiveWeb) -> None:
    connection = live_web.connection()
    try:
        connection.request("POST", "/api/v1/auth/token/", headers=JSON,
                           body=json.dumps({"username": "nobody", "password": "x" * 12}))
        first = connection.getresponse()
        first.read()
        assert first.getheader("Connection") == "keep-alive"
        sock = connection.sock
        connection.request("GET", "/health/live")
        assert connection.getresponse().read() == HEALTHY
        assert connection.sock is sock  # the same TCP connection served both
    finally:
        connection.close()


# The wrapper without a server: what counts as unread, and the bounded drain.

class _Server:
    """What the wrapper asks of gunicorn's response object: `force_close`."""

    def __init__(self) -> None:
        self.closed = False
        self.started: list[str] = []

    def force_close(self) -> None:
        self.closed = True

    def start_response(self, status: str, headers: Any, exc_info: Any = None) -> None:
        self.started.append(status)


def _app(reads: int) -> Any:
    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        environ["wsgi.input"].read(reads)
        start_response("200 OK", [])
        return [b"done"]

    return app


@pytest.mark.parametrize(("reads", "closes"), [(0, True), (5, True), (10, False)])
def test_only_an_answer_leaving_body_unread_asks_for_a_close(reads: int, closes: bool) -> None:
    server = _Server()
    environ = {"CONTENT_LENGTH": "10", "wsgi.input": io.BytesIO(b"0123456789")}
    answer = CloseAfterEarlyAnswer(_app(reads))(environ, server.start_response)
    assert server.closed is closes and list(answer) == [b"done"]


def test_a_chunked_body_not_read_to_its_end_is_unread() -> None:
    body = _TrackedInput(io.BytesIO(b"abc"), None, chunked=True)
    assert body.unread()
    body.read(3)
    assert body.unread()  # its end was not seen yet
    body.read(3)
    assert not body.unread()


def test_the_drain_stops_when_the_client_stalls() -> None:
    """A client that declared more than it sends: the drain gives up at its deadline."""
    server_end, client_end = socket.socketpair()
    with server_end, client_end:
        client_end.sendall(b"x" * 1000)
        body = _TrackedInput(server_end.makefile("rb", buffering=0), 1_000_000, chunked=False)
        assert drain(body, server_end, seconds=0.3) == 1000
        assert body.unread() and server_end.gettimeout() is None


def test_the_drain_reads_at_most_its_bound() -> None:
    server_end, client_end = socket.socketpair()
    with server_end, client_end:
        client_end.sendall(b"x" * 200_000)
        body = _TrackedInput(server_end.makefile("rb", buffering=0), 200_000, chunked=False)
        assert drain(body, server_end, max_bytes=100_000) == 100_000
