"""jobs.context: the one path from stored drafts to the engine's inputs."""

from __future__ import annotations

from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.inventory.selectors import cluster_inventory
from clusters.models import Cluster, ClusterJob, NetworkDomain, Node, StorageClass
from clusters.verifications.services import verification_approve, verification_request
from jobs.context import (
    check_context_for,
    evaluate,
    name_findings,
    parameters_view,
    spec_from_job,
)
from jobs.core.spec import EnvVar, Mount, ResourcePair
from jobs.drafts.selectors import job_get_for_user
from jobs.drafts.services import job_create, ssh_key_create
from jobs.models import DeploymentParameters, Job, JobState, LaunchList
from jobs.wizard.evaluation import BasicsInput, evaluate_basics, evaluate_draft
from jobs.wizard.selectors import cluster_offer
from rlark_site.foundation.tenancy.models import Team
from tests.factories import load_fleet_rows
from tests.jobs.records_support import run_record_for

pytestmark = pytest.mark.django_db

HEAD: dict[str, str] = {"kubernetes.io/hostname": "a-head-01",
                        "topology.rlinf.io/cluster": "gpu-a"}
POOL_A: dict[str, str] = {"rlinf.io/pool": "a100-a", "topology.rlinf.io/cluster": "gpu-a"}
ENV_C: dict[str, str] = {"rlinf.io/pool": "env-c"}
ROLES: list[dict[str, Any]] = [
    {"name": "Actor", "cluster": "gpu-a", "selector": HEAD},
    {"name": "Rollout", "cluster": "gpu-a", "selector": POOL_A},
    {"name": "Environment", "cluster": "cpu-c", "selector": ENV_C},
]
# evaluate(job) for a job fetched by job_get_for_user: the SSH keys, the clusters, the rest of
# the world (name taken, launch list, deployment parameters, network domains) in one, the
# verifications; clusters.matching takes at most three per distinct selector.
FIXED_QUERIES = 4
PER_SELECTOR_QUERIES = 3


def public_key(comment: str = "") -> str:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    line = key.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()
    return f"{line} {comment}".strip()


@pytest.fixture(autouse=True)
def fleet(db: None) -> list[Cluster]:
    return load_fleet_rows()


def make_job(team: Team, user: Any, name: str = "ppo", **data: Any) -> Job:
    return job_create(team=team, user=user, data={"name": name, "roles": ROLES, **data})


def test_spec_keeps_values_as_typed_and_resolves_ssh_keys(team: Team, owner: Any) -> None:
    line = public_key("alice@laptop")
    ssh_key_create(team=team, user=owner, name="alice", public_key=line)
    role = {"name": "Odd", "cluster": "gpu-a", "gpus": "eight",
            "selector": [["a", "1"], ["a", "2"]], "devices": {"rlinf.io/rdma": "two"},
            "cpu": {"request": 2, "limit": "4"}, "env": [{"name": "X", "value": "1"}],
            "mounts": [{"kind": "object_storage", "storage_class": "s3-fuse",
                        "target": "/mnt/c", "size": "10Gi"}]}
    job = make_job(team, owner, roles=[role], ssh_keys=["alice", "bob"])
    spec = spec_from_job(job)
    (r,) = spec.roles
    assert r.gpus == "eight"
    assert r.selector == (("a", "1"), ("a", "2"))
    assert r.devices == (("rlinf.io/rdma", "two"),)
    assert r.cpu == ResourcePair(request="2", limit="4")
    assert r.env == (EnvVar(name="X", value="1"),)
    assert r.mounts == (Mount(kind="object_storage", target="/mnt/c", storage_class="s3-fuse",
                              size="10Gi"),)
    assert spec.ssh_keys == (line,)
    assert spec.team == "vision-rl"
    ctx = check_context_for(spec, team=team, exclude_job_id=job.pk, ssh_key_names=["alice", "bob"])
    assert ctx.unknown_ssh_key_names == ("bob",)


