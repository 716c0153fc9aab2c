"""A webhook receiver on loopback, and Celery run eagerly, for the notification tests."""

from __future__ import annotations

import hashlib
import hmac
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from celery import current_app

SECRET = "s3cret-webhook-key-of-the-team"


class Receiver:
    """A webhook receiver on loopback answering the queued status codes (then 200)."""

    def __init__(self) -> None:
        self.answers: list[int] = []
        self.received: list[tuple[dict[str, str], bytes]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.received.append(({k.lower(): v for k, v in self.headers.items()},
                                          body))
                code = receiver.answers.pop(0) if receiver.answers else 200
                self.send_response(code)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def signature_ok(headers: dict[str, str], body: bytes, secret: str = SECRET) -> bool:
    expected = hmac.new(secret.encode(), headers["x-rlark-timestamp"].encode() + b"." + body,
                        hashlib.sha256).hexdigest()
    return hmac.compare_digest(headers["x-rlark-signature"], f"sha256={expected}")


@pytest.fixture
def receiver() -> Iterator[Receiver]:
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
