"""A webhook receiver on loopback, and Celery run eagerly, for the notification tests."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from celery import current_app

SECRET = "s3cret-webhook-key-of-the-team"


class Receiver:
    """A webhook receiver on loopback answering the queued answers (then 200): a status code,
    or a status code and headers (a redirect's `Location`)."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.answers: list[int | tuple[int, dict[str, str]]] = []
        self.received: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append(({k.lower(): v for k, v in self.headers.items()},
                                          body))
                answer = receiver.answers.pop(0) if receiver.answers else 200
                code, headers = answer if isinstance(answer, tuple) else (answer, {})
                self.send_response(code)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

        self.host = host
        self.server = Server((host, port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True,
                                       kwargs={"poll_interval": 0.02})
        self.thread.start()

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/hook"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def signature_ok(headers: dict[str, str], body: bytes, secret: str = SECRET) -> bool:
    expected = hmac.new(secret.encode(), headers["x-rlark-timestamp"].encode() + b"." + body,
                        hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers["x-rlark-signature"], f"sha256={expected}")


LOOPBACK = ["127.0.0.0/8"]


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    """A receiver on 127.0.0.1, and loopback opened to webhooks for this test only (closed by
    default, as the rest of the suite sees it: SPEC 18)."""
    settings.RLARK_WEBHOOK_ALLOWED_NETWORKS = LOOPBACK
    server = Receiver()
    yield server
    server.stop()


@pytest.fixture
def eager_notifications(settings: Any) -> Iterator[None]:
    """Tasks run in the caller (after the commit, like a worker would), mail kept in memory."""
    settings.RLARK_WEBHOOK_RETRY_BASE = 0
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    before = current_app.conf.task_always_eager
    current_app.conf.task_always_eager = True
    yield
    current_app.conf.task_always_eager = before


class Connections:
    """Every TCP connection this process tries, and a guard that lets only loopback ones
    through: a webhook test never sends a packet to any other address, even when the rule
    under test is broken (the attempt is recorded and refused instead)."""

    def __init__(self) -> None:
        self.tried: list[str] = []

    def to(self, address: str) -> list[str]:
        return [tried for tried in self.tried if tried == address]


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> Connections:
    seen = Connections()
    original = socket.socket.connect

    def connect(sock: socket.socket, address: Any) -> None:
        host = str(address[0]) if isinstance(address, tuple) else str(address)
        seen.tried.append(host)
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _loopback(host):
            raise ConnectionRefusedError(f"the test refuses a connection to {host}")
        original(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    return seen


def _loopback(host: str) -> bool:
    address = ipaddress.ip_address(host.split("%", 1)[0])
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


class Resolver:
    """Answers for host names under `.rlark.test` (RFC 6761 keeps `.test` for tests): each
    name answers its queued addresses, one list per lookup (the last one again when the queue
    is down to one), so a test can make validation and connection see different answers."""

    def __init__(self) -> None:
        self.answers: dict[str, list[list[str]]] = {}
        self.lookups: list[str] = []

    def name(self, name: str, *answers: list[str]) -> str:
        self.answers[name] = [list(answer) for answer in answers]
        return name

    def lookup(self, host: str) -> list[str] | None:
        if not host.endswith(".rlark.test"):
            return None
        self.lookups.append(host)
        queued = self.answers.get(host)
        if not queued:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return queued.pop(0) if len(queued) > 1 else queued[0]


@pytest.fixture
def resolver(monkeypatch: pytest.MonkeyPatch) -> Resolver:
    names = Resolver()
    original = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0,
                    flags: int = 0) -> Any:
        addresses = names.lookup(host) if isinstance(host, str) else None
        if addresses is None:
            return original(host, port, family, type, proto, flags)
        return [info for address in addresses
                for info in original(address, port, family, type, proto,
                                     flags | socket.AI_NUMERICHOST)]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return names
