"""Wizard step 4's checklist capacity line (SPEC 15: the pre-flight "in the step 4 checklist"),
rendered by the server with Django's test client on inventory and occupancy polled over real
HTTP from the fleet simulator (real `kubernetes` client, real PostgreSQL).

Each role's `task-N-capacity` line carries the role's verdict in `data-verdict`, the verdict's
label in the page's language, the ✓/✗ mark (✓ only for fits_now) and the pre-flight's message:
fits_now on idle nodes, will_queue once a foreign pod holds a node's GPUs, never_fits for a
worker no matched node can ever hold; in English and in Chinese.
"""

from __future__ import annotations

import html as htmllib
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from clusters.inventory.services import poll_cluster
from clusters.models import Cluster
from clusters.simulator.testing import InProcessSimulator, run_simulator
from jobs.drafts.services import job_create
from rlark_site.foundation.tenancy.models import Team
from tests.factories import load_fleet_rows
from tests.jobs.records_support import IMAGE

pytestmark = pytest.mark.django_db

CLUSTER, NS, GPU = "gpu-w4", "rl-gpu-w4", "nvidia.com/gpu"
ZONE = {"topology.rlinf.io/cluster": CLUSTER}


def _node(name: str, pool: str) -> dict[str, Any]:
    return {"name": name,
            "labels": {"kubernetes.io/hostname": name, "rlinf.io/pool": pool, **ZONE},
            "allocatable": {GPU: 8, "cpu": 64, "memory": "512Gi", "pods": 110}}


FLEET = {"clusters": [{
    "name": CLUSTER, "namespace": NS,
    "nodes": [_node("w4-head-01", "head"), _node("w4-node-01", "w"), _node("w4-node-02", "w")],
}]}

LABELS = {
    "en": {"fits_now": "Fits now", "will_queue": "Will queue", "never_fits": "Never fits",
           "capacity": "capacity", "ok": "holds", "bad": "needs attention"},
    "zh-hans": {"fits_now": "现在可运行", "will_queue": "将排队等待", "never_fits": "永远无法运行",
                "capacity": "容量", "ok": "满足", "bad": "需要处理"},
}


@pytest.fixture
def sim() -> Iterator[InProcessSimulator]:
    with run_simulator(FLEET) as handle:
        yield handle


@pytest.fixture
def cluster(sim: InProcessSimulator) -> Cluster:
    (cluster,) = load_fleet_rows(FLEET, api_url_base=sim.base_url)
    assert poll_cluster(cluster_id=cluster.pk).ok
    return cluster


@pytest.fixture
def web(client: Client, owner: Any) -> Client:
    client.force_login(owner)
    return client


def _draft(team: Team, owner: Any, name: str, **worker: Any) -> None:
    roles = [{"name": "Actor", "cluster": CLUSTER, "gpus": 8, "image": IMAGE,
              "selector": {"kubernetes.io/hostname": "w4-head-01", **ZONE}},
             {"name": "Rollout", "cluster": CLUSTER, "gpus": 8, "image": IMAGE,
              "selector": {"rlinf.io/pool": "w", **ZONE}, **worker}]
    job_create(team=team, user=owner, data={
        "name": name, "task_type": "custom", "header_role": "Actor", "roles": roles,
        "run_script": "python -m rlinf.train"})


def _capacity_line(web: Client, name: str, index: int, language: str) -> tuple[str, str]:
    """(data-verdict, the line's text as read, tags dropped) of role `index`'s capacity line."""
    response = web.get(reverse("jobs:wizard-step", kwargs={"name": name, "step": 4}),
                       HTTP_ACCEPT_LANGUAGE=language)
    assert response.status_code == 200
    page = response.content.decode()
    found = re.findall(rf'<li id="task-{index}-capacity" data-verdict="([a-z_]+)">(.*?)</li>',
                       page, re.S)
    assert len(found) == 1, f"one capacity line for task {index}"
    verdict, inner = found[0]
    text = " ".join(htmllib.unescape(re.sub(r"<[^>]+>", " ", inner)).split())
    return verdict, text


