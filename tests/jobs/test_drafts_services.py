"""Draft services: what is kept, what is refused, and what the audit trail records."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import translation
from pghistory.models import Events

from clusters.models import Cluster, ClusterJob
from jobs.drafts.services import job_create, job_delete, job_update
from jobs.models import DeploymentParameters, Job, JobState, LaunchList, Role
from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.tenancy.models import Team
from tests.jobs.records_support import run_record_for

pytestmark = pytest.mark.django_db


def test_create_without_roles_makes_the_types_initial_roles_empty(team: Team, owner: Any) -> None:
    job = job_create(team=team, user=owner, data={"name": "rl-job", "task_type": "rl"})
    roles = list(job.roles.all())
    assert [(r.name, r.position) for r in roles] == [
        ("Actor", 0), ("Rollout", 1), ("Environment", 2)]
    assert all(r.selector == [] and r.cluster == "" and r.gpus == 0 for r in roles)
    assert job.created_by == owner and job.state == JobState.DRAFT


def test_an_unknown_type_is_kept_with_no_initial_roles(team: Team, owner: Any) -> None:
    job = job_create(team=team, user=owner, data={"name": "odd", "task_type": "quantum"})
    assert job.task_type == "quantum"
    assert not job.roles.exists()


def test_selectors_and_devices_are_stored_as_pairs_in_the_given_order(
    team: Team, owner: Any
) -> None:
    role = {"name": "A", "selector": {"b": "2", "a": "1"}, "devices": [["rlinf.io/x", 1]],
            "cpu": {"request": "1", "limit": None}, "gpus": None}
    job = job_create(team=team, user=owner, data={"name": "pairs", "roles": [role]})
    stored = job.roles.get()
    assert stored.selector == [["b", "2"], ["a", "1"]]
    assert stored.devices == [["rlinf.io/x", 1]]
    assert stored.cpu == {"request": "1"}
    assert stored.gpus == 0  # null means "not given"


def test_a_name_used_by_a_job_on_a_cluster_is_refused(team: Team, owner: Any) -> None:
    cluster = Cluster.objects.create(name="gpu-a", namespace="rl-gpu-a", api_url="http://x")
    ClusterJob.objects.create(cluster=cluster, namespace="elsewhere", name="remote-run")
    with pytest.raises(ApplicationError) as refused:
        job_create(team=team, user=owner, data={"name": "remote-run"})
    assert refused.value.status_code == 400
    assert [f["code"] for f in refused.value.extra["findings"]] == ["job.name.taken"]
    assert not Job.objects.exists()


def test_a_taken_name_that_is_also_malformed_is_reported_as_taken(
    team: Team, other_team: Team, owner: Any, outsider: Any
) -> None:
    job_create(team=other_team, user=outsider, data={"name": "Not A Label"})
    with pytest.raises(ApplicationError) as refused:
        job_create(team=team, user=owner, data={"name": "Not A Label"})
    assert [f["code"] for f in refused.value.extra["findings"]] == ["job.name.taken"]


def test_update_keeps_the_name_and_replaces_roles_in_order(team: Team, owner: Any) -> None:
    job = job_create(team=team, user=owner, data={"name": "j", "task_type": "custom"})
    job = job_update(job=job, user=owner, partial=True,
                     data={"roles": [{"name": "B"}, {"name": "A"}], "header_role": "A"})
    assert [(r.name, r.position) for r in Role.objects.filter(job=job)] == [("B", 0), ("A", 1)]
    job = job_update(job=job, user=owner, partial=True, data={"roles": [{"name": "C"}]})
    assert list(Role.objects.filter(job=job).values_list("name", flat=True)) == ["C"]
    assert job.header_role == "A" and job.name == "j"


def test_a_job_cannot_move_to_another_team(team: Team, other_team: Team, owner: Any) -> None:
    job = job_create(team=team, user=owner, data={"name": "j"})
    with pytest.raises(ApplicationError):
        job_update(job=job, user=owner, partial=True, data={"team": "nlp-rl"})


def test_records_must_belong_to_the_team(team: Team, other_team: Team, owner: Any,
                                         outsider: Any) -> None:
    ours = LaunchList.objects.create(team=team, title="ours", created_by=owner)
    params = DeploymentParameters.objects.create(team=team, title="p", created_by=owner)
    job = job_create(team=team, user=owner, data={
        "name": "j", "launch_list": ours.pk, "deployment_parameters": params.pk})
    assert job.launch_list == ours and job.deployment_parameters == params
    theirs = DeploymentParameters.objects.create(team=other_team, title="t", created_by=outsider)
    with pytest.raises(ApplicationError) as refused:
        job_update(job=job, user=owner, partial=True, data={"deployment_parameters": theirs.pk})
    assert refused.value.extra == {"field": "deployment_parameters"}
    assert str(refused.value) == f"Deployment parameters {theirs.pk} not found."
    job = job_update(job=job, user=owner, partial=True, data={"launch_list": None})
    assert job.launch_list is None and job.deployment_parameters == params


def test_a_missing_record_is_named_in_the_user_s_language(team: Team, owner: Any) -> None:
    job = job_create(team=team, user=owner, data={"name": "j"})
    with translation.override("zh-hans"), pytest.raises(ApplicationError) as refused:
        job_update(job=job, user=owner, partial=True, data={"launch_list": 987654})
    assert str(refused.value) == "启动清单 987654 不存在。"


def test_only_drafts_are_deleted(team: Team, owner: Any) -> None:
    job = job_create(team=team, user=owner, data={"name": "j"})
    record = run_record_for(job, state=JobState.SUBMIT_FAILED)
    with pytest.raises(ApplicationError) as refused:
        job_delete(job=job)
    assert refused.value.status_code == 409
    record.delete()
    job_delete(job=Job.objects.get(pk=job.pk))
    assert not Job.objects.exists() and not Role.objects.exists()


def test_changes_are_audited_with_the_acting_user(team: Team, owner: Any) -> None:
    job = job_create(team=team, user=owner, data={"name": "audited"})
    events = Events.objects.filter(pgh_obj_model="jobs.Job", pgh_obj_id=str(job.pk))
    assert events.count() == 1
    assert events.get().pgh_context["user"] == owner.pk


def _role_events(job: Job, seen: set[str]) -> list[tuple[str, str, dict[str, Any] | None]]:
    """Role events of `job` not among `seen` (one test runs in one transaction: one now())."""
    rows = Events.objects.filter(pgh_obj_model="jobs.Role", pgh_data__job_id=job.pk)
    return [(e.pgh_label, e.pgh_data["name"], e.pgh_diff) for e in rows
            if e.pgh_slug not in seen]


def _three_roles(team: Team, owner: Any) -> Job:
    return job_create(team=team, user=owner, data={"name": "in-place", "roles": [
        {"name": "Actor", "gpus": 8}, {"name": "Rollout", "gpus": 4}, {"name": "Env"}]})


def _now() -> set[str]:
    return set(Events.objects.values_list("pgh_slug", flat=True))


def test_roles_are_saved_in_place_only_the_change_is_audited(team: Team, owner: Any) -> None:
    job = _three_roles(team, owner)
    before, ids = _now(), list(job.roles.values_list("pk", flat=True))
    job_update(job=job, user=owner, partial=True, data={"roles": [
        {"name": "Actor", "gpus": 8}, {"name": "Rollout", "gpus": 2}, {"name": "Env"}]})
    assert list(Role.objects.filter(job=job).values_list("pk", flat=True)) == ids
    assert _role_events(job, before) == [("update", "Rollout", {"gpus": [4, 2]})]


def test_a_rename_is_an_update_a_removal_a_delete_an_addition_an_insert(
    team: Team, owner: Any
) -> None:
    job = _three_roles(team, owner)
    before = _now()
    job_update(job=job, user=owner, partial=True, data={"roles": [
        {"name": "Actor", "gpus": 8}, {"name": "Env"}, {"name": "Critic"}]})
    assert sorted(_role_events(job, before), key=str) == sorted([
        ("delete", "Rollout", None), ("insert", "Critic", None),
        ("update", "Env", {"position": [2, 1]})], key=str)
    before = _now()
    job_update(job=job, user=owner, partial=True, data={"roles": [
        {"name": "Actor", "gpus": 8}, {"name": "Environment"}, {"name": "Critic"}]})
    assert _role_events(job, before) == [
        ("update", "Environment", {"name": ["Env", "Environment"]})]
    assert [(r.name, r.position) for r in Role.objects.filter(job=job)] == [
        ("Actor", 0), ("Environment", 1), ("Critic", 2)]


def test_reordered_roles_swap_positions_in_place(team: Team, owner: Any) -> None:
    job = _three_roles(team, owner)
    before = _now()
    job_update(job=job, user=owner, partial=True, data={"roles": [
        {"name": "Env"}, {"name": "Rollout", "gpus": 4}, {"name": "Actor", "gpus": 8}]})
    assert [(r.name, r.position) for r in Role.objects.filter(job=job)] == [
        ("Env", 0), ("Rollout", 1), ("Actor", 2)]
    assert sorted((n, d) for _, n, d in _role_events(job, before)) == [
        ("Actor", {"position": [0, 2]}), ("Env", {"position": [2, 0]})]
