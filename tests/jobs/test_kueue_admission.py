"""Admission through Kueue end to end (SPEC 15): RLark on a Kueue cluster of the fleet
simulator, over real HTTP with the real `kubernetes` client, real PostgreSQL and Celery tasks.

Two jobs for a ClusterQueue with quota for one: the first is admitted and Running, the second
`admission.state == "pending"` at position 1 with Kueue's message; when the first ends the
second is admitted. A job the queue could never hold is refused before Submit
(`admission.exceeds_quota`). The status pass reads one Workload list per namespace and one
visibility answer per LocalQueue with pending runs, never per job.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from rest_framework.test import APIClient

from clusters.inventory.services import poll_cluster
from clusters.models import Cluster
from clusters.simulator.testing import InProcessSimulator, run_simulator
from jobs.drafts.services import job_create
from jobs.models import DeploymentParameters, Job, JobState, LaunchList, RunRecord
from jobs.records.status import sync_cluster
from jobs.tasks import submit_run_record
from rlark_site.foundation.tenancy.models import Team
from tests.factories import confirmed_parameters, load_fleet_rows
from tests.jobs.records_support import EXPECTED_SIGNAL, IMAGE, approved

pytestmark = pytest.mark.django_db

CLUSTER, NS, GPU = "gpu-k", "rl-gpu-k", "nvidia.com/gpu"
ZONE = {"topology.rlinf.io/cluster": CLUSTER}


def _node(name: str, pool: str) -> dict[str, Any]:
    return {"name": name,
            "labels": {"kubernetes.io/hostname": name, "rlinf.io/pool": pool, **ZONE},
            "allocatable": {GPU: 8, "cpu": 64, "memory": "512Gi", "pods": 110}}


FLEET = {"clusters": [{
    "name": CLUSTER, "namespace": NS,
    "nodes": [_node("k-head-01", "head"), _node("k-head-02", "head"),
              _node("k-node-01", "k"), _node("k-node-02", "k")],
    "kueue": {
        "cluster_queues": [{"name": "vision-cq", "flavors": [
            {"name": "a100", "resources": {GPU: {"nominal_quota": 8},
                                           "cpu": {"nominal_quota": 256}}}]}],
        "local_queues": [{"namespace": NS, "name": "vision-q", "cluster_queue": "vision-cq"}],
    },
}]}


@pytest.fixture
def sim() -> Iterator[InProcessSimulator]:
    with run_simulator(FLEET) as handle:
        yield handle


@pytest.fixture
def cluster(sim: InProcessSimulator, team: Team) -> Cluster:
    (cluster,) = load_fleet_rows(FLEET, api_url_base=sim.base_url)
    Cluster.objects.filter(pk=cluster.pk).update(admission="kueue",
                                                 kueue_queues={team.slug: "vision-q"})
    assert poll_cluster(cluster_id=cluster.pk).ok
    return cluster


def _role(name: str, selector: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "cluster": CLUSTER, "selector": {**selector, **ZONE}, "gpus": 8,
            "image": IMAGE, "prepare_script": "source /opt/venv/bin/activate"}


def _job(name: str, *, team: Team, owner: Any, admin: Any, head: str,
         workers: dict[str, str] | None = None) -> Job:
    """A draft with the Header role on one node (8 GPUs) and, with `workers`, a Rollout role
    on those nodes (8 GPUs each), its selectors verified and its parameters confirmed."""
    roles = [_role("Actor", {"kubernetes.io/hostname": head})]
    approved(team=team, owner=owner, admin=admin, cluster=CLUSTER, header=True,
             selector={"kubernetes.io/hostname": head, **ZONE})
    if workers is not None:
        roles.append(_role("Rollout", workers))
        approved(team=team, owner=owner, admin=admin, cluster=CLUSTER, selector={**workers, **ZONE})
    launch = LaunchList.objects.create(team=team, title=name, created_by=owner, image=IMAGE,
                                       entry="python -m rlinf.train",
                                       expected_signals=[EXPECTED_SIGNAL])
    parameters = DeploymentParameters.objects.create(team=team, title=name, created_by=owner,
                                                     launch_list=launch)
    job = job_create(team=team, user=owner, data={
        "name": name, "task_type": "custom", "header_role": "Actor", "roles": roles,
        "run_script": "python -m rlinf.train", "launch_list": launch.pk,
        "deployment_parameters": parameters.pk})
    confirmed_parameters(job, admin=admin)
    return job


def _submit(api: APIClient, name: str, capture: Any) -> RunRecord:
    with capture(execute=False):
        response = api.post(f"/api/v1/jobs/{name}/submit/")
    assert response.status_code == 202, response.json()
    record = RunRecord.objects.get(job_name=name)
    submit_run_record.apply(args=[record.pk])
    return record


def _detail(api: APIClient, name: str) -> dict[str, Any]:
    response = api.get(f"/api/v1/jobs/{name}/")
    assert response.status_code == 200
    return dict(response.json())


def test_two_jobs_for_quota_of_one_the_second_waits_in_line_until_the_first_ends(
        cluster: Cluster, sim: InProcessSimulator, team: Team, owner: Any, admin_user: Any,
        api_client_for: Any, django_capture_on_commit_callbacks: Any) -> None:
    api = api_client_for(owner)
    capture = django_capture_on_commit_callbacks
    for name, head in (("first", "k-head-01"), ("second", "k-head-02")):
        _job(name, team=team, owner=owner, admin=admin_user, head=head)
        assert not [f for f in _detail(api, name)["findings"] if f["severity"] == "error"]
    first = _submit(api, "first", capture)
    assert first.admission == {"queue": "vision-q", "cluster_queue": None, "state": "pending",
                               "reason": "", "message": "", "position": None,
                               "position_in_local_queue": None}
    sim.tick()  # Kueue admits the first
    sim.tick()  # its pods are scheduled: Running
    _submit(api, "second", capture)
    sim.tick()
    sync_cluster(cluster=CLUSTER)

    running = _detail(api, "first")
    assert running["state"] == JobState.RUNNING
    assert running["admission"] == {
        "queue": "vision-q", "cluster_queue": "vision-cq", "state": "admitted",
        "reason": "Admitted", "message": "The workload is admitted", "position": None,
        "position_in_local_queue": None}
    waiting = _detail(api, "second")
    assert waiting["state"] == JobState.PENDING
    admission = waiting["admission"]
    assert (admission["state"], admission["position"], admission["reason"],
            admission["cluster_queue"]) == ("pending", 1, "Pending", "vision-cq")
    assert admission["message"].startswith("couldn't assign flavors to pod set ")
    assert admission["message"].endswith(
        ": insufficient unused quota for nvidia.com/gpu in flavor a100, 8 more needed")

    sim.set_job_phase(CLUSTER, NS, "first", "Succeeded")
    sim.tick()  # the first's Workload finishes, the second is admitted
    sim.tick()  # the second's pods are scheduled
    sync_cluster(cluster=CLUSTER)
    done = _detail(api, "first")
    assert (done["state"], done["admission"]["state"], done["admission"]["message"]) == (
        JobState.SUCCEEDED, "finished", "Pods succeeded: 1/1.")
    second = _detail(api, "second")
    assert (second["state"], second["admission"]["state"], second["admission"]["position"]) == (
        JobState.RUNNING, "admitted", None)


def test_the_job_page_says_where_the_job_waits(
        cluster: Cluster, sim: InProcessSimulator, team: Team, owner: Any, admin_user: Any,
        api_client_for: Any, django_capture_on_commit_callbacks: Any, client: Any) -> None:
    api = api_client_for(owner)
    for name, head in (("first", "k-head-01"), ("second", "k-head-02")):
        _job(name, team=team, owner=owner, admin=admin_user, head=head)
        _submit(api, name, django_capture_on_commit_callbacks)
        sim.tick()
    sync_cluster(cluster=CLUSTER)
    client.force_login(owner)
    page = client.get("/jobs/job/second/").content.decode()
    assert 'data-admission-state="pending"' in page
    assert "Position 1 in its ClusterQueue." in page
    assert "8 more needed" in page


def test_the_status_pass_reads_once_per_namespace_and_queue_never_per_job(
        cluster: Cluster, sim: InProcessSimulator, team: Team, owner: Any, admin_user: Any,
        api_client_for: Any, django_capture_on_commit_callbacks: Any) -> None:
    api = api_client_for(owner)
    for name, head in (("first", "k-head-01"), ("second", "k-head-02")):
        _job(name, team=team, owner=owner, admin=admin_user, head=head)
        _submit(api, name, django_capture_on_commit_callbacks)
    sim.tick()
    before = len(sim.requests(CLUSTER))
    sync_cluster(cluster=CLUSTER)
    paths = [r["path"] for r in sim.requests(CLUSTER)[before:]]
    assert paths.count(f"/apis/kueue.x-k8s.io/v1beta1/namespaces/{NS}/workloads") == 1
    assert sum("pendingworkloads" in p for p in paths) == 1
    assert not [p for p in paths if "/workloads/" in p]  # no read of one Workload


def test_a_job_the_queue_could_never_hold_is_refused_before_submit(
        cluster: Cluster, sim: InProcessSimulator, team: Team, owner: Any, admin_user: Any,
        api_client_for: Any) -> None:
    api = api_client_for(owner)
    _job("greedy", team=team, owner=owner, admin=admin_user, head="k-head-01",
         workers={"rlinf.io/pool": "k"})  # 8 + 2 x 8 = 24 GPUs against a quota of 8
    (finding,) = [f for f in _detail(api, "greedy")["findings"]
                  if f["code"] == "admission.exceeds_quota"]
    assert (finding["severity"], finding["detail"]["requested"], finding["detail"]["quota"],
            finding["detail"]["cluster_queue"]) == ("error", "24", "8", "vision-cq")
    response = api.post("/api/v1/jobs/greedy/submit/")
    assert response.status_code == 422
    assert "admission.exceeds_quota" in [f["code"] for f in response.json()["findings"]]
    assert sim.created_bodies(CLUSTER) == []


def test_a_team_without_a_local_queue_is_refused_before_submit(
        cluster: Cluster, team: Team, owner: Any, admin_user: Any, api_client_for: Any) -> None:
    Cluster.objects.filter(pk=cluster.pk).update(kueue_queues={})
    api = api_client_for(owner)
    _job("queueless", team=team, owner=owner, admin=admin_user, head="k-head-01")
    codes = [f["code"] for f in _detail(api, "queueless")["findings"]]
    assert "admission.no_queue" in codes
    assert api.post("/api/v1/jobs/queueless/submit/").status_code == 422


def test_the_poll_keeps_the_queues_and_the_queues_api_shows_the_teams_share(
        cluster: Cluster, sim: InProcessSimulator, team: Team, owner: Any, admin_user: Any,
        api_client_for: Any, django_capture_on_commit_callbacks: Any) -> None:
    api = api_client_for(owner)
    _job("first", team=team, owner=owner, admin=admin_user, head="k-head-01")
    _submit(api, "first", django_capture_on_commit_callbacks)
    sim.tick()
    assert poll_cluster(cluster_id=cluster.pk).ok
    body = api.get(f"/api/v1/clusters/{CLUSTER}/queues/").json()
    (queue,) = body["cluster_queues"]
    gpu = next(r for r in queue["resources"] if r["resource"] == GPU)
    assert (queue["name"], gpu["nominal"], gpu["used"], gpu["potential"]) == (
        "vision-cq", "8", "8", "8")
    (share,) = body["teams"]
    assert (share["team"], share["local_queue"], share["cluster_queue"], share["found"]) == (
        team.slug, "vision-q", "vision-cq", True)
    assert [(u["resource"], u["used"], u["share_percent"]) for u in share["usage"]
            if u["resource"] == GPU] == [(GPU, "8", 100.0)]


def test_a_cluster_that_lost_kueue_keeps_the_last_good_queues(
        cluster: Cluster, sim: InProcessSimulator, member: Any, api_client_for: Any) -> None:
    sim.control("DELETE", f"clusters/{CLUSTER}/kueue")  # Kueue uninstalled: its API is 404
    result = poll_cluster(cluster_id=cluster.pk)
    assert result.ok  # the nodes were polled all the same
    body = api_client_for(member).get(f"/api/v1/clusters/{CLUSTER}/queues/").json()
    assert body["error"].startswith("NotFound")
    assert [q["name"] for q in body["cluster_queues"]] == ["vision-cq"]


def test_a_run_keeps_its_admission_when_kueue_goes_away(
        cluster: Cluster, sim: InProcessSimulator, team: Team, owner: Any, admin_user: Any,
        api_client_for: Any, django_capture_on_commit_callbacks: Any) -> None:
    api = api_client_for(owner)
    _job("first", team=team, owner=owner, admin=admin_user, head="k-head-01")
    _submit(api, "first", django_capture_on_commit_callbacks)
    sim.tick()
    sync_cluster(cluster=CLUSTER)
    assert _detail(api, "first")["admission"]["state"] == "admitted"
    sim.control("DELETE", f"clusters/{CLUSTER}/kueue")
    sync_cluster(cluster=CLUSTER)
    assert _detail(api, "first")["admission"]["state"] == "admitted"


def test_the_pre_flight_reads_kueue_quota_never_fits_above_it_will_queue_while_used(
        cluster: Cluster, sim: InProcessSimulator, team: Team, owner: Any, admin_user: Any,
        api_client_for: Any, django_capture_on_commit_callbacks: Any) -> None:
    """SPEC 15: a job above the quota the team can ever get is never_fits (exceeds_quota
    stays the error); quota used by an admitted job makes the next job will_queue."""
    api = api_client_for(owner)
    _job("greedy", team=team, owner=owner, admin=admin_user, head="k-head-02",
         workers={"rlinf.io/pool": "k"})
    greedy = _detail(api, "greedy")
    assert greedy["capacity"]["verdict"] == "never_fits"
    assert {r["verdict"] for r in greedy["capacity"]["roles"]} == {"fits_now"}
    assert "admission.exceeds_quota" in [f["code"] for f in greedy["findings"]]

    for name, head in (("first", "k-head-01"), ("second", "k-head-02")):
        _job(name, team=team, owner=owner, admin=admin_user, head=head)
    assert _detail(api, "second")["capacity"]["verdict"] == "fits_now"
    _submit(api, "first", django_capture_on_commit_callbacks)
    sim.tick()  # Kueue admits the first: its 8 GPUs of quota are reserved
    sim.tick()
    assert poll_cluster(cluster_id=cluster.pk).ok  # the quota view and occupancy read again
    second = _detail(api, "second")
    assert second["capacity"]["verdict"] == "will_queue"
    assert second["capacity"]["quota"] == [{"cluster_queue": "vision-cq", "resource": GPU,
                                            "unused": "0", "needed": "8"}]
    (finding,) = [f for f in second["findings"] if f["code"] == "capacity.will_queue"]
    assert (finding["severity"], finding["role"]) == ("warning", None)
    assert "vision-cq" in finding["message"]


def test_the_wizard_shows_the_jobs_total_against_the_quota_on_every_tab_of_step_2(
        cluster: Cluster, team: Team, owner: Any, admin_user: Any, client: Any) -> None:
    """`admission.exceeds_quota` for the whole job has no field: it is listed at the top of
    step 2 (what the roles ask for), on each role's tab, and still in step 4's findings."""
    _job("greedy", team=team, owner=owner, admin=admin_user, head="k-head-01",
         workers={"rlinf.io/pool": "k"})
    client.force_login(owner)
    alert = '<div id="step-findings" class="general-findings" role="alert">'
    for tab in (0, 1):
        page = client.get(f"/jobs/wizard/greedy/step-2/?role={tab}").content.decode()
        assert alert in page, tab
        shown = page.split(alert)[1].split("</div>")[0]
        assert '<p class="finding error">The job asks for 24 nvidia.com/gpu in all' in shown
        assert "admission.exceeds_quota" in shown
    for number in (1, 3):
        page = client.get(f"/jobs/wizard/greedy/step-{number}/").content.decode()
        assert "admission.exceeds_quota" not in page
    review = client.get("/jobs/wizard/greedy/step-4/").content.decode()
    findings = review.split('id="findings"')[1]
    assert '<a href="/jobs/wizard/greedy/step-2/">The job asks for 24 nvidia.com/gpu' in findings
