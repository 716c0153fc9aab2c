"""SSH keys: validation, fingerprints, unique names per team, and the API (SPEC 12)."""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from rest_framework.test import APIClient

from jobs.core.sshkeys import fingerprint_sha256
from jobs.drafts.services import ssh_key_create, ssh_key_delete
from jobs.models import SSHKey
from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.tenancy.models import Team

pytestmark = pytest.mark.django_db

KEYS = "/api/v1/ssh-keys/"


def public_key(comment: str = "") -> str:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    line = key.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()
    return f"{line} {comment}".strip()


@pytest.fixture
def api(api_client_for: Callable[[Any], APIClient], owner: Any) -> APIClient:
    return api_client_for(owner)


def test_a_valid_key_is_stored_normalised_with_its_fingerprint(team: Team, owner: Any) -> None:
    line = public_key("alice@laptop")
    key = ssh_key_create(team=team, user=owner, name=" alice ", public_key=f"  {line}\n")
    assert key.name == "alice"
    assert key.public_key == line
    assert key.fingerprint == fingerprint_sha256(line)
    assert key.fingerprint.startswith("SHA256:")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "ssh-dss AAAAB3NzaC1kc3MAAACBAP",
        "ssh-ed25519 not-base64!!",
        "ssh-rsa " + base64.b64encode(b"\x00\x00\x00\x0bssh-ed25519" + b"\x00" * 36).decode(),
        "hello world",
    ],
)
def test_invalid_keys_are_refused_naming_the_field(team: Team, owner: Any, text: str) -> None:
    with pytest.raises(ApplicationError) as refused:
        ssh_key_create(team=team, user=owner, name="k", public_key=text)
    assert refused.value.status_code == 400
    assert refused.value.extra == {"field": "public_key"}
    assert not SSHKey.objects.exists()


def test_names_are_unique_per_team_only(
    team: Team, other_team: Team, owner: Any, outsider: Any
) -> None:
    ssh_key_create(team=team, user=owner, name="laptop", public_key=public_key())
    with pytest.raises(ApplicationError) as refused:
        ssh_key_create(team=team, user=owner, name="laptop", public_key=public_key())
    assert refused.value.extra == {"field": "name"}
    assert "laptop" in refused.value.message
    ssh_key_create(team=other_team, user=outsider, name="laptop", public_key=public_key())
    assert SSHKey.objects.count() == 2


def test_delete_removes_the_key(team: Team, owner: Any) -> None:
    key = ssh_key_create(team=team, user=owner, name="k", public_key=public_key())
    ssh_key_delete(key=key)
    assert not SSHKey.objects.exists()


def test_api_adds_lists_and_deletes_keys(api: APIClient, team: Team) -> None:
    line = public_key("ci")
    response = api.post(KEYS, {"name": "ci", "public_key": line}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["fingerprint"] == fingerprint_sha256(line)
    assert response.json()["team"] == "vision-rl"
    listed = api.get(KEYS).json()
    assert [k["name"] for k in listed["results"]] == ["ci"]
    assert api.get(f"{KEYS}ci/").json()["public_key"] == line
    assert api.delete(f"{KEYS}ci/").status_code == 204
    assert api.get(KEYS).json()["count"] == 0


def test_api_reports_an_invalid_key_with_a_clear_400(api: APIClient, team: Team) -> None:
    response = api.post(KEYS, {"name": "bad", "public_key": "ssh-ed25519 AAAA"}, format="json")
    assert response.status_code == 400
    assert response.json()["field"] == "public_key"
    assert response.json()["detail"]
    response = api.post(KEYS, {"name": "bad"}, format="json")
    assert response.status_code == 400
    assert response.json()["detail"].startswith("Malformed request body: public_key:")


def test_api_keeps_teams_apart(
    api: APIClient, api_client_for: Callable[[Any], APIClient], outsider: Any,
    other_team: Team, team: Team,
) -> None:
    ssh_key_create(team=other_team, user=outsider, name="theirs", public_key=public_key())
    assert api.get(KEYS).json()["count"] == 0
    assert api.get(f"{KEYS}theirs/").status_code == 404
    assert api.delete(f"{KEYS}theirs/").status_code == 404
    assert api.get(KEYS, {"team": "nlp-rl"}).status_code == 404
    response = api.post(KEYS, {"team": "nlp-rl", "name": "x", "public_key": public_key()},
                        format="json")
    assert response.status_code == 404
    assert SSHKey.objects.filter(team=other_team).count() == 1
    assert APIClient().get(KEYS).status_code == 401
