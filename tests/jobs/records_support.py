"""Builders for the run-record, submission and status tests (real rows, real services)."""

from __future__ import annotations

from typing import Any

from clusters.credentials import encrypt
from clusters.models import Cluster, VerificationState
from clusters.verifications.services import verification_approve, verification_request
from jobs.drafts.services import job_create
from jobs.models import DeploymentParameters, Job, LaunchList, RunRecord
from rlark_site.foundation.tenancy.models import Team
from tests.factories import DEMO_FLEET, confirmed_parameters, load_fleet_rows

DIGEST = "sha256:" + "ab" * 32
IMAGE = f"registry.example.com/rlinf/rlinf@{DIGEST}"

HEAD_SELECTOR = {"kubernetes.io/hostname": "a-head-01", "topology.rlinf.io/cluster": "gpu-a"}
# Four ready CPU nodes of gpu-a: the simulator schedules them.
CPU_SELECTOR = {"rlinf.io/pool": "cpu-a", "topology.rlinf.io/cluster": "gpu-a"}
# Twelve a100 nodes of gpu-a, one of them NotReady: the simulator keeps the job Pending.
POOL_SELECTOR = {"rlinf.io/pool": "a100-a", "topology.rlinf.io/cluster": "gpu-a"}

EXPECTED_SIGNAL = {
    "signal": "first rollout batch with reward mean",
    "where": "Head Task log",
    "within_minutes": 20,
}


def run_record_for(job: Job, *, state: str, cluster: str = "gpu-a",
                   namespace: str = "rl-gpu-a", **fields: Any) -> RunRecord:
    """A run record in `state` written directly (no cluster call): the job reads as submitted."""
    return RunRecord.objects.create(
        team=job.team, job=job, job_name=job.name, cluster=cluster, namespace=namespace,
        manifest_yaml="", manifest_sha256="", frozen_by=job.created_by, state=state, **fields,
    )


def register_fleet(simulator: Any) -> list[Cluster]:
    """Cluster rows for every cluster the simulator serves, reachable with their tokens."""
    clusters = load_fleet_rows(DEMO_FLEET, api_url_base=simulator.base_url)
    for cluster in clusters:
        cluster.token_encrypted = encrypt(simulator.fleet.cluster(cluster.name).token or "")
        cluster.save(update_fields=["token_encrypted"])
    return clusters


def approved(
    *,
    team: Team,
    owner: Any,
    admin: Any,
    cluster: str,
    selector: dict[str, str],
    header: bool = False,
    gpu: int | None = None,
) -> int:
    verification = verification_request(
        team=team,
        user=owner,
        cluster=Cluster.objects.get(name=cluster),
        selector=selector,
        for_header_role=header,
        requested_gpu=gpu,
    )
    if verification.state == VerificationState.PENDING:
        verification_approve(verification_id=verification.pk, admin=admin, note="checked")
    return verification.pk


def role(name: str, selector: dict[str, str], *, gpus: int = 0) -> dict[str, Any]:
    return {
        "name": name,
        "cluster": "gpu-a",
        "selector": selector,
        "gpus": gpus,
        "image": IMAGE,
        "prepare_script": "source /opt/venv/bin/activate",
    }


def submittable_job(
    *,
    team: Team,
    owner: Any,
    admin: Any,
    name: str = "ppo-run",
    worker_selector: dict[str, str] = CPU_SELECTOR,
    confirm: bool = True,
) -> Job:
    """A two-role draft (Actor as Header on one node, Rollout on several) without errors: its
    deployment parameters are filled from it and confirmed by `admin` (with `confirm`; else
    they are as created: empty and pending)."""
    approved(
        team=team, owner=owner, admin=admin, cluster="gpu-a", selector=HEAD_SELECTOR, header=True
    )
    approved(team=team, owner=owner, admin=admin, cluster="gpu-a", selector=worker_selector)
    launch_list = LaunchList.objects.create(
        team=team,
        title=f"{name} launch list",
        created_by=owner,
        entry="python -m rlinf.train",
        expected_signals=[EXPECTED_SIGNAL],
        image=IMAGE,
    )
    parameters = DeploymentParameters.objects.create(
        team=team, title=f"{name} parameters", created_by=owner, launch_list=launch_list
    )
    job = job_create(
        team=team,
        user=owner,
        data={
            "name": name,
            "task_type": "custom",
            "header_role": "Actor",
            "roles": [role("Actor", HEAD_SELECTOR, gpus=8), role("Rollout", worker_selector)],
            "run_script": "cd /workspace/rlinf && python -m rlinf.train --config ppo.yaml",
            "launch_list": launch_list.pk,
            "deployment_parameters": parameters.pk,
        },
    )
    if confirm:
        confirmed_parameters(job, admin=admin)
    return job
