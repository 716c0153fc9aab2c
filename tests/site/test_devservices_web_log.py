"""`make run`'s web process prints one line per request (RLark's `rlark.request`), not a
second one from gunicorn's access log."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import requests

from rlark_site import devservices


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _lines_for(path: str, env: dict[str, str], log: Path) -> list[str]:
    port = _free_port()
    with log.open("wb") as out:
        web = subprocess.Popen(
            devservices.web_command(f"127.0.0.1:{port}"),
            env={**env, "RLARK_WEB_WORKERS": "1", "RLARK_WEB_THREADS": "1",
                 "RLARK_LOG_FORMAT": "console"},
            cwd=devservices.BASE_DIR, stdout=out, stderr=out, start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                answer = requests.get(f"http://127.0.0.1:{port}{path}", timeout=60)
                break
            except requests.ConnectionError:
                if time.monotonic() > deadline or web.poll() is not None:
                    raise
                time.sleep(0.3)
        assert answer.status_code == 200
        requests.get(f"http://127.0.0.1:{port}{path}?again=1", timeout=60)
    finally:
        os.killpg(web.pid, signal.SIGTERM)
        web.wait(timeout=30)
    return [line for line in log.read_text().splitlines() if path in line]


def test_make_run_logs_one_line_per_request(tmp_path: Path) -> None:
    env = {key: value for key, value in os.environ.items() if key != "RLARK_WEB_ACCESS_LOG"}
    lines = _lines_for("/health/live", devservices.web_environment(env), tmp_path / "web.log")
    assert len(lines) == 2, lines  # two requests
    assert all("rlark.request" in line for line in lines)


def test_an_access_log_asked_for_is_kept(tmp_path: Path) -> None:
    env = {**os.environ, "RLARK_WEB_ACCESS_LOG": "-"}
    lines = _lines_for("/health/live", devservices.web_environment(env), tmp_path / "web.log")
    assert len(lines) == 4, lines  # rlark.request and gunicorn's, for each of two requests
