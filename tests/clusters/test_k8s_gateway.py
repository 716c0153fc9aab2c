"""The Kubernetes gateway, through the real `kubernetes` client over HTTP, against the simulator."""

from __future__ import annotations

import base64
import gc
import random
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusters import k8s
from clusters.k8s.nodes import node_info_from_object
from clusters.quantities import parse_count
from clusters.simulator.fleet import generate_fleet
from clusters.simulator.testing import (
    DEMO_FLEET_PATH,
    TEST_JOB_CRD,
    InProcessSimulator,
    job_body,
    run_simulator,
    task_body,
)

BIG = "sim-00"
BIG_NODES = 2300
NAMESPACE = "rl-gpu-a"
QUICK = 0.001  # base delay of read retries in tests


def _fleet() -> dict[str, Any]:
    document = dict(yaml.safe_load(DEMO_FLEET_PATH.read_text()))
    document["clusters"] += generate_fleet(clusters=1, nodes_per_cluster=BIG_NODES, seed=7)[
        "clusters"
    ]
    return document


@pytest.fixture(scope="module")
def crd_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("crds") / "rlinf.io_jobs.yaml"
    path.write_text(yaml.safe_dump(TEST_JOB_CRD))
    return path


@pytest.fixture(scope="module")
def module_sim(crd_path: Path) -> Iterator[InProcessSimulator]:
    with run_simulator(_fleet(), crd_path=crd_path) as handle:
        yield handle


@pytest.fixture
def sim(module_sim: InProcessSimulator) -> Iterator[InProcessSimulator]:
    yield module_sim
    module_sim.reset()


@pytest.fixture
def gpu_a(sim: InProcessSimulator) -> k8s.Credentials:
    return sim.credentials("gpu-a")


def _actor_job(name: str, *, namespace: str | None = NAMESPACE) -> dict[str, Any]:
    task = task_body("actor", replicas=2, selector={"rlinf.io/pool": "a100-a"}, gpus=8, head=True)
    return job_body(name, namespace=namespace, tasks=[task])


def _codes(sim: InProcessSimulator, cluster: str, method: str) -> list[int | None]:
    return [entry["code"] for entry in sim.requests(cluster) if entry["method"] == method]


# Nodes


def test_node_pages_return_every_node_exactly_once(sim: InProcessSimulator) -> None:
    pages = list(k8s.iter_node_pages(credentials=sim.credentials(BIG), page_size=500))

    names = [node.name for page in pages for node in page]
    assert [len(page) for page in pages] == [500, 500, 500, 500, 300]
    assert sorted(names) == sorted(node.name for node in sim.fleet.cluster(BIG).nodes)


def test_node_info_keeps_gpu_rlinf_cpu_memory_pods_and_readiness(
    gpu_a: k8s.Credentials,
) -> None:
    nodes = {n.name: n for page in k8s.iter_node_pages(credentials=gpu_a) for n in page}

    assert nodes["a-node-01"].allocatable == {"nvidia.com/gpu": "8", "rlinf.io/rdma": "4",
                                              "cpu": "96", "memory": "1Ti", "pods": "110"}
    assert nodes["a-node-01"].labels["rlinf.io/pool"] == "a100-a"
    assert nodes["a-node-01"].ready is True
    assert nodes["a-node-12"].ready is False


