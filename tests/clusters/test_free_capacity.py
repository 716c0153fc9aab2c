"""Free capacity where people look (SPEC 15): the nodes API and page, the cluster API and
pages, the wizard's label picker. Occupancy comes from real polls of the fleet simulator
over HTTP; a foreign pod bound through the simulator's control endpoint takes capacity.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from clusters.capacity import quantities
from clusters.inventory.selectors import cluster_capacity, node_capacity_of, node_list
from clusters.inventory.services import cluster_create, poll_cluster
from clusters.models import Cluster, Node, NodeOccupancy
from clusters.simulator.testing import InProcessSimulator, run_simulator
from jobs.templatetags.wizard_html import label_options
from jobs.wizard.presenters import LabelOption, LabelSelect
from jobs.wizard.selectors import cluster_choices, cluster_offer

pytestmark = pytest.mark.django_db

ApiClient = Callable[[Any], APIClient]
GPU = "nvidia.com/gpu"
RDMA = "rlinf.io/rdma"
NODES = "/api/v1/nodes/"
FLEET: dict[str, Any] = {"clusters": [{
    "name": "free",
    "namespace": "rl-free",
    "token": "free-token",
    "nodes": [
        {"name": "f-gpu-1", "labels": {"pool": "gpu", "zone": "z1"},
         "allocatable": {GPU: 8, RDMA: 4, "cpu": "96", "memory": "1Ti", "pods": 110}},
        {"name": "f-gpu-2", "labels": {"pool": "gpu", "zone": "z2"},
         "allocatable": {GPU: 8, RDMA: 4}},
        {"name": "f-gpu-3", "labels": {"pool": "gpu", "zone": "z2"}, "ready": False,
         "allocatable": {GPU: 8}},
        {"name": "f-cpu-1", "labels": {"pool": "cpu"}, "allocatable": {"cpu": "16"}},
    ],
    "pods": [{"name": "serving", "namespace": "serving", "node": "f-gpu-1",
              "requests": {GPU: 6, RDMA: 1, "cpu": "8", "memory": "64Gi"}}],
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


@pytest.fixture
def cluster(sim: InProcessSimulator) -> Cluster:
    return cluster_create(name="free", namespace="rl-free", api_url=sim.cluster_url("free"),
                          token="free-token", verify_tls=False)


@pytest.fixture
def member_api(member: Any, api_client_for: ApiClient) -> APIClient:
    return api_client_for(member)


@pytest.fixture
def member_web(member: Any) -> Client:
    client = Client()
    client.force_login(member)
    return client


def _rows(api: APIClient) -> dict[str, dict[str, Any]]:
    answer = api.get(NODES, {"cluster": "free"})
    assert answer.status_code == 200
    return {row["name"]: row for row in answer.json()["results"]}


def test_node_rows_carry_allocatable_requested_free_and_the_pass_time(
    cluster: Cluster, member_api: APIClient
) -> None:
    poll_cluster(cluster_id=cluster.id)

    rows = _rows(member_api)

    cluster.refresh_from_db()
    busy = rows["f-gpu-1"]
    assert busy["allocatable"] == {"cpu": "96", "memory": "1Ti", GPU: "8", "pods": "110",
                                   RDMA: "4"}
    assert busy["requested"] == {"cpu": "8", "memory": "64Gi", GPU: "6", "pods": "1", RDMA: "1"}
    assert busy["free"] == {"cpu": "88", "memory": "960Gi", GPU: "2", "pods": "109", RDMA: "3"}
    assert busy["occupancy_as_of"] is not None
    assert busy["occupancy_as_of"] == rows["f-cpu-1"]["occupancy_as_of"]
    assert cluster.occupancy_as_of is not None
    assert busy["occupancy_as_of"].startswith(cluster.occupancy_as_of.strftime("%Y-%m-%dT%H:%M"))
    idle = rows["f-gpu-2"]
    assert idle["requested"] == {"cpu": "0", "memory": "0", GPU: "0", "pods": "0", RDMA: "0"}
    assert idle["free"] == idle["allocatable"]


def test_a_foreign_pod_reduces_free_on_its_node_after_a_poll(
    sim: InProcessSimulator, cluster: Cluster, member_api: APIClient
) -> None:
    poll_cluster(cluster_id=cluster.id)
    before = _rows(member_api)

    sim.add_pod("free", "batch", node="f-gpu-2", requests={GPU: 3, RDMA: 4, "cpu": "2"})
    unpolled = _rows(member_api)
    poll_cluster(cluster_id=cluster.id)
    after = _rows(member_api)

    assert unpolled["f-gpu-2"]["free"] == before["f-gpu-2"]["free"]  # as of the last pass
    assert after["f-gpu-2"]["free"][GPU] == "5"
    assert after["f-gpu-2"]["free"][RDMA] == "0"
    assert after["f-gpu-2"]["requested"]["pods"] == "1"
    assert after["f-gpu-2"]["occupancy_as_of"] > before["f-gpu-2"]["occupancy_as_of"]
    assert {name: row["free"] for name, row in after.items() if name != "f-gpu-2"} == {
        name: row["free"] for name, row in before.items() if name != "f-gpu-2"}


def test_occupancy_is_unknown_before_the_first_pass_and_for_gone_nodes(
    sim: InProcessSimulator, cluster: Cluster, member_api: APIClient
) -> None:
    never = _rows(member_api)  # registered, never polled: no rows at all
    poll_cluster(cluster_id=cluster.id)
    Node.objects.filter(name="f-gpu-2").update(gone=True)
    rows = member_api.get(NODES, {"cluster": "free", "include_gone": "true"}).json()["results"]
    gone = next(row for row in rows if row["name"] == "f-gpu-2")

    assert never == {}
    assert (gone["requested"], gone["free"], gone["occupancy_as_of"]) == (None, None, None)
    assert gone["allocatable"][GPU] == "8"


def test_a_node_row_without_an_occupancy_row_is_unknown_not_idle(
    cluster: Cluster, member_api: APIClient
) -> None:
    poll_cluster(cluster_id=cluster.id)
    NodeOccupancy.objects.filter(node__name="f-cpu-1").delete()

    row = _rows(member_api)["f-cpu-1"]

    assert (row["requested"], row["free"], row["occupancy_as_of"]) == (None, None, None)
    assert row["allocatable"]["cpu"] == "16"


def test_the_node_list_costs_the_same_queries_for_any_page(
    cluster: Cluster, member_api: APIClient, django_assert_max_num_queries: Any
) -> None:
    poll_cluster(cluster_id=cluster.id)
    for index in range(60):
        Node.objects.create(cluster=cluster, name=f"extra-{index}", namespace="rl-free", gpu=8)

    with django_assert_max_num_queries(6):
        answer = member_api.get(NODES, {"cluster": "free", "limit": 50})

    assert len(answer.json()["results"]) == 50


def test_the_cluster_api_totals_free_and_allocatable_gpus_and_devices(
    sim: InProcessSimulator, cluster: Cluster, member_api: APIClient
) -> None:
    unpolled = member_api.get("/api/v1/clusters/free/").json()
    poll_cluster(cluster_id=cluster.id)
    sim.add_pod("free", "batch", node="f-gpu-2", requests={GPU: 1})
    poll_cluster(cluster_id=cluster.id)

    detail = member_api.get("/api/v1/clusters/free/").json()
    listed = next(c for c in member_api.get("/api/v1/clusters/").json()["results"]
                  if c["name"] == "free")

    assert unpolled["capacity"] == {}  # no nodes yet
    # allocatable: every present node; free: ready nodes only (f-gpu-3 is NotReady)
    assert detail["capacity"] == {GPU: {"allocatable": "24", "free": "9"},
                                  RDMA: {"allocatable": "8", "free": "7"}}
    assert list(detail["capacity"]) == [GPU, RDMA]
    assert listed["capacity"] == detail["capacity"]
    assert (detail["occupancy_pods"], detail["occupancy_error"]) == (2, "")
    assert detail["occupancy_as_of"] is not None


def test_a_cluster_never_counted_has_allocatable_totals_and_unknown_free(
    cluster: Cluster, member_api: APIClient
) -> None:
    poll_cluster(cluster_id=cluster.id)
    Cluster.objects.filter(id=cluster.id).update(occupancy_as_of=None)

    detail = member_api.get("/api/v1/clusters/free/").json()

    assert detail["capacity"] == {GPU: {"allocatable": "24", "free": None},
                                  RDMA: {"allocatable": "8", "free": None}}
    assert all(row["free"] is None for row in _rows(member_api).values())


def test_the_sql_totals_are_the_sum_of_each_nodes_free(cluster: Cluster, member: Any) -> None:
    """The cluster totals (SQL) and the node rows (`NodeCapacity`) apply one rule, including
    to a stored entry RLark never writes (not a count: nothing requested) and to a request
    beyond the allocatable (free 0, never negative)."""
    poll_cluster(cluster_id=cluster.id)
    NodeOccupancy.objects.filter(node__name="f-gpu-2").update(requested={GPU: "lots"})
    NodeOccupancy.objects.filter(node__name="f-gpu-1").update(
        requested={GPU: "12", RDMA: "2", "pods": "1"})
    cluster.refresh_from_db()

    totals = cluster_capacity([cluster])[cluster.id]
    expected: dict[str, int] = {}
    for node in node_list(user=member, cluster="free"):
        capacity = node_capacity_of(node)
        if node.ready:
            for resource, amount in capacity.free.items():
                expected[resource] = expected.get(resource, 0) + amount

    assert {r.resource: r.free for r in totals.resources} == {
        resource: amount for resource, amount in quantities(expected).items()
        if resource in (GPU, RDMA)}
    assert (totals.gpu and totals.gpu.free) == "8"  # f-gpu-1: 0 (12 of 8), f-gpu-2: 8


def test_the_pages_show_free_per_node_and_per_cluster(
    cluster: Cluster, member_web: Client
) -> None:
    poll_cluster(cluster_id=cluster.id)

    nodes = member_web.get(reverse("clusters:nodes"), {"selector": "zone=z1"}).content.decode()
    clusters = member_web.get(reverse("clusters:list")).content.decode()
    detail = member_web.get(reverse("clusters:detail", args=["free"])).content.decode()

    assert "GPUs (free / allocatable)" in nodes
    assert '<strong class="free">2</strong> / 8' in nodes
    assert f'{RDMA} <strong class="free">3</strong> / 4' in nodes
    assert '<strong class="free">10</strong> / 24' in clusters
    assert f'{RDMA} <strong class="free">7</strong> / 8' in clusters
    assert '<strong class="free">10</strong> / 24' in detail
    assert "Occupancy counted" in detail and "1 pod" in detail


def test_the_pages_mark_free_unknown_before_the_first_count(
    cluster: Cluster, member_web: Client
) -> None:
    poll_cluster(cluster_id=cluster.id)
    Cluster.objects.filter(id=cluster.id).update(occupancy_as_of=None)

    nodes = member_web.get(reverse("clusters:nodes"), {"cluster": "free"}).content.decode()
    clusters = member_web.get(reverse("clusters:list")).content.decode()

    assert 'title="occupancy not counted yet">?</span> / 8' in nodes
    assert 'title="occupancy not counted yet">?</span> / 24' in clusters


def test_the_label_picker_shows_free_gpus_per_value_in_one_query(
    sim: InProcessSimulator, cluster: Cluster, django_assert_num_queries: Any
) -> None:
    poll_cluster(cluster_id=cluster.id)

    with django_assert_num_queries(1):
        choices = cluster_choices("free")

    values = {(k.key, v.value): (v.count, v.free_gpu) for k in choices.labels or ()
              for v in k.values}
    assert values[("pool", "gpu")] == (3, 10)  # 2 + 8, f-gpu-3 not ready
    assert values[("zone", "z1")] == (1, 2)
    assert values[("zone", "z2")] == (2, 8)
    assert values[("pool", "cpu")] == (1, None)  # no GPUs: nodes only
    assert cluster_offer("free", labels=choices.labels) == cluster_offer("free")


def test_the_label_picker_has_no_free_gpus_before_the_first_count(cluster: Cluster) -> None:
    poll_cluster(cluster_id=cluster.id)
    Cluster.objects.filter(id=cluster.id).update(occupancy_as_of=None)

    labels = cluster_choices("free").labels or ()

    assert {v.free_gpu for k in labels for v in k.values} == {None}


def test_a_label_option_names_nodes_and_free_gpus_in_both_languages() -> None:
    from django.utils import translation

    select = LabelSelect(key="pool", id="role-0-label-0", selected=True, options=(
        LabelOption("gpu", 3, True, 10), LabelOption("one", 1, False, 1),
        LabelOption("cpu", 1, False, None)))

    english = label_options(select)
    with translation.override("zh-hans"):
        chinese = label_options(select)

    assert '<option value="pool=gpu" selected>gpu (3 nodes, 10 free GPUs)</option>' in english
    assert ">one (1 node, 1 free GPU)</option>" in english
    assert ">cpu (1 node)</option>" in english
    assert "GPU" in chinese and "free GPUs" not in chinese
