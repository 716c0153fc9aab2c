"""`make run` starts a local Prometheus scraping the simulator's GPU metrics when the binary is
installed and `RLARK_PROMETHEUS_URL` is not set, and points the product at it."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from clusters.simulator.testing import DEMO_FLEET_PATH, run_simulator
from rlark_site import devservices


def test_a_set_url_is_kept_and_nothing_started() -> None:
    env = {"RLARK_PROMETHEUS_URL": "http://prometheus.example:9090"}
    command, line = devservices.demo_prometheus(env, 8700)
    assert command is None and "prometheus.example" in line
    assert env["RLARK_PROMETHEUS_URL"] == "http://prometheus.example:9090"


def test_without_the_binary_it_is_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devservices.shutil, "which", lambda name: None)
    env: dict[str, str] = {}
    command, line = devservices.demo_prometheus(env, 8700)
    assert command is None and "off" in line and "RLARK_PROMETHEUS_URL" not in env


def test_the_started_prometheus_scrapes_every_demo_cluster(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(devservices, "STATE_DIR", tmp_path)
    with run_simulator(DEMO_FLEET_PATH) as sim:
        port = int(sim.base_url.rsplit(":", 1)[1])
        env: dict[str, str] = {}
        command, _line = devservices.demo_prometheus(env, port)
        assert command is not None and env["RLARK_GPU_IDLE_WINDOW"] == "120"
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            up: set[str] = set()
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and len(up) < 3:
                time.sleep(0.1)
                try:
                    with urllib.request.urlopen(
                            f"{env['RLARK_PROMETHEUS_URL']}/api/v1/targets", timeout=2) as answer:
                        targets: list[dict[str, Any]] = json.loads(answer.read())[
                            "data"]["activeTargets"]
                except OSError:
                    continue
                up = {t["labels"]["job"] for t in targets if t["health"] == "up"}
            assert up == {"dcgm-gpu-a", "dcgm-gpu-b", "dcgm-cpu-c"}
        finally:
            process.terminate()
            process.wait(timeout=10)
