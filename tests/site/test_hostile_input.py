"""Hostile input is refused by one mechanism (rlark_site.foundation.guard, the JSON parser, the
pagination), and every API answer, error or not, is JSON of the one error shape."""

from __future__ import annotations

from email.message import Message
from typing import Any
from urllib.parse import quote

import pytest
from django.http import HttpRequest
from django.test import Client, override_settings
from django.urls import include, path
from rest_framework.test import APIClient

from jobs.models import Job
from rlark_site.foundation.tenancy.models import Team

pytestmark = pytest.mark.django_db


def assert_error_shape(response: Any, status: int) -> dict[str, Any]:
    assert response.status_code == status
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert isinstance(body["detail"], str) and body["detail"]
    assert set(body) <= {"detail", "field", "errors", "findings", "state", "decided_by",
                         "problems"}
    return body


@pytest.mark.parametrize("url", [
    "/api/v1/jobs/a%00b/",
    "/api/v1/jobs/a%0D%0Ab/",
    "/api/v1/teams/a%01b/members/",
])
def test_control_characters_in_an_api_path_answer_400_json(api_client_for, member,
                                                             url: str) -> None:
    assert_error_shape(api_client_for(member).get(url), 400)


@pytest.mark.parametrize("url", [
    "/api/v1/jobs/?team=a%00b",
    "/api/v1/audit-events/?actor=a%00b",
    "/api/v1/jobs/?a%1Fb=1",
])
def test_control_characters_in_a_query_answer_400_json(api_client_for, member, url: str) -> None:
    assert_error_shape(api_client_for(member).get(url), 400)


@pytest.mark.parametrize("url", [
    "/jobs/a%00b/",
    "/jobs/?q=a%00b",
    "/clusters/?q=%7F",
])
def test_control_characters_on_pages_answer_400(client: Client, member, url: str) -> None:
    client.force_login(member)
    response = client.get(url)
    assert response.status_code == 400
    assert response["Content-Type"].startswith("text/html")


def test_a_number_beyond_bigint_in_a_path_is_404(client: Client, member) -> None:
    client.force_login(member)
    assert client.get("/jobs/ssh-keys/9223372036854775808/delete/").status_code == 404


@pytest.mark.parametrize("query", [
    "limit=9223372036854775808", "limit=abc", "limit=0", "limit=-1", "limit=¹",
    "offset=9223372036854775807", "offset=1000001", "offset=x",
])
def test_bad_limit_or_offset_is_400_never_500(api_client_for, member, query: str) -> None:
    for url in ("/api/v1/jobs/", "/api/v1/clusters/", "/api/v1/verifications/"):
        assert_error_shape(api_client_for(member).get(f"{url}?{query}"), 400)


def test_limit_is_capped(api_client_for, member, team: Team) -> None:
    for index in range(3):
        Job.objects.create(team=team, name=f"job-{index}", created_by=member)
    response = api_client_for(member).get("/api/v1/jobs/?limit=100000")
    assert response.status_code == 200
    assert response.json()["count"] == 3
    next_page = api_client_for(member).get("/api/v1/jobs/?limit=2&offset=2").json()
    assert [row["name"] for row in next_page["results"]] == ["job-2"] or len(
        next_page["results"]) == 1


@pytest.mark.parametrize("actor", ["¹", "٣", "²³"])
def test_audit_filter_on_odd_digits_is_safe(api_client_for, member, actor: str) -> None:
    response = api_client_for(member).get("/api/v1/audit-events/", {"actor": actor})
    assert response.status_code == 200
    assert response.json()["results"] == []


def test_nul_in_a_json_key_is_a_400_naming_the_place(api_client_for, member) -> None:
    response = api_client_for(member).post("/api/v1/deployment-parameters/", {
        "title": "x", "roles": [{"role": "Actor", "cluster": "gpu-a",
                                 "selector": {"a\x00b": "c"}}],
    }, format="json")
    body = assert_error_shape(response, 400)
    assert "roles.0.selector.a\\0b" in body["detail"]