def test_node_info_carries_the_resource_version_that_moves_with_each_change(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    before = {n.name: n for page in k8s.iter_node_pages(credentials=gpu_a) for n in page}
    sim.patch_node("gpu-a", "a-node-01", ready=False)
    after = {n.name: n for page in k8s.iter_node_pages(credentials=gpu_a) for n in page}

    assert before["a-node-01"].resource_version
    assert after["a-node-01"].resource_version != before["a-node-01"].resource_version
    assert after["a-node-02"].resource_version == before["a-node-02"].resource_version


def test_node_info_turns_every_label_into_text() -> None:
    node = {
        "metadata": {"name": "n1", "labels": {"rlinf.io/rack": 7, "zone": "z1"}},
        "status": {"allocatable": {"nvidia.com/gpu": 8, "cpu": "64", "ephemeral-storage": "1Ti"}},
    }

    info = node_info_from_object(node)

    assert (info.labels, info.allocatable) == ({"rlinf.io/rack": "7", "zone": "z1"},
                                                {"nvidia.com/gpu": "8", "cpu": "64"})
    assert (info.ready, info.resource_version) == (False, "")


class _NotJsonHandler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b"this is not JSON"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_a_node_page_that_is_not_json_raises_and_leaves_the_collector_running() -> None:
    server = HTTPServer(("127.0.0.1", 0), _NotJsonHandler)
    threading.Thread(target=server.serve_forever, daemon=True,
                     kwargs={"poll_interval": 0.02}).start()
    credentials = k8s.Credentials(api_url=f"http://127.0.0.1:{server.server_port}")
    try:
        with pytest.raises(k8s.KubeError) as caught:
            next(k8s.iter_node_pages(credentials=credentials, attempts=1))
    finally:
        server.shutdown()
        server.server_close()

    assert (caught.value.status, caught.value.reason) == (200, "BadResponse")
    assert gc.isenabled()


def test_listing_nodes_leaves_a_paused_collector_paused(gpu_a: k8s.Credentials) -> None:
    gc.disable()
    try:
        nodes = _listed(gpu_a, page_size=5)
        still_paused = not gc.isenabled()
    finally:
        gc.enable()

    assert still_paused
    assert len(nodes) == 17


def _listed(credentials: k8s.Credentials, **options: Any) -> list[k8s.NodeInfo]:
    return [n for page in k8s.iter_node_pages(credentials=credentials, **options) for n in page]


def test_each_cluster_serves_only_its_own_nodes(sim: InProcessSimulator) -> None:
    pages = k8s.iter_node_pages(credentials=sim.credentials("cpu-c"), page_size=4)

    names = {node.name for page in pages for node in page}
    assert names == {node.name for node in sim.fleet.cluster("cpu-c").nodes}


def test_a_failing_node_page_is_retried_with_the_same_continue_token(
    sim: InProcessSimulator,
) -> None:
    pages = k8s.iter_node_pages(credentials=sim.credentials(BIG), page_size=1000, base_delay=QUICK)
    first = next(pages)
    sim.set_faults(BIG, fail_next=1)

    rest = list(pages)

    assert len(first) + sum(len(page) for page in rest) == BIG_NODES
    node_lists = [e for e in sim.requests(BIG) if e["path"] == "/api/v1/nodes"]
    assert [e["code"] for e in node_lists] == [200, 500, 200, 200]
    assert node_lists[1]["query"]["continue"] == node_lists[2]["query"]["continue"]


@pytest.mark.parametrize(
    ("quantity", "count"),
    [("8", 8), ("0", 0), ("2k", 2000), ("4000m", 4), ("1Ki", 1024), ("1e2", 100)],
)
def test_parse_count_reads_whole_quantities(quantity: str, count: int) -> None:
    assert parse_count(quantity) == count


@pytest.mark.parametrize("quantity", ["1500m", "-1", "eight", "", "1.5"])
def test_parse_count_rejects_fractions_negatives_and_garbage(quantity: str) -> None:
    assert parse_count(quantity) is None


# Storage classes


def test_list_storage_classes(gpu_a: k8s.Credentials) -> None:
    assert k8s.list_storage_classes(credentials=gpu_a) == ["local-nvme", "s3-fuse"]


# Jobs


def test_created_job_carries_server_metadata_and_a_pending_status(
    gpu_a: k8s.Credentials,
) -> None:
    created = k8s.create_job(credentials=gpu_a, namespace=NAMESPACE, body=_actor_job("ppo"))

    metadata = created["metadata"]
    assert (metadata["name"], metadata["namespace"], metadata["generation"]) == (
        "ppo",
        NAMESPACE,
        1,
    )
    assert metadata["uid"] and metadata["resourceVersion"] and metadata["creationTimestamp"]
    assert created["status"]["phase"] == "Pending"


def test_get_job_returns_the_stored_object(gpu_a: k8s.Credentials) -> None:
    created = k8s.create_job(credentials=gpu_a, namespace=NAMESPACE, body=_actor_job("ppo"))

    assert k8s.get_job(credentials=gpu_a, namespace=NAMESPACE, name="ppo") == created


def test_list_jobs_per_namespace_and_across_namespaces(gpu_a: k8s.Credentials) -> None:
    k8s.create_job(credentials=gpu_a, namespace=NAMESPACE, body=_actor_job("one"))
    k8s.create_job(credentials=gpu_a, namespace="default", body=_actor_job("two", namespace=None))

    def names(namespace: str | None) -> list[str]:
        jobs = k8s.list_jobs(credentials=gpu_a, namespace=namespace)
        return [job["metadata"]["name"] for job in jobs]

    assert (names(NAMESPACE), names("default"), sorted(names(None))) == (
        ["one"],
        ["two"],
        ["one", "two"],
    )


def test_list_jobs_follows_pagination(sim: InProcessSimulator, gpu_a: k8s.Credentials) -> None:
    for index in range(5):
        k8s.create_job(credentials=gpu_a, namespace=NAMESPACE, body=_actor_job(f"job-{index}"))

    jobs = k8s.list_jobs(credentials=gpu_a, namespace=NAMESPACE, page_size=2)

    assert [job["metadata"]["name"] for job in jobs] == [f"job-{i}" for i in range(5)]
    assert _codes(sim, "gpu-a", "GET") == [200, 200, 200]


def test_deleted_job_is_gone(gpu_a: k8s.Credentials) -> None:
    k8s.create_job(credentials=gpu_a, namespace=NAMESPACE, body=_actor_job("ppo"))

    k8s.delete_job(credentials=gpu_a, namespace=NAMESPACE, name="ppo")

    with pytest.raises(k8s.NotFound):
        k8s.get_job(credentials=gpu_a, namespace=NAMESPACE, name="ppo")


def test_jobs_are_per_cluster(sim: InProcessSimulator, gpu_a: k8s.Credentials) -> None:
    k8s.create_job(credentials=gpu_a, namespace=NAMESPACE, body=_actor_job("ppo"))

    assert k8s.list_jobs(credentials=sim.credentials("gpu-b")) == []


# Error mapping


def test_duplicate_create_raises_already_exists(gpu_a: k8s.Credentials) -> None:
    k8s.create_job(credentials=gpu_a, namespace=NAMESPACE, body=_actor_job("ppo"))

    with pytest.raises(k8s.AlreadyExists) as caught:
        k8s.create_job(credentials=gpu_a, namespace=NAMESPACE, body=_actor_job("ppo"))

    error = caught.value
    assert (error.status, error.reason, error.transient) == (409, "AlreadyExists", False)
    assert error.message == 'jobs.rlinf.io "ppo" already exists'
    assert error.__cause__ is not None


def test_schema_breaking_body_raises_invalid(gpu_a: k8s.Credentials) -> None:
    body = _actor_job("ppo")
    body["spec"]["tasks"][0]["replicas"] = "two"

    with pytest.raises(k8s.Invalid) as caught:
        k8s.create_job(credentials=gpu_a, namespace=NAMESPACE, body=body)

    assert (caught.value.status, caught.value.reason) == (422, "Invalid")
    assert "spec.tasks[0].replicas" in caught.value.message


def test_missing_job_raises_not_found(gpu_a: k8s.Credentials) -> None:
    with pytest.raises(k8s.NotFound) as caught:
        k8s.get_job(credentials=gpu_a, namespace=NAMESPACE, name="nope")

    assert (caught.value.status, caught.value.reason) == (404, "NotFound")


def test_deleting_a_missing_job_raises_not_found(gpu_a: k8s.Credentials) -> None:
    with pytest.raises(k8s.NotFound):
        k8s.delete_job(credentials=gpu_a, namespace=NAMESPACE, name="nope")


def test_namespace_mismatch_raises_bad_request(gpu_a: k8s.Credentials) -> None:
    with pytest.raises(k8s.BadRequest) as caught:
        k8s.create_job(
            credentials=gpu_a, namespace=NAMESPACE, body=_actor_job("ppo", namespace="other")
        )

    assert caught.value.status == 400
    assert "namespace" in caught.value.message


@pytest.mark.parametrize("token", ["wrong-token", None])
def test_bad_or_missing_token_raises_unauthorized(
    sim: InProcessSimulator, token: str | None
) -> None:
    credentials = k8s.Credentials(api_url=sim.cluster_url("gpu-a"), token=token)

    with pytest.raises(k8s.Unauthorized) as caught:
        k8s.list_storage_classes(credentials=credentials, base_delay=QUICK)

    assert (caught.value.status, caught.value.transient) == (401, False)


def test_server_error_is_transient(sim: InProcessSimulator, gpu_a: k8s.Credentials) -> None:
    sim.set_faults("gpu-a", fail_next=1)

    with pytest.raises(k8s.ServerError) as caught:
        k8s.create_job(credentials=gpu_a, namespace=NAMESPACE, body=_actor_job("ppo"))

    assert (caught.value.status, caught.value.transient) == (500, True)


def test_throttling_raises_too_many_requests(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    sim.set_faults("gpu-a", fail_next=1, fail_mode="throttle")

    with pytest.raises(k8s.TooManyRequests) as caught:
        k8s.create_job(credentials=gpu_a, namespace=NAMESPACE, body=_actor_job("ppo"))

    assert (caught.value.status, caught.value.transient) == (429, True)


def test_timeout_raises_unreachable(sim: InProcessSimulator, gpu_a: k8s.Credentials) -> None:
    sim.set_faults("gpu-a", fail_next=1, fail_mode="timeout", hang_seconds=2)

    with pytest.raises(k8s.Unreachable) as caught:
        k8s.get_job(credentials=gpu_a, namespace=NAMESPACE, name="ppo", timeout=0.2, attempts=1)

    assert (caught.value.status, caught.value.reason, caught.value.transient) == (
        None,
        "Timeout",
        True,
    )


def test_slow_answers_past_the_timeout_raise_unreachable(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    sim.set_faults("gpu-a", latency_ms=1000)

    with pytest.raises(k8s.Unreachable):
        k8s.list_storage_classes(credentials=gpu_a, timeout=0.2, attempts=1)


def test_dropped_connection_raises_unreachable(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    sim.set_faults("gpu-a", fail_next=1, fail_mode="drop")

    with pytest.raises(k8s.Unreachable) as caught:
        k8s.delete_job(credentials=gpu_a, namespace=NAMESPACE, name="ppo")

    assert caught.value.transient is True
    assert caught.value.__cause__ is not None


def test_refused_connection_raises_unreachable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    credentials = k8s.Credentials(api_url=f"http://127.0.0.1:{port}/gpu-a")

    with pytest.raises(k8s.Unreachable) as caught:
        k8s.list_storage_classes(credentials=credentials, attempts=1)

    assert caught.value.reason == "ConnectionRefused"


# Retries


def test_reads_succeed_after_transient_failures(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    sim.set_faults("gpu-a", fail_next=2)

    assert k8s.list_storage_classes(credentials=gpu_a, base_delay=QUICK) == [
        "local-nvme",
        "s3-fuse",
    ]
    assert _codes(sim, "gpu-a", "GET") == [500, 500, 200]


def test_reads_retry_timeouts_and_dropped_connections(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    k8s.create_job(credentials=gpu_a, namespace=NAMESPACE, body=_actor_job("ppo"))
    sim.set_faults("gpu-a", fail_next=1, fail_mode="timeout", hang_seconds=2)
    first = k8s.get_job(
        credentials=gpu_a, namespace=NAMESPACE, name="ppo", timeout=0.2, base_delay=QUICK
    )
    sim.set_faults("gpu-a", fail_next=1, fail_mode="drop")
    second = k8s.get_job(credentials=gpu_a, namespace=NAMESPACE, name="ppo", base_delay=QUICK)

    assert first["metadata"]["name"] == second["metadata"]["name"] == "ppo"


def test_reads_give_up_after_their_attempts(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    sim.set_faults("gpu-a", fail_next=10)

    with pytest.raises(k8s.ServerError):
        k8s.list_jobs(credentials=gpu_a, attempts=3, base_delay=QUICK)

    assert _codes(sim, "gpu-a", "GET") == [500, 500, 500]


def test_permanent_errors_are_not_retried(sim: InProcessSimulator, gpu_a: k8s.Credentials) -> None:
    with pytest.raises(k8s.NotFound):
        k8s.get_job(credentials=gpu_a, namespace=NAMESPACE, name="nope", base_delay=QUICK)

    assert _codes(sim, "gpu-a", "GET") == [404]


def test_create_is_not_retried(sim: InProcessSimulator, gpu_a: k8s.Credentials) -> None:
    sim.set_faults("gpu-a", fail_next=1)

    with pytest.raises(k8s.ServerError):
        k8s.create_job(credentials=gpu_a, namespace=NAMESPACE, body=_actor_job("ppo"))

    assert _codes(sim, "gpu-a", "POST") == [500]


def test_lost_create_answer_then_retry_meets_already_exists(
    sim: InProcessSimulator, gpu_a: k8s.Credentials
) -> None:
    """The case submission must treat as success: the Job exists though the answer was lost."""
    sim.set_faults("gpu-a", fail_next=1, fail_mode="drop_after")
    with pytest.raises(k8s.Unreachable):
        k8s.create_job(credentials=gpu_a, namespace=NAMESPACE, body=_actor_job("ppo"))

    with pytest.raises(k8s.AlreadyExists):
        k8s.create_job(credentials=gpu_a, namespace=NAMESPACE, body=_actor_job("ppo"))


def test_backoff_delays_grow_exponentially_with_jitter_under_the_cap() -> None:
    delays = k8s.backoff_delays(attempts=6, base=0.1, cap=1.0, rng=random.Random(3))

    ceilings = [0.1, 0.2, 0.4, 0.8, 1.0]
    assert len(delays) == 5
    assert all(c / 2 <= d <= c for d, c in zip(delays, ceilings, strict=True))


def test_one_attempt_means_no_delays() -> None:
    assert k8s.backoff_delays(attempts=1, base=0.1, cap=1.0) == []


def test_concurrent_calls_share_clients_safely(gpu_a: k8s.Credentials) -> None:
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(5):
                results.append(k8s.list_storage_classes(credentials=gpu_a))
        except BaseException as error:  # collected and asserted below
            errors.append(error)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert errors == []
    assert results == [["local-nvme", "s3-fuse"]] * 40


# Kubeconfig

PEM = "-----BEGIN CERTIFICATE-----\nMIIBfake\n-----END CERTIFICATE-----\n"


def _kubeconfig(path: Path, server: str, user: dict[str, Any]) -> Path:
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "current-context": "sim",
        "clusters": [
            {
                "name": "gpu-a",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(PEM.encode()).decode(),
                },
            }
        ],
        "users": [{"name": "robot", "user": user}],
        "contexts": [{"name": "sim", "context": {"cluster": "gpu-a", "user": "robot"}}],
    }
    path.write_text(yaml.safe_dump(document))
    return path


def test_credentials_from_kubeconfig_reach_the_cluster(
    sim: InProcessSimulator, tmp_path: Path
) -> None:
    user = {"token": "demo-token-gpu-a"}
    path = _kubeconfig(tmp_path / "config", sim.cluster_url("gpu-a"), user)

    credentials = k8s.credentials_from_kubeconfig(path=path, context="sim")

    assert credentials == k8s.Credentials(
        api_url=sim.cluster_url("gpu-a"), token="demo-token-gpu-a", ca_cert=PEM
    )
    assert k8s.list_storage_classes(credentials=credentials) == ["local-nvme", "s3-fuse"]


def test_credentials_from_kubeconfig_carry_the_ca_of_https_servers(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "config", "https://k8s.example.com:6443", {"token": "t"})

    credentials = k8s.credentials_from_kubeconfig(path=path)

    assert (credentials.api_url, credentials.ca_cert, credentials.verify_tls) == (
        "https://k8s.example.com:6443",
        PEM,
        True,
    )


def test_kubeconfig_exec_plugin_users_are_refused_without_running_them(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    user = {"exec": {"apiVersion": "client.authentication.k8s.io/v1", "command": "touch",
                     "args": [str(marker)]}}
    path = _kubeconfig(tmp_path / "config", "https://k8s.example.com:6443", user)

    with pytest.raises(ValueError, match="exec are not supported"):
        k8s.credentials_from_kubeconfig(path=path)
    assert not marker.exists()
