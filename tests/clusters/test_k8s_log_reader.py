"""`PodLogReader`: the progress pass's log reads, one cluster's client made once, against the
simulator over HTTP (the same answers, requests and errors as `read_pod_log`), a redirect, and
a proxy taken from the environment."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from clusters import k8s
from clusters.simulator.testing import (
    DEMO_FLEET_PATH,
    InProcessSimulator,
    job_body,
    run_simulator,
    task_body,
)

NS = "rl-gpu-a"
POD = "ppo-rollout-0"


@pytest.fixture(scope="module")
def module_sim() -> Iterator[InProcessSimulator]:
    with run_simulator(DEMO_FLEET_PATH) as handle:
        yield handle


@pytest.fixture
def sim(module_sim: InProcessSimulator) -> Iterator[InProcessSimulator]:
    yield module_sim
    module_sim.reset()


@pytest.fixture
def gpu_a(sim: InProcessSimulator) -> k8s.Credentials:
    return sim.credentials("gpu-a")


@pytest.fixture
def logged(sim: InProcessSimulator, gpu_a: k8s.Credentials) -> k8s.Credentials:
    """A started Job whose rollout pod logged three lines (and a restart's previous log)."""
    body = job_body("ppo", tasks=[
        task_body("actor", replicas=1, selector={"rlinf.io/pool": "a100-head"}, gpus=8,
                  head=True),
        task_body("rollout", replicas=2, selector={"rlinf.io/pool": "a100-a"}, gpus=8)])
    k8s.create_job(credentials=gpu_a, namespace=NS, body=body)
    sim.tick()
    sim.append_pod_log("gpu-a", NS, POD, ["before the restart"], previous=True)
    sim.patch_pod("gpu-a", NS, POD, restarts=1, lastTerminated={"reason": "Error",
                                                                "exitCode": 1})
    sim.append_pod_log("gpu-a", NS, POD, ["one", "two", "three"])
    return gpu_a


OPTIONS: list[dict[str, Any]] = [
    {},
    {"tail_lines": 2},
    {"tail_lines": 1, "timestamps": True},
    {"tail_lines": 3, "max_bytes": 5},
    {"since_seconds": 3600},
    {"since_time": datetime(2000, 1, 1, tzinfo=UTC), "timestamps": True},
    {"since_time": datetime.now(UTC) + timedelta(hours=1)},
    {"previous": True},
    {"container": "main", "tail_lines": 1},
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: ",".join(o) or "whole")
def test_each_read_answers_and_asks_what_read_pod_log_does(
        sim: InProcessSimulator, logged: k8s.Credentials, options: dict[str, Any]) -> None:
    before = len(sim.requests("gpu-a"))
    expected = k8s.read_pod_log(credentials=logged, namespace=NS, name=POD, **options)
    read = k8s.PodLogReader(logged, timeout=5.0).read(namespace=NS, name=POD, **options)
    asked = sim.requests("gpu-a")[before:]

    assert read == expected
    assert [(r["method"], r["path"], r["query"], r["code"]) for r in asked] == [
        (asked[0]["method"], asked[0]["path"], asked[0]["query"], 200)] * 2


def test_the_since_time_goes_with_its_colons_as_they_are(
        sim: InProcessSimulator, logged: k8s.Credentials) -> None:
    moment = datetime(2026, 12, 1, 10, 0, 0, 250000, tzinfo=UTC)
    k8s.PodLogReader(logged).read(namespace=NS, name=POD, since_time=moment)

    assert sim.requests("gpu-a")[-1]["query"]["sinceTime"] == "2026-12-01T10:00:00.250000Z"


def test_one_reader_serves_many_threads_over_kept_connections(
        sim: InProcessSimulator, logged: k8s.Credentials) -> None:
    logs = k8s.PodLogReader(logged)
    with ThreadPoolExecutor(max_workers=8) as pool:
        texts = list(pool.map(lambda _: logs.read(namespace=NS, name=POD, tail_lines=2).text,
                              range(64)))

    assert texts == ["two\nthree\n"] * 64


def test_errors_are_the_gateway_s_own(sim: InProcessSimulator, gpu_a: k8s.Credentials,
                                      logged: k8s.Credentials) -> None:
    logs = k8s.PodLogReader(logged, timeout=1.0)
    with pytest.raises(k8s.NotFound):
        logs.read(namespace=NS, name="ppo-actor-9")
    with pytest.raises(k8s.BadRequest):
        logs.read(namespace=NS, name=POD, container="sidecar")
    sim.set_faults("gpu-a", fail_next=1, fail_mode="error")
    with pytest.raises(k8s.ServerError) as failed:
        logs.read(namespace=NS, name=POD)
    sim.set_faults("gpu-a", fail_next=1, fail_mode="throttle")
    with pytest.raises(k8s.TooManyRequests):
        logs.read(namespace=NS, name=POD)
    sim.set_faults("gpu-a", fail_next=1, fail_mode="drop")
    with pytest.raises(k8s.Unreachable) as dropped:
        logs.read(namespace=NS, name=POD)
    sim.clear_faults("gpu-a")
    wrong = k8s.Credentials(api_url=gpu_a.api_url, token="not-the-token")
    with pytest.raises(k8s.Unauthorized):
        k8s.PodLogReader(wrong).read(namespace=NS, name=POD)

    assert failed.value.transient and dropped.value.transient
    assert logs.read(namespace=NS, name=POD, tail_lines=1).text == "three\n"  # and it goes on


def test_nothing_listening_is_unreachable() -> None:
    with pytest.raises(k8s.Unreachable):
        k8s.PodLogReader(k8s.Credentials(api_url="http://127.0.0.1:9"), timeout=1.0).read(
            namespace=NS, name=POD)


class _Answer(BaseHTTPRequestHandler):
    """Answers every GET with the server's `status`, `headers` and `body`; keeps the request
    line of each."""

    protocol_version = "HTTP/1.1"
    server: Any

    def do_GET(self) -> None:
        self.server.seen.append(self.requestline)
        self.send_response(self.server.status)
        for name, value in self.server.headers:
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(self.server.body)))
        self.send_header("Connection", "close")  # a kept connection would hold the server
        self.close_connection = True
        self.end_headers()
        self.wfile.write(self.server.body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def answering() -> Iterator[Any]:
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    server.daemon_threads = True
    server.seen, server.status, server.headers, server.body = [], 200, [], b""
    threading.Thread(target=server.serve_forever, daemon=True,
                     kwargs={"poll_interval": 0.02}).start()
    yield server
    server.shutdown()
    server.server_close()


def test_a_redirect_is_an_error_answer_not_followed(answering: Any) -> None:
    answering.status, answering.body = 302, b"elsewhere"
    answering.headers = [("Location", "http://127.0.0.1:9/elsewhere")]
    credentials = k8s.Credentials(api_url=f"http://127.0.0.1:{answering.server_port}/api-proxy")

    with pytest.raises(k8s.KubeError) as caught:
        k8s.PodLogReader(credentials).read(namespace=NS, name=POD, tail_lines=5)

    assert caught.value.status == 302
    assert answering.seen == [
        f"GET /api-proxy/api/v1/namespaces/{NS}/pods/{POD}/log?limitBytes=1048577&tailLines=5 "
        "HTTP/1.1"]


def test_behind_a_proxy_from_the_environment_the_whole_url_goes_to_it(
        answering: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    answering.body = b"through the proxy\n"
    monkeypatch.setenv("http_proxy", f"http://127.0.0.1:{answering.server_port}")
    monkeypatch.setenv("no_proxy", "")
    credentials = k8s.Credentials(api_url="http://cluster.invalid:6443", token="t")

    log = k8s.PodLogReader(credentials).read(namespace=NS, name=POD, max_bytes=100)

    assert log == k8s.PodLog(text="through the proxy\n", truncated=False)
    assert answering.seen == [f"GET http://cluster.invalid:6443/api/v1/namespaces/{NS}/pods/"
                              f"{POD}/log?limitBytes=101 HTTP/1.1"]
