"""Evicted and preempted causes (SPEC 16) end to end on the simulator over HTTP: the Rollout's
pod is evicted by its node's kubelet (`POST /_control/.../pods/{pod}/evict`) or preempted by
kube-scheduler (`.../preempt`), RLinf's teardown then kills the Actor (the Head Task prints
its ActorDiedError later), the Job fails; a real status pass finds the disruption as the run's
earliest cause, with the pod and the cluster's own line, on the job and run record APIs and
the job page."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.models import JobState, RunRecord
from jobs.records.status import sync_submitted_jobs
from tests.jobs.observe_support import CLUSTER, HEAD_POD, NAMESPACE
from tests.jobs.test_causes import eager, past_start_lines
from tests.jobs.test_observe_causes_rules import KILLED

pytestmark = pytest.mark.django_db
JOB = "ppo-run"
ROLLOUT_POD = "ppo-run-rollout-0"
__all__ = ["eager"]  # the cause tests' settings and eager Celery, used here too
EVICTION = ("The node was low on resource: memory. Threshold quantity: 100Mi, available: 12Mi. "
            "Container main was using 61Gi, request is 0, has larger consumption of memory.")
PREEMPTION = "default-scheduler: preempting to accommodate a higher priority pod"


def _disrupt(sim: Any, how: str) -> None:
    if how == "evicted":
        sim.evict_pod(CLUSTER, NAMESPACE, ROLLOUT_POD, resource="memory", threshold="100Mi",
                      available="12Mi", usage="61Gi")
    else:
        sim.preempt_pod(CLUSTER, NAMESPACE, ROLLOUT_POD, preemptor="urgent-eval-0")


@pytest.mark.parametrize(("how", "evidence"), [("evicted", EVICTION),
                                               ("preempted", PREEMPTION)])
def test_an_evicted_or_preempted_pod_is_the_cause_of_the_failed_run(
        how: str, evidence: str, running: RunRecord, demo_simulator: Any, owner: Any,
        api_client_for: Any, client: Any) -> None:
    sync_submitted_jobs()  # seen Running
    past_start_lines(demo_simulator, HEAD_POD, ROLLOUT_POD)
    _disrupt(demo_simulator, how)
    demo_simulator.advance_clock(1.1)  # the cluster's times are whole seconds: RLinf's
    # teardown comes later
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, HEAD_POD, [KILLED])
    demo_simulator.patch_pod(CLUSTER, NAMESPACE, HEAD_POD, phase="Failed",
                             terminated={"reason": "Error", "exitCode": 1})
    demo_simulator.set_job_phase(CLUSTER, NAMESPACE, JOB, "Failed")
    sync_submitted_jobs()

    record = RunRecord.objects.get(pk=running.pk)
    assert record.state == JobState.FAILED
    cause = record.cause
    assert (cause["tag"], cause["pod"]) == (how, ROLLOUT_POD)
    assert cause["evidence"].strip() == evidence
    at = datetime.fromisoformat(cause["at"].replace("Z", "+00:00"))
    assert abs((at - timezone.now()).total_seconds()) < 120  # the condition's time
    rollout = record.pod_attempts.get(pod_name=ROLLOUT_POD)
    assert (rollout.phase, rollout.failure_tag) == ("Failed", how)
    assert record.pod_attempts.get(pod_name=HEAD_POD).failure_tag == "ray_actor_died"

    api = api_client_for(owner)
    assert api.get(f"/api/v1/jobs/{JOB}/").json()["cause"] == cause
    assert api.get(f"/api/v1/run-records/{JOB}/").json()["cause"] == cause
    client.force_login(owner)
    page = client.get(reverse("jobs:job-detail", args=[JOB])).content.decode()
    assert f'id="run-cause" data-tag="{how}"' in page
    assert ROLLOUT_POD in page and evidence.split(":")[0] in page
