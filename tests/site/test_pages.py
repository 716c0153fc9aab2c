from __future__ import annotations

import pytest
from django.test import Client

from clusters.models import Cluster
from clusters.verifications.services import verification_request
from tests.conftest import PASSWORD
from tests.factories import load_fleet_rows

pytestmark = pytest.mark.django_db


def test_login_page_renders_and_logs_in(client: Client, owner) -> None:
    page = client.get("/login/")
    assert page.status_code == 200
    assert b'name="username"' in page.content
    response = client.post("/login/", {"username": "owner", "password": PASSWORD})
    assert response.status_code == 302


def test_wrong_login_keeps_the_username(client: Client, owner) -> None:
    response = client.post("/login/", {"username": "owner", "password": "wrong"})
    assert response.status_code == 200
    assert b"Wrong username or password." in response.content
    assert b'value="owner"' in response.content


def test_pages_require_login(client: Client) -> None:
    response = client.get("/")
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_chinese_is_chosen_from_the_browser(client: Client) -> None:
    page = client.get("/login/", HTTP_ACCEPT_LANGUAGE="zh-CN,zh;q=0.9")
    assert 'lang="zh-hans"' in page.content.decode()
    assert "登录" in page.content.decode()
    assert "登录 RLark" in page.content.decode()


def test_schema_and_interactive_docs_are_served_without_a_cdn(client: Client, owner) -> None:
    client.force_login(owner)
    schema = client.get("/api/schema/")
    assert schema.status_code == 200
    assert b"/api/v1/teams/" in schema.content
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"cdn." not in docs.content and b"unpkg" not in docs.content


def test_health_endpoints(client: Client) -> None:
    assert client.get("/health/live").json() == {"status": "ok"}
    ready = client.get("/health/ready")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"postgres": "ok", "redis": "ok"}


def test_the_openapi_schema_validates_without_warnings(tmp_path) -> None:
    from django.core.management import call_command

    out = tmp_path / "schema.yaml"
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(out))
    assert "/api/v1/jobs/{name}/submit/" in out.read_text()


def _nav(client: Client) -> str:
    html = client.get("/jobs/").content.decode()
    return html[html.index('<nav aria-label="Main">'):html.index("</nav>")]


def test_one_verification_entry_each_the_queue_with_its_count_for_admins(
    client: Client, member, admin_user, team
) -> None:
    client.force_login(member)
    nav = _nav(client)
    assert nav.count("Verification") == 1 and ">Verifications<" in nav
    client.force_login(admin_user)
    assert _nav(client).count("Verification") == 1 and 'id="nav-pending"' not in _nav(client)
    load_fleet_rows()
    for pool in ("a100-a", "cpu-a"):
        verification_request(team=team, user=member, cluster=Cluster.objects.get(name="gpu-a"),
                             selector={"rlinf.io/pool": pool})
    nav = _nav(client)
    assert ">Verification queue" in nav
    assert ('<span class="badge pending" id="nav-pending" '
            'title="2 requests wait for a decision">2</span>') in nav


def test_admins_land_on_the_queue_members_on_their_jobs(client: Client, member, admin_user) -> None:
    client.force_login(member)
    assert client.get("/")["Location"] == "/jobs/"
    client.force_login(admin_user)
    assert client.get("/")["Location"] == "/clusters/verifications/queue/"
