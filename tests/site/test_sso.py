"""Single sign-on through OpenID Connect, against a small provider run inside the test: a
loopback issuer with its discovery document, JWKS (an RS256 key made here with
`cryptography`), authorization, token and userinfo endpoints. The real redirect flow is
driven with Django's test client; the provider is reached over HTTP by RLark itself."""

from __future__ import annotations

import json
import secrets
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from django.contrib.auth import get_user_model
from django.test import Client
from django.test.utils import override_settings

from rlark_site.foundation import sso
from rlark_site.foundation.tenancy.models import MemberRole, Membership, Team
from tests.conftest import PASSWORD, make_user

CLIENT_ID = "rlark"
CLIENT_SECRET = "s3cret"
User = get_user_model()


@dataclass
class Provider:
    """The issuer's state: who signs in next, the codes it handed out, what it was asked."""

    url: str = ""
    key: rsa.RSAPrivateKey = field(
        default_factory=lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048))
    claims: dict[str, Any] = field(default_factory=dict)
    audience: str = CLIENT_ID
    codes: dict[str, dict[str, Any]] = field(default_factory=dict)
    token_requests: list[dict[str, list[str]]] = field(default_factory=list)
    end_session: bool = True  # whether discovery names an end_session_endpoint
    issued: list[str] = field(default_factory=list)  # the ID tokens handed out

    def jwks(self) -> dict[str, Any]:
        jwk = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**jwk, "kid": "k1", "alg": "RS256", "use": "sig"}]}

    def id_token(self, nonce: str) -> str:
        now = int(time.time())
        payload = {"iss": self.url, "aud": self.audience, "sub": self.claims["sub"],
                   "nonce": nonce, "iat": now, "exp": now + 300}
        token = jwt.encode(payload, self.key, algorithm="RS256", headers={"kid": "k1"})
        self.issued.append(token)
        return token


def _handler(provider: Provider) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def _json(self, body: Any, status: int = 200) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            query = {k: v[0] for k, v in parse_qs(parts.query).items()}
            if parts.path == "/.well-known/openid-configuration":
                document = {"issuer": provider.url,
                            "authorization_endpoint": f"{provider.url}/authorize",
                            "token_endpoint": f"{provider.url}/token",
                            "userinfo_endpoint": f"{provider.url}/userinfo",
                            "jwks_uri": f"{provider.url}/jwks"}
                if provider.end_session:
                    document["end_session_endpoint"] = f"{provider.url}/logout"
                self._json(document)
            elif parts.path == "/jwks":
                self._json(provider.jwks())
            elif parts.path == "/authorize":
                code = secrets.token_urlsafe(16)
                provider.codes[code] = query
                self.send_response(302)
                self.send_header("Location", f"{query['redirect_uri']}?" + urlencode(
                    {"code": code, "state": query["state"]}))
                self.end_headers()
            elif parts.path == "/userinfo":
                if self.headers.get("Authorization") != "Bearer access-1":
                    self._json({"error": "invalid_token"}, 401)
                else:
                    self._json(provider.claims)
            else:
                self._json({"error": "not_found"}, 404)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            form = parse_qs(self.rfile.read(length).decode())
            provider.token_requests.append(form)
            request = provider.codes.pop(form.get("code", [""])[0], None)
            if (request is None or form.get("client_secret") != [CLIENT_SECRET]
                    or form.get("redirect_uri") != [request["redirect_uri"]]):
                self._json({"error": "invalid_grant"}, 400)
                return
            self._json({"access_token": "access-1", "token_type": "Bearer",
                        "id_token": provider.id_token(request["nonce"])})

    return Handler


@pytest.fixture(scope="module")
def running_provider() -> Iterator[Provider]:
    provider = Provider()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(provider))
    provider.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1},
                              daemon=True)
    thread.start()
    yield provider
    server.shutdown()
    server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def provider(running_provider: Provider, db: None) -> Iterator[Provider]:
    running_provider.claims = {"sub": "u-1", "preferred_username": "dana",
                               "email": "dana@example.com", "groups": []}
    running_provider.audience = CLIENT_ID
    running_provider.end_session = True
    sso.discovery.cache_clear()
    with override_settings(RLARK_OIDC_ENABLED=True, RLARK_OIDC_ISSUER=running_provider.url,
                           OIDC_RP_CLIENT_ID=CLIENT_ID, OIDC_RP_CLIENT_SECRET=CLIENT_SECRET,
                           RLARK_OIDC_ADMIN_GROUPS=["rlark-admins"],
                           RLARK_OIDC_TEAM_GROUPS=["rl-vision=vision-rl:member",
                                                   "rl-vision-leads=vision-rl:maintainer"]):
        yield running_provider
    sso.discovery.cache_clear()


