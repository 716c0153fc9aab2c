"""Client-certificate users reach a cluster through the gateway: the fleet simulator served
over TLS that requires a client certificate signed by the cluster's CA (mutual TLS)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from clusters import k8s
from tests.tlsutil import CertificateAuthority, Issued, mtls_simulator

FLEET = {"clusters": [{"name": "secure", "namespace": "rl", "storage_classes": ["fast"],
                       "nodes": [{"name": "n1", "labels": {"a": "1"}}]}]}


@pytest.fixture(scope="module")
def authority() -> CertificateAuthority:
    return CertificateAuthority()


@pytest.fixture(scope="module")
def mtls_url(authority: CertificateAuthority) -> Iterator[str]:
    with mtls_simulator(authority, FLEET) as base_url:
        yield f"{base_url}/secure"


def _credentials(url: str, authority: CertificateAuthority, client: Issued | None
                 ) -> k8s.Credentials:
    return k8s.Credentials(api_url=url, ca_cert=authority.cert,
                           client_cert=client.cert if client else None,
                           client_key=client.key if client else None)


def test_a_client_certificate_of_the_cluster_ca_lists_the_cluster(
    mtls_url: str, authority: CertificateAuthority,
) -> None:
    credentials = _credentials(mtls_url, authority, authority.issue("rlark"))
    assert k8s.list_storage_classes(credentials=credentials) == ["fast"]
    nodes = [node.name for page in k8s.iter_node_pages(credentials=credentials) for node in page]
    assert nodes == ["n1"]


def test_without_a_client_certificate_the_handshake_is_refused(
    mtls_url: str, authority: CertificateAuthority,
) -> None:
    with pytest.raises(k8s.KubeError):
        k8s.list_storage_classes(credentials=_credentials(mtls_url, authority, None))


def test_a_certificate_of_another_ca_is_refused(
    mtls_url: str, authority: CertificateAuthority,
) -> None:
    stranger = CertificateAuthority("someone-else").issue("rlark")
    with pytest.raises(k8s.KubeError):
        k8s.list_storage_classes(credentials=_credentials(mtls_url, authority, stranger))


def test_the_key_never_touches_the_disk(mtls_url: str, authority: CertificateAuthority) -> None:
    client = authority.issue("rlark")
    credentials = _credentials(mtls_url, authority, client)
    k8s.list_storage_classes(credentials=credentials)
    configuration = k8s.client.api_client_for(credentials).configuration
    assert configuration.key_file.startswith("/proc/self/fd/")
    assert Path(configuration.key_file).read_text() == client.key
