"""A real Prometheus server (Debian's `prometheus` package) on loopback, scraping the simulator's
`/<cluster>/metrics` every `interval` (half a second unless told), for the GPU idleness
tests. Started once per test module: its config and TSDB live in a temporary directory, on a
free port (never a fixed one). Prometheus 2.42 applies its first targets 5 s after it starts
(its scrape manager's fixed throttle): a module that needs two servers starts both, then waits
for both (`wait_until_up`)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml

BINARY = shutil.which("prometheus") or "/usr/bin/prometheus"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Prometheus:
    """One `prometheus` process; `stop()` ends it (by its own pid)."""

    def __init__(self, directory: Path, scrape_configs: list[dict[str, Any]], *,
                 interval: float = 0.5) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        every = f"{round(interval * 1000)}ms"
        config = {"global": {"scrape_interval": every, "scrape_timeout": every,
                             "evaluation_interval": every},
                  "scrape_configs": scrape_configs}
        (directory / "prometheus.yml").write_text(yaml.safe_dump(config))
        self.jobs = [job["job_name"] for job in scrape_configs]
        self.process: subprocess.Popen[bytes] | None = None
        self._log = open(directory / "prometheus.log", "ab")
        for _try in range(5):  # a free port taken between the probe and the bind: try again
            self.port = free_port()
            self.url = f"http://127.0.0.1:{self.port}"
            self.process = subprocess.Popen(
                [BINARY, f"--config.file={directory / 'prometheus.yml'}",
                 f"--storage.tsdb.path={directory / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}",
                 "--storage.tsdb.retention.time=1h", "--log.level=warn"],
                stdout=subprocess.DEVNULL, stderr=self._log)
            if self._ready():
                break
            self._end()
        else:
            self.stop()
            raise RuntimeError("prometheus did not start: " + self.log())

    def log(self) -> str:
        path = self.directory / "prometheus.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def _ready(self, seconds: float = 30.0) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                return False
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                    if answer.status == 200:
                        return True
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.05)
        return False

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=5) as answer:
            return json.loads(answer.read())

    def wait_until_up(self, seconds: float = 30.0) -> None:
        """Until every scrape job's target is up (its first scrape succeeded)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            targets = self.get("/api/v1/targets")["data"]["activeTargets"]
            up = {t["labels"]["job"] for t in targets if t["health"] == "up"}
            if set(self.jobs) <= up:
                return
            time.sleep(0.05)
        raise AssertionError(f"targets not up: {self.get('/api/v1/targets')}")

    def queries_answered(self) -> int:
        """How many `/api/v1/query` requests it has answered (its own counter)."""
        with urllib.request.urlopen(f"{self.url}/metrics", timeout=5) as answer:
            text = answer.read().decode()
        total = 0.0
        for line in text.splitlines():
            if line.startswith("prometheus_http_requests_total{") \
                    and 'handler="/api/v1/query"' in line:
                total += float(line.rsplit(" ", 1)[1])
        return int(total)

    def stop(self) -> None:
        self._end()
        self._log.close()

    def _end(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


def scrape(job: str, simulator_url: str, cluster: str, **extra: Any) -> dict[str, Any]:
    """A scrape job of one simulated cluster's `/metrics`."""
    host = simulator_url.split("://", 1)[1].rstrip("/")
    return {"job_name": job, "metrics_path": f"/{cluster}/metrics",
            "static_configs": [{"targets": [host], **extra.pop("static", {})}], **extra}
