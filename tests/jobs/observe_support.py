"""A job submitted to the demo simulator and running there, for the observation tests."""

from __future__ import annotations

from typing import Any

from jobs.models import RunRecord
from jobs.records.submission import job_submit
from jobs.tasks import submit_run_record
from rlark_site.foundation.tenancy.models import Team
from tests.jobs.records_support import register_fleet, submittable_job

CLUSTER = "gpu-a"
NAMESPACE = "rl-gpu-a"
HEAD_POD = "ppo-run-actor-0"


def running_job(sim: Any, *, team: Team, owner: Any, admin: Any, capture: Any,
                name: str = "ppo-run") -> RunRecord:
    """Submit a two-role job and let the simulator start it."""
    register_fleet(sim)
    job = submittable_job(team=team, owner=owner, admin=admin, name=name)
    with capture(execute=False):
        record = job_submit(job=job, user=owner)
    submit_run_record.apply(args=[record.pk])
    sim.tick()
    return record