def sign_in(client: Client, provider: Provider) -> Any:
    """The browser's part: RLark -> provider's authorize -> RLark's callback."""
    start = client.get("/oidc/authenticate/", {"next": "/jobs/"})
    assert start.status_code == 302
    authorize = start["Location"]
    assert authorize.startswith(f"{provider.url}/authorize?")
    query = {k: v[0] for k, v in parse_qs(urlsplit(authorize).query).items()}
    assert query["client_id"] == CLIENT_ID and query["code_challenge_method"] == "S256"
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        opener.open(authorize, timeout=10)
    except urllib.error.HTTPError as redirect:
        callback = redirect.headers["Location"]
    parts = urlsplit(callback)
    assert parts.path == "/oidc/callback/"
    return client.get(parts.path, {k: v[0] for k, v in parse_qs(parts.query).items()})


def test_first_sign_in_creates_the_user_and_lands_where_asked(
    client: Client, provider: Provider,
) -> None:
    response = sign_in(client, provider)
    assert response.status_code == 302 and response["Location"] == "/jobs/"
    user = User.objects.get(username="dana")
    assert user.email == "dana@example.com" and not user.has_usable_password()
    assert client.get("/jobs/").status_code == 200  # the session is signed in
    (token_request,) = provider.token_requests[-1:]
    assert token_request["code_verifier"]  # PKCE


def test_groups_decide_platform_admin_and_team_memberships(
    client: Client, provider: Provider, team: Team,
) -> None:
    provider.claims["groups"] = ["rl-vision", "rl-vision-leads", "rlark-admins"]
    sign_in(client, provider)
    user = User.objects.get(username="dana")
    assert user.is_staff
    assert Membership.objects.get(team=team, user=user).role == MemberRole.MAINTAINER

    provider.claims["groups"] = ["rl-vision"]
    client.logout()
    sign_in(client, provider)
    user.refresh_from_db()
    assert not user.is_staff
    assert Membership.objects.get(team=team, user=user).role == MemberRole.MEMBER

    provider.claims["groups"] = []
    client.logout()
    sign_in(client, provider)
    assert not Membership.objects.filter(team=team, user=user).exists()


def test_teams_the_mapping_does_not_name_are_left_alone(
    client: Client, provider: Provider, other_team: Team,
) -> None:
    sign_in(client, provider)
    user = User.objects.get(username="dana")
    Membership.objects.create(team=other_team, user=user, role=MemberRole.MEMBER)
    client.logout()
    sign_in(client, provider)
    assert Membership.objects.filter(team=other_team, user=user).exists()


def test_sso_never_signs_into_a_local_account(client: Client, provider: Provider) -> None:
    make_user("dana")  # a local user with a password, e.g. the break-glass admin
    response = sign_in(client, provider)
    assert response.status_code == 302 and "sso=failed" in response["Location"]
    assert client.get("/jobs/").status_code == 302  # not signed in


def test_a_token_for_another_client_is_refused(client: Client, provider: Provider) -> None:
    provider.audience = "someone-else"
    response = sign_in(client, provider)
    assert "sso=failed" in response["Location"]
    assert not User.objects.filter(username="dana").exists()


def test_the_local_password_login_stays(client: Client, provider: Provider,
                                        admin_user: Any) -> None:
    page = client.get("/login/").content.decode()
    assert "/oidc/authenticate/" in page and 'name="password"' in page
    response = client.post("/login/", {"username": admin_user.username, "password": PASSWORD})
    assert response.status_code == 302


def test_sso_is_off_by_default(client: Client, db: None) -> None:
    assert client.get("/oidc/authenticate/").status_code == 404
    assert client.get("/oidc/callback/", {"code": "x", "state": "y"}).status_code == 404
    assert "/oidc/authenticate/" not in client.get("/login/").content.decode()


def test_team_mapping_entries_are_checked() -> None:
    assert sso.team_grants(["g=t"]) == [sso.TeamGrant(group="g", team="t", role="member")]
    with pytest.raises(ValueError, match="group=team-slug:role"):
        sso.team_grants(["g=t:owner"])


# RP-initiated logout

def test_logging_out_ends_the_providers_session_too(client: Client, provider: Provider) -> None:
    sign_in(client, provider)
    response = client.post("/logout/")
    assert response.status_code == 302
    target = urlsplit(response["Location"])
    assert f"{target.scheme}://{target.netloc}{target.path}" == f"{provider.url}/logout"
    query = {k: v[0] for k, v in parse_qs(target.query).items()}
    assert query == {"id_token_hint": provider.issued[-1], "client_id": CLIENT_ID,
                     "post_logout_redirect_uri": "http://testserver/login/"}
    assert client.get("/jobs/").status_code == 302  # signed out here as well


def test_without_an_end_session_endpoint_logout_stays_local(
    client: Client, provider: Provider,
) -> None:
    provider.end_session = False
    sign_in(client, provider)
    response = client.post("/logout/")
    assert response.status_code == 302 and response["Location"] == "/login/"
    assert client.get("/jobs/").status_code == 302


def test_a_password_session_logs_out_locally_with_sso_on(
    client: Client, provider: Provider, admin_user: Any,
) -> None:
    client.post("/login/", {"username": admin_user.username, "password": PASSWORD})
    response = client.post("/logout/")
    assert response.status_code == 302 and response["Location"] == "/login/"
