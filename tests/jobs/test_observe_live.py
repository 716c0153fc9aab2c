"""A submitted job's pods, events and logs, read live from the simulator: API and page
fragments, tenancy, and one cluster read per refresh interval however many watch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from jobs.models import RunRecord
from rlark_site.foundation.tenancy.models import Team
from tests.cache_support import OBSERVE_PREFIX, clear_prefix
from tests.jobs.observe_support import CLUSTER, HEAD_POD, NAMESPACE
from tests.jobs.records_support import submittable_job

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_cache(settings: Any) -> Iterator[None]:
    settings.RLARK_SUBMIT_RETRY_BASE = 0
    settings.RLARK_KUBE_TIMEOUT = 5.0
    settings.RLARK_OBSERVE_REFRESH = 60.0
    clear_prefix(OBSERVE_PREFIX)
    yield
    clear_prefix(OBSERVE_PREFIX)


def _requests(sim: Any, suffix: str) -> int:
    return sum(1 for r in sim.requests(CLUSTER) if r["path"].endswith(suffix))


def test_the_api_lists_each_tasks_pods(running: RunRecord, owner: Any,
                                       api_client_for: Any) -> None:
    answer = api_client_for(owner).get(reverse("api:job-pods", args=["ppo-run"]))
    assert answer.status_code == 200
    pods = {pod["name"]: pod for pod in answer.json()["pods"]}
    assert pods[HEAD_POD]["task"] == "actor"
    assert pods[HEAD_POD]["phase"] == "Running"
    assert pods[HEAD_POD]["node"] == "a-head-01"
    assert pods[HEAD_POD]["current"]["state"] == "running"
    assert answer.json()["error"] == ""


def test_events_are_the_jobs_and_its_pods_newest_first(
    running: RunRecord, demo_simulator: Any, owner: Any, api_client_for: Any
) -> None:
    demo_simulator.patch_pod(CLUSTER, NAMESPACE, HEAD_POD, phase="Failed",
                             terminated={"reason": "OOMKilled", "exitCode": 137})
    events = api_client_for(owner).get(reverse("api:job-events", args=["ppo-run"])).json()
    reasons = [(e["kind"], e["reason"]) for e in events["events"]]
    assert reasons[0] == ("Pod", "Failed")
    assert ("Job", "SuccessfulCreate") in reasons
    stamps = [e["last_at"] for e in events["events"]]
    assert stamps == sorted(stamps, reverse=True)


def test_another_team_and_an_unsubmitted_job_get_404(
    running: RunRecord, outsider: Any, owner: Any, team: Team, admin_user: Any,
    api_client_for: Any
) -> None:
    for view in ("api:job-pods", "api:job-events"):
        assert api_client_for(outsider).get(reverse(view, args=["ppo-run"])).status_code == 404
    log = reverse("api:job-pod-log", args=["ppo-run", HEAD_POD])
    assert api_client_for(outsider).get(log).status_code == 404
    submittable_job(team=team, owner=owner, admin=admin_user, name="draft-only")
    assert api_client_for(owner).get(reverse("api:job-pods", args=["draft-only"])).status_code \
        == 404


def test_the_log_api_reads_a_bounded_tail(running: RunRecord, demo_simulator: Any,
                                          owner: Any, api_client_for: Any) -> None:
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, HEAD_POD, ["one", "two", "three"])
    url = reverse("api:job-pod-log", args=["ppo-run", HEAD_POD])
    answer = api_client_for(owner).get(url, {"tail": 2})
    assert answer.status_code == 200
    assert answer.json() == {"pod": HEAD_POD, "previous": False, "text": "two\nthree\n",
                             "truncated": False}
    assert api_client_for(owner).get(url, {"tail": 0}).status_code == 400


def test_a_pod_of_another_job_is_not_found(running: RunRecord, demo_simulator: Any,
                                           owner: Any, api_client_for: Any) -> None:
    from clusters import k8s
    from clusters.simulator.testing import job_body, task_body

    task = task_body("x", replicas=1, selector={"rlinf.io/pool": "a100-a"})
    k8s.create_job(credentials=demo_simulator.credentials(CLUSTER), namespace=NAMESPACE,
                   body=job_body("stranger", tasks=[task]))
    demo_simulator.tick()
    url = reverse("api:job-pod-log", args=["ppo-run", "stranger-x-0"])
    assert api_client_for(owner).get(url).status_code == 404


def test_no_previous_container_is_a_conflict(running: RunRecord, owner: Any,
                                              api_client_for: Any) -> None:
    url = reverse("api:job-pod-log", args=["ppo-run", HEAD_POD])
    answer = api_client_for(owner).get(url, {"previous": "true"})
    assert answer.status_code == 409
    assert "previous terminated container" in answer.json()["detail"]


def test_many_watchers_cost_one_pods_and_one_events_read_per_interval(
    running: RunRecord, demo_simulator: Any, owner: Any, member: Any, api_client_for: Any
) -> None:
    pods_before = _requests(demo_simulator, "/pods")
    events_before = _requests(demo_simulator, "/events")
    clients = [Client(), Client()]
    clients[0].force_login(owner)
    clients[1].force_login(member)
    for _ in range(5):
        for client in clients:
            assert client.get(reverse("jobs:job-live", args=["ppo-run"])).status_code == 200
        api_client_for(owner).get(reverse("api:job-pods", args=["ppo-run"]))
    assert _requests(demo_simulator, "/pods") - pods_before == 1
    assert _requests(demo_simulator, "/events") - events_before == 1


def test_the_live_fragment_shows_pods_by_task_and_polls_while_active(
    running: RunRecord, client: Client, owner: Any
) -> None:
    client.force_login(owner)
    page = client.get(reverse("jobs:job-live", args=["ppo-run"])).content.decode()
    assert HEAD_POD in page and "a-head-01" in page
    assert 'hx-trigger="every 60s"' in page
    assert reverse("jobs:job-pod-log", args=["ppo-run", HEAD_POD]) in page
    assert f"kubectl -n {NAMESPACE} port-forward {HEAD_POD} 8265:8265" in page
    assert f"kubectl -n {NAMESPACE} exec -it {HEAD_POD} -c main -- bash" in page
    detail = client.get(reverse("jobs:job-detail", args=["ppo-run"])).content.decode()
    assert reverse("jobs:job-live", args=["ppo-run"]) in detail


def test_the_log_fragment_searches_follows_and_downloads(
    running: RunRecord, demo_simulator: Any, client: Client, owner: Any
) -> None:
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, HEAD_POD,
                                  ["step 1 reward=0.1", "noise", "step 2 reward=0.2"])
    client.force_login(owner)
    url = reverse("jobs:job-pod-log", args=["ppo-run", HEAD_POD])
    page = client.get(url, {"q": "REWARD", "follow": "1"}).content.decode()
    assert "<mark>step 1 reward=0.1</mark>" in page and "noise" not in page
    assert "2 matching lines" in page
    assert 'hx-trigger="every 60s"' in page
    download = client.get(url, {"download": "1", "tail": "1"})
    assert download["Content-Disposition"] == f'attachment; filename="{HEAD_POD}.log"'
    assert download.content == b"step 2 reward=0.2\n"


def test_a_log_asked_for_while_the_cluster_cannot_be_read_says_so_rather_than_404(
    running: RunRecord, demo_simulator: Any, client: Client, owner: Any, api_client_for: Any
) -> None:
    """The job's pods could not be listed (the shared snapshot holds the error for the
    interval): a log link answers the cluster's error in the panel (a 404 is swapped nowhere,
    the click would look lost) and the API a 503, as documented; an unknown pod is still 404."""
    demo_simulator.set_faults(CLUSTER, fail_next=1, fail_mode="error")  # the pods list
    client.force_login(owner)
    live = client.get(reverse("jobs:job-live", args=["ppo-run"])).content.decode()
    assert "The cluster could not be read" in live and f'data-pod="{HEAD_POD}"' not in live
    answer = client.get(reverse("jobs:job-pod-log", args=["ppo-run", HEAD_POD]))
    assert answer.status_code == 200
    page = answer.content.decode()
    assert "The cluster could not be read" in page and 'class="yaml log"' not in page
    api = api_client_for(owner).get(reverse("api:job-pod-log", args=["ppo-run", HEAD_POD]))
    assert api.status_code == 503
    demo_simulator.clear_faults(CLUSTER)
    clear_prefix(OBSERVE_PREFIX)
    assert client.get(reverse("jobs:job-pod-log", args=["ppo-run", "ppo-run-nope-0"])) \
        .status_code == 404
    assert "rlark: task actor replica 0" in client.get(
        reverse("jobs:job-pod-log", args=["ppo-run", HEAD_POD])).content.decode()


def test_a_followed_log_keeps_asking_a_cluster_that_could_not_be_read(
    running: RunRecord, demo_simulator: Any, client: Client, owner: Any
) -> None:
    """Following a log through a cluster error: the lines keep polling (the log comes back at
    the next interval by itself) and say so, in both languages; a download answers the
    cluster's error instead of an empty file; a pod without a previous container stops."""
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, HEAD_POD, ["step 9 reward=0.9"])
    client.force_login(owner)
    url = reverse("jobs:job-pod-log", args=["ppo-run", HEAD_POD])
    demo_simulator.set_faults(CLUSTER, fail_next=1, fail_mode="error")  # the pods list
    page = client.get(url, {"follow": "1"}).content.decode()
    assert "The cluster could not be read" in page and 'class="yaml log"' not in page
    assert 'hx-trigger="every 60s"' in page and "Tries again every 60 s." in page
    zh = client.get(url, {"follow": "1"}, headers={"accept-language": "zh-hans"})
    assert "每 60 秒重试一次。" in zh.content.decode()
    unfollowed = client.get(url).content.decode()
    assert "hx-trigger" not in unfollowed.split('id="pod-log-lines"')[1]
    assert "Tries again" not in unfollowed
    download = client.get(url, {"download": "1"})
    assert download.status_code == 503 and "Content-Disposition" not in download
    assert b"The cluster could not be read" in download.content
    demo_simulator.clear_faults(CLUSTER)
    clear_prefix(OBSERVE_PREFIX)
    again = client.get(url, {"follow": "1"}).content.decode()  # what the next poll gets
    assert "step 9 reward=0.9" in again and "could not be read" not in again
    previous = client.get(url, {"follow": "1", "previous": "true"}).content.decode()
    assert 'class="yaml log"' not in previous and "Tries again" not in previous
    assert "hx-trigger" not in previous.split('id="pod-log-lines"')[1]