def _assert_line(text: str, verdict: str, language: str) -> None:
    words = LABELS[language]
    mark = "✓ " + words["ok"] if verdict == "fits_now" else "✗ " + words["bad"]
    assert text.startswith(f"{mark} {words['capacity']}: {words[verdict]} — "), text
    for other in ("fits_now", "will_queue", "never_fits"):
        if other != verdict:
            assert words[other] not in text


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_fits_now_then_will_queue_when_a_foreign_pod_takes_a_node(
        cluster: Cluster, sim: InProcessSimulator, team: Team, owner: Any, web: Client,
        language: str) -> None:
    _draft(team, owner, "roomy")
    for index in (0, 1):
        verdict, text = _capacity_line(web, "roomy", index, language)
        assert verdict == "fits_now"
        _assert_line(text, "fits_now", language)
    _, text = _capacity_line(web, "roomy", 1, language)
    if language == "en":
        assert text.endswith("All 2 matched nodes have room for a worker now.")
    else:
        assert "All 2 matched nodes" not in text and "2" in text

    sim.add_pod(CLUSTER, "someone-else", node="w4-node-02", requests={GPU: 4, "cpu": 2})
    assert poll_cluster(cluster_id=cluster.pk).ok
    assert _capacity_line(web, "roomy", 0, language)[0] == "fits_now"
    verdict, text = _capacity_line(web, "roomy", 1, language)
    assert verdict == "will_queue"
    _assert_line(text, "will_queue", language)
    assert "w4-node-02" in text and GPU in text
    if language == "en":
        assert "1 of 2 workers would wait for capacity now" in text
        assert "w4-node-02 has 4 of 8 nvidia.com/gpu free, 8 needed" in text
    else:
        assert "would wait" not in text and "free" not in text

    sim.remove_pod(CLUSTER, "someone-else")
    assert poll_cluster(cluster_id=cluster.pk).ok
    assert _capacity_line(web, "roomy", 1, language)[0] == "fits_now"


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_never_fits_when_no_matched_node_can_hold_a_worker(
        cluster: Cluster, team: Team, owner: Any, web: Client, language: str) -> None:
    _draft(team, owner, "hungry", cpu={"request": "100"})
    assert _capacity_line(web, "hungry", 0, language)[0] == "fits_now"
    verdict, text = _capacity_line(web, "hungry", 1, language)
    assert verdict == "never_fits"
    _assert_line(text, "never_fits", language)
    assert "w4-node-01" in text and "cpu" in text
    if language == "en":
        assert "2 of 2 workers can never be placed" in text
    else:
        assert "can never be placed" not in text


def test_each_request_computes_the_jobs_pre_flight_once(
        cluster: Cluster, team: Team, owner: Any, web: Client, api_client_for: Any,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Step 2 (each role's tab and its live answer), step 4 and the job detail show the
    pre-flight in several places (the findings, the role panel, the checklist, `capacity`):
    each role is judged once per request, not once per place (it was 2-3 times)."""
    from jobs.core.findings import capacity

    judged: list[str | None] = []
    real = capacity.role_preflight

    def counted(role: str | None, *args: Any) -> Any:
        judged.append(role)
        return real(role, *args)

    monkeypatch.setattr(capacity, "role_preflight", counted)
    _draft(team, owner, "roomy")
    step = "jobs:wizard-step"
    asked = {
        "step 2, Actor": lambda: web.get(reverse(step, kwargs={"name": "roomy", "step": 2})
                                         + "?role=0"),
        "step 2, Rollout": lambda: web.get(reverse(step, kwargs={"name": "roomy", "step": 2})
                                           + "?role=1"),
        "step 2, live": lambda: web.post(reverse(
            "jobs:wizard-matches", kwargs={"name": "roomy", "index": 1}), {
                "role": "1", "cluster": CLUSTER, "gpus": "8", "image": IMAGE,
                "selector_text": f"rlinf.io/pool=w\ntopology.rlinf.io/cluster={CLUSTER}\n"}),
        "step 4": lambda: web.get(reverse(step, kwargs={"name": "roomy", "step": 4})),
        "job detail": lambda: api_client_for(owner).get("/api/v1/jobs/roomy/"),
    }
    for place, ask in asked.items():
        judged.clear()
        response = ask()
        assert response.status_code == 200, place
        assert sorted(judged, key=str) == ["Actor", "Rollout"], place