@override_settings(DATA_UPLOAD_MAX_MEMORY_SIZE=1000)
def test_a_body_too_large_is_413_json(api_client_for, member) -> None:
    response = api_client_for(member).post("/api/v1/jobs/", {"name": "x" * 2000}, format="json")
    assert_error_shape(response, 413)


def test_an_unknown_api_url_is_404_json(api_client_for, member) -> None:
    assert_error_shape(api_client_for(member).get("/api/v1/no-such-thing/"), 404)
    assert_error_shape(APIClient().get("/api/v2/"), 404)


def test_an_unknown_page_stays_an_html_404(client: Client, member) -> None:
    client.force_login(member)
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")


def _explode(request: HttpRequest) -> None:
    raise RuntimeError("boom")


urlpatterns = [
    path("api/v1/explode/", _explode),
    path("explode/", _explode),
    path("", include("rlark_site.urls")),
]
handler500 = "rlark_site.foundation.exceptions.server_error"


@override_settings(ROOT_URLCONF=__name__)
def test_a_non_drf_500_under_the_api_is_json() -> None:
    client = Client(raise_request_exception=False)
    assert_error_shape(client.get("/api/v1/explode/"), 500)
    assert client.get("/explode/")["Content-Type"].startswith("text/html")


def test_a_validation_error_has_the_one_shape(api_client_for, admin_user) -> None:
    response = api_client_for(admin_user).post("/api/v1/teams/", {"slug": "ok-team"},
                                               format="json")
    body = assert_error_shape(response, 400)
    assert body["field"] == "name"
    assert body["detail"] == "Malformed request body: name: This field is required."
    assert body["errors"] == {"name": ["This field is required."]}


def test_nested_validation_errors_are_flattened(api_client_for, member) -> None:
    response = api_client_for(member).post("/api/v1/launch-lists/", {
        "title": "x", "expected_signals": [{"signal": ""}],
    }, format="json")
    body = assert_error_shape(response, 400)
    assert body["field"] == "expected_signals.0.signal"


@pytest.mark.parametrize(("url", "payload", "field"), [
    ("/api/v1/verifications/",
     {"cluster": "gpu-a", "selector": {"a": "b"}, "requested_host_paths": ["/d"] * 65},
     "requested_host_paths"),
    ("/api/v1/verifications/",
     {"cluster": "gpu-a", "selector": {f"k{i}": "v" for i in range(33)}}, "selector"),
    ("/api/v1/launch-lists/",
     {"title": "x", "expected_signals": [{"signal": "s"}] * 101}, "expected_signals"),
    ("/api/v1/deployment-parameters/",
     {"title": "x", "roles": [{"role": "r", "cluster": "", "selector": {}}] * 33}, "roles"),
    ("/api/v1/deployment-parameters/",
     {"title": "x", "roles": [{"role": "r", "cluster": "",
                               "selector": {f"k{i}": "v" for i in range(33)}}]},
     "roles.0.selector"),
    ("/api/v1/launch-lists/", {"title": "a\r\nb"}, "title"),
])
def test_lists_and_names_are_bounded(api_client_for, member, url: str, payload: dict[str, Any],
                                     field: str) -> None:
    body = assert_error_shape(api_client_for(member).post(url, payload, format="json"), 400)
    assert body["field"] == field


def test_a_job_name_with_control_characters_is_not_stored(api_client_for, member) -> None:
    response = api_client_for(member).post("/api/v1/jobs/", {"name": "a\r\nb"}, format="json")
    body = assert_error_shape(response, 400)
    assert body["findings"][0]["code"] == "job.name.invalid"
    assert not Job.objects.exists()


def test_the_manifest_download_name_cannot_be_rewritten(client: Client, member,
                                                        team: Team) -> None:
    job = Job.objects.create(team=team, name='a"; filename*=UTF-8\'\'evil.sh', created_by=member)
    client.force_login(member)
    response = client.get(f"/jobs/wizard/{quote(job.name)}/manifest.yaml")
    assert response.status_code == 200
    message = Message()
    message["Content-Disposition"] = response["Content-Disposition"]
    assert message.get_filename() == f"{job.name}.yaml"
    assert message.get_params(header="Content-Disposition")[1:] == [
        ("filename", f"{job.name}.yaml")
    ]