def test_cluster_facts_list_storage_classes_and_devices_of_present_nodes(
    team: Team, owner: Any
) -> None:
    Node.objects.filter(cluster__name="cpu-c").exclude(name="c-env-01").update(gone=True)
    Node.objects.filter(name="c-env-01").update(devices={"rlinf.io/sim-license": 2,
                                                         "example.com/other": 1})
    Node.objects.create(cluster=Cluster.objects.get(name="cpu-c"), name="c-gone",
                        namespace="rl-cpu-c", devices={"rlinf.io/old": 1}, gone=True)
    ctx = check_context_for(spec_from_job(make_job(team, owner)), team=team)
    assert set(ctx.clusters) == {"gpu-a", "cpu-c"}
    assert ctx.clusters["gpu-a"].namespace == "rl-gpu-a"
    assert ctx.clusters["gpu-a"].storage_classes == {"s3-fuse", "local-nvme"}
    assert ctx.clusters["gpu-a"].device_names == {"rlinf.io/rdma"}
    assert ctx.clusters["cpu-c"].device_names == {"rlinf.io/sim-license"}


def test_matches_and_network_domains_are_loaded(team: Team, owner: Any) -> None:
    domain = NetworkDomain.objects.create(name="a-to-c")
    domain.clusters.set(Cluster.objects.filter(name__in=["gpu-a", "cpu-c"]))
    NetworkDomain.objects.create(name="empty")
    ctx = check_context_for(spec_from_job(make_job(team, owner)), team=team)
    assert ctx.match_for(POOL_A).count == 12
    assert ctx.match_for(HEAD).count == 1
    assert ctx.network_domains == {"a-to-c": {"gpu-a", "cpu-c"}, "empty": frozenset()}


def test_the_records_are_seen_as_their_models_show_them(
    team: Team, owner: Any, admin_user: Any, other_team: Team
) -> None:
    """The launch list's images, the job's deployment parameters (as `parameters_view` of the
    model) and how the two records point at each other, read in one statement."""
    cluster = Cluster.objects.get(name="gpu-a")
    verification = verification_request(team=team, user=owner, cluster=cluster, selector=POOL_A)
    verification_approve(verification_id=verification.pk, admin=admin_user, note="ok")
    launch_list = LaunchList.objects.create(team=team, title="l", created_by=owner,
                                            image="repo/img:1", role_images={"Actor": "repo/a:2"})
    parameters = DeploymentParameters.objects.create(
        team=team, title="p", created_by=owner, launch_list=launch_list, network_domain="x",
        roles=[{"role": "Actor", "cluster": "gpu-a", "gpus": 8.0}], storage_notes="a\r\nb",
        confirmation_note="n", confirmed_content={"record": {"k": [1, "2"]}},
        confirmation_stale_reasons=[{"part": "job", "field": "gpus"}],
    )
    parameters.verifications.set([verification])
    DeploymentParameters.objects.create(team=team, title="unlinked", created_by=owner)
    job = make_job(team, owner, launch_list=launch_list.pk, deployment_parameters=parameters.pk)
    ctx = check_context_for(spec_from_job(job), team=team, exclude_job_id=job.pk)
    assert ctx.parameters == parameters_view(DeploymentParameters.objects.get(pk=parameters.pk))
    assert ctx.parameters is not None and ctx.parameters.verification_ids == {verification.pk}
    assert ctx.launch_list_images is not None
    assert (ctx.launch_list_images.image, ctx.launch_list_images.role_images) == (
        "repo/img:1", (("Actor", "repo/a:2"),))
    assert (ctx.parameters_launch_list_id, ctx.launch_list_parameters_id) == (
        launch_list.pk, parameters.pk)

    # Another team's parameters are not read as the job's; where they point still is.
    foreign = DeploymentParameters.objects.create(team=other_team, title="f", created_by=owner)
    other_list = LaunchList.objects.create(team=team, title="o", created_by=owner)
    Job.objects.filter(pk=job.pk).update(deployment_parameters=foreign, launch_list=other_list)
    ctx = check_context_for(spec_from_job(Job.objects.get(pk=job.pk)), team=team)
    assert ctx.parameters is None
    assert (ctx.parameters_launch_list_id, ctx.launch_list_parameters_id) == (None, None)
    assert ctx.launch_list_images is not None and not ctx.launch_list_images.recorded
    parameters.launch_list = None
    parameters.save()
    DeploymentParameters.objects.filter(pk=foreign.pk).update(launch_list=launch_list)
    Job.objects.filter(pk=job.pk).update(launch_list=launch_list)
    ctx = check_context_for(spec_from_job(Job.objects.get(pk=job.pk)), team=team)
    assert (ctx.parameters_launch_list_id, ctx.launch_list_parameters_id) == (
        launch_list.pk, foreign.pk)

    Job.objects.filter(pk=job.pk).update(deployment_parameters=None, launch_list=None)
    ctx = check_context_for(spec_from_job(Job.objects.get(pk=job.pk)), team=team)
    assert (ctx.parameters, ctx.launch_list_images) == (None, None)
    assert (ctx.parameters_launch_list_id, ctx.launch_list_parameters_id) == (None, None)


