"""The launch list's main container image (manual, step 4): recorded pinned, compared with
each role's image by the findings engine, shown in the wizard and the API, frozen at submission."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from django.test import Client
from rest_framework.test import APIClient

from jobs.core.findings import check, has_errors
from jobs.core.spec import CheckContext, JobSpec, LaunchListImages
from jobs.models import Job, LaunchList, Role
from jobs.records.submission import job_submit
from rlark_site.foundation.findings import Finding
from rlark_site.foundation.tenancy.models import Team
from tests.factories import load_fleet_rows
from tests.jobs.fleet_context import IMAGE, clean_context, clean_spec, with_role
from tests.jobs.records_support import DIGEST as RECORD_DIGEST
from tests.jobs.records_support import IMAGE as RECORD_IMAGE
from tests.jobs.records_support import submittable_job

LISTS = "/api/v1/launch-lists/"
REPO = "registry.example.com/rlinf/rlinf"
OTHER_DIGEST = "sha256:" + "5e" * 32
CODES = ("launch_list.image.missing", "launch_list.image.unlisted", "launch_list.image.mismatch")


def findings_with(images: LaunchListImages | None, spec: JobSpec | None = None) -> list[Finding]:
    spec = spec or clean_spec()
    ctx: CheckContext = replace(clean_context(spec), launch_list_images=images)
    return [f for f in check(spec, ctx) if f.code in CODES]


# --- the rule (pure) ---------------------------------------------------------------------------


def test_roles_equal_to_the_launch_lists_image_have_no_finding() -> None:
    assert findings_with(LaunchListImages(image=IMAGE)) == []


def test_no_launch_list_linked_means_nothing_to_compare() -> None:
    assert findings_with(None) == []


def test_a_role_with_another_image_is_an_error_on_its_image_field() -> None:
    spec = with_role(clean_spec(), 1, image=f"{REPO}@{OTHER_DIGEST}")
    [finding] = findings_with(LaunchListImages(image=IMAGE), spec)
    assert (finding.code, finding.severity) == ("launch_list.image.mismatch", "error")
    assert (finding.role, finding.field) == ("Rollout", "roles[1].image")
    assert finding.detail == {"expected": IMAGE, "image": f"{REPO}@{OTHER_DIGEST}"}


def test_per_role_images_are_compared_role_by_role_ignoring_case() -> None:
    other = f"{REPO}:v2@{OTHER_DIGEST}"
    spec = with_role(clean_spec(), 2, image=other)
    images = LaunchListImages(
        role_images=(("actor", IMAGE), ("ROLLOUT", IMAGE), ("Environment", other))
    )
    assert findings_with(images, spec) == []
    mismatched = findings_with(images, with_role(spec, 0, image=other))
    assert [(f.code, f.role) for f in mismatched] == [("launch_list.image.mismatch", "Actor")]


def test_a_role_the_per_role_map_does_not_name_takes_the_image_for_all_roles() -> None:
    other = f"{REPO}@{OTHER_DIGEST}"
    spec = with_role(clean_spec(), 2, image=other)
    assert findings_with(LaunchListImages(image=IMAGE, role_images=(("Environment", other),)),
                         spec) == []


def test_a_role_the_per_role_map_does_not_name_is_an_error_without_an_image_for_all() -> None:
    [finding] = findings_with(
        LaunchListImages(role_images=(("Actor", IMAGE), ("Rollout", IMAGE)))
    )
    assert (finding.code, finding.severity) == ("launch_list.image.unlisted", "error")
    assert (finding.role, finding.field) == ("Environment", "roles[2].image")
    assert finding.detail == {"listed": ["Actor", "Rollout"]}


def test_a_launch_list_without_an_image_is_one_job_level_warning() -> None:
    findings = findings_with(LaunchListImages())
    assert [(f.code, f.severity, f.role, f.field) for f in findings] == [
        ("launch_list.image.missing", "warning", None, "launch_list")
    ]
    assert not has_errors(findings)


@pytest.mark.parametrize(
    ("image", "digest"),
    [
        (f"{REPO}:v0.3", IMAGE.split("@")[1]),  # a tag with the same digest recorded beside it
        (f"{REPO}:v0.3@{IMAGE.split('@')[1]}", ""),  # the immutable tag with its digest
    ],
)
def test_the_same_content_under_a_tag_is_equal(image: str, digest: str) -> None:
    spec = with_role(clean_spec(), 1, image=image, image_digest=digest)
    assert findings_with(LaunchListImages(image=IMAGE), spec) == []


def test_the_same_digest_in_another_repository_differs() -> None:
    spec = with_role(clean_spec(), 1, image=f"registry.example.com/other/rlinf@{IMAGE[-71:]}")
    assert [f.code for f in findings_with(LaunchListImages(image=IMAGE), spec)] == [
        "launch_list.image.mismatch"
    ]


@pytest.mark.parametrize("image", ["", f"{REPO}:v0.3", f"{REPO}:latest", "not an image!"])
def test_an_image_that_pins_nothing_is_left_to_the_image_rules(image: str) -> None:
    spec = with_role(clean_spec(), 1, image=image, image_digest="")
    assert findings_with(LaunchListImages(image=IMAGE), spec) == []
    assert any(f.code.startswith("image.") for f in check(spec, clean_context(spec)))


# --- recording it: API and pages ---------------------------------------------------------------


@pytest.fixture
def api(api_client_for: Callable[[Any], APIClient], owner: Any) -> APIClient:
    return api_client_for(owner)


@pytest.mark.django_db
def test_the_api_records_the_image_for_all_roles_and_per_role(api: APIClient) -> None:
    tagged = f"{REPO}:v0.3@{OTHER_DIGEST}"
    response = api.post(LISTS, {"title": "t", "image": IMAGE, "role_images": {"Actor": tagged}},
                        format="json")
    assert response.status_code == 201, response.json()
    assert (response.json()["image"], response.json()["role_images"]) == (IMAGE, {"Actor": tagged})
    stored = LaunchList.objects.get()
    assert (stored.image, stored.role_images) == (IMAGE, {"Actor": tagged})
    patched = api.patch(f"{LISTS}{stored.pk}/", {"role_images": {}}, format="json")
    assert (patched.json()["image"], patched.json()["role_images"]) == (IMAGE, {})


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"image": f"{REPO}:v0.3"}, "image"),
        ({"image": f"{REPO}:latest"}, "image"),
        ({"image": REPO}, "image"),
        ({"image": "registry.example.com/team/image@sha256:<digest>"}, "image"),
        ({"image": f"{REPO}@sha256:abc"}, "image"),
        ({"role_images": {"Actor": f"{REPO}:v0.3"}}, "role_images"),
        ({"role_images": {"not a role": IMAGE}}, "role_images"),
        ({"role_images": {"Actor": IMAGE, "actor": IMAGE}}, "role_images"),
    ],
)
def test_an_unpinned_reference_or_a_bad_role_is_refused_clearly(
    api: APIClient, body: dict[str, Any], field: str
) -> None:
    response = api.post(LISTS, {"title": "t", **body}, format="json")
    assert response.status_code == 400
    answer = response.json()
    assert answer["field"] == field
    message = answer["errors"][field][0]
    assert "pinned image reference" in message or "role" in message.lower(), message
    assert not LaunchList.objects.exists()


@pytest.fixture
def owner_web(client: Client, owner: Any) -> Client:
    client.force_login(owner)
    return client


@pytest.mark.django_db
def test_the_page_records_per_role_images_one_per_line(owner_web: Client) -> None:
    tagged = f"{REPO}:v0.3@{OTHER_DIGEST}"
    response = owner_web.post("/jobs/launch-lists/new/", {
        "title": "t", "image": IMAGE, "role_images": f"Actor: {tagged}\n\nRollout:{IMAGE}\n",
    })
    assert response.status_code == 302
    stored = LaunchList.objects.get()
    assert stored.role_images == {"Actor": tagged, "Rollout": IMAGE}
    html = owner_web.get(f"/jobs/launch-lists/{stored.pk}/").content.decode()
    assert f"Actor: {tagged}" in html  # the form, as typed
    assert "Main container image" in html and "all roles" in html  # the record's summary


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"image": f"{REPO}:v0.3"}, "is not a pinned image reference"),
        ({"role_images": f"Actor {IMAGE}"}, "Line 1: write “role: image reference”"),
        ({"role_images": f"x\nthe actor: {IMAGE}"}, "Line 1: write “role: image reference”"),
        ({"role_images": f"Actor: {IMAGE}\nActor: {IMAGE}"}, "Line 2: role Actor is listed twice"),
        ({"role_images": f"Actor: {REPO}:latest"}, "Role Actor: "),
    ],
)
def test_the_page_refuses_a_bad_image_and_keeps_the_input(
    owner_web: Client, form: dict[str, str], message: str
) -> None:
    response = owner_web.post("/jobs/launch-lists/new/", {"title": "kept title", **form})
    html = response.content.decode()
    assert response.status_code == 200
    assert message in html.replace("&quot;", '"').replace("&#x27;", "'")
    assert "kept title" in html
    assert not LaunchList.objects.exists()


@pytest.mark.django_db
def test_the_page_refuses_in_chinese_too(owner_web: Client) -> None:
    response = owner_web.post("/jobs/launch-lists/new/", {"title": "t", "image": f"{REPO}:v0.3"},
                              HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "不是固定的镜像引用" in response.content.decode()


# --- a linked job: findings in the API and the wizard, refusal, freezing -----------------------


@pytest.fixture
def job(team: Team, owner: Any, admin_user: Any) -> Job:
    load_fleet_rows()
    return submittable_job(team=team, owner=owner, admin=admin_user)


def _job_codes(api: APIClient, name: str) -> list[tuple[str, str | None]]:
    response = api.get(f"/api/v1/jobs/{name}/")
    return [(f["code"], f["role"]) for f in response.json()["findings"] if f["code"] in CODES]


@pytest.mark.django_db
def test_the_api_findings_compare_the_jobs_roles_with_its_launch_list(
    api: APIClient, job: Job
) -> None:
    assert _job_codes(api, job.name) == []
    Role.objects.filter(job=job, name="Rollout").update(image=f"{REPO}@{OTHER_DIGEST}")
    assert _job_codes(api, job.name) == [("launch_list.image.mismatch", "Rollout")]
    response = api.post(f"/api/v1/jobs/{job.name}/submit/")
    assert response.status_code == 422
    assert "launch_list.image.mismatch" in {f["code"] for f in response.json()["findings"]}


@pytest.mark.django_db
def test_a_per_role_launch_list_missing_a_role_is_reported_for_that_role(
    api: APIClient, job: Job
) -> None:
    LaunchList.objects.filter(pk=job.launch_list_id).update(
        image="", role_images={"actor": RECORD_IMAGE}
    )
    assert _job_codes(api, job.name) == [("launch_list.image.unlisted", "Rollout")]
    LaunchList.objects.filter(pk=job.launch_list_id).update(role_images={})
    assert _job_codes(api, job.name) == [("launch_list.image.missing", None)]


@pytest.mark.django_db
def test_the_wizard_shows_the_mismatch_at_the_image_field_and_on_review(
    owner_web: Client, job: Job
) -> None:
    Role.objects.filter(job=job, name="Rollout").update(image=f"{REPO}@{OTHER_DIGEST}")
    for step in (2, 4):
        response = owner_web.get(f"/jobs/wizard/{job.name}/step-{step}/", {"role": 1})
        assert response.status_code == 200
        html = response.content.decode()
        assert "launch_list.image.mismatch" in html, step
        assert "differs from the one the launch list records" in html, step


@pytest.mark.django_db
def test_submission_freezes_the_launch_lists_images(
    job: Job, owner: Any, django_capture_on_commit_callbacks: Any
) -> None:
    LaunchList.objects.filter(pk=job.launch_list_id).update(role_images={"Rollout": RECORD_IMAGE})
    with django_capture_on_commit_callbacks(execute=False):
        record = job_submit(job=job, user=owner)
    LaunchList.objects.filter(pk=job.launch_list_id).update(image="", role_images={})
    record.refresh_from_db()
    assert record.launch_list_snapshot["image"] == RECORD_IMAGE
    assert record.launch_list_snapshot["role_images"] == {"Rollout": RECORD_IMAGE}
    assert RECORD_DIGEST in record.manifest_yaml
