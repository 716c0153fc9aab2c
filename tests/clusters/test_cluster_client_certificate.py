"""A cluster's client certificate and key are replaced (or removed) when editing it, on the
page and through the API: stored encrypted like the other credentials, both or neither, and
the next poll signs in with the new certificate (a simulator that checks client certs)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django.test import Client

from clusters.credentials import credentials_for
from clusters.inventory.services import PollOutcome, cluster_create, poll_cluster
from clusters.models import Cluster
from tests.conftest import PASSWORD
from tests.tlsutil import CertificateAuthority, mtls_simulator

FLEET = {"clusters": [{"name": "secure", "namespace": "rl-secure", "storage_classes": ["fast"],
                       "nodes": [{"name": "n1", "labels": {"a": "1"}}]}]}


@pytest.fixture(scope="module")
def authority() -> CertificateAuthority:
    return CertificateAuthority()


@pytest.fixture(scope="module")
def mtls_base(authority: CertificateAuthority) -> Iterator[str]:
    with mtls_simulator(authority, FLEET) as base_url:
        yield base_url


@pytest.fixture
def stale_cluster(db: None, authority: CertificateAuthority, mtls_base: str) -> Cluster:
    """Registered with a certificate the cluster does not trust (another authority's)."""
    stale = CertificateAuthority("retired-ca").issue("rlark")
    return cluster_create(name="secure", namespace="rl-secure", api_url=f"{mtls_base}/secure",
                          ca_cert=authority.cert, client_cert=stale.cert, client_key=stale.key)


@pytest.fixture
def admin_client(client: Client, admin_user: Any) -> Client:
    client.login(username=admin_user.username, password=PASSWORD)
    return client


def _edit_form(cluster: Cluster, **changes: str) -> dict[str, str]:
    form = {"name": cluster.name, "namespace": cluster.namespace, "api_url": cluster.api_url,
            "verify_tls": "on", "enabled": "on"}
    form.update(changes)
    return form


def test_the_edit_page_replaces_the_certificate_and_the_next_poll_uses_it(
    admin_client: Client, stale_cluster: Cluster, authority: CertificateAuthority,
) -> None:
    assert poll_cluster(cluster_id=stale_cluster.id).outcome == PollOutcome.FAILED
    fresh = authority.issue("rlark")
    page = admin_client.get(f"/clusters/cluster/{stale_cluster.name}/edit/").content.decode()
    assert "A certificate and its key are stored" in page
    assert "PRIVATE KEY" not in page  # never shown back
    response = admin_client.post(f"/clusters/cluster/{stale_cluster.name}/edit/", _edit_form(
        stale_cluster, client_cert=fresh.cert, client_key=fresh.key))
    assert response.status_code == 302, response.content.decode()
    stale_cluster.refresh_from_db()
    assert "PRIVATE KEY" not in stale_cluster.client_key_encrypted  # encrypted at rest
    credentials = credentials_for(stale_cluster)
    assert (credentials.client_cert, credentials.client_key) == (fresh.cert, fresh.key)
    assert poll_cluster(cluster_id=stale_cluster.id).outcome == PollOutcome.OK


def test_blank_keeps_and_remove_clears_the_certificate(
    admin_client: Client, stale_cluster: Cluster,
) -> None:
    before = (stale_cluster.client_cert_encrypted, stale_cluster.client_key_encrypted)
    url = f"/clusters/cluster/{stale_cluster.name}/edit/"
    assert admin_client.post(url, _edit_form(stale_cluster)).status_code == 302
    stale_cluster.refresh_from_db()
    assert (stale_cluster.client_cert_encrypted, stale_cluster.client_key_encrypted) == before
    assert admin_client.post(url, _edit_form(
        stale_cluster, clear_client_certificate="on")).status_code == 302
    stale_cluster.refresh_from_db()
    assert not stale_cluster.client_cert_encrypted and not stale_cluster.client_key_encrypted


@pytest.mark.parametrize("changes, field, message", [
    ({"client_cert": "CERT"}, "client_key", "needs its key"),
    ({"client_key": "KEY"}, "client_cert", "needs its certificate"),
    ({"client_cert": "not pem", "client_key": "not pem"}, "client_cert", "PEM certificate"),
    ({"clear_client_certificate": "on", "client_cert": "x", "client_key": "y"},
     "clear_client_certificate", "not both"),
])
def test_the_page_refuses_half_a_pair_or_what_is_not_pem(
    admin_client: Client, stale_cluster: Cluster, changes: dict[str, str], field: str,
    message: str,
) -> None:
    before = stale_cluster.client_cert_encrypted
    response = admin_client.post(f"/clusters/cluster/{stale_cluster.name}/edit/",
                                 _edit_form(stale_cluster, **changes))
    assert response.status_code == 200
    assert message in " ".join(str(e) for e in response.context["form"].errors[field])
    stale_cluster.refresh_from_db()
    assert stale_cluster.client_cert_encrypted == before


def test_the_page_says_it_in_chinese(admin_client: Client, stale_cluster: Cluster) -> None:
    response = admin_client.post(f"/clusters/cluster/{stale_cluster.name}/edit/",
                                 _edit_form(stale_cluster, client_cert="CERT"),
                                 HTTP_ACCEPT_LANGUAGE="zh-hans")
    page = response.content.decode()
    assert "客户端证书需要其密钥" in page and "客户端证书（PEM）" in page


def test_the_api_replaces_and_removes_the_certificate(
    admin_user: Any, api_client_for: Any, stale_cluster: Cluster,
    authority: CertificateAuthority,
) -> None:
    api = api_client_for(admin_user)
    url = f"/api/v1/clusters/{stale_cluster.name}/"
    fresh = authority.issue("rlark")
    half = api.patch(url, {"client_cert": fresh.cert}, format="json")
    assert half.status_code == 400 and "client_key" in half.json()["errors"]
    response = api.patch(url, {"client_cert": fresh.cert, "client_key": fresh.key},
                         format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["has_client_certificate"] is True
    assert "client_key" not in response.json()
    assert poll_cluster(cluster_id=stale_cluster.id).outcome == PollOutcome.OK
    removed = api.patch(url, {"client_cert": "", "client_key": ""}, format="json")
    assert removed.json()["has_client_certificate"] is False
    stale_cluster.refresh_from_db()
    assert not stale_cluster.client_key_encrypted
