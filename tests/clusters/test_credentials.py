"""Cluster credentials: encrypted at rest, readable with any configured key, rotatable."""

from __future__ import annotations

from io import StringIO
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.core.management import call_command
from django.core.management.base import CommandError
from pghistory.models import Events

from clusters.credentials import (
    CredentialError,
    credentials_for,
    decrypt,
    encrypt,
    is_current,
    reencrypt,
)
from clusters.inventory.services import cluster_create, cluster_update
from clusters.models import Cluster

OLD_KEY = Fernet.generate_key().decode()
NEW_KEY = Fernet.generate_key().decode()
TOKEN = "bearer-token-0123456789"
CA = "-----BEGIN CERTIFICATE-----\nMIIBdemo\n-----END CERTIFICATE-----\n"


@pytest.fixture
def old_key(settings: Any) -> Any:
    settings.RLARK_CREDENTIAL_KEYS = [OLD_KEY]
    return settings


def test_encryption_round_trips_and_hides_the_text(old_key: Any) -> None:
    token = encrypt(TOKEN)
    assert TOKEN not in token
    assert decrypt(token) == TOKEN


def test_the_empty_credential_stays_empty(old_key: Any) -> None:
    assert encrypt("") == ""
    assert decrypt("") == ""


def test_two_encryptions_of_one_text_differ(old_key: Any) -> None:
    assert encrypt(TOKEN) != encrypt(TOKEN)


def test_an_old_key_still_decrypts_after_a_new_key_is_put_first(settings: Any) -> None:
    settings.RLARK_CREDENTIAL_KEYS = [OLD_KEY]
    token = encrypt(TOKEN)
    settings.RLARK_CREDENTIAL_KEYS = [NEW_KEY, OLD_KEY]
    assert decrypt(token) == TOKEN
    assert not is_current(token)
    rotated = reencrypt(token)
    assert is_current(rotated)
    settings.RLARK_CREDENTIAL_KEYS = [NEW_KEY]
    assert decrypt(rotated) == TOKEN


def test_a_ciphertext_of_an_unknown_key_is_refused(settings: Any) -> None:
    settings.RLARK_CREDENTIAL_KEYS = [OLD_KEY]
    token = encrypt(TOKEN)
    settings.RLARK_CREDENTIAL_KEYS = [NEW_KEY]
    with pytest.raises(CredentialError):
        decrypt(token)


@pytest.mark.django_db
def test_stored_credentials_are_ciphertext_and_decrypt_for_the_gateway(old_key: Any) -> None:
    cluster = cluster_create(
        name="gpu-z", namespace="rl-z", api_url="https://k8s.example.com:6443", token=TOKEN,
        ca_cert=CA,
    )
    stored = Cluster.objects.values("token_encrypted", "ca_cert_encrypted").get(id=cluster.id)
    assert TOKEN not in stored["token_encrypted"]
    assert "CERTIFICATE" not in stored["ca_cert_encrypted"]
    credentials = credentials_for(Cluster.objects.get(id=cluster.id))
    assert (credentials.api_url, credentials.token, credentials.ca_cert) == (
        "https://k8s.example.com:6443", TOKEN, CA,
    )
    assert credentials.verify_tls is True
    assert TOKEN not in repr(credentials)


@pytest.mark.django_db
def test_a_cluster_without_credentials_gives_none_to_the_gateway(old_key: Any) -> None:
    cluster = cluster_create(name="open", namespace="rl-open", api_url="http://127.0.0.1:1/open")
    credentials = credentials_for(cluster)
    assert (credentials.token, credentials.ca_cert) == (None, None)


@pytest.mark.django_db
def test_saving_the_same_token_again_writes_nothing(old_key: Any) -> None:
    cluster = cluster_create(
        name="gpu-z", namespace="rl-z", api_url="http://127.0.0.1:1/z", token=TOKEN
    )
    before = Events.objects.count()
    cluster_update(cluster=cluster, token=TOKEN)
    assert Events.objects.count() == before


@pytest.mark.django_db
def test_rotate_credentials_re_encrypts_with_the_newest_key(settings: Any) -> None:
    settings.RLARK_CREDENTIAL_KEYS = [OLD_KEY]
    cluster = cluster_create(
        name="gpu-z", namespace="rl-z", api_url="http://127.0.0.1:1/z", token=TOKEN, ca_cert=CA
    )
    cluster_create(name="open", namespace="rl-open", api_url="http://127.0.0.1:1/open")
    settings.RLARK_CREDENTIAL_KEYS = [NEW_KEY, OLD_KEY]
    out = StringIO()
    call_command("rotate_credentials", stdout=out)
    assert "of 1 cluster(s)" in out.getvalue()
    settings.RLARK_CREDENTIAL_KEYS = [NEW_KEY]
    credentials = credentials_for(Cluster.objects.get(id=cluster.id))
    assert (credentials.token, credentials.ca_cert) == (TOKEN, CA)


@pytest.mark.django_db
def test_rotating_twice_changes_nothing_the_second_time(settings: Any) -> None:
    settings.RLARK_CREDENTIAL_KEYS = [NEW_KEY, OLD_KEY]
    cluster_create(name="gpu-z", namespace="rl-z", api_url="http://127.0.0.1:1/z", token=TOKEN)
    out = StringIO()
    call_command("rotate_credentials", stdout=out)
    assert "of 0 cluster(s)" in out.getvalue()


@pytest.mark.django_db
def test_rotation_names_a_cluster_whose_key_is_gone(settings: Any) -> None:
    settings.RLARK_CREDENTIAL_KEYS = [OLD_KEY]
    cluster_create(name="gpu-z", namespace="rl-z", api_url="http://127.0.0.1:1/z", token=TOKEN)
    settings.RLARK_CREDENTIAL_KEYS = [NEW_KEY]
    with pytest.raises(CommandError, match="gpu-z"):
        call_command("rotate_credentials", stdout=StringIO())
