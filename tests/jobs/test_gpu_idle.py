"""GPU idleness through a real Prometheus (SPEC 16): Debian's `prometheus` scrapes the simulator's
DCGM-like `/metrics` every half second; real status passes ask it once per cluster; a
run whose GPUs are set idle gets `gpu.idle` and one signed `job_gpu_idle` per episode at a real
webhook receiver; tensor activity absent falls back to utilisation; `exported_pod` (honor_labels
off behind a `pod` target label) is read; a Prometheus that is down, slow, or answers garbage or
too much leaves `gpu` unknown with the reason and the pass goes on."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from celery import current_app
from django.core import mail
from django.test import Client
from django.urls import reverse

from clusters.simulator.testing import InProcessSimulator, run_simulator
from jobs.gpu.reader import observe_cluster_gpus
from jobs.models import (
    EventKind,
    GpuIdleEpisode,
    IdleEnd,
    JobState,
    NotificationEvent,
    RunGpu,
    RunRecord,
)
from jobs.notify.services import preferences_set, webhook_set
from jobs.records.status import sync_submitted_jobs
from jobs.records.submission import job_submit
from jobs.tasks import submit_run_record
from rlark_site.foundation.tenancy.models import Team
from tests.conftest import DEMO_FLEET
from tests.jobs.notify_support import SECRET, Receiver, signature_ok
from tests.jobs.observe_support import CLUSTER, HEAD_POD, NAMESPACE
from tests.jobs.prometheus_support import Prometheus, free_port, scrape
from tests.jobs.records_support import submittable_job

pytestmark = pytest.mark.django_db
JOB = "ppo-run"
WINDOW = 1  # second: each reading averages the last two or three scrapes


@pytest.fixture(scope="module")
def module_simulator() -> Iterator[InProcessSimulator]:
    with run_simulator(DEMO_FLEET) as handle:
        yield handle  # type: ignore[misc]


@pytest.fixture
def demo_simulator(module_simulator: InProcessSimulator) -> Iterator[InProcessSimulator]:
    """The module's simulator (Prometheus scrapes its port), reset after each test."""
    yield module_simulator
    module_simulator.reset()


@pytest.fixture(scope="module")
def prometheus_servers(module_simulator: InProcessSimulator,
                       tmp_path_factory: pytest.TempPathFactory
                       ) -> Iterator[tuple[Prometheus, Prometheus]]:
    """The module's two Prometheus servers, started together (each waits 5 s for its first
    targets: both wait at once), each scraping gpu-a's exporter:

    - as a static target (labels as emitted);
    - as Kubernetes service discovery would: the target carries the exporter's own `pod` and
      `namespace`, `honor_labels` is off, so the workload's pod is in `exported_pod` /
      `exported_namespace`."""
    servers: list[Prometheus] = []
    try:
        servers.append(Prometheus(tmp_path_factory.mktemp("prometheus"),
                                  [scrape("dcgm", module_simulator.base_url, CLUSTER)]))
        servers.append(Prometheus(tmp_path_factory.mktemp("prometheus-k8s"), [scrape(
            "gpu-metrics", module_simulator.base_url, CLUSTER, honor_labels=False,
            static={"labels": {"pod": "nvidia-dcgm-exporter-7x2kq",
                               "namespace": "gpu-operator"}})]))
        for server in servers:
            server.wait_until_up()
        yield servers[0], servers[1]
    finally:
        for server in servers:
            server.stop()


@pytest.fixture
def prometheus(prometheus_servers: tuple[Prometheus, Prometheus]) -> Prometheus:
    """Prometheus scraping gpu-a's exporter as a static target (labels as emitted)."""
    return prometheus_servers[0]


@pytest.fixture
def prometheus_k8s(prometheus_servers: tuple[Prometheus, Prometheus]) -> Prometheus:
    """Prometheus scraping it as Kubernetes service discovery would (`exported_pod`)."""
    return prometheus_servers[1]


@pytest.fixture(autouse=True)
def gpu_settings(settings: Any) -> Iterator[None]:
    settings.RLARK_GPU_IDLE_WINDOW = WINDOW
    settings.RLARK_GPU_IDLE_THRESHOLD = 0.05
    settings.RLARK_PROMETHEUS_TIMEOUT = 2.0
    settings.RLARK_KUBE_TIMEOUT = 5.0
    settings.RLARK_SUBMIT_RETRY_BASE = 0
    settings.RLARK_WEBHOOK_RETRY_BASE = 0
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    before = current_app.conf.task_always_eager
    current_app.conf.task_always_eager = True
    yield
    current_app.conf.task_always_eager = before


@pytest.fixture
def watched(running: RunRecord, prometheus: Prometheus, settings: Any) -> RunRecord:
    """The run seen Running by a status pass, read through the module's Prometheus."""
    settings.RLARK_PROMETHEUS_URL = prometheus.url
    sync_submitted_jobs()
    return running


