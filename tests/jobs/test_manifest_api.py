"""GET /api/v1/jobs/{name}/manifest/: the same bytes and X-Manifest-SHA256 for the same job,
in a bounded number of queries, and another team's job answers 404.

Regenerate the golden file after an intended change of the manifest with
``RLARK_UPDATE_GOLDEN=1 .venv/bin/pytest tests/jobs/test_manifest_api.py`` and review the diff.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from rest_framework.test import APIClient

from clusters.models import Cluster, NetworkDomain
from jobs.drafts.services import job_create, ssh_key_create
from jobs.models import DeploymentParameters, Job, LaunchList
from rlark_site.foundation.tenancy.models import Team
from tests.factories import confirmed_parameters, load_fleet_rows
from tests.jobs.fleet_context import ALICE_KEY
from tests.jobs.records_support import CPU_SELECTOR, HEAD_SELECTOR, IMAGE, approved
from tests.query_bounds import bounded_queries

pytestmark = pytest.mark.django_db

GOLDEN = Path(__file__).parent / "golden" / "api-manifest.yaml"
URL = "/api/v1/jobs/pinned/manifest/"
# The token, the job with its team, its roles, the team's SSH keys, its clusters, the rest of
# the engine's world in one (whether the name is taken, the launch list, the deployment
# parameters with their verifications, the network domains), the team's verifications, and two
# per distinct selector (clusters.matching), and the pre-flight's one for the matched nodes'
# capacity and occupancy (SPEC 15).
MANIFEST_QUERIES = 7 + 2 * 2 + 1


def _role(name: str, selector: dict[str, str], **extra: Any) -> dict[str, Any]:
    return {"name": name, "cluster": "gpu-a", "selector": selector, "image": IMAGE,
            "prepare_script": "source /opt/venv/bin/activate", **extra}


@pytest.fixture
def pinned(team: Team, owner: Any, admin_user: Any) -> Job:
    """A clean two-role job touching every input the manifest view loads: SSH keys, a network
    domain, environment, an object-storage mount, a launch list and confirmed parameters."""
    load_fleet_rows()
    approved(team=team, owner=owner, admin=admin_user, cluster="gpu-a", selector=HEAD_SELECTOR,
             header=True)
    approved(team=team, owner=owner, admin=admin_user, cluster="gpu-a", selector=CPU_SELECTOR)
    domain = NetworkDomain.objects.create(name="fabric-a")
    domain.clusters.set([Cluster.objects.get(name="gpu-a")])
    ssh_key_create(team=team, user=owner, name="alice", public_key=ALICE_KEY)
    launch_list = LaunchList.objects.create(team=team, title="pinned", created_by=owner,
                                            image=IMAGE)
    parameters = DeploymentParameters.objects.create(team=team, title="pinned",
                                                     created_by=owner, launch_list=launch_list)
    job = job_create(team=team, user=owner, data={
        "name": "pinned", "task_type": "custom", "header_role": "Actor",
        "roles": [
            _role("Actor", HEAD_SELECTOR, gpus=8, cpu={"request": "4", "limit": "8"},
                  env=[{"name": "HF_HOME", "value": "/mnt/ckpt/hf"}]),
            _role("Rollout", CPU_SELECTOR, memory={"request": "8Gi", "limit": "16Gi"},
                  mounts=[{"kind": "object_storage", "storage_class": "s3-fuse",
                           "target": "/mnt/ckpt"}]),
        ],
        "network_domain": "fabric-a", "ssh_keys": ["alice"],
        "run_script": "cd /workspace/rlinf && python -m rlinf.train --config ppo.yaml",
        "tensorboard_log_dir": "/mnt/ckpt/tb",
        "launch_list": launch_list.pk, "deployment_parameters": parameters.pk,
    })
    confirmed_parameters(job, admin=admin_user)
    return job


def expected_text(job: Job) -> str:
    """The golden manifest with this run's record ids (database sequences differ per run)."""
    golden = GOLDEN.read_text(encoding="utf-8")
    return golden.replace("@LAUNCH_LIST@", str(job.launch_list_id)).replace(
        "@PARAMETERS@", str(job.deployment_parameters_id))


def test_the_manifest_is_the_pinned_yaml_with_its_sha256(
    pinned: Job, owner: Any, api_client_for: Callable[[Any], APIClient]
) -> None:
    response = api_client_for(owner).get(URL)
    assert response.status_code == 200, response.content
    text = response.content.decode("utf-8")
    if os.environ.get("RLARK_UPDATE_GOLDEN"):
        for key, value, mark in (
            ("launch-list", pinned.launch_list_id, "@LAUNCH_LIST@"),
            ("deployment-parameters", pinned.deployment_parameters_id, "@PARAMETERS@"),
        ):
            text = text.replace(f"rlinf.io/{key}: '{value}'", f"rlinf.io/{key}: '{mark}'")
        GOLDEN.write_text(text, encoding="utf-8")
        text = expected_text(pinned)
    assert text == expected_text(pinned)
    assert response["X-Manifest-SHA256"] == hashlib.sha256(response.content).hexdigest()


def test_the_json_manifest_is_the_same_document_with_the_same_sha256(
    pinned: Job, owner: Any, api_client_for: Callable[[Any], APIClient]
) -> None:
    response = api_client_for(owner).get(URL, {"format": "json"})
    assert response.status_code == 200
    assert response.json() == yaml.safe_load(expected_text(pinned))
    assert response["X-Manifest-SHA256"] == hashlib.sha256(
        expected_text(pinned).encode("utf-8")).hexdigest()


def test_the_manifest_takes_a_bounded_number_of_queries(
    pinned: Job, owner: Any, api_client_for: Callable[[Any], APIClient]
) -> None:
    api = api_client_for(owner)
    with bounded_queries(exact=False)(MANIFEST_QUERIES):
        assert api.get(URL).status_code == 200


def test_another_teams_job_answers_404(
    pinned: Job, outsider: Any, api_client_for: Callable[[Any], APIClient]
) -> None:
    assert api_client_for(outsider).get(URL).status_code == 404