def test_the_teams_own_verifications_are_loaded(
    team: Team, owner: Any, admin_user: Any, other_team: Team
) -> None:
    cluster = Cluster.objects.get(name="gpu-a")
    verification = verification_request(team=team, user=owner, cluster=cluster,
                                        selector=POOL_A)
    verification_approve(verification_id=verification.pk, admin=admin_user, note="ok")
    spec = spec_from_job(make_job(team, owner))
    view = check_context_for(spec, team=team).verification_for("gpu-a", POOL_A)
    assert view is not None and (view.id, view.state) == (verification.pk, "approved")
    assert check_context_for(spec, team=team).verification_for("gpu-a", HEAD) \
        is None
    assert check_context_for(spec, team=other_team).verifications == {}


def test_a_name_is_taken_by_another_job_or_a_foreign_cluster_job(
    team: Team, owner: Any
) -> None:
    job = make_job(team, owner, name="mine")
    spec = spec_from_job(job)
    assert check_context_for(spec, team=team, exclude_job_id=job.pk).taken_names == frozenset()
    assert check_context_for(spec, team=team).taken_names == {"mine"}  # as seen by a new draft
    gpu_a = Cluster.objects.get(name="gpu-a")
    remote = ClusterJob.objects.create(cluster=gpu_a, namespace="rl-gpu-a", name="mine")
    assert check_context_for(spec, team=team, exclude_job_id=job.pk).taken_names == {"mine"}
    run_record_for(job, state=JobState.RUNNING, cluster="gpu-a", namespace="rl-gpu-a")
    assert check_context_for(spec, team=team, exclude_job_id=job.pk).taken_names == frozenset()
    remote.namespace = "elsewhere"
    remote.save()
    assert check_context_for(spec, team=team, exclude_job_id=job.pk).taken_names == {"mine"}


def test_name_findings_speak_the_engines_codes() -> None:
    assert [f.code for f in name_findings("ok-name", taken=True)] == ["job.name.taken"]
    assert name_findings("ok-name", taken=False) == []
    assert [f.code for f in name_findings("Bad Name", taken=True)] == [
        "job.name.invalid", "job.name.taken"]


def test_evaluate_runs_the_engine(team: Team, owner: Any) -> None:
    make_job(team, owner, header_role="Actor")
    evaluation = evaluate(job_get_for_user(owner, "ppo"))
    spec, ctx, findings = evaluation
    assert spec.name == "ppo" and ctx.clusters
    assert evaluation.has_errors
    assert {"selector.unverified", "run_script.empty"} <= {f.code for f in findings}


def _evaluate_queries(user: Any, name: str) -> int:
    job = job_get_for_user(user, name)
    with CaptureQueriesContext(connection) as queries:
        evaluate(job)
    return len(queries)