def gpu_of(record: RunRecord) -> RunGpu | None:
    return RunGpu.objects.filter(run_record=record).first()


def passes_until(record: RunRecord, done: Callable[[RunGpu], bool], capture: Any = None,
                 seconds: float = 60) -> RunGpu:
    """Real status passes until the run's reading satisfies `done` (each pass asks once)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if capture is not None:
            with capture(execute=True):
                sync_submitted_jobs()
        else:
            sync_submitted_jobs()
        gpu = gpu_of(record)
        if gpu is not None and done(gpu):
            return gpu
        time.sleep(0.2)
    raise AssertionError(f"the reading never came: {gpu_of(record) and gpu_of(record).__dict__}")


def test_a_busy_run_reads_busy_with_both_metrics(watched: RunRecord, owner: Any,
                                                 api_client_for: Any) -> None:
    gpu = passes_until(watched, lambda g: g.idle is not None)
    assert gpu.idle is False and gpu.metric == "tensor_active" and gpu.reason == ""
    assert gpu.utilization == 87.0 and gpu.tensor_active == 0.42
    assert gpu.gpus == 8  # the Actor's eight; the Rollout holds none
    assert [(p["pod"], p["gpus"]) for p in gpu.pods] == [(HEAD_POD, 8)]


def test_an_idle_run_fires_job_gpu_idle_once_signed_then_ends_busy(
        watched: RunRecord, demo_simulator: InProcessSimulator, team: Team,
        receiver: Receiver, django_capture_on_commit_callbacks: Any, owner: Any,
        api_client_for: Any) -> None:
    webhook_set(team=team, url=receiver.url, secret=SECRET, enabled=True)
    owner.email = "owner@example.com"
    owner.save(update_fields=["email"])
    preferences_set(user=owner, email_events=["job_gpu_idle"], language="zh-hans")
    passes_until(watched, lambda g: g.idle is False)
    # Hung in a collective: the kernels spin at 100 %, the tensor pipe does nothing.
    demo_simulator.set_pod_gpu(CLUSTER, NAMESPACE, HEAD_POD, utilization=100,
                               tensor_active=0.0)
    gpu = passes_until(watched, lambda g: g.idle is True, django_capture_on_commit_callbacks)
    assert gpu.metric == "tensor_active" and gpu.tensor_active < 0.05
    for _ in range(3):  # every pass sees it idle: one episode, sent once
        with django_capture_on_commit_callbacks(execute=True):
            sync_submitted_jobs()
        time.sleep(0.3)
    episode = GpuIdleEpisode.objects.get(run_record=watched)
    assert episode.number == 1 and episode.ended_at is None and episode.gpus == 8
    assert NotificationEvent.objects.filter(kind=EventKind.JOB_GPU_IDLE).count() == 1
    bodies = [json.loads(body) for _headers, body in receiver.received]
    assert [b["kind"] for b in bodies] == ["job_gpu_idle"]
    assert all(signature_ok(headers, body) for headers, body in receiver.received)
    assert bodies[0]["event"] == f"job_gpu_idle:{watched.pk}:1"
    assert bodies[0]["metric"] == "tensor_active" and bodies[0]["gpus"] == 8
    assert bodies[0]["window_seconds"] == WINDOW and bodies[0]["threshold"] == 0.05
    assert len(mail.outbox) == 1 and "GPU 空闲" in mail.outbox[0].subject
    assert "tensor_active" in mail.outbox[0].body and "8" in mail.outbox[0].body

    api = api_client_for(owner)
    shown = api.get(f"/api/v1/jobs/{JOB}/").json()["gpu"]
    assert shown["idle"] is True and shown["metric"] == "tensor_active"
    assert shown["utilization"] == 100.0 and shown["tensor_active"] == 0.0
    assert shown["as_of"] and shown["idle_since"] == bodies[0]["idle_since"].replace(
        "+00:00", "Z")
    assert [e["number"] for e in shown["episodes"]] == [1]
    assert api.get(f"/api/v1/run-records/{JOB}/").json()["gpu"]["idle"] is True
    for language, words in (("en", "GPUs idle"), ("zh-hans", "GPU 空闲")):
        page = Client(HTTP_ACCEPT_LANGUAGE=language)
        page.force_login(owner)
        region = page.get(f"/jobs/records/{JOB}/progress/").content.decode()
        assert 'id="gpu-idle-badge"' in region and words in region

    demo_simulator.set_pod_gpu(CLUSTER, NAMESPACE, HEAD_POD, tensor_active=0.5)
    passes_until(watched, lambda g: g.idle is False)
    episode.refresh_from_db()
    assert episode.end == IdleEnd.BUSY and episode.ended_at == episode.last_idle_at
    gpu = gpu_of(watched)
    assert gpu is not None
    # What usage sums: the episode's idle time is the run's, 8 GPUs each second of it.
    assert gpu.idle_seconds == pytest.approx(episode.idle_seconds) and gpu.idle_seconds > 0
    assert gpu.idle_gpu_seconds == pytest.approx(8 * gpu.idle_seconds)
    # The episode's interval is at least its counted time: equal unless two readings were more
    # than a window apart (a slow pass here), whose gap beyond the window is not counted.
    interval = (episode.last_idle_at - episode.started_at).total_seconds()
    assert 0 < episode.idle_seconds <= interval + 0.01
    assert gpu.observed_seconds > gpu.idle_seconds
    assert [json.loads(b)["kind"] for _h, b in receiver.received] == ["job_gpu_idle"]


def test_without_tensor_activity_utilisation_decides(
        watched: RunRecord, demo_simulator: InProcessSimulator) -> None:
    demo_simulator.set_pod_gpu(CLUSTER, NAMESPACE, HEAD_POD, utilization=2,
                               tensor_active=None)
    gpu = passes_until(watched, lambda g: g.idle is True)
    assert gpu.metric == "utilization" and gpu.tensor_active is None
    assert gpu.utilization is not None and gpu.utilization < 5


def test_exported_pod_is_read_when_honor_labels_is_off(
        running: RunRecord, prometheus_k8s: Prometheus, settings: Any) -> None:
    settings.RLARK_PROMETHEUS_URL = prometheus_k8s.url
    gpu = passes_until(running, lambda g: g.idle is not None)
    assert gpu.idle is False and gpu.gpus == 8
    series = prometheus_k8s.get("/api/v1/query?query=DCGM_FI_DEV_GPU_UTIL")["data"]["result"]
    held = [s["metric"] for s in series if s["metric"].get("exported_pod") == HEAD_POD]
    assert len(held) == 8 and held[0]["pod"] == "nvidia-dcgm-exporter-7x2kq"
    assert held[0]["exported_namespace"] == NAMESPACE


def test_one_query_per_cluster_per_pass_whatever_the_number_of_runs(
        watched: RunRecord, demo_simulator: InProcessSimulator, team: Team, owner: Any,
        admin_user: Any, prometheus: Prometheus, api_client_for: Any,
        django_capture_on_commit_callbacks: Any) -> None:
    job = submittable_job(team=team, owner=owner, admin=admin_user, name="grpo-run")
    with django_capture_on_commit_callbacks(execute=False):
        second = job_submit(job=job, user=owner)
    submit_run_record.apply(args=[second.pk])
    demo_simulator.set_job_phase(CLUSTER, NAMESPACE, "grpo-run", "Running")  # no room left
    sync_submitted_jobs()
    assert RunRecord.objects.filter(state=JobState.RUNNING, cluster=CLUSTER).count() == 2
    before = prometheus.queries_answered()
    for _ in range(4):
        sync_submitted_jobs()
    assert prometheus.queries_answered() - before == 4
    assert gpu_of(second) is not None and gpu_of(watched) is not None
    # Viewers read what the pass stored: pages and API answers ask Prometheus nothing.
    asked = prometheus.queries_answered()
    web = Client()
    web.force_login(owner)
    api = api_client_for(owner)
    for name in (watched.job_name, "grpo-run"):
        assert web.get(reverse("jobs:job-detail", args=[name])).status_code == 200
        assert web.get(reverse("jobs:run-record", args=[name])).status_code == 200
        assert web.get(reverse("jobs:run-record-progress", args=[name])).status_code == 200
        assert api.get(f"/api/v1/jobs/{name}/").json()["gpu"] is not None
        assert api.get(f"/api/v1/run-records/{name}/").json()["gpu"] is not None
    assert prometheus.queries_answered() == asked


class _Fake:
    """A loopback HTTP server that answers every request with `answer(handler)`."""

    def __init__(self, answer: Callable[[BaseHTTPRequestHandler], None]) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                answer(self)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02},
                         daemon=True).start()  # stop() waits a poll interval at most
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def _send(handler: BaseHTTPRequestHandler, body: bytes, code: int = 200,
          content_type: str = "application/json") -> None:
    handler.send_response(code)
    handler.send_header("Content-Type", content_type)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    try:
        handler.wfile.write(body)
    except OSError:
        pass


def _slow(handler: BaseHTTPRequestHandler) -> None:
    time.sleep(4)
    _send(handler, b'{"status":"success","data":{"resultType":"vector","result":[]}}')


def _drip(handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.end_headers()
    try:
        for _ in range(40):  # a byte each 0.1 s: no single read times out, the whole does
            handler.wfile.write(b" ")
            handler.wfile.flush()
            time.sleep(0.1)
    except OSError:
        pass


FAKES: dict[str, tuple[Callable[[BaseHTTPRequestHandler], None], str]] = {
    "slow": (_slow, "Prometheus: timeout"),
    "drip": (_drip, "Prometheus: timeout"),
    "html": (lambda h: _send(h, b"<html>proxy error</html>", 200, "text/html"),
             "Prometheus: not JSON"),
    "garbage": (lambda h: _send(h, b"\x00\xff\xfe binary"), "Prometheus: not JSON"),
    "not a vector": (lambda h: _send(h, b'{"status":"success","data":{"resultType":"matrix",'
                                        b'"result":[]}}'), "Prometheus: not an instant vector"),
    "bad value": (lambda h: _send(h, b'{"status":"success","data":{"resultType":"vector",'
                                     b'"result":[{"metric":{},"value":[1,{"x":1}]}]}}'),
                  "Prometheus: not an instant vector"),
    "error": (lambda h: _send(h, b'{"status":"error","errorType":"bad_data","error":"x"}', 400),
              "Prometheus: query refused: bad_data"),
    "503": (lambda h: _send(h, b"Service Unavailable", 503, "text/plain"),
            "Prometheus: HTTP 503"),
    "redirect": (lambda h: _send(h, b"", 302), "Prometheus: redirect refused (HTTP 302)"),
    "huge": (lambda h: _send(h, b'{"status":"success","data":{"resultType":"vector","result":['
                                + b'{"metric":{},"value":[1,"1"]},' * 100_000 + b"]}}"),
             "Prometheus: answer larger than 65536 bytes"),
}


@pytest.mark.parametrize("kind", list(FAKES))
def test_a_prometheus_that_misbehaves_leaves_gpu_unknown_and_the_pass_goes_on(
        running: RunRecord, settings: Any, kind: str) -> None:
    answer, reason = FAKES[kind]
    fake = _Fake(answer)
    settings.RLARK_PROMETHEUS_URL = fake.url
    settings.RLARK_PROMETHEUS_MAX_BYTES = 65536
    settings.RLARK_PROMETHEUS_TIMEOUT = 1.0
    try:
        report = sync_submitted_jobs()
    finally:
        fake.stop()
    assert report.checked == 1 and report.unreachable == 0
    assert RunRecord.objects.get(pk=running.pk).state == JobState.RUNNING  # the pass did its work
    gpu = gpu_of(running)
    assert gpu is not None and gpu.idle is None and gpu.reason == reason
    assert gpu.utilization is None and gpu.as_of is None and gpu.idle_seconds == 0


def test_prometheus_down_is_refused_and_an_open_episode_stays_open(
        watched: RunRecord, demo_simulator: InProcessSimulator, settings: Any,
        prometheus: Prometheus, django_capture_on_commit_callbacks: Any) -> None:
    demo_simulator.set_pod_gpu(CLUSTER, NAMESPACE, HEAD_POD, utilization=0, tensor_active=0)
    passes_until(watched, lambda g: g.idle is True, django_capture_on_commit_callbacks)
    settings.RLARK_PROMETHEUS_URL = f"http://127.0.0.1:{free_port()}"  # nothing listens
    report = sync_submitted_jobs()
    assert report.checked == 1
    gpu = gpu_of(watched)
    assert gpu is not None and gpu.idle is None and gpu.reason == "Prometheus: refused"
    counted = gpu.idle_seconds
    settings.RLARK_PROMETHEUS_URL = prometheus.url
    with django_capture_on_commit_callbacks(execute=True):
        passes_until(watched, lambda g: g.idle is True)
    episode = GpuIdleEpisode.objects.get(run_record=watched)  # still the one episode
    assert episode.ended_at is None
    assert NotificationEvent.objects.filter(kind=EventKind.JOB_GPU_IDLE).count() == 1
    assert gpu_of(watched).idle_seconds >= counted  # type: ignore[union-attr]


def test_not_configured_asks_nothing(running: RunRecord, settings: Any) -> None:
    settings.RLARK_PROMETHEUS_URL = ""
    sync_submitted_jobs()
    assert observe_cluster_gpus(cluster=CLUSTER) is None and gpu_of(running) is None


def test_an_ended_run_ends_its_episode(watched: RunRecord, demo_simulator: InProcessSimulator,
                                       django_capture_on_commit_callbacks: Any) -> None:
    demo_simulator.set_pod_gpu(CLUSTER, NAMESPACE, HEAD_POD, utilization=0, tensor_active=0)
    passes_until(watched, lambda g: g.idle is True, django_capture_on_commit_callbacks)
    demo_simulator.set_job_phase(CLUSTER, NAMESPACE, JOB, phase="Succeeded")
    sync_submitted_jobs()
    sync_submitted_jobs()
    episode = GpuIdleEpisode.objects.get(run_record=watched)
    assert episode.end == IdleEnd.RUN_ENDED and episode.ended_at == episode.last_idle_at

