"""The SSH key page: list, add (errors next to the field, input kept), delete with confirmation."""

from __future__ import annotations

import re
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from django.test import Client
from django.urls import reverse

from jobs.drafts.services import ssh_key_create
from jobs.models import SSHKey
from rlark_site.foundation.tenancy.models import Team

pytestmark = pytest.mark.django_db


def public_key(comment: str = "") -> str:
    key = ed25519.Ed25519PrivateKey.generate().public_key()
    line = key.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()
    return f"{line} {comment}".strip()


@pytest.fixture
def page(client: Client, owner: Any) -> Client:
    client.force_login(owner)
    return client


def test_the_page_requires_login(client: Client) -> None:
    response = client.get(reverse("jobs:ssh-keys"))
    assert response.status_code == 302
    assert response["Location"].startswith("/login/")


def test_the_page_lists_the_teams_keys_only(
    page: Client, team: Team, owner: Any, other_team: Team, outsider: Any
) -> None:
    ours = ssh_key_create(team=team, user=owner, name="alice-laptop", public_key=public_key())
    ssh_key_create(team=other_team, user=outsider, name="their-key", public_key=public_key())
    html = page.get(reverse("jobs:ssh-keys")).content.decode()
    row = re.search(r"<tr>\s*<td>alice-laptop</td>.*?</tr>", html, re.S)
    assert row is not None and ours.fingerprint in row.group(0)
    assert "<td>owner</td>" in row.group(0)  # who added it
    assert "their-key" not in html


def test_adding_a_key_redirects_back_with_a_message(page: Client, team: Team) -> None:
    response = page.post(reverse("jobs:ssh-keys"),
                         {"name": "ci", "public_key": public_key("ci")}, follow=True)
    assert response.redirect_chain == [(reverse("jobs:ssh-keys"), 302)]
    assert "SSH key ci added." in response.content.decode()
    assert SSHKey.objects.get(team=team).name == "ci"


def test_an_invalid_key_is_shown_next_to_the_field_keeping_the_input(page: Client) -> None:
    typed = "ssh-ed25519 definitely-not-a-key"
    response = page.post(reverse("jobs:ssh-keys"), {"name": "mine", "public_key": typed})
    html = response.content.decode()
    assert response.status_code == 200
    assert 'id="public-key-errors"' in html
    assert 'aria-invalid="true" aria-describedby="public-key-errors"' in html
    assert f">{typed}</textarea>" in html
    assert 'value="mine"' in html
    assert not SSHKey.objects.exists()


def test_a_duplicate_name_is_shown_next_to_the_name(page: Client, team: Team, owner: Any) -> None:
    ssh_key_create(team=team, user=owner, name="dup", public_key=public_key())
    response = page.post(reverse("jobs:ssh-keys"), {"name": "dup", "public_key": public_key()})
    assert 'id="name-errors"' in response.content.decode()
    assert SSHKey.objects.count() == 1


def test_delete_asks_for_confirmation_then_deletes(page: Client, team: Team, owner: Any) -> None:
    key = ssh_key_create(team=team, user=owner, name="old", public_key=public_key())
    url = reverse("jobs:ssh-key-delete", args=[key.pk])
    confirm = page.get(url)
    assert confirm.status_code == 200
    assert key.fingerprint in confirm.content.decode()
    assert SSHKey.objects.exists()
    response = page.post(url)
    assert response.status_code == 302
    assert not SSHKey.objects.exists()


def test_another_teams_key_answers_404(
    page: Client, other_team: Team, outsider: Any
) -> None:
    theirs = ssh_key_create(team=other_team, user=outsider, name="t", public_key=public_key())
    url = reverse("jobs:ssh-key-delete", args=[theirs.pk])
    assert page.get(url).status_code == 404
    assert page.post(url).status_code == 404
    assert SSHKey.objects.filter(pk=theirs.pk).exists()
