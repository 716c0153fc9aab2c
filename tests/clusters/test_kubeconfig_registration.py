"""Registering a cluster from a kubeconfig, on the admin page and through the API: the chosen
context's server, CA and user (token or client certificate) are stored encrypted, and the
cluster is then polled through the gateway; unsupported users are refused, never run."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from clusters.credentials import credentials_for
from clusters.inventory.services import PollOutcome, poll_cluster
from clusters.k8s import KubeconfigError, read_context
from clusters.models import Cluster, ClusterState
from clusters.simulator.testing import InProcessSimulator
from tests.conftest import PASSWORD
from tests.tlsutil import CertificateAuthority, mtls_simulator

FLEET = {"clusters": [{"name": "secure", "namespace": "rl-secure",
                       "storage_classes": ["fast"],
                       "nodes": [{"name": "n1", "labels": {"a": "1"}},
                                 {"name": "n2", "labels": {"a": "2"}}]}]}
SUPPORTED = "client-certificate-data and client-key-data"


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def kubeconfig(*users: tuple[str, str, dict[str, Any], str | None], ca: str | None = None,
               current: str | None = None) -> str:
    """A kubeconfig with one context per (context name, server, user, namespace)."""
    clusters, contexts, user_entries = [], [], []
    for index, (name, server, user, namespace) in enumerate(users):
        cluster: dict[str, Any] = {"server": server}
        if ca:
            cluster["certificate-authority-data"] = _b64(ca)
        clusters.append({"name": f"c{index}", "cluster": cluster})
        user_entries.append({"name": f"u{index}", "user": user})
        context = {"cluster": f"c{index}", "user": f"u{index}"}
        if namespace:
            context["namespace"] = namespace
        contexts.append({"name": name, "context": context})
    document = {"apiVersion": "v1", "kind": "Config", "clusters": clusters,
                "users": user_entries, "contexts": contexts}
    if current:
        document["current-context"] = current
    return yaml.safe_dump(document)


@pytest.fixture(scope="module")
def authority() -> CertificateAuthority:
    return CertificateAuthority()


@pytest.fixture(scope="module")
def mtls_base(authority: CertificateAuthority) -> Iterator[str]:
    with mtls_simulator(authority, FLEET) as base_url:
        yield base_url


@pytest.fixture
def cert_kubeconfig(authority: CertificateAuthority, mtls_base: str) -> str:
    client = authority.issue("rlark")
    user = {"client-certificate-data": _b64(client.cert), "client-key-data": _b64(client.key)}
    other = ("staging", "https://staging.example.com:6443", {"token": "t"}, None)
    return kubeconfig(other, ("secure", f"{mtls_base}/secure", user, "rl-secure"),
                      ca=authority.cert, current="staging")


@pytest.fixture
def admin_client(client: Client, admin_user: Any) -> Client:
    client.login(username=admin_user.username, password=PASSWORD)
    return client


# The parser (no database, no network)

def test_the_chosen_context_gives_server_ca_and_token() -> None:
    text = kubeconfig(("a", "https://a:6443", {"token": "tok-a"}, "ns-a"),
                      ("b", "https://b:6443", {"token": "tok-b"}, None), ca="CA-PEM", current="a")
    chosen = read_context(text, "b")
    assert (chosen.name, chosen.namespace) == ("b", "")
    assert (chosen.credentials.api_url, chosen.credentials.token) == ("https://b:6443", "tok-b")
    assert chosen.credentials.ca_cert == "CA-PEM"
    assert read_context(text).credentials.token == "tok-a"  # the current context


@pytest.mark.parametrize("user, reason", [
    ({"exec": {"command": "aws", "args": ["eks", "get-token"]}}, "exec are not supported"),
    ({"auth-provider": {"name": "oidc"}}, "auth-provider are not supported"),
    ({"tokenFile": "/var/run/token"}, "token files"),
    ({"username": "u", "password": "p"}, "basic auth"),
    ({"client-certificate": "/home/me/cert.pem", "client-key": "/home/me/key.pem"},
     "names a file"),
    ({"client-certificate-data": _b64("CERT")}, "needs its key"),
    ({}, "no credentials"),
])
def test_unsupported_users_are_refused_naming_what_works(user: dict[str, Any],
                                                         reason: str) -> None:
    text = kubeconfig(("x", "https://x:6443", user, "ns"), current="x")
    with pytest.raises(KubeconfigError, match=reason) as refused:
        read_context(text)
    if "not supported" in reason or "no credentials" in reason:
        assert SUPPORTED in str(refused.value)


@pytest.mark.parametrize("text, reason", [
    ("a: [unclosed", "not a YAML document"),
    ("kind: Config\n", "no list of contexts"),
])
def test_what_is_not_a_kubeconfig_is_refused(text: str, reason: str) -> None:
    with pytest.raises(KubeconfigError, match=reason):
        read_context(text)


def test_an_unknown_context_lists_the_contexts() -> None:
    text = kubeconfig(("a", "https://a:6443", {"token": "t"}, None),
                      ("b", "https://b:6443", {"token": "t"}, None))
    with pytest.raises(KubeconfigError, match="choose a context: a, b"):
        read_context(text)
    with pytest.raises(KubeconfigError, match="no context 'c'; contexts: a, b"):
        read_context(text, "c")


def test_insecure_skip_tls_verify_turns_verification_off() -> None:
    document = yaml.safe_load(kubeconfig(("a", "https://a:6443", {"token": "t"}, None),
                                         current="a"))
    document["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True
    assert read_context(yaml.safe_dump(document)).credentials.verify_tls is False


# The admin page

def test_an_uploaded_kubeconfig_with_a_client_certificate_registers_and_polls(
    admin_client: Client, cert_kubeconfig: str,
) -> None:
    upload = SimpleUploadedFile("config", cert_kubeconfig.encode())
    response = admin_client.post("/clusters/add/kubeconfig/", {
        "name": "secure", "kubeconfig_file": upload, "context": "secure", "enabled": "on"})
    assert response.status_code == 302, response.content.decode()
    cluster = Cluster.objects.get(name="secure")
    assert cluster.namespace == "rl-secure"  # from the context
    assert cluster.client_key_encrypted and "PRIVATE KEY" not in cluster.client_key_encrypted
    assert not cluster.token_encrypted
    assert credentials_for(cluster).client_cert is not None

    result = poll_cluster(cluster_id=cluster.id)
    assert result.outcome == PollOutcome.OK, result.error
    cluster.refresh_from_db()
    assert cluster.state == ClusterState.OK
    assert sorted(cluster.nodes.values_list("name", flat=True)) == ["n1", "n2"]


def test_a_pasted_token_kubeconfig_reaches_the_simulator(
    admin_client: Client, demo_simulator: InProcessSimulator,
) -> None:
    server = demo_simulator.cluster_url("gpu-a")
    text = kubeconfig(("sim", server, {"token": "demo-token-gpu-a"}, None), current="sim")
    response = admin_client.post("/clusters/add/kubeconfig/", {
        "name": "gpu-a", "kubeconfig": text, "namespace": "rl-gpu-a", "enabled": "on"})
    assert response.status_code == 302
    cluster = Cluster.objects.get(name="gpu-a")
    assert poll_cluster(cluster_id=cluster.id).outcome == PollOutcome.OK


def test_the_page_names_the_supported_kinds_when_refusing_an_exec_user(
    admin_client: Client,
) -> None:
    text = kubeconfig(("eks", "https://eks:443", {"exec": {"command": "aws"}}, "ns"),
                      current="eks")
    response = admin_client.post("/clusters/add/kubeconfig/", {"name": "eks", "kubeconfig": text})
    assert response.status_code == 200
    page = response.content.decode()
    assert "exec are not supported" in page and SUPPORTED in page
    assert "aws" not in page.split("<form", 1)[1].split("</textarea>", 1)[0]  # not echoed
    assert not Cluster.objects.filter(name="eks").exists()


def test_a_context_without_namespace_needs_one(admin_client: Client) -> None:
    text = kubeconfig(("a", "https://a:6443", {"token": "t"}, None), current="a")
    response = admin_client.post("/clusters/add/kubeconfig/", {"name": "a", "kubeconfig": text})
    assert response.status_code == 200
    assert "names no namespace" in response.content.decode()


def test_only_platform_admins_register_clusters(client: Client, member: Any) -> None:
    client.login(username=member.username, password=PASSWORD)
    assert client.get("/clusters/add/kubeconfig/").status_code == 403


# The API

def test_the_api_registers_a_client_certificate_cluster(
    admin_user: Any, api_client_for: Any, cert_kubeconfig: str,
) -> None:
    response = api_client_for(admin_user).post("/api/v1/clusters/from-kubeconfig/", {
        "name": "secure", "kubeconfig": cert_kubeconfig, "kube_context": "secure"},
        format="json")
    assert response.status_code == 201, response.json()
    body = response.json()
    assert body["has_client_certificate"] is True and body["has_token"] is False
    assert body["has_ca_cert"] is True and body["namespace"] == "rl-secure"
    assert "kubeconfig" not in body
    cluster = Cluster.objects.get(name="secure")
    assert poll_cluster(cluster_id=cluster.id).outcome == PollOutcome.OK


def test_the_api_refuses_an_auth_provider_user(admin_user: Any, api_client_for: Any) -> None:
    text = kubeconfig(("gke", "https://gke:443", {"auth-provider": {"name": "gcp"}}, "ns"),
                      current="gke")
    response = api_client_for(admin_user).post(
        "/api/v1/clusters/from-kubeconfig/", {"name": "gke", "kubeconfig": text}, format="json")
    assert response.status_code == 400
    assert "auth-provider are not supported" in str(response.json())


def test_members_cannot_register_through_the_api(member: Any, api_client_for: Any) -> None:
    text = kubeconfig(("a", "https://a:6443", {"token": "t"}, "ns"), current="a")
    response = api_client_for(member).post(
        "/api/v1/clusters/from-kubeconfig/", {"name": "a", "kubeconfig": text}, format="json")
    assert response.status_code == 403


# The reasons in the user's language

def test_every_refusal_reason_has_a_translated_message() -> None:
    from django.utils import translation

    from clusters.inventory.forms import _KUBECONFIG_REASONS, kubeconfig_reason

    cases = {
        "exec": kubeconfig(("x", "https://x:6443", {"exec": {"command": "aws"}}, "ns"),
                           current="x"),
        "yaml": "a: [unclosed",
        "contexts": kubeconfig(("a", "https://a:6443", {"token": "t"}, None),
                               ("b", "https://b:6443", {"token": "t"}, None)),
    }
    codes = set()
    for text in cases.values():
        with pytest.raises(KubeconfigError) as refused:
            read_context(text)
        codes.add(refused.value.code)
        assert refused.value.code in _KUBECONFIG_REASONS
        with translation.override("zh-hans"):
            chinese = kubeconfig_reason(refused.value)
        assert chinese != str(refused.value) and chinese.isascii() is False
    assert codes == {"unsupported_user", "not_yaml", "choose_context"}


def test_the_page_and_the_api_refuse_an_exec_user_in_chinese(
    admin_client: Client, admin_user: Any, api_client_for: Any,
) -> None:
    text = kubeconfig(("eks", "https://eks:443", {"exec": {"command": "aws"}}, "ns"),
                      current="eks")
    page = admin_client.post("/clusters/add/kubeconfig/", {"name": "eks", "kubeconfig": text},
                             HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "无法使用此 kubeconfig：不支持使用 exec 的用户" in page
    assert "客户端证书与密钥" in page and "are not supported" not in page
    answer = api_client_for(admin_user).post(
        "/api/v1/clusters/from-kubeconfig/", {"name": "eks", "kubeconfig": text},
        format="json", HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert answer.status_code == 400
    assert "不支持使用 exec 的用户" in str(answer.json())
    assert not Cluster.objects.filter(name="eks").exists()
