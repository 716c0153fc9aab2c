"""The admin queue's capacity panel (SPEC 15, issue #21), through the real page on the demo
fleet served by the simulator and polled over HTTP: per role of the draft a request was asked
for, the pre-flight's verdict, how many matched nodes hold a worker now and ever, the nodes
short and by how much, and the occupancy poll it read; never stale from the panel cache (a
foreign pod counted by the next poll shows at once); in both languages; and a page's queries
do not grow with its requests."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from clusters.inventory.services import PollOutcome, cluster_create, poll_cluster
from clusters.models import Cluster, Verification
from clusters.verifications.services import verification_request
from jobs.drafts.services import job_create
from jobs.models import Job
from tests.jobs.records_support import HEAD_SELECTOR, role

pytestmark = pytest.mark.django_db

QUEUE = "/clusters/verifications/queue/"
H100_B = {"rlinf.io/pool": "h100-b"}  # b-node-01..12, 8 GPUs each; b-node-03 has 4 free
A100_B = {"rlinf.io/pool": "a100-b"}  # b-node-13..16, 4 GPUs each


@pytest.fixture
def polled(demo_simulator: Any, django_capture_on_commit_callbacks: Any) -> Any:
    for spec in demo_simulator.fleet.clusters:
        cluster = cluster_create(
            name=spec.name, namespace=spec.namespace, api_url=demo_simulator.cluster_url(spec.name),
            token=spec.token or "", verify_tls=False,
        )
        with django_capture_on_commit_callbacks(execute=True):
            assert poll_cluster(cluster_id=cluster.pk).outcome == PollOutcome.OK
    return demo_simulator


def poll(name: str) -> None:
    assert poll_cluster(cluster_id=Cluster.objects.get(name=name).pk).outcome == PollOutcome.OK


def draft(team: Any, owner: Any, name: str, selector: dict[str, str], gpus: int) -> Job:
    return job_create(team=team, user=owner, data={
        "name": name, "task_type": "custom", "header_role": "Actor",
        "roles": [role("Actor", HEAD_SELECTOR, gpus=8),
                  {**role("Rollout", selector, gpus=gpus), "cluster": "gpu-b"}],
        "run_script": "python -m rlinf.train",
    })


def asked_for(job: Job, owner: Any, selector: dict[str, str], gpus: int) -> Verification:
    return verification_request(team=job.team, user=owner, cluster=Cluster.objects.get(
        name="gpu-b"), selector=selector, requested_gpu=gpus, job_name=job.name,
        role_name="Rollout")


def logged_in(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def capacity_of(page: str, verification: Verification) -> str:
    panel = page.split(f'id="verification-{verification.pk}"')[1].split("</article>")[0]
    return panel.split('<section class="capacity-panel"')[1].split("</section>")[0]


def role_row(capacity: str, job: str, name: str) -> str:
    table = capacity.split(f'data-job="{job}"')[1].split("</table>")[0]
    return table.split(f'<tr data-role="{name}"')[1].split("</tr>")[0]


def test_the_panel_shows_each_roles_verdict_counts_shortfalls_and_as_of(
    polled: Any, team: Any, owner: Any, admin_user: Any, private_cache: None,
) -> None:
    job = draft(team, owner, "ppo-h100", H100_B, gpus=8)
    verification = asked_for(job, owner, H100_B, 8)
    client = logged_in(admin_user)
    capacity = capacity_of(client.get(QUEUE).content.decode(), verification)

    # The request itself: 8 GPUs per worker on its 12 matched nodes, b-node-03 has 4 free.
    assert 'data-verdict="will_queue"' in capacity.split('<table')[0]
    assert "11 of 12 fit now, 12 ever" in capacity
    as_of = Cluster.objects.get(name="gpu-b").occupancy_as_of
    assert as_of is not None
    assert f"occupancy as of {as_of:%Y-%m-%d %H:%M:%S}" in capacity

    rollout = role_row(capacity, "ppo-h100", "Rollout")
    assert 'data-verdict="will_queue"' in rollout and "this request" in rollout
    assert '<td class="fits-now">11</td><td class="fits-ever">12</td>' in rollout
    assert "b-node-03: 4 of 8 nvidia.com/gpu free, 8 needed (short by 4)" in rollout
    assert f"{as_of:%Y-%m-%d %H:%M:%S}" in rollout
    actor = role_row(capacity, "ppo-h100", "Actor")
    assert 'data-verdict="fits_now"' in actor and "this request" not in actor
    assert 'data-job="ppo-h100" data-verdict="will_queue"' in capacity

    # A role asking more than any matched node holds can never fit.
    never = draft(team, owner, "ppo-a100", A100_B, gpus=8)
    Verification.objects.filter(pk=verification.pk).update(requested_for_job=never.name)
    rollout = role_row(capacity_of(client.get(QUEUE).content.decode(), verification),
                       "ppo-a100", "Rollout")
    assert 'data-verdict="never_fits"' in rollout
    assert '<td class="fits-now">0</td><td class="fits-ever">0</td>' in rollout
    assert "b-node-13: 4 of 4 nvidia.com/gpu free, 8 needed (short by 4)" in rollout


def test_the_panel_follows_the_next_occupancy_poll_though_the_panel_is_cached(
    polled: Any, team: Any, owner: Any, admin_user: Any, private_cache: None,
) -> None:
    job = draft(team, owner, "ppo-h100", H100_B, gpus=8)
    verification = asked_for(job, owner, H100_B, 8)
    client = logged_in(admin_user)
    before = capacity_of(client.get(QUEUE).content.decode(), verification)
    assert "11 of 12 fit now" in before

    polled.add_pod("gpu-b", "foreign-trainer", node="b-node-05",
                   requests={"nvidia.com/gpu": 6})
    poll("gpu-b")
    page = client.get(QUEUE).content.decode()
    after = capacity_of(page, verification)
    assert "10 of 12 fit now, 12 ever" in after
    rollout = role_row(after, "ppo-h100", "Rollout")
    assert "b-node-05: 2 of 8 nvidia.com/gpu free, 8 needed (short by 6)" in rollout
    as_of = Cluster.objects.get(name="gpu-b").occupancy_as_of
    assert f"occupancy as of {as_of:%Y-%m-%d %H:%M:%S}" in after

    # The job's roles change: the panel follows at once, too.
    job.roles.filter(name="Rollout").update(gpus=2)
    rollout = role_row(capacity_of(client.get(QUEUE).content.decode(), verification),
                       "ppo-h100", "Rollout")
    assert 'data-verdict="fits_now"' in rollout and "12</td><td class=\"fits-ever\">12" in rollout


def test_the_panel_in_chinese(
    polled: Any, team: Any, owner: Any, admin_user: Any, private_cache: None,
) -> None:
    job = draft(team, owner, "ppo-h100", H100_B, gpus=8)
    verification = asked_for(job, owner, H100_B, 8)
    page = logged_in(admin_user).get(QUEUE, HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    capacity = capacity_of(page, verification)
    assert "能否运行？当前容量" in capacity
    assert "b-node-03：nvidia.com/gpu 空闲 4 / 可分配 8，需要 8（缺 4）" in capacity
    assert "本请求" in capacity and "Will it run?" not in capacity


def test_the_queues_queries_do_not_grow_with_its_requests_and_their_jobs(
    polled: Any, team: Any, owner: Any, admin_user: Any, private_cache: None,
) -> None:
    client = logged_in(admin_user)
    first = asked_for(draft(team, owner, "ppo-0", H100_B, gpus=8), owner, H100_B, 8)
    with CaptureQueriesContext(connection) as one:
        page = client.get(QUEUE).content.decode()
    assert 'data-job="ppo-0"' in capacity_of(page, first)

    others = [
        asked_for(draft(team, owner, "ppo-1", A100_B, gpus=4), owner, A100_B, 4),
        asked_for(draft(team, owner, "ppo-2", {"rlinf.io/pool": "h100-b",
                                               "rlinf.io/zone": "zone-2"}, gpus=2), owner,
                  {"rlinf.io/pool": "h100-b", "rlinf.io/zone": "zone-2"}, 2),
    ]
    with CaptureQueriesContext(connection) as many:
        page = client.get(QUEUE).content.decode()
    for index, verification in enumerate([first, *others]):
        assert f'data-job="ppo-{index}"' in capacity_of(page, verification)
    # The queue reads each distinct selector's condition clusters once (`result_inputs`,
    # before the capacity panel); everything else, the capacity panels' reads included (the
    # requests' and their jobs' selectors one statement each), stays as for one request.
    def counted(queries: CaptureQueriesContext) -> tuple[list[str], int, int]:
        sql = [q["sql"] for q in queries.captured_queries]
        capacity = [q for q in sql if "WITH ORDINALITY AS s(selector, position)" in q]
        conditions = [q for q in sql if "AS cond(k, v)" in q and q not in capacity]
        return ([q for q in sql if q not in conditions and q not in capacity], len(conditions),
                len(capacity))

    rest_one, conditions_one, capacity_one = counted(one)
    rest_many, conditions_many, capacity_many = counted(many)
    assert (conditions_one, conditions_many) == (1, 3)
    assert capacity_one == capacity_many == 2
    assert len(rest_many) <= len(rest_one), [q[:120] for q in rest_many]
    assert len(re.findall(r'<section class="capacity-panel"', page)) == 3


def test_a_job_above_its_kueue_quota_never_fits_in_the_panel_as_in_the_job_detail(
    polled: Any, team: Any, owner: Any, admin_user: Any, private_cache: None,
    api_client_for: Any,
) -> None:
    """gpu-b admits through Kueue (the demo's ClusterQueues: 16 GPUs and 8 to borrow); a job
    of 13 workers of 8 GPUs there (104) can never be admitted. The panel judges the job with
    the matched nodes' namespace, as the job detail does, so it finds the team's LocalQueue
    and says never_fits (it said will_queue: the nodes' namespace was lost, no queue found)."""
    Cluster.objects.filter(name="gpu-b").update(
        admission="kueue", kueue_queues={team.slug: "vision-rl-queue"})
    poll("gpu-b")
    head = {"kubernetes.io/hostname": "b-node-01", "topology.rlinf.io/cluster": "gpu-b"}
    job = job_create(team=team, user=owner, data={
        "name": "greedy", "task_type": "custom", "header_role": "Actor",
        "roles": [{**role("Actor", head, gpus=8), "cluster": "gpu-b"},
                  {**role("Rollout", H100_B, gpus=8), "cluster": "gpu-b"}],
        "run_script": "python -m rlinf.train",
    })
    detail = api_client_for(owner).get("/api/v1/jobs/greedy/").json()
    assert detail["capacity"]["verdict"] == "never_fits"
    assert "admission.exceeds_quota" in [f["code"] for f in detail["findings"]]

    verification = asked_for(job, owner, H100_B, 8)
    capacity = capacity_of(logged_in(admin_user).get(QUEUE).content.decode(), verification)
    assert 'data-job="greedy" data-verdict="never_fits"' in capacity
    rollout = role_row(capacity, "greedy", "Rollout")
    assert 'data-verdict="will_queue"' in rollout  # the role alone waits for b-node-03
