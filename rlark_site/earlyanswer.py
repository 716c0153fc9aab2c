"""An answer sent before the request body was read closes the connection, cleanly.

RLark answers some requests without reading their body: the request guard's 413 for a body
over DATA_UPLOAD_MAX_MEMORY_SIZE above all, but also a 401, 403, 404 or 405 to a POST. Gunicorn
(27) then drains at most 64 KiB of the unread body and closes the connection if more is left,
after having announced `Connection: keep-alive`: a client that reuses the connection gets
`RemoteDisconnected` or a broken pipe, and one still sending a large body gets a reset
before it can read the answer (RFC 9112 9.6 asks the server to linger instead).

`CloseAfterEarlyAnswer` wraps the WSGI application:

- when the answer starts while part of the declared body is unread (or a chunked body has
  not ended), it asks the server to close the connection after this answer, so the answer
  carries `Connection: close` (a WSGI application may not send hop-by-hop headers itself;
  gunicorn's `start_response` belongs to its response object, whose `force_close` does it);
- after the answer has been sent (the iterable's `close`), it reads and drops what is left of
  the body, at most `LINGER_BYTES` within `LINGER_SECONDS` (the socket's timeout bounds each
  read), so the client finishes sending and reads the answer, and the server's close is a FIN,
  not a reset.

Answers after the body was read are returned untouched (so file responses keep their
`wsgi.file_wrapper` path).
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

LINGER_BYTES = 32 * 1024 * 1024
LINGER_SECONDS = 2.0
_CHUNK = 64 * 1024

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


class _TrackedInput:
    """`wsgi.input` counting what the application read, to tell an unread body."""

    def __init__(self, stream: Any, declared: int | None, chunked: bool) -> None:
        self.stream = stream
        self.declared = declared
        self.chunked = chunked
        self.read_bytes = 0
        self.ended = False

    def _seen(self, data: bytes, asked: int | None) -> bytes:
        self.read_bytes += len(data)
        if not data and asked != 0:
            self.ended = True
        return data

    def read(self, size: int | None = None, *args: Any) -> bytes:
        return self._seen(self.stream.read(size, *args) if size is not None
                          else self.stream.read(), size)

    def readline(self, size: int | None = None, *args: Any) -> bytes:
        return self._seen(self.stream.readline(size, *args) if size is not None
                          else self.stream.readline(), size)

    def readlines(self, hint: int | None = None) -> list[bytes]:
        return list(iter(self.readline, b""))

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.readline, b"")

    def unread(self) -> bool:
        if self.ended:
            return False
        if self.declared is not None:
            return self.read_bytes < self.declared
        return self.chunked


class _Lingering:
    """The application's answer, then (on `close`) what is left of the body read and dropped."""

    def __init__(self, answer: Iterable[bytes], linger: Callable[[], None]) -> None:
        self.answer = answer
        self.linger = linger

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.answer)

    def close(self) -> None:
        try:
            close = getattr(self.answer, "close", None)
            if close is not None:
                close()
        finally:
            self.linger()


def _declared(environ: dict[str, Any]) -> int | None:
    try:
        return max(0, int(environ.get("CONTENT_LENGTH") or 0))
    except ValueError:
        return None


def _ask_server_to_close(start_response: StartResponse) -> None:
    """Gunicorn's `start_response` is a method of its response, whose `force_close` makes
    it answer `Connection: close` and close afterwards; other servers are left alone."""
    force_close = getattr(getattr(start_response, "__self__", None), "force_close", None)
    if callable(force_close):
        force_close()


def drain(body: _TrackedInput, sock: socket.socket | None, *,
          max_bytes: int = LINGER_BYTES, seconds: float = LINGER_SECONDS) -> int:
    """Read and drop the rest of the body: at most `max_bytes`, for at most `seconds` when
    the socket is known (each read bounded by its timeout); without a socket, nothing (an
    unbounded wait on a stalled client is worse than a reset). Returns the bytes dropped."""
    if sock is None:
        return 0
    prior = sock.gettimeout()
    deadline = time.monotonic() + seconds
    dropped = 0
    try:
        while dropped < max_bytes and body.unread():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            sock.settimeout(remaining)
            data = body.read(min(_CHUNK, max_bytes - dropped))
            if not data:
                break
            dropped += len(data)
    except (OSError, ValueError):
        pass  # the client went away or stalled: the server closes the connection anyway
    finally:
        try:
            sock.settimeout(prior)
        except OSError:
            pass
    return dropped


class CloseAfterEarlyAnswer:
    def __init__(self, app: WSGIApp) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: StartResponse
                 ) -> Iterable[bytes]:
        chunked = "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        body = _TrackedInput(environ.get("wsgi.input"),
                             None if chunked else _declared(environ), chunked)
        environ["wsgi.input"] = body
        early: list[bool] = []

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            if not early and body.unread():
                early.append(True)
                _ask_server_to_close(start_response)
            return start_response(status, headers, exc_info)

        answer = self.app(environ, start)
        if not early:
            return answer
        sock = environ.get("gunicorn.socket")
        known = sock if isinstance(sock, socket.socket) else None

        def linger() -> None:
            drain(body, known)

        return _Lingering(answer, linger)
