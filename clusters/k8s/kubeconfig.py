"""Credentials from a kubeconfig file (a context with a server, a bearer token and a CA)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from kubernetes import client as k8s
from kubernetes import config as k8s_config

from clusters.k8s.client import Credentials

_BEARER = "Bearer "


def credentials_from_kubeconfig(*, path: str | Path, context: str | None = None) -> Credentials:
    """Read one context of a kubeconfig into `Credentials` (the current context by default).

    Token-based users only (static tokens or exec/auth plugins that yield a token,
    read once: an expiring token must be re-read by calling this again). Client
    certificates are not supported: `Credentials` carries no client key.
    """
    configuration = k8s.Configuration()
    with tempfile.TemporaryDirectory(prefix="rlark-kubeconfig-") as scratch:
        k8s_config.load_kube_config(
            config_file=str(path),
            context=context,
            client_configuration=configuration,
            persist_config=False,
            temp_file_path=scratch,
        )
        ca_cert = Path(configuration.ssl_ca_cert).read_text() if configuration.ssl_ca_cert else None
    token = configuration.api_key.get("BearerToken") or configuration.api_key.get("authorization")
    if token is None and configuration.cert_file:
        raise ValueError("client-certificate users are not supported; use a token")
    if token is not None and token.startswith(_BEARER):
        token = token[len(_BEARER) :]
    return Credentials(
        api_url=configuration.host,
        token=token,
        ca_cert=ca_cert,
        verify_tls=bool(configuration.verify_ssl),
    )
