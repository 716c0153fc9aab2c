"""deploy/examples/*.yaml are what RLark renders for two demo jobs, through the real path.

The demo fleet is loaded as inventory rows, an admin approves the selectors, the drafts go
through the services, `jobs.context` and `jobs.core.render.build_manifest`; the result must equal
the shipped files byte for byte. Regenerate them with ``RLARK_UPDATE_EXAMPLES=1``.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from clusters.models import Cluster, NetworkDomain
from clusters.simulator.schema import JobSchema
from clusters.verifications.services import verification_approve, verification_request
from jobs.context import evaluate
from jobs.core.render import Manifest, build_manifest
from jobs.drafts.selectors import job_get_for_user
from jobs.drafts.services import job_create, ssh_key_create
from jobs.models import DeploymentParameters, LaunchList
from rlark_site.foundation.tenancy.models import Team
from tests.factories import REPO, confirmed_parameters, load_fleet_rows

pytestmark = pytest.mark.django_db

EXAMPLES = REPO / "deploy" / "examples"
UPDATE = os.environ.get("RLARK_UPDATE_EXAMPLES") == "1"
IMAGE = "registry.example.com/rlinf/rlinf@sha256:" + "3f" * 32
# A fixed key (ed25519, private bytes 0..31) so the example is reproducible.
DEMO_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAOhB7/zzhC+HXDdGOdLwJln5NYwm6UNXx3chmQSVTG4 alice@laptop"
)
PREPARE = "source /opt/venv/bin/activate"

HEAD = {"kubernetes.io/hostname": "a-head-01", "topology.rlinf.io/cluster": "gpu-a"}
POOL_A = {"rlinf.io/pool": "a100-a", "topology.rlinf.io/cluster": "gpu-a"}
ENV_C = {"rlinf.io/pool": "env-c"}
COLLECTOR = {"kubernetes.io/hostname": "c-env-01", "topology.rlinf.io/cluster": "cpu-c"}

RL_ROLES: list[dict[str, Any]] = [
    {
        "name": "Actor", "cluster": "gpu-a", "selector": HEAD, "gpus": 8,
        "devices": {"rlinf.io/rdma": 1},
        "cpu": {"request": "32", "limit": "64"}, "memory": {"request": "256Gi", "limit": "512Gi"},
        "image": IMAGE, "prepare_script": PREPARE,
        "env": [{"name": "HF_HOME", "value": "/mnt/models/hf"}],
        "mounts": [
            {"kind": "host_path", "source": "/data/models", "target": "/mnt/models"},
            {"kind": "object_storage", "storage_class": "s3-fuse", "target": "/mnt/ckpt"},
        ],
    },
    {
        "name": "Rollout", "cluster": "gpu-a", "selector": POOL_A, "gpus": 8,
        "devices": {"rlinf.io/rdma": 1},
        "image": IMAGE, "prepare_script": PREPARE,
        "env": [{"name": "HF_HOME", "value": "/mnt/models/hf"}],
        "mounts": [{"kind": "host_path", "source": "/data/models", "target": "/mnt/models"}],
    },
    {
        "name": "Environment", "cluster": "cpu-c", "selector": ENV_C, "gpus": 0,
        "devices": {"rlinf.io/sim-license": 1},
        "cpu": {"request": "8"}, "memory": {"request": "16Gi"},
        "image": IMAGE, "prepare_script": PREPARE,
    },
]


@pytest.fixture
def fleet(db: None) -> None:
    load_fleet_rows()
    domain = NetworkDomain.objects.create(name="gpu-a-cpu-c", description="RDMA-routed")
    domain.clusters.set(Cluster.objects.filter(name__in=["gpu-a", "cpu-c"]))


def approve(team: Team, user: Any, admin: Any, cluster: str, selector: dict[str, str],
            **confirm: Any) -> None:
    verification = verification_request(
        team=team, user=user, cluster=Cluster.objects.get(name=cluster), selector=selector,
        for_header_role="kubernetes.io/hostname" in selector,
        requested_host_paths=confirm.get("confirm_host_paths"),
    )
    verification_approve(verification_id=verification.pk, admin=admin, note="checked",
                         **confirm)


def records(team: Team, user: Any, launch_list_id: int, parameters_id: int) -> dict[str, int]:
    """The two linked records, with fixed ids (they are written into the manifest)."""
    launch_list = LaunchList.objects.create(pk=launch_list_id, team=team, title="example",
                                            created_by=user)
    DeploymentParameters.objects.create(pk=parameters_id, team=team, title="example",
                                        launch_list=launch_list, created_by=user)
    return {"launch_list": launch_list_id, "deployment_parameters": parameters_id}


def render(user: Any, name: str, admin: Any) -> Manifest:
    job = job_get_for_user(user, name)
    confirmed_parameters(job, admin=admin)
    evaluation = evaluate(job_get_for_user(user, name))
    errors = [f.as_dict() for f in evaluation.findings if f.severity == "error"]
    assert errors == []
    return build_manifest(evaluation.spec, evaluation.ctx)


def compare(manifest: Manifest, filename: str) -> None:
    path = EXAMPLES / filename
    if UPDATE:
        path.write_text(manifest.yaml, encoding="utf-8")
    admission = JobSchema().admit(manifest.data)
    assert admission.causes == [] and admission.unknown_fields == []
    assert path.read_text(encoding="utf-8") == manifest.yaml


def test_three_role_rl_example(fleet: None, team: Team, owner: Any, admin_user: Any) -> None:
    approve(team, owner, admin_user, "gpu-a", HEAD, confirm_host_paths=["/data/models"])
    approve(team, owner, admin_user, "gpu-a", POOL_A, confirm_host_paths=["/data/models"])
    approve(team, owner, admin_user, "cpu-c", ENV_C)
    ssh_key_create(team=team, user=owner, name="alice-laptop", public_key=DEMO_KEY)
    job_create(team=team, user=owner, data={
        "name": "ppo-math-7b", "task_type": "rl", "header_role": "Actor", "roles": RL_ROLES,
        "network_domain": "gpu-a-cpu-c", "ssh_keys": ["alice-laptop"],
        "run_script": "cd /workspace/rlinf && python -m rlinf.train --config ppo.yaml",
        "tensorboard_log_dir": "/mnt/ckpt/tb", **records(team, owner, 12, 7),
    })
    manifest = render(owner, "ppo-math-7b", admin_user)
    tasks = manifest.data["spec"]["tasks"]
    assert [(t["name"], t.get("head", False), t["replicas"]) for t in tasks] == [
        ("actor", True, 1), ("rollout", False, 12), ("environment", False, 10)]
    assert manifest.data["metadata"]["namespace"] == "rl-gpu-a"
    compare(manifest, "rl-3role.yaml")


def test_data_collection_example(fleet: None, team: Team, owner: Any, admin_user: Any) -> None:
    approve(team, owner, admin_user, "cpu-c", COLLECTOR)
    job_create(team=team, user=owner, data={
        "name": "collect-sim-traces", "task_type": "data_collection",
        "header_role": "Environment",
        "roles": [{
            "name": "Environment", "cluster": "cpu-c", "selector": COLLECTOR,
            "devices": {"rlinf.io/sim-license": 2}, "image": IMAGE, "prepare_script": PREPARE,
            "mounts": [{"kind": "object_storage", "storage_class": "nfs", "target": "/mnt/out",
                        "size": "100Gi"}],
        }],
        "run_script": "cd /workspace/collect && python collect.py --out /mnt/out",
        **records(team, owner, 21, 22),
    })
    manifest = render(owner, "collect-sim-traces", admin_user)
    assert [t["replicas"] for t in manifest.data["spec"]["tasks"]] == [1]
    assert manifest.data["metadata"]["namespace"] == "rl-cpu-c"
    compare(manifest, "data-collection.yaml")