def test_the_log_fragment_is_404_for_another_team(running: RunRecord, client: Client,
                                                 outsider: Any) -> None:
    client.force_login(outsider)
    assert client.get(reverse("jobs:job-pod-log", args=["ppo-run", HEAD_POD])).status_code \
        == 404


def test_the_job_list_polls_the_states_of_live_jobs(running: RunRecord, client: Client,
                                                    owner: Any) -> None:
    client.force_login(owner)
    page = client.get(reverse("jobs:list")).content.decode()
    assert 'id="state-ppo-run"' in page
    assert f'{reverse("jobs:job-states")}?style=list&amp;name=ppo-run' in page


def test_states_are_sent_out_of_band_for_the_users_own_jobs_only(
    running: RunRecord, demo_simulator: Any, client: Client, owner: Any, outsider: Any
) -> None:
    from jobs.records.status import sync_submitted_jobs

    sync_submitted_jobs()
    client.force_login(owner)
    answer = client.get(reverse("jobs:job-states"), {"name": ["ppo-run", "nope"],
                                                      "style": "page"}).content.decode()
    assert 'id="state-ppo-run" data-state="running" hx-swap-oob="true"' in answer
    assert "nope" not in answer
    client.force_login(outsider)
    assert "ppo-run" not in client.get(reverse("jobs:job-states"),
                                       {"name": "ppo-run"}).content.decode()


def test_the_job_page_follows_its_state_and_counts_pods(running: RunRecord, client: Client,
                                                        owner: Any) -> None:
    client.force_login(owner)
    page = client.get(reverse("jobs:job-detail", args=["ppo-run"])).content.decode()
    assert f'{reverse("jobs:job-states")}?style=page&amp;name=ppo-run' in page
    live = client.get(reverse("jobs:job-live", args=["ppo-run"])).content.decode()
    assert "Running: " in live and "pods in all" in live


def test_clearing_the_observe_keys_leaves_other_keys_alone() -> None:
    from django.core.cache import cache

    cache.set("observe:snapshot:test-owned", 1, timeout=60)
    cache.set("observe:log:test-owned:a:1", 2, timeout=60)
    cache.set("throttle_test_not_owned", 3, timeout=60)
    try:
        assert clear_prefix(OBSERVE_PREFIX) >= 2
        assert cache.get_many(["observe:snapshot:test-owned", "observe:log:test-owned:a:1"]) == {}
        assert cache.get("throttle_test_not_owned") == 3
    finally:
        cache.delete("throttle_test_not_owned")
