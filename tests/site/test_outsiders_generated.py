"""Generated from the URL configuration: every route that names a team's object (or a user's
token), tried by an outsider with another team's real ids, names and slugs, with every method,
answers 404 (or 405 where the method does not exist), never the object. A new route is covered
without anyone remembering to. Then the same routes with hostile bytes in every argument and
common query parameter: never a 500.

Routes that name global objects (clusters, readable by everyone, written by admins) and
admin-only routes (answering 403 to everyone else) are listed below, each with why.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

from clusters.models import Cluster, Verification
from jobs.models import DeploymentParameters, Job, LaunchList, RunRecord, SSHKey
from rlark_site.foundation.tenancy.models import ApiToken, Team

pytestmark = pytest.mark.django_db

# Global, not team-owned: clusters are listed for everyone and written by platform admins.
GLOBAL = re.compile(r"^(api/v1/clusters/|clusters/cluster/)")
# Platform admins only (403 to anyone else,
# rlark_site.foundation.tenancy.access.require_platform_admin).
ADMIN_ONLY = re.compile(
    r"(^clusters/verifications/queue/|^api/v1/verifications/.*/(approve|reject)/$"
    r"|^jobs/deployment-parameters/queue/|^api/v1/deployment-parameters/queue/"
    r"|^api/v1/deployment-parameters/.*/(confirm|reject)/$)"
)
SKIPPED_PREFIXES = ("django-admin/", "i18n/", "static/")
METHODS = ("get", "post", "put", "patch", "delete")


def _routes(patterns: list[Any], prefix: str = "") -> Iterator[str]:
    for entry in patterns:
        if isinstance(entry, URLResolver):
            yield from _routes(entry.url_patterns, prefix + str(entry.pattern))
        elif isinstance(entry, URLPattern):
            yield prefix + str(entry.pattern)


def object_routes() -> list[str]:
    routes = sorted({r for r in _routes(get_resolver().url_patterns) if "<" in r})
    return [r for r in routes if not r.startswith(SKIPPED_PREFIXES) and not GLOBAL.match(r)]


@pytest.fixture
def foreign(other_team: Team, outsider: Any, team: Team, member: Any) -> dict[str, Any]:
    """The other team's real objects (owned by `other_team`, used by `outsider`'s team)."""
    cluster = Cluster.objects.create(name="gpu-a", namespace="rl", api_url="https://gpu-a:6443")
    job = Job.objects.create(team=other_team, name="their-job", created_by=outsider)
    RunRecord.objects.create(team=other_team, job=job, job_name=job.name, cluster="gpu-a",
                             namespace="rl", manifest_yaml="{}", manifest_sha256="0" * 64,
                             frozen_by=outsider)
    key = SSHKey.objects.create(team=other_team, name="their-key", public_key="ssh-ed25519 AAAA",
                                fingerprint="SHA256:x", created_by=outsider)
    launch = LaunchList.objects.create(team=other_team, title="theirs", created_by=outsider)
    params = DeploymentParameters.objects.create(team=other_team, title="theirs",
                                                 created_by=outsider)
    verification = Verification.objects.create(
        team=other_team, cluster=cluster, selector={"a": "b"}, selector_key="a=b",
        requested_by=outsider)
    token, _secret = ApiToken.objects.create(user=outsider, expiry=timedelta(days=1), name="x")
    return {"slug": other_team.slug, "name": job.name, "ssh_key": key, "pk_launch": launch.pk,
            "pk_params": params.pk, "verification_id": verification.pk, "token_id": token.pk,
            "key_pk": key.pk}


def fill(route: str, values: dict[str, Any]) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(2)
        if name == "pk":
            if "ssh-keys" in route:
                return str(values["key_pk"])
            return str(values["pk_params" if "deployment-parameters" in route else "pk_launch"])
        if name == "name" and "ssh-keys" in route:
            return quote(values["ssh_key"].name)
        known = {"slug": values["slug"], "name": values["name"], "pod": "their-job-0",
                 "index": "0", "step": "1", "verification_id": values["verification_id"],
                 "token_id": values["token_id"]}
        return quote(str(known[name]))

    return "/" + re.sub(r"<(?:(\w+):)?(\w+)>", value, route)


def test_the_generator_sees_the_team_routes() -> None:
    routes = object_routes()
    assert "api/v1/jobs/<str:name>/" in routes
    assert "jobs/records/<str:name>/" in routes
    assert len(routes) > 30


def test_every_team_route_answers_404_to_an_outsider(foreign: dict[str, Any], member: Any,
                                                      api_client_for: Any) -> None:
    """`member` is in the first team; every object above belongs to the other team."""
    api = api_client_for(member)
    web = Client()
    web.force_login(member)
    wrong: list[str] = []
    for route in object_routes():
        url = fill(route, foreign)
        client = api if route.startswith("api/") else web
        expected = {403, 404, 405} if ADMIN_ONLY.search(route) else {404, 405}
        for method in METHODS:
            response = getattr(client, method)(url)
            if response.status_code not in expected:
                wrong.append(f"{method.upper()} {url} -> {response.status_code}")
    assert not wrong, "\n".join(wrong)


def test_the_owner_team_reaches_the_same_urls(foreign: dict[str, Any], outsider: Any,
                                              api_client_for: Any) -> None:
    """The control: the ids above are real (the owning team's member gets past 404 on GET)."""
    api = api_client_for(outsider)
    web = Client()
    web.force_login(outsider)
    reached = 0
    for route in object_routes():
        client = api if route.startswith("api/") else web
        if client.get(fill(route, foreign)).status_code != 404:
            reached += 1
    assert reached >= len(object_routes()) // 2


# Routes that name a team in the query (`?team=<slug>`), not the path: another team's slug is
# the same 404 as a team that does not exist.
TEAM_QUERY_ROUTES = ["/api/v1/usage/", "/jobs/usage/", "/jobs/usage/export.csv"]


def test_another_teams_slug_in_the_query_is_404(foreign: dict[str, Any], member: Any,
                                                outsider: Any, api_client_for: Any) -> None:
    wrong = []
    for user, expected in ((member, 404), (outsider, 200)):
        api = api_client_for(user)
        web = Client()
        web.force_login(user)
        for route in TEAM_QUERY_ROUTES:
            client = api if route.startswith("/api/") else web
            status = client.get(f"{route}?team={foreign['slug']}").status_code
            if status != expected:
                wrong.append(f"{user.username}: GET {route}?team={foreign['slug']} -> {status}")
    assert not wrong, "\n".join(wrong)


HOSTILE = ["a%00b", "a%0D%0Ab", "%7F", "9223372036854775808", "-1", "%C2%B9", "..%2F..", "x" * 300]
QUERIES = ["team", "state", "limit", "offset", "actor", "job", "model", "page", "q", "name",
           "cluster", "from", "to", "group_by"]


def test_hostile_bytes_in_every_argument_and_query_never_500(foreign: dict[str, Any],
                                                             member: Any, admin_user: Any,
                                                             api_client_for: Any) -> None:
    clients = {"api": api_client_for(admin_user), "web": Client()}
    clients["web"].force_login(admin_user)
    failures: list[str] = []
    routes = sorted(set(_routes(get_resolver().url_patterns)) - {""})
    for route in routes:
        if route.startswith(SKIPPED_PREFIXES):
            continue
        client = clients["api" if route.startswith("api/") else "web"]
        for bad in HOSTILE:
            path = "/" + re.sub(r"<(?:\w+:)?\w+>", bad, route)
            query = "&".join(f"{q}={bad}" for q in QUERIES)
            for url in (path, f"{fill(route, foreign) if '<' in route else '/' + route}?{query}"):
                status = client.get(url).status_code
                if status >= 500:
                    failures.append(f"GET {url} -> {status}")
    assert not failures, "\n".join(failures[:40])