def test_query_count_does_not_grow_with_jobs_or_nodes(
    team: Team, owner: Any, django_assert_max_num_queries: Any
) -> None:
    make_job(team, owner, ssh_keys=["nobody"])
    bound = FIXED_QUERIES + PER_SELECTOR_QUERIES * len(ROLES)
    with django_assert_max_num_queries(bound):
        evaluate(job_get_for_user(owner, "ppo"))
    before = _evaluate_queries(owner, "ppo")

    for i in range(60):
        make_job(team, owner, name=f"filler-{i}")
    cluster = Cluster.objects.get(name="gpu-a")
    Node.objects.bulk_create(
        Node(cluster=cluster, name=f"extra-{i:04d}", namespace="rl-gpu-a",
             labels={"rlinf.io/pool": "a100-a", "topology.rlinf.io/cluster": "gpu-a"},
             gpu=8, devices={"rlinf.io/rdma": 4, f"rlinf.io/dev-{i}": 1})
        for i in range(500)
    )
    ClusterJob.objects.bulk_create(
        ClusterJob(cluster=cluster, namespace="rl-gpu-a", name=f"remote-{i}") for i in range(200)
    )
    with django_assert_max_num_queries(bound):
        evaluation = evaluate(job_get_for_user(owner, "ppo"))
    assert evaluation.ctx.match_for(POOL_A).count == 512
    assert _evaluate_queries(owner, "ppo") == before


def test_evaluate_reads_the_team_ssh_keys_once(team: Team, owner: Any) -> None:
    make_job(team, owner, ssh_keys=["nobody"])
    job = job_get_for_user(owner, "ppo")
    with CaptureQueriesContext(connection) as queries:
        evaluation = evaluate(job)
    key_reads = [q["sql"] for q in queries.captured_queries if '"jobs_sshkey"' in q["sql"]]
    assert len(key_reads) == 1
    assert evaluation.ctx.unknown_ssh_key_names == ("nobody",)


def test_the_wizard_evaluations_read_the_team_ssh_keys_once(team: Team, owner: Any) -> None:
    make_job(team, owner, ssh_keys=["nobody"])
    job = job_get_for_user(owner, "ppo")
    for run in (
        lambda: evaluate_draft(job, role_index=0, role_body={"name": "actor"}),
        lambda: evaluate_basics(team=team, job=job, basics=BasicsInput(
            name="ppo", task_type=job.task_type, rows=((job.roles.all()[0].name, 0),),
            header_role=job.header_role)),
    ):
        with CaptureQueriesContext(connection) as queries:
            evaluation = run()
        assert len([q for q in queries.captured_queries if '"jobs_sshkey"' in q["sql"]]) == 1
        assert evaluation.ctx.unknown_ssh_key_names == ("nobody",)


def reported_devices(cluster: str) -> tuple[str, ...]:
    """The distinct rlinf.io/* resources the cluster's present nodes report, in the
    database's order (read here on their own, as the oracle)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT DISTINCT d.key FROM clusters_node n "
            "JOIN clusters_cluster c ON c.id = n.cluster_id, jsonb_object_keys(n.devices) d(key) "
            "WHERE c.name = %s AND NOT n.gone AND d.key LIKE 'rlinf.io/%%' ORDER BY d.key",
            [cluster])
        return tuple(key for (key,) in cursor.fetchall())


def test_the_evaluation_keeps_its_clusters_as_read_in_one_query(team: Team, owner: Any) -> None:
    """Storage classes and devices come in the database's order, as the wizard offers them, and
    match the separate reads they replace (the rules see the same sets)."""
    Node.objects.create(cluster=Cluster.objects.get(name="gpu-a"), name="a-gone",
                        namespace="rl-gpu-a", devices={"rlinf.io/old": 1}, gone=True)
    job = job_get_for_user(owner, make_job(team, owner).name)
    evaluation = evaluate(job)
    assert set(evaluation.inventory) == set(evaluation.ctx.clusters) == {"gpu-a", "cpu-c"}
    for name, row in evaluation.inventory.items():
        storage = StorageClass.objects.filter(cluster__name=name).order_by("name")
        assert row.storage_classes == tuple(storage.values_list("name", flat=True))
        assert row.device_names == reported_devices(name)
        assert evaluation.ctx.clusters[name].storage_classes == frozenset(row.storage_classes)
        assert cluster_offer(name, inventory=row) == cluster_offer(name)
    assert "rlinf.io/old" not in evaluation.inventory["gpu-a"].device_names
    assert cluster_inventory(["gpu-a", "no-such"]).keys() == {"gpu-a"}
    spec, ctx, findings = evaluation
    assert (spec, ctx, findings) == (evaluation.spec, evaluation.ctx, evaluation.findings)
