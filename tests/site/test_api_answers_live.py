"""Every answer under /api/ is JSON in the one error shape, through a real gunicorn started as
`make run` starts it (DEBUG on) and as production runs it (DEBUG off): an unknown path with a
valid token, a method a route does not take, a refused Host, a body over the limit, a server
error; pages outside /api/ keep their HTML. (Django's test client never shows the DEBUG pages
`make run` answered with: the 404 there was text/html.) Only the test with a token writes to
the database (committed, so the server sees it); the others need no rows."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.http import HttpResponse, HttpResponseNotAllowed
from django.test import RequestFactory

from rlark_site.foundation.exceptions import ApiErrorShapeMiddleware
from rlark_site.foundation.tenancy.models import ApiToken
from tests.site.live_web import LiveWeb, free_port, start, stop


def json_error(answer: tuple[int, dict[str, str], bytes], status: int) -> dict[str, Any]:
    code, headers, body = answer
    assert (code, headers["content-type"].split(";")[0]) == (status, "application/json"), (
        code, headers, body[:300])
    document: dict[str, Any] = json.loads(body)
    assert isinstance(document["detail"], str) and document["detail"]
    return document


@pytest.fixture
def token(transactional_db: None, member: Any) -> str:
    _row, secret = ApiToken.objects.create(user=member, expiry=timedelta(days=1), name="live")
    return str(secret)


def test_an_unknown_api_path_with_a_valid_token_is_json_404(live_web: LiveWeb,
                                                            token: str) -> None:
    auth = {"Authorization": f"Token {token}"}
    assert json_error(live_web.request("GET", "/api/v1/no-such-endpoint/", headers=auth),
                      404)["detail"] == "Not found."
    assert json_error(live_web.request("GET", "/api/v2/", headers=auth), 404)
    code, _headers, _body = live_web.request("GET", "/api/v1/teams/", headers=auth)
    assert code == 200  # the token is good


def test_a_method_the_route_does_not_take_is_json_405(live_web: LiveWeb) -> None:
    answer = live_web.request("DELETE", "/api/v1/auth/token/")  # open to anyone, POST only
    json_error(answer, 405)
    assert "POST" in answer[1]["allow"]


def test_a_refused_host_is_json_400(live_web: LiveWeb) -> None:
    json_error(live_web.request("GET", "/api/v1/teams/", headers={"Host": "evil.example"}), 400)


def test_a_body_over_the_limit_is_json_413(live_web: LiveWeb) -> None:
    answer = live_web.request("POST", "/api/v1/jobs/", body=b"{" + b" " * 3_000_000 + b"}",
                              headers={"Content-Type": "application/json"})
    json_error(answer, 413)


def test_a_post_to_a_path_without_its_slash_is_a_json_404_naming_the_path_with_it(
    live_web: LiveWeb
) -> None:
    """Django's CommonMiddleware cannot redirect a POST without losing its body: with DEBUG on
    it raises (a 500), off it answers a 301 the client's POST would follow as a GET. Under
    /api/ both settings answer the same 404 in the one shape, naming the path with its slash;
    a GET still redirects."""
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        document = json_error(live_web.request(
            method, "/api/v1/jobs?team=x", body=b"{}",
            headers={"Content-Type": "application/json"}), 404)
        assert "/api/v1/jobs/" in document["detail"], document
        assert document["path"] == "/api/v1/jobs/"
    code, headers, _body = live_web.request("GET", "/api/v1/auth/token")
    assert (code, headers["location"]) == (301, "/api/v1/auth/token/")
    json_error(live_web.request("POST", "/api/v1/no-such-endpoint", body=b"{}"), 404)


@pytest.fixture(scope="module", params=["make-run", "production"])
def web_without_database(request: Any, tmp_path_factory: pytest.TempPathFactory
                         ) -> Iterator[LiveWeb]:
    """RLark's gunicorn as `make run` / production start it, its DATABASE_URL naming a port
    where no PostgreSQL listens (a port bound and let go: connections are refused)."""
    nowhere = f"postgresql://postgres@127.0.0.1:{free_port()}/rlark_gone"
    log = tmp_path_factory.mktemp(f"web-nodb-{request.param}") / "gunicorn.log"
    process, web = start(request.param, log, database_url=nowhere)
    try:
        yield web
    finally:
        stop(process)


def test_a_server_error_under_the_api_is_json_500(web_without_database: LiveWeb) -> None:
    """A real 500 through gunicorn: the database is unreachable for this server process, so
    the token lookup of an authenticated API request raises psycopg's OperationalError out of
    the view (no view of RLark catches it). A real fault, chosen over a test-only view: no
    settings module or urlconf exists only for this test, and the server runs exactly the
    code and middleware production runs. With DEBUG on (`make run`) Django answers its HTML
    technical page and with DEBUG off `handler500`; under /api/ both arrive as JSON in the one
    shape, telling nothing of the fault; a page outside /api/ keeps its HTML 500."""
    auth = {"Authorization": "Token " + "0f" * 32}
    for method, path, body in (("GET", "/api/v1/teams/", None),
                               ("GET", "/api/v1/jobs/some-run/", None),
                               ("POST", "/api/v1/jobs/", b'{"name": "x"}')):
        answer = web_without_database.request(
            method, path, body=body, headers={**auth, "Content-Type": "application/json"})
        document = json_error(answer, 500)
        assert document == {"detail": "Server error."}, document
        for leak in (b"OperationalError", b"Traceback", b"rlark_gone", b"psycopg"):
            assert leak not in answer[2]
    code, headers, _body = web_without_database.request("GET", "/health/live")
    assert (code, headers["content-type"]) == (200, "application/json")  # the server lives
    code, headers, _body = web_without_database.request(  # the session's row is unreadable
        "GET", "/jobs/", headers={"Cookie": "sessionid=" + "a" * 32})
    assert (code, headers["content-type"].split(";")[0]) == (500, "text/html")


def test_pages_outside_the_api_keep_their_html(live_web: LiveWeb) -> None:
    code, headers, _body = live_web.request("GET", "/no-such-page/")
    assert (code, headers["content-type"].split(";")[0]) == (404, "text/html")
    code, headers, _body = live_web.request("GET", "/jobs/", headers={"Host": "evil.example"})
    assert (code, headers["content-type"].split(";")[0]) == (400, "text/html")


def _answer_with(response: HttpResponse) -> ApiErrorShapeMiddleware:
    return ApiErrorShapeMiddleware(lambda request: response)


def test_the_outermost_layer_turns_any_other_error_answer_into_the_shape() -> None:
    request = RequestFactory().post("/api/v1/anything/")
    answer = _answer_with(HttpResponseNotAllowed(["GET"], content=b"<h1>no</h1>"))(request)
    assert (answer.status_code, answer["Content-Type"], answer["Allow"]) == (
        405, "application/json", "GET")
    assert json.loads(answer.content) == {"detail": "Method not allowed."}
    teapot = _answer_with(HttpResponse("short and stout", status=418))(request)
    assert json.loads(teapot.content) == {"detail": "I'm a Teapot."}


def test_json_answers_and_pages_pass_through_unchanged() -> None:
    page = HttpResponse("<h1>Not found</h1>", status=404)
    assert _answer_with(page)(RequestFactory().get("/jobs/x/")) is page
    problem = HttpResponse(b"{}", status=409, content_type="application/problem+json")
    assert _answer_with(problem)(RequestFactory().get("/api/v1/x/")) is problem
    fine = HttpResponse("ok")
    assert _answer_with(fine)(RequestFactory().get("/api/v1/x/")) is fine

