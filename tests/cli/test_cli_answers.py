"""What `rlark` does with answers a real RLark does not give on demand: a 403, a 500, a
proxy's HTML page, another API version, no version header, JSON that does not parse, and a
Ctrl-C while the submit is on the wire. A small HTTP server in this process plays the other
side; the installed console script is the client, as everywhere in tests/cli."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import RLARK

TOKEN = "stub-token-" + "x" * 40


class Stub:
    def __init__(self) -> None:
        self.status = 200
        self.body: bytes = b"{}"
        self.headers: dict[str, str] = {"Content-Type": "application/json",
                                        "X-RLark-API-Version": "1.0"}
        self.delay = 0.0
        self.requests: list[tuple[str, str]] = []


@pytest.fixture(scope="module")
def stub() -> Iterator[tuple[Stub, str]]:
    state = Stub()

    class Handler(BaseHTTPRequestHandler):
        def answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            state.requests.append((self.command, self.path))
            if state.delay:
                time.sleep(state.delay)
            self.send_response(state.status)
            for key, value in state.headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(state.body)))
            self.end_headers()
            self.wfile.write(state.body)

        do_GET = do_POST = answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True,
                              kwargs={"poll_interval": 0.02})
    thread.start()
    try:
        yield state, f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def answer(stub: tuple[Stub, str], tmp_path: Path) -> Any:
    state, url = stub

    def run(*args: str, status: int = 200, body: Any = None, headers: dict[str, str] | None
            = None, version: str | None = "1.0") -> subprocess.CompletedProcess[str]:
        state.status, state.delay = status, 0.0
        state.body = body if isinstance(body, bytes) else json.dumps(body or {}).encode()
        state.headers = {"Content-Type": "application/json", **(headers or {})}
        if version is not None:
            state.headers["X-RLark-API-Version"] = version
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("RLARK_")},
               "RLARK_URL": url, "RLARK_TOKEN": TOKEN, "XDG_CONFIG_HOME": str(tmp_path)}
        done = subprocess.run([str(RLARK), *args], capture_output=True, text=True, env=env,
                              timeout=60)
        assert TOKEN not in done.stdout + done.stderr
        return done

    return run


def error_line(done: subprocess.CompletedProcess[str]) -> str:
    found = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(found) == 1, done.stderr
    return found[0]


def test_403_500_and_429_are_one_line(answer: Any) -> None:
    forbidden = answer("status", "x", status=403, body={"detail": "Platform admins only."})
    assert forbidden.returncode == 2
    assert error_line(forbidden) == "error: permission denied: Platform admins only."
    failed = answer("list", status=500, body={"detail": "Server error."})
    assert failed.returncode == 2
    assert "the server failed on GET /api/v1/jobs/ (HTTP 500: Server error.)" in \
        error_line(failed)
    throttled = answer("list", status=429, body={"detail": "Slow down."},
                       headers={"Retry-After": "7"})
    assert throttled.returncode == 2 and "retry in 7 s" in error_line(throttled)


def test_a_proxys_html_page_and_a_server_that_is_not_rlark(answer: Any) -> None:
    page = b"<html><body><h1>502 Bad Gateway</h1></body></html>"
    proxy = answer("list", status=502, body=page, headers={"Content-Type": "text/html"},
                   version=None)
    assert proxy.returncode == 2
    assert "answered an HTML page (HTTP 502), not the RLark API" in error_line(proxy)
    login_page = answer("list", status=200, body=page, headers={"Content-Type": "text/html"},
                        version=None)
    assert "HTML page (HTTP 200)" in error_line(login_page)
    other = answer("list", body={"results": []}, version=None)
    assert other.returncode == 2 and "without X-RLark-API-Version" in error_line(other)
    garbled = answer("list", body=b"{not json", version="1.0")
    assert garbled.returncode == 2 and "does not parse" in error_line(garbled)


def test_api_versions_warn_on_minor_and_refuse_major(answer: Any) -> None:
    page = {"count": 0, "next": None, "previous": None, "results": []}
    newer = answer("list", "-o", "json", body=page, version="1.4")
    assert newer.returncode == 0 and json.loads(newer.stdout) == []
    assert newer.stderr.count("warning: the server's API 1.4 is newer") == 1
    assert "pip install --upgrade rlark" in newer.stderr
    major = answer("list", body=page, version="2.0")
    assert major.returncode == 2
    line = error_line(major)
    assert "the server speaks API 2.0" in line and "pip install --upgrade rlark" in line
    assert major.stdout == ""
    unreadable = answer("list", body=page, version="v-next")
    assert unreadable.returncode == 2


def test_ctrl_c_while_the_submit_is_on_the_wire_waits_for_the_answer(
        stub: tuple[Stub, str], tmp_path: Path) -> None:
    state, url = stub
    state.status, state.delay = 202, 2.0
    state.body = json.dumps({"state": "queued", "run_record": "x"}).encode()
    state.headers = {"Content-Type": "application/json", "X-RLark-API-Version": "1.0"}
    state.requests.clear()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("RLARK_")},
           "RLARK_URL": url, "RLARK_TOKEN": TOKEN, "XDG_CONFIG_HOME": str(tmp_path)}
    process = subprocess.Popen([str(RLARK), "submit", "x", "--wait"], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env, text=True)
    deadline = time.monotonic() + 20
    while not state.requests and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)  # the POST was sent; its answer takes 2 s
    _out, err = process.communicate(timeout=30)
    state.delay = 0.0
    assert process.returncode == 4, err
    assert "waiting for the server's answer" in err
    assert "job x submitted (queued)" in err and "interrupted: job x is submitted" in err
    assert state.requests == [("POST", "/api/v1/jobs/x/submit/")]  # sent once, not followed
