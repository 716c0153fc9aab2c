"""Job files through the API on the simulator-backed demo fleet: export, apply under another
name (the same manifest apart from the name), idempotent apply, a submitted job refused,
validate stores nothing, clone, sweep, verify, the version header, and another team's names
answering 404 on every new route."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml
from django.apps import apps
from rest_framework.test import APIClient

from jobs.models import Job, JobState, RunRecord
from rlark_site.foundation.tenancy.models import Team
from tests.jobs.jobfile_support import (
    APPLY,
    SCHEMA,
    SWEEP,
    VALIDATE,
    post_file,
    renamed_manifest,
)
from tests.jobs.records_support import register_fleet, run_record_for, submittable_job

pytestmark = pytest.mark.django_db
Api = Callable[[Any], APIClient]


def _audit_rows() -> int:
    return sum(apps.get_model("jobs", name).objects.count() for name in ("JobEvent", "RoleEvent"))


@pytest.fixture
def clean(demo_simulator: Any, team: Team, owner: Any, admin_user: Any) -> Job:
    """A two-role draft without errors, on the demo fleet served by the simulator."""
    register_fleet(demo_simulator)
    return submittable_job(team=team, owner=owner, admin=admin_user, name="ppo-base")


def _exported(api: APIClient, name: str = "ppo-base") -> str:
    response = api.get(f"/api/v1/jobs/{name}/job-file/")
    assert response.status_code == 200, response.content
    return str(response.content.decode())


def _renamed(text: str, name: str) -> str:
    document = yaml.safe_load(text)
    document["metadata"]["name"] = name
    return yaml.safe_dump(document, sort_keys=False)


def test_export_then_apply_under_another_name_gives_the_same_manifest(
    clean: Job, owner: Any, api_client_for: Api
) -> None:
    api = api_client_for(owner)
    applied = post_file(api, APPLY, _renamed(_exported(api), "ppo-copy"))
    assert applied.status_code == 201, applied.content
    assert applied.json()["action"] == "created" and not applied.json()["has_errors"]
    old = api.get("/api/v1/jobs/ppo-base/manifest/")
    new = api.get("/api/v1/jobs/ppo-copy/manifest/")
    assert old.status_code == new.status_code == 200, (old.content, new.content)
    assert new.content.decode() == renamed_manifest(old.content.decode(), old="ppo-base",
                                                    new="ppo-copy")


def test_the_export_is_deterministic_and_valid_against_the_schema(
    clean: Job, owner: Any, api_client_for: Api
) -> None:
    from jsonschema import Draft202012Validator

    api = api_client_for(owner)
    text = _exported(api)
    assert text == _exported(api)
    assert text.startswith("# yaml-language-server: $schema=http://testserver/api/v1/"
                           "job-file-schema/\n")
    schema = api.get(SCHEMA).json()
    assert not list(Draft202012Validator(schema).iter_errors(yaml.safe_load(text)))
    assert api.get("/api/v1/jobs/ppo-base/job-file/", {"format": "json"}).json() == \
        yaml.safe_load(text)


def test_the_schema_is_public_and_refuses_unknown_keys(clean: Job) -> None:
    from jsonschema import Draft202012Validator

    schema = APIClient().get(SCHEMA).json()
    bad = {"apiVersion": "rlark.io/v1", "kind": "Job", "metadata": {"name": "x"},
           "spec": {"roles": [{"name": "A", "gpu": 1}]}}
    errors = list(Draft202012Validator(schema).iter_errors(bad))
    assert [e.validator for e in errors] == ["additionalProperties"]


def test_a_second_apply_of_the_same_file_writes_nothing(
    clean: Job, owner: Any, api_client_for: Api
) -> None:
    api = api_client_for(owner)
    text = _renamed(_exported(api), "ppo-twice")
    assert post_file(api, APPLY, text).json()["action"] == "created"
    before = (_audit_rows(), Job.objects.get(name="ppo-twice").updated_at)
    again = post_file(api, APPLY, text)
    assert again.status_code == 200
    assert (again.json()["action"], again.json()["changes"]) == ("unchanged", [])
    assert (_audit_rows(), Job.objects.get(name="ppo-twice").updated_at) == before


def test_apply_updates_the_draft_and_lists_what_changed(
    clean: Job, owner: Any, api_client_for: Api
) -> None:
    api = api_client_for(owner)
    changed = _exported(api).replace("gpus: 8", "gpus: 4")
    dry = post_file(api, APPLY, changed, dry_run="true")
    assert dry.status_code == 200 and dry.json()["dry_run"] is True
    assert dry.json()["changes"] == [
        {"path": "spec.roles[0].gpus", "change": "changed", "from": 8, "to": 4}]
    assert clean.roles.get(name="Actor").gpus == 8  # the dry run stored nothing
    done = post_file(api, APPLY, changed)
    assert (done.status_code, done.json()["action"]) == (200, "updated")
    assert clean.roles.get(name="Actor").gpus == 4
    assert "deployment_parameters.gpus_mismatch" in [f["code"] for f in done.json()["findings"]]


def test_apply_to_a_submitted_job_is_refused(clean: Job, owner: Any, api_client_for: Api) -> None:
    api = api_client_for(owner)
    text = _exported(api)
    run_record_for(clean, state=JobState.RUNNING)
    refused = post_file(api, APPLY, text.replace("gpus: 8", "gpus: 4"))
    assert refused.status_code == 409
    assert refused.json()["state"] == "running" and refused.json()["changes"][0]["path"] == \
        "spec.roles[0].gpus"
    assert clean.roles.get(name="Actor").gpus == 8
    same = post_file(api, APPLY, text)
    assert (same.status_code, same.json()["action"], same.json()["state"]) == (
        200, "unchanged", "running")


def test_validate_answers_findings_and_stores_nothing(
    clean: Job, owner: Any, api_client_for: Api
) -> None:
    api = api_client_for(owner)
    jobs, rows = Job.objects.count(), _audit_rows()
    text = _renamed(_exported(api), "ppo-new").replace("gpus: 8", "gpus: eight")
    answer = post_file(api, VALIDATE, text)
    assert answer.status_code == 200, answer.content
    assert answer.json()["has_errors"] is True
    assert "gpu.invalid" in [f["code"] for f in answer.json()["findings"]]
    assert (Job.objects.count(), _audit_rows()) == (jobs, rows)
    own = post_file(api, VALIDATE, _exported(api))  # its own name is not "taken" by itself
    assert own.json() == {"name": "ppo-base", "team": "vision-rl", "findings": [],
                          "has_errors": False}


def test_a_bad_file_is_refused_with_its_place_and_nothing_is_stored(
    clean: Job, owner: Any, api_client_for: Api
) -> None:
    api = api_client_for(owner)
    jobs = Job.objects.count()
    text = _renamed(_exported(api), "ppo-bad").replace("gpus: 8", "gpu: 8")
    for url in (APPLY, VALIDATE):
        answer = post_file(api, url, text)
        assert answer.status_code == 400, answer.content
        problem = answer.json()["problems"][0]
        assert (problem["code"], problem["path"], problem["suggestion"]) == (
            "schema.unknown_key", "spec.roles[0].gpu", "gpus")
        assert answer.json()["detail"].startswith(f"line {problem['line']}, column ")
    too_big = post_file(api, APPLY, b"# x\n" * 70_000)
    assert too_big.status_code == 413 and too_big.json()["problems"][0]["code"] == \
        "file.too_large"
    nul = post_file(api, APPLY, b"apiVersion: rlark.io/v1\x00\n")
    assert nul.status_code == 400 and nul.json()["problems"][0]["code"] == "file.nul"
    assert Job.objects.count() == jobs


def test_another_teams_names_answer_404_on_every_new_route(
    clean: Job, outsider: Any, owner: Any, api_client_for: Api
) -> None:
    mine = _exported(api_client_for(owner))
    api = api_client_for(outsider)
    assert api.get("/api/v1/jobs/ppo-base/job-file/").status_code == 404
    assert api.post("/api/v1/jobs/ppo-base/clone/", {"name": "x-1"}, format="json"
                    ).status_code == 404
    assert api.post("/api/v1/jobs/ppo-base/verify/").status_code == 404
    theirs = mine.replace("team: vision-rl", "team: nlp-rl")  # the name is vision-rl's job
    for url in (APPLY, VALIDATE):
        assert post_file(api, url, theirs).status_code == 404, url
    for url in (APPLY, VALIDATE, SWEEP):  # a team that is not theirs
        assert post_file(api, url, mine, grid="run_script=a").status_code == 404, url
    assert clean.roles.get(name="Actor").gpus == 8 and Job.objects.count() == 1


def test_clone_with_overrides_makes_a_typed_new_draft(
    clean: Job, owner: Any, api_client_for: Api
) -> None:
    api = api_client_for(owner)
    answer = api.post("/api/v1/jobs/ppo-base/clone/", {
        "name": "ppo-lr", "set": ["roles.Rollout.gpus=0", "roles.Actor.env.LR=3e-4",
                                  "run_script=cd /w && python b.py"]}, format="json")
    assert answer.status_code == 201, answer.content
    assert answer.json()["overrides"] == [
        {"path": "spec.roles[1].gpus", "value": 0},
        {"path": "spec.roles[0].env.LR", "value": "3e-4"},
        {"path": "spec.run_script", "value": "cd /w && python b.py"}]
    job = Job.objects.get(name="ppo-lr")
    assert job.roles.get(name="Actor").env == [{"name": "LR", "value": "3e-4"}]
    assert job.run_script == "cd /w && python b.py"
    assert answer.json()["source"] == {"name": "ppo-base", "state": "draft"}


def test_clone_refuses_a_bad_path_with_the_nearest_key(
    clean: Job, owner: Any, api_client_for: Api
) -> None:
    api = api_client_for(owner)
    answer = api.post("/api/v1/jobs/ppo-base/clone/", {
        "name": "ppo-x", "set": ["roles.Rollout.gpus=4", "roles.Rolout.gpus=4"]}, format="json")
    assert answer.status_code == 400
    assert answer.json()["field"] == "set[1]"
    assert answer.json()["problems"][0]["suggestion"] == "Rollout"
    assert not Job.objects.filter(name="ppo-x").exists()


def test_a_submitted_job_exports_and_clones_what_ran(
    running: RunRecord, owner: Any, api_client_for: Api
) -> None:
    api = api_client_for(owner)
    text = _exported(api, "ppo-run")
    assert "the body frozen when it was submitted" in text
    assert yaml.safe_load(text)["spec"] == running.job_file_snapshot != {}
    applied = post_file(api, APPLY, _renamed(text, "ppo-again"))
    assert applied.status_code == 201, applied.content
    again = api.get("/api/v1/jobs/ppo-again/manifest/")
    assert again.status_code == 200, again.content
    assert again.content.decode() == renamed_manifest(running.manifest_yaml, old="ppo-run",
                                                      new="ppo-again")
    clone = api.post("/api/v1/jobs/ppo-run/clone/", {"name": "ppo-run-2"}, format="json")
    running.refresh_from_db()
    assert clone.status_code == 201 and clone.json()["source"]["state"] == running.state
    assert clone.json()["state"] == "draft"


def test_sweep_makes_one_named_draft_per_combination(
    clean: Job, owner: Any, api_client_for: Api
) -> None:
    api = api_client_for(owner)
    text = _renamed(_exported(api), "sw")
    answer = post_file(api, SWEEP, text, grid=["roles.Actor.gpus=8,4", "run_script=a,b,c"])
    assert answer.status_code == 201, answer.content
    drafts = answer.json()["drafts"]
    assert [d["name"] for d in drafts] == [f"sw-{n}" for n in range(1, 7)]
    assert [d["values"] for d in drafts[:4]] == [
        {"spec.roles[0].gpus": 8, "spec.run_script": "a"},
        {"spec.roles[0].gpus": 8, "spec.run_script": "b"},
        {"spec.roles[0].gpus": 8, "spec.run_script": "c"},
        {"spec.roles[0].gpus": 4, "spec.run_script": "a"}]
    assert Job.objects.get(name="sw-5").run_script == "b"
    assert Job.objects.get(name="sw-5").roles.get(name="Actor").gpus == 4
    again = post_file(api, SWEEP, text, grid=["roles.Actor.gpus=8,4", "run_script=a,b,c"])
    assert again.status_code == 200
    assert {d["action"] for d in again.json()["drafts"]} == {"unchanged"}


def test_sweep_is_bounded_and_atomic(clean: Job, owner: Any, outsider: Any, other_team: Team,
                                     api_client_for: Api) -> None:
    api = api_client_for(owner)
    text = _renamed(_exported(api), "sw")
    jobs = Job.objects.count()
    big = post_file(api, SWEEP, text, grid=["run_script=" + ",".join("x" * 11),
                                            "roles.Actor.gpus=" + ",".join("1" * 10)])
    assert big.status_code == 400
    assert (big.json()["problems"][0]["code"], big.json()["count"], big.json()["limit"]) == (
        "sweep.too_many", 110, 100)
    Job.objects.create(team=other_team, name="sw-3", created_by=outsider)
    taken = post_file(api, SWEEP, text, grid=["run_script=a,b,c"])
    assert taken.status_code == 404
    blocked = post_file(api, SWEEP, _renamed(text, "sx"), grid=["roles.Actor.gpus=8,eight"],
                        submit="true")
    assert blocked.status_code == 422
    assert [d["has_errors"] for d in blocked.json()["drafts"]] == [False, True]
    assert Job.objects.count() == jobs + 1  # only the other team's job
    assert not RunRecord.objects.exists()


def test_sweep_submit_submits_every_draft(clean: Job, owner: Any, api_client_for: Api,
                                          django_capture_on_commit_callbacks: Any) -> None:
    api = api_client_for(owner)
    text = _renamed(_exported(api), "sub")
    with django_capture_on_commit_callbacks(execute=False):
        answer = post_file(api, SWEEP, text, grid=["run_script=a,b"], submit="true")
    assert answer.status_code == 201, answer.content
    assert [d["state"] for d in answer.json()["drafts"]] == ["queued", "queued"]
    assert sorted(RunRecord.objects.values_list("job_name", flat=True)) == ["sub-1", "sub-2"]


def test_verify_requests_what_each_role_lacks(
    clean: Job, owner: Any, api_client_for: Api
) -> None:
    api = api_client_for(owner)
    post_file(api, APPLY, _renamed(_exported(api), "ver").replace(
        "rlinf.io/pool: cpu-a", "rlinf.io/pool: a100-a"))
    first = api.post("/api/v1/jobs/ver/verify/")
    assert first.status_code == 200, first.content
    assert [(r["role"], r["outcome"]) for r in first.json()["roles"]] == [
        ("Actor", "covered"), ("Rollout", "requested")]
    again = api.post("/api/v1/jobs/ver/verify/").json()["roles"][1]
    assert (again["outcome"], again["verification"]) == (
        "reused", first.json()["roles"][1]["verification"])


def test_every_api_answer_carries_the_version_header(
    clean: Job, owner: Any, api_client_for: Api
) -> None:
    api = api_client_for(owner)
    post_file(api, APPLY, _renamed(_exported(api), "ppo-broken").replace("gpus: 8",
                                                                         "gpus: eight"))
    answers = {
        200: api.get("/api/v1/jobs/"),
        404: api.get("/api/v1/jobs/nobody/"),
        422: api.get("/api/v1/jobs/ppo-broken/manifest/"),
        400: api.get("/api/v1/jobs/?q=%01"),  # refused by the guard, before any view
        401: APIClient().get("/api/v1/jobs/"),
    }
    for code, response in answers.items():
        assert response.status_code == code, (code, response.content)
        assert response["X-RLark-API-Version"] == "1.0"
    assert "X-RLark-API-Version" not in APIClient().get("/login/")


def test_a_platform_admin_downloads_a_run_records_job_file_as_they_read_its_page(
    running: RunRecord, admin_user: Any, outsider: Any, client: Any, api_client_for: Api
) -> None:
    """The run record page (admins read every team's) links its job file: a platform admin
    outside the team downloads it too, what ran; a member of another team still gets 404, and
    a draft that was never submitted stays its team's."""
    client.force_login(admin_user)
    assert client.get(f"/jobs/records/{running.job_name}/").status_code == 200
    admin = api_client_for(admin_user)
    text = _exported(admin, running.job_name)
    assert yaml.safe_load(text)["spec"] == running.job_file_snapshot != {}
    as_json = admin.get(f"/api/v1/jobs/{running.job_name}/job-file/?format=json")
    assert as_json.status_code == 200 and as_json.json()["spec"] == running.job_file_snapshot
    draft = Job.objects.create(team=running.team, name="ppo-draft",
                               created_by=running.job.created_by)
    assert admin.get(f"/api/v1/jobs/{draft.name}/job-file/").status_code == 404
    stranger = api_client_for(outsider)
    refused = stranger.get(f"/api/v1/jobs/{running.job_name}/job-file/")
    assert (refused.status_code, refused["Content-Type"]) == (404, "application/json")
