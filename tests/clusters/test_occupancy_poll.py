"""Node occupancy in the inventory poll: the cluster-wide pod listing added up per node,
written only where it changed, kept when a listing is hostile or fails.

Through the real kubernetes client over HTTP: against the fleet simulator, and against a
hand-made API server for answers no honest server gives (garbage, endless or huge lists).
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from pghistory.models import Events

from clusters import k8s
from clusters.inventory.services import PollOutcome, cluster_create, poll_cluster
from clusters.models import Cluster, Node, NodeOccupancy
from clusters.simulator.testing import InProcessSimulator, job_body, run_simulator, task_body

pytestmark = pytest.mark.django_db

GPU = "nvidia.com/gpu"
OCCUPANCY_WRITE = re.compile(r'(INSERT INTO|UPDATE|DELETE FROM) "?clusters_nodeoccupancy"?\s',
                             re.IGNORECASE)
FLEET: dict[str, Any] = {"clusters": [{
    "name": "occ",
    "namespace": "rl-occ",
    "token": "occ-token",
    "nodes": [
        {"name": "o-gpu-1", "labels": {"pool": "gpu"},
         "allocatable": {GPU: 8, "rlinf.io/rdma": 4, "cpu": "96", "memory": "1Ti", "pods": 110}},
        {"name": "o-gpu-2", "labels": {"pool": "gpu"}, "allocatable": {GPU: 8}},
        {"name": "o-cpu-1", "labels": {"pool": "cpu"}, "allocatable": {"cpu": "1500m"}},
    ],
    "pods": [{"name": "busy", "namespace": "serving", "node": "o-gpu-1",
              "requests": {GPU: 4, "cpu": "8", "memory": "32Gi", "rlinf.io/rdma": 1}}],
}]}


@pytest.fixture(scope="module")
def module_sim() -> Iterator[InProcessSimulator]:
    with run_simulator(FLEET) as handle:
        yield handle


@pytest.fixture
def sim(module_sim: InProcessSimulator, settings: Any) -> Iterator[InProcessSimulator]:
    settings.RLARK_KUBE_TIMEOUT = 2
    settings.RLARK_INVENTORY_READ_ATTEMPTS = 1
    yield module_sim
    module_sim.reset()


def _register(api_url: str, token: str = "occ-token") -> Cluster:
    return cluster_create(name="occ", namespace="rl-occ", api_url=api_url, token=token,
                          verify_tls=False)


def _occupancy(cluster: Cluster) -> dict[str, dict[str, str]]:
    rows = NodeOccupancy.objects.filter(cluster=cluster).select_related("node")
    return {row.node.name: row.requested for row in rows}


def _occupancy_writes(queries: CaptureQueriesContext) -> list[str]:
    return [q["sql"] for q in queries.captured_queries
            if OCCUPANCY_WRITE.match(q["sql"].lstrip())]


def test_the_first_poll_records_each_nodes_requests_and_allocatable(
    sim: InProcessSimulator,
) -> None:
    cluster = _register(sim.cluster_url("occ"))

    result = poll_cluster(cluster_id=cluster.id)

    assert (result.outcome, result.stats.pods, result.stats.occupancy_written) == (
        PollOutcome.OK, 1, 3)
    assert _occupancy(cluster) == {
        "o-gpu-1": {"cpu": "8", "memory": "32Gi", GPU: "4", "pods": "1", "rlinf.io/rdma": "1"},
        "o-gpu-2": {},
        "o-cpu-1": {},
    }
    cluster.refresh_from_db()
    assert cluster.occupancy_as_of == cluster.last_success_at is not None
    assert (cluster.occupancy_pods, cluster.occupancy_error) == (1, "")
    nodes = {n.name: (n.cpu_milli, n.memory_bytes, n.pods) for n in Node.objects.all()}
    assert nodes == {"o-gpu-1": (96_000, 1 << 40, 110), "o-gpu-2": (64_000, 512 << 30, 110),
                     "o-cpu-1": (1500, 512 << 30, 110)}
    assert "occupancy of 1 pods (3 nodes written)" in result.summary()


def test_an_unchanged_re_poll_writes_no_occupancy_row(sim: InProcessSimulator) -> None:
    cluster = _register(sim.cluster_url("occ"))
    poll_cluster(cluster_id=cluster.id)
    before = Cluster.objects.get(id=cluster.id).occupancy_as_of

    with CaptureQueriesContext(connection) as queries:
        result = poll_cluster(cluster_id=cluster.id)

    assert (result.stats.pods, result.stats.occupancy_written) == (1, 0)
    assert _occupancy_writes(queries) == []
    cluster.refresh_from_db()
    assert before is not None and cluster.occupancy_as_of is not None
    assert cluster.occupancy_as_of > before


def test_pod_churn_rewrites_only_the_nodes_it_touched_and_no_audit_event(
    sim: InProcessSimulator,
) -> None:
    cluster = _register(sim.cluster_url("occ"))
    poll_cluster(cluster_id=cluster.id)
    events = Events.objects.count()

    sim.add_pod("occ", "batch", node="o-gpu-2", requests={GPU: 8, "memory": "1536Mi"})
    with CaptureQueriesContext(connection) as queries:
        added = poll_cluster(cluster_id=cluster.id)
    occupied = _occupancy(cluster)["o-gpu-2"]
    sim.remove_pod("occ", "batch")
    removed = poll_cluster(cluster_id=cluster.id)

    assert (added.stats.occupancy_written, removed.stats.occupancy_written) == (1, 1)
    assert len(_occupancy_writes(queries)) == 1
    assert occupied == {GPU: "8", "memory": "1536Mi", "pods": "1"}
    assert _occupancy(cluster)["o-gpu-2"] == {}
    assert Events.objects.count() == events


def test_a_jobs_bound_pods_count_until_the_job_ends(sim: InProcessSimulator) -> None:
    credentials = sim.credentials("occ")
    k8s.create_job(credentials=credentials, namespace="rl-occ", body=job_body(
        "ppo", tasks=[task_body("actor", replicas=2, selector={"pool": "gpu"}, gpus=4)]))
    sim.tick()
    cluster = _register(sim.cluster_url("occ"))

    poll_cluster(cluster_id=cluster.id)
    running = _occupancy(cluster)
    sim.set_job_phase("occ", "rl-occ", "ppo", "Succeeded")
    poll_cluster(cluster_id=cluster.id)

    assert (running["o-gpu-1"][GPU], running["o-gpu-2"][GPU]) == ("8", "4")
    assert (running["o-gpu-1"]["pods"], running["o-gpu-2"]["pods"]) == ("2", "1")
    assert _occupancy(cluster)["o-gpu-2"] == {}


def test_the_listing_is_one_cluster_wide_paged_list_per_poll(
    sim: InProcessSimulator, settings: Any
) -> None:
    settings.RLARK_INVENTORY_PAGE_SIZE = 2
    for index in range(4):
        sim.add_pod("occ", f"w-{index}", node="o-cpu-1", requests={"cpu": "100m"})
    cluster = _register(sim.cluster_url("occ"))

    result = poll_cluster(cluster_id=cluster.id)

    listings = [r for r in sim.requests("occ") if r["path"].endswith("/pods")]
    assert [r["path"] for r in listings] == ["/api/v1/pods"] * 3
    assert {r["query"]["fieldSelector"] for r in listings} == {
        "status.phase!=Succeeded,status.phase!=Failed"}
    assert [r["query"]["limit"] for r in listings] == ["2", "2", "2"]
    assert result.stats.pods == 5
    assert _occupancy(cluster)["o-cpu-1"] == {"cpu": "400m", "pods": "4"}


# A hand-made API server: valid nodes, storage classes and no Job CRD; pods as the test says.


NODE_LIST = {"kind": "NodeList", "apiVersion": "v1", "metadata": {}, "items": [
    {"metadata": {"name": f"h-{i}", "resourceVersion": "1", "labels": {}},
     "status": {"allocatable": {GPU: "8", "cpu": "64", "memory": "512Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}]}} for i in (1, 2)]}


def _pod(name: str, node: str = "h-1", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"nodeName": node, "containers": [
        {"name": "main", "resources": {"requests": {GPU: "2"}}}]}
    body.update(spec)
    return {"metadata": {"name": name, "namespace": "x", "uid": f"uid-{name}"},
            "spec": body, "status": {"phase": "Running"}}


PodAnswer = Callable[[dict[str, str]], tuple[int, bytes]]


def _good(query: dict[str, str]) -> tuple[int, bytes]:
    items = [_pod("a"), _pod("b", node="h-2"), _pod("pending", node=""),
             {**_pod("done"), "status": {"phase": "Succeeded"}}]
    return 200, json.dumps({"kind": "PodList", "metadata": {}, "items": items}).encode()


class _Handler(BaseHTTPRequestHandler):
    server: _HandMade

    def do_GET(self) -> None:
        path, _, query_text = self.path.partition("?")
        query = dict(part.split("=", 1) for part in query_text.split("&") if "=" in part)
        if path == "/api/v1/nodes":
            code, body = 200, json.dumps(NODE_LIST).encode()
        elif path == "/apis/storage.k8s.io/v1/storageclasses":
            code, body = 200, b'{"kind": "StorageClassList", "metadata": {}, "items": []}'
        elif path == "/api/v1/pods":
            code, body = self.server.pods(query)
        else:
            code, body = 404, b'{"kind": "Status", "status": "Failure", "code": 404}'
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _HandMade(ThreadingHTTPServer):
    daemon_threads = True
    pods: PodAnswer = staticmethod(_good)


@pytest.fixture
def hand_made(settings: Any) -> Iterator[_HandMade]:
    settings.RLARK_KUBE_TIMEOUT = 5
    settings.RLARK_INVENTORY_READ_ATTEMPTS = 1
    server = _HandMade(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True,
                              kwargs={"poll_interval": 0.02})
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _answer(document: Any) -> PodAnswer:
    body = json.dumps(document).encode() if not isinstance(document, bytes) else document
    return lambda query: (200, body)


def _endless(query: dict[str, str]) -> tuple[int, bytes]:
    page = {"kind": "PodList", "metadata": {"continue": "again"}, "items": []}
    return 200, json.dumps(page).encode()


def _many(query: dict[str, str]) -> tuple[int, bytes]:
    items = [_pod(f"p-{i}") for i in range(60)]
    return 200, json.dumps({"kind": "PodList", "metadata": {}, "items": items}).encode()


def _list(*items: Any) -> dict[str, Any]:
    return {"kind": "PodList", "metadata": {}, "items": list(items)}


HOSTILE: list[tuple[str, PodAnswer, str]] = [
    ("not JSON", _answer(b"<html>"), "response is not JSON"),
    ("a JSON array", _answer([1, 2]), "response is not a JSON object"),
    ("items not a list", _answer({"items": {"a": 1}}), "items are not a list"),
    ("an item not an object", _answer(_list("pod")), "a pod of the list is not an object"),
    ("containers as a string", _answer(_list(_pod("s", containers="main"))),
     "pod x/s: spec.containers: not a list"),
    ("an absurd quantity", _answer(_list(_pod("q", containers=[
        {"resources": {"requests": {GPU: "1e999"}}}]))), "is not a quantity"),
    ("totals beyond int64", _answer(_list(*[_pod(f"m{i}", containers=[
        {"resources": {"requests": {"memory": "8Ei"}}}]) for i in range(3)])),
     "requests add up beyond 2^63"),
    ("1e30 GPUs on one pod", _answer(_list(_pod("g", containers=[
        {"resources": {"requests": {GPU: "1e30"}}}]))), "'1e30' is too large"),
    ("a hundred distinct devices on one node", _answer(_list(*[_pod(f"d{i}", containers=[
        {"resources": {"requests": {f"rlinf.io/d{i}-{j}": "1" for j in range(10)}}}])
        for i in range(10)])), "more than 64 distinct resources"),
    ("nodeName not a string", _answer(_list(_pod("n", node=7))), "spec.nodeName is not a string"),
    ("endless continue tokens", _endless, "more than 5 pages"),
    ("more pods than allowed", _many, "more than 50 pods"),
    ("a server error", lambda q: (500, b'{"kind":"Status","code":500,"reason":"InternalError",'
                                  b'"message":"etcd is down"}'), "ServerError: 500"),
    ("forbidden", lambda q: (403, b'{"kind":"Status","code":403,"reason":"Forbidden",'
                             b'"message":"pods is forbidden"}'), "Unauthorized: 403"),
]


@pytest.mark.parametrize(("case", "answer", "problem"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_pod_list_is_recorded_and_the_last_good_occupancy_kept(
    hand_made: _HandMade, settings: Any, case: str, answer: PodAnswer, problem: str
) -> None:
    settings.RLARK_OCCUPANCY_MAX_PAGES = 5
    settings.RLARK_OCCUPANCY_MAX_PODS = 50
    host, port = hand_made.server_address[:2]
    cluster = _register(f"http://{host!s}:{port}")
    poll_cluster(cluster_id=cluster.id)
    good = _occupancy(cluster)
    as_of = Cluster.objects.get(id=cluster.id).occupancy_as_of

    hand_made.pods = answer
    result = poll_cluster(cluster_id=cluster.id)

    cluster.refresh_from_db()
    assert good == {"h-1": {GPU: "2", "pods": "1"}, "h-2": {GPU: "2", "pods": "1"}}
    assert result.outcome == PollOutcome.OK
    assert problem in cluster.occupancy_error
    assert (cluster.occupancy_as_of, _occupancy(cluster)) == (as_of, good)
    assert cluster.state == "ok" and cluster.last_error == ""


def test_an_expired_continue_token_restarts_the_listing_once(hand_made: _HandMade,
                                                            settings: Any) -> None:
    settings.RLARK_INVENTORY_PAGE_SIZE = 1
    answers = iter([
        _list(_pod("a")) | {"metadata": {"continue": "t1"}},
        None,  # 410 Expired
        _list(_pod("a")) | {"metadata": {"continue": "t2"}},
        _list(_pod("b", node="h-2")),
    ])

    def expiring(query: dict[str, str]) -> tuple[int, bytes]:
        document = next(answers)
        if document is None:
            return 410, b'{"kind":"Status","code":410,"reason":"Expired","message":"too old"}'
        return 200, json.dumps(document).encode()

    hand_made.pods = expiring
    host, port = hand_made.server_address[:2]
    cluster = _register(f"http://{host!s}:{port}")

    poll_cluster(cluster_id=cluster.id)

    assert _occupancy(cluster) == {"h-1": {GPU: "2", "pods": "1"}, "h-2": {GPU: "2", "pods": "1"}}


def test_the_gateway_reduces_bound_running_pods_and_bounds_a_page(hand_made: _HandMade) -> None:
    host, port = hand_made.server_address[:2]
    credentials = k8s.Credentials(api_url=f"http://{host!s}:{port}")
    hand_made.pods = _answer(_list({**_pod("a"), "metadata": {
        "name": "a", "namespace": "x", "uid": "u", "labels": {"rlinf.io/job": "ppo", "n": 1}}},
        _pod("pending", node=""), {**_pod("done"), "status": {"phase": "Failed"}}))

    pages = list(k8s.iter_bound_pod_pages(credentials=credentials))
    with pytest.raises(k8s.ListTooLarge, match="larger than 100 bytes"):
        list(k8s.iter_bound_pod_pages(credentials=credentials, max_page_bytes=100))

    assert [[(p.node, p.namespace, p.name, p.uid, p.phase, p.labels) for p in page]
            for page in pages] == [[("h-1", "x", "a", "u", "Running",
                                     {"rlinf.io/job": "ppo", "n": "1"})]]


def test_the_gateway_narrows_to_one_node_on_the_simulator(sim: InProcessSimulator) -> None:
    sim.add_pod("occ", "web", node="o-cpu-1", requests={"cpu": "1"}, labels={"app": "web"})

    one = [p.name for page in k8s.iter_bound_pod_pages(
        credentials=sim.credentials("occ"), node_name="o-cpu-1") for p in page]
    every = [p.name for page in k8s.iter_bound_pod_pages(
        credentials=sim.credentials("occ")) for p in page]

    assert (one, every) == (["web"], ["web", "busy"])


def test_occupancy_rows_have_no_audit_table_while_nodes_do() -> None:
    from django.apps import apps

    tracked = {model.pgh_tracked_model._meta.label for model in apps.get_models()
               if hasattr(model, "pgh_tracked_model")}

    assert "clusters.Node" in tracked
    assert "clusters.NodeOccupancy" not in tracked


def test_pods_with_missing_fields_count_what_they_carry(hand_made: _HandMade) -> None:
    bare = {"spec": {"nodeName": "h-1"}}  # no metadata, no status, no containers
    hand_made.pods = _answer(_list(
        bare,
        {"metadata": {"name": "no-resources", "namespace": "x"},
         "spec": {"nodeName": "h-1", "containers": [{"name": "main"}]}},
        _pod("null-requests", containers=[{"resources": {"requests": None}}]),
        _pod("no-phase", node="h-2") | {"status": {}},
        {**_pod("other", node="h-2"), "metadata": {"name": "other"}},  # no namespace, no uid
    ))
    host, port = hand_made.server_address[:2]
    cluster = _register(f"http://{host!s}:{port}")

    result = poll_cluster(cluster_id=cluster.id)

    cluster.refresh_from_db()
    assert (result.outcome, cluster.occupancy_error, result.stats.pods) == (PollOutcome.OK, "", 5)
    assert _occupancy(cluster) == {"h-1": {"pods": "3"}, "h-2": {GPU: "4", "pods": "2"}}


def test_pods_on_unknown_nodes_are_not_counted_and_make_no_row(hand_made: _HandMade) -> None:
    hand_made.pods = _answer(_list(_pod("here"), *[_pod(f"away-{i}", node=f"ghost-{i}")
                                                    for i in range(40)]))
    host, port = hand_made.server_address[:2]
    cluster = _register(f"http://{host!s}:{port}")

    result = poll_cluster(cluster_id=cluster.id)

    assert (result.stats.pods, result.stats.occupancy_written) == (1, 2)
    assert _occupancy(cluster) == {"h-1": {GPU: "2", "pods": "1"}, "h-2": {}}
    assert Node.objects.filter(cluster=cluster).count() == 2


def test_a_listing_of_millions_stops_reading_at_the_bound(hand_made: _HandMade,
                                                         settings: Any) -> None:
    """A server that claims a million pods (and would serve them page after page) is read
    only up to RLARK_OCCUPANCY_MAX_PODS: the poll stops, says so and keeps the last good
    occupancy."""
    settings.RLARK_INVENTORY_PAGE_SIZE = 100
    settings.RLARK_OCCUPANCY_MAX_PODS = 1000
    host, port = hand_made.server_address[:2]
    cluster = _register(f"http://{host!s}:{port}")
    poll_cluster(cluster_id=cluster.id)
    good = _occupancy(cluster)
    served: list[int] = []

    def millions(query: dict[str, str]) -> tuple[int, bytes]:
        start = int(query.get("continue") or 0)
        served.append(start)
        items = [_pod(f"p-{start + i}", node=f"h-{1 + i % 2}") for i in range(100)]
        page = {"kind": "PodList", "metadata": {"continue": str(start + 100),
                                                "remainingItemCount": 1_000_000 - start},
                "items": items}
        return 200, json.dumps(page).encode()

    hand_made.pods = millions
    result = poll_cluster(cluster_id=cluster.id)

    cluster.refresh_from_db()
    assert result.outcome == PollOutcome.OK
    assert "more than 1000 pods" in cluster.occupancy_error
    assert len(served) == 11  # ten pages of 100, the eleventh passes the bound
    assert _occupancy(cluster) == good


def test_the_tally_keeps_no_pod_bodies_however_many_pods() -> None:
    """50,000 pods across 100 pages on 100 nodes: the tally holds per-node totals and the
    pods' uids, far less than the pods themselves (each page is dropped once counted)."""
    import tracemalloc

    from clusters.inventory.occupancy import tally

    requests = {GPU: 1, "cpu": 100}

    def pages() -> Iterator[list[k8s.PodUsage]]:
        for page in range(100):
            yield [k8s.BoundPod(node=f"n-{i % 100}", namespace="x", name=f"p-{page}-{i}",
                                uid=f"{page:04d}-{i:04d}-uid", phase="Running",
                                labels={"app": "a" * 200}, requests=requests).usage
                   for i in range(500)]

    tracemalloc.start()
    try:
        counted = tally(pages(), nodes=[f"n-{i}" for i in range(100)])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert counted.pods == 50_000
    assert counted.nodes["n-0"] == {GPU: 500, "cpu": 50_000, "pods": 500}
    assert peak < 12 * 1024 * 1024  # uids and one page: 5.4 MB; holding the pods: 24 MB


def test_churn_that_leaves_a_nodes_totals_unchanged_writes_nothing(
    sim: InProcessSimulator,
) -> None:
    """One pod ends and another with the same requests starts on the same node between two
    polls: the node's totals are the same, so no row is written and no audit event made."""
    cluster = _register(sim.cluster_url("occ"))
    sim.add_pod("occ", "first", node="o-gpu-2", requests={GPU: 2, "cpu": "1"})
    poll_cluster(cluster_id=cluster.id)
    events = Events.objects.count()
    before = _occupancy(cluster)

    sim.remove_pod("occ", "first")
    sim.add_pod("occ", "second", node="o-gpu-2", requests={GPU: 2, "cpu": "1"})
    with CaptureQueriesContext(connection) as queries:
        result = poll_cluster(cluster_id=cluster.id)

    assert (result.stats.pods, result.stats.occupancy_written) == (2, 0)
    assert _occupancy_writes(queries) == []
    assert _occupancy(cluster) == before
    assert Events.objects.count() == events
