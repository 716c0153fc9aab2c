"""Pending, explained (SPEC 15) end to end: RLark on the fleet simulator over real HTTP with
the real `kubernetes` client, real PostgreSQL, Celery tasks run in the test.

Two jobs for one 8-GPU node (the second Pending with the sentence and kube-scheduler's
FailedScheduling text verbatim), a foreign pod taking half a node, a Kueue-queued job (Kueue's
message and the position), the sentence in Chinese, the `pending_overdue` email and signed
webhook carrying it, a hostile scheduler message (megabytes, NUL, control characters) bounded
and stored, and a status pass whose cluster calls do not grow with the Pending jobs.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from celery import current_app
from django.core import mail
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from clusters.inventory.services import poll_cluster
from clusters.k8s import list_events
from clusters.models import Cluster
from clusters.simulator.testing import InProcessSimulator, run_simulator
from jobs.drafts.services import job_create
from jobs.models import DeploymentParameters, EventKind, Job, JobState, LaunchList, RunRecord
from jobs.notify.services import preferences_set, webhook_set
from jobs.records.pending import MESSAGE_MAX
from jobs.records.status import flag_overdue_pending, sync_cluster
from jobs.tasks import submit_run_record
from rlark_site.foundation.tenancy.models import Team
from tests.factories import confirmed_parameters, load_fleet_rows
from tests.jobs.notify_support import SECRET, Receiver, signature_ok
from tests.jobs.records_support import EXPECTED_SIGNAL, IMAGE, approved

pytestmark = pytest.mark.django_db

PLAIN, KUEUE, GPU = "gpu-p", "gpu-q", "nvidia.com/gpu"
NS = {PLAIN: "rl-gpu-p", KUEUE: "rl-gpu-q"}


def _node(cluster: str, name: str) -> dict[str, Any]:
    return {"name": name,
            "labels": {"kubernetes.io/hostname": name, "topology.rlinf.io/cluster": cluster},
            "allocatable": {GPU: 8, "cpu": 64, "memory": "512Gi", "pods": 110}}


FLEET = {"clusters": [
    {"name": PLAIN, "namespace": NS[PLAIN],
     "nodes": [_node(PLAIN, "p-head-01"), _node(PLAIN, "p-head-02"), _node(PLAIN, "p-node-01")]},
    {"name": KUEUE, "namespace": NS[KUEUE],
     "nodes": [_node(KUEUE, "q-head-01"), _node(KUEUE, "q-head-02")],
     "kueue": {
         "cluster_queues": [{"name": "vision-cq", "flavors": [
             {"name": "a100", "resources": {GPU: {"nominal_quota": 8},
                                            "cpu": {"nominal_quota": 256}}}]}],
         "local_queues": [{"namespace": NS[KUEUE], "name": "vision-q",
                           "cluster_queue": "vision-cq"}]}},
]}


@pytest.fixture
def sim() -> Iterator[InProcessSimulator]:
    with run_simulator(FLEET) as handle:
        yield handle


@pytest.fixture
def clusters(sim: InProcessSimulator, team: Team) -> dict[str, Cluster]:
    rows = {c.name: c for c in load_fleet_rows(FLEET, api_url_base=sim.base_url)}
    Cluster.objects.filter(pk=rows[KUEUE].pk).update(admission="kueue",
                                                     kueue_queues={team.slug: "vision-q"})
    for row in rows.values():
        assert poll_cluster(cluster_id=row.pk).ok
    return rows


@pytest.fixture(autouse=True)
def eager(settings: Any) -> Iterator[None]:
    settings.RLARK_WEBHOOK_RETRY_BASE = 0
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    before = current_app.conf.task_always_eager
    current_app.conf.task_always_eager = True
    yield
    current_app.conf.task_always_eager = before


def _job(name: str, *, cluster: str, head: str, team: Team, owner: Any, admin: Any,
         gpus: int = 8) -> Job:
    selector = {"kubernetes.io/hostname": head, "topology.rlinf.io/cluster": cluster}
    approved(team=team, owner=owner, admin=admin, cluster=cluster, header=True,
             selector=selector)
    launch = LaunchList.objects.create(team=team, title=name, created_by=owner, image=IMAGE,
                                       entry="python -m rlinf.train",
                                       expected_signals=[EXPECTED_SIGNAL])
    parameters = DeploymentParameters.objects.create(team=team, title=name, created_by=owner,
                                                     launch_list=launch)
    job = job_create(team=team, user=owner, data={
        "name": name, "task_type": "custom", "header_role": "Actor",
        "roles": [{"name": "Actor", "cluster": cluster, "selector": selector, "gpus": gpus,
                   "image": IMAGE, "prepare_script": "source /opt/venv/bin/activate"}],
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


def _detail(api: APIClient, name: str, language: str = "en") -> dict[str, Any]:
    response = api.get(f"/api/v1/jobs/{name}/", HTTP_ACCEPT_LANGUAGE=language)
    assert response.status_code == 200
    return dict(response.json())


def _failed_scheduling(sim: InProcessSimulator, cluster: str, pod: str) -> str:
    events = list_events(credentials=sim.credentials(cluster), namespace=NS[cluster],
                         involved_name=pod, involved_kind="Pod")
    (message,) = {e.message for e in events if e.reason == "FailedScheduling"}
    return message


@pytest.fixture
def make(team: Team, owner: Any, admin_user: Any, api_client_for: Any,
         django_capture_on_commit_callbacks: Any) -> Any:
    api = api_client_for(owner)

    def submit(name: str, *, cluster: str = PLAIN, head: str = "p-head-01",
               gpus: int = 8) -> RunRecord:
        _job(name, cluster=cluster, head=head, team=team, owner=owner, admin=admin_user,
             gpus=gpus)
        return _submit(api, name, django_capture_on_commit_callbacks)

    page = Client()
    page.force_login(owner)
    submit.api = api  # type: ignore[attr-defined]
    submit.page = page  # type: ignore[attr-defined]
    return submit


def test_the_second_of_two_jobs_for_one_node_says_why_in_one_sentence(
        clusters: dict[str, Cluster], sim: InProcessSimulator, make: Any) -> None:
    make("first")
    sim.tick()
    sync_cluster(cluster=PLAIN)
    assert RunRecord.objects.get(job_name="first").state == JobState.RUNNING
    assert poll_cluster(cluster_id=clusters[PLAIN].pk).ok  # the first's pod holds 8 GPUs
    make("second")
    sim.tick()
    sync_cluster(cluster=PLAIN)

    assert _detail(make.api, "first")["pending"] is None
    waiting = _detail(make.api, "second")
    assert waiting["state"] == JobState.PENDING
    pending = waiting["pending"]
    assert pending["source"] == "scheduler"
    assert pending["summary"] == ("Actor: 1 of 1 worker waits for GPUs: p-head-01 has 0 of 8 "
                                  "free, 8 needed.")
    (role,) = pending["roles"]
    assert role["message"] == _failed_scheduling(sim, PLAIN, "second-actor-0")
    assert role["message"].startswith("0/3 nodes are available: ")
    assert (role["workers"], role["waiting"]) == (1, 1)
    assert role["attempts"] >= 1 and role["last_attempt_at"]  # the scheduler's event, counted
    assert role["short"] == [{"cluster": PLAIN, "node": "p-head-01", "resource": GPU,
                              "free": "0", "allocatable": "8", "needed": "8"}]
    assert pending["since"] is not None

    page = make.page.get("/jobs/job/second/")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="job-pending"' in text and "p-head-01 has 0 of 8 free, 8 needed" in text
    assert "0/3 nodes are available" in text
    assert "data-pending-attempts=" in text and "The scheduler tried" in text

    sim.set_job_phase(PLAIN, NS[PLAIN], "first", "Succeeded")  # the node is free again
    sim.tick()
    sync_cluster(cluster=PLAIN)
    sim.tick()
    sync_cluster(cluster=PLAIN)
    record = RunRecord.objects.get(job_name="second")
    assert record.state == JobState.RUNNING
    assert record.pending == {}
    assert _detail(make.api, "second")["pending"] is None


def test_a_foreign_pod_taking_half_a_node_makes_a_job_pending_with_the_right_sentence(
        clusters: dict[str, Cluster], sim: InProcessSimulator, make: Any) -> None:
    sim.add_pod(PLAIN, "someone-else", node="p-head-02", requests={GPU: 4})
    assert poll_cluster(cluster_id=clusters[PLAIN].pk).ok
    make("squeezed", head="p-head-02")
    sim.tick()
    sync_cluster(cluster=PLAIN)
    pending = _detail(make.api, "squeezed")["pending"]
    assert pending["source"] == "scheduler"
    assert pending["summary"] == ("Actor: 1 of 1 worker waits for GPUs: p-head-02 has 4 of 8 "
                                  "free, 8 needed.")
    assert "Insufficient nvidia.com/gpu" in pending["roles"][0]["message"]

    chinese = _detail(make.api, "squeezed", language="zh-hans")["pending"]
    assert chinese["summary"] == ("Actor：1 个工作进程中有 1 个在等待 GPU：p-head-02 有 8 个中的 "
                                  "4 个空闲，需要 8 个。")
    assert chinese["roles"] == pending["roles"]  # the cluster's words stay as they were


def test_a_kueue_queued_job_says_kueue_with_its_message_and_position(
        clusters: dict[str, Cluster], sim: InProcessSimulator, make: Any) -> None:
    make("first-q", cluster=KUEUE, head="q-head-01")
    sim.tick()
    sim.tick()
    make("second-q", cluster=KUEUE, head="q-head-02")
    sim.tick()
    sync_cluster(cluster=KUEUE)
    detail = _detail(make.api, "second-q")
    assert detail["state"] == JobState.PENDING
    pending, admission = detail["pending"], detail["admission"]
    assert pending["source"] == "kueue"
    assert admission["position"] == 1
    assert pending["queue"]["position"] == 1
    assert pending["summary"] == ("Waiting for Kueue to admit the job: position 1 in "
                                  "ClusterQueue vision-cq.")
    (role,) = pending["roles"]
    assert role["message"] == admission["message"]
    assert "insufficient unused quota for nvidia.com/gpu in flavor a100" in role["message"]
    assert role["short"] == []
    chinese = _detail(make.api, "second-q", language="zh-hans")["pending"]["summary"]
    assert chinese == "正在等待 Kueue 接纳该任务：在 ClusterQueue vision-cq 中排第 1 位。"


def test_the_pending_overdue_email_and_webhook_carry_the_sentence(
        clusters: dict[str, Cluster], sim: InProcessSimulator, make: Any, team: Team,
        owner: Any, member: Any, receiver: Receiver, django_capture_on_commit_callbacks: Any
) -> None:
    webhook_set(team=team, url=receiver.url, secret=SECRET, enabled=True)
    owner.email, member.email = "owner@example.com", "member@example.com"
    owner.save(update_fields=["email"])
    member.save(update_fields=["email"])
    preferences_set(user=owner, email_events=["pending_overdue"], language="zh-hans")
    preferences_set(user=member, email_events=["pending_overdue"], language="en")
    sim.add_pod(PLAIN, "someone-else", node="p-head-02", requests={GPU: 4})
    assert poll_cluster(cluster_id=clusters[PLAIN].pk).ok
    record = make("late", head="p-head-02")
    sim.tick()
    sync_cluster(cluster=PLAIN)
    RunRecord.objects.filter(pk=record.pk).update(
        pending_since=timezone.now() - timedelta(days=1))
    assert flag_overdue_pending() == 1
    with django_capture_on_commit_callbacks(execute=True):
        sync_cluster(cluster=PLAIN)
    sentence = "Actor: 1 of 1 worker waits for GPUs: p-head-02 has 4 of 8 free, 8 needed."
    (headers, body), = [item for item in receiver.received
                        if json.loads(item[1])["kind"] == EventKind.PENDING_OVERDUE]
    assert signature_ok(headers, body)
    payload = json.loads(body)
    assert payload["pending"]["summary"] == sentence
    assert payload["pending"]["source"] == "scheduler"
    assert "Insufficient nvidia.com/gpu" in payload["pending"]["roles"][0]["message"]
    assert "pending_facts" not in payload
    by_address = {m.to[0]: m.body for m in mail.outbox}
    assert sentence in by_address["member@example.com"]
    assert "p-head-02 有 8 个中的 4 个空闲" in by_address["owner@example.com"]
    listing = make.page.get("/jobs/", HTTP_ACCEPT_LANGUAGE="en").content.decode()
    assert 'data-flag="pending-too-long"' in listing and sentence in listing


def test_a_hostile_scheduler_message_is_bounded_and_stored_safely(
        clusters: dict[str, Cluster], sim: InProcessSimulator, make: Any) -> None:
    make("first")
    sim.tick()
    make("hostile")
    sim.tick()
    hostile = "0/3 nodes\x00 are \x1b[31mavailable\x07\r: " + "x" * (3 * 1024 * 1024)
    sim.patch_pod(PLAIN, NS[PLAIN], "hostile-actor-0", scheduler_message=hostile)
    report = sync_cluster(cluster=PLAIN)
    assert report.unreachable == 0
    stored = RunRecord.objects.get(job_name="hostile").pending
    (role,) = stored["roles"]
    assert role["message"].startswith("0/3 nodes are [31mavailable: xxx")
    assert len(role["message"]) == MESSAGE_MAX and role["message"].endswith("…")
    assert not any(ord(c) < 32 and c not in "\t\n" for c in role["message"])
    assert _detail(make.api, "hostile")["pending"]["roles"][0]["message"] == role["message"]
    page = make.page.get("/jobs/job/hostile/")
    assert page.status_code == 200 and "\x00" not in page.content.decode()


def _calls(sim: InProcessSimulator, since: int) -> Counter[str]:
    kinds: Counter[str] = Counter()
    for request in sim.requests(PLAIN)[since:]:
        path = request["path"].split("?")[0]
        kinds[f"{request['method']} {path}"] += 1
    return kinds


def test_the_status_pass_makes_no_per_job_cluster_calls(
        clusters: dict[str, Cluster], sim: InProcessSimulator, make: Any,
        django_assert_max_num_queries: Any) -> None:
    make("holder")
    sim.tick()
    sync_cluster(cluster=PLAIN)
    assert poll_cluster(cluster_id=clusters[PLAIN].pk).ok
    for index in range(1):
        make(f"wait-{index}")
    sim.tick()
    since = len(sim.requests(PLAIN))
    sync_cluster(cluster=PLAIN)
    one = _calls(sim, since)
    for index in range(1, 5):
        make(f"wait-{index}")
    sim.tick()
    sync_cluster(cluster=PLAIN)
    since = len(sim.requests(PLAIN))
    with django_assert_max_num_queries(40) as queries:
        sync_cluster(cluster=PLAIN)
    five = _calls(sim, since)
    assert five == one  # five Pending jobs cost the cluster what one did
    # the pods and the jobs of the namespace, and its FailedScheduling events (a pod waits)
    assert set(five) == {f"GET /api/v1/namespaces/{NS[PLAIN]}/pods",
                         f"GET /api/v1/namespaces/{NS[PLAIN]}/events",
                         "GET /apis/rlinf.io/v1alpha1/namespaces/rl-gpu-p/jobs"}
    assert five[f"GET /api/v1/namespaces/{NS[PLAIN]}/events"] == 1
    node_reads = [q for q in queries.captured_queries if '"clusters_node"' in q["sql"]]
    assert len(node_reads) == 1  # the inventory's nodes, once for all the Pending jobs
    explained = RunRecord.objects.filter(job_name__startswith="wait-")
    assert {r.pending["source"] for r in explained} == {"scheduler"}
