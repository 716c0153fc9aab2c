"""Credentials from a kubeconfig: one context's server, CA bundle and user, read as data.

The document is parsed here, never handed to the `kubernetes` loader: an uploaded kubeconfig
must not make RLark run its `exec` command or call an auth provider. Supported users carry a
bearer token (`token`) or a client certificate and key (`client-certificate-data` and
`client-key-data`); everything must be embedded (`kubectl config view --flatten --minify`).
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from clusters.k8s.client import Credentials

SUPPORTED_USERS = ("a bearer token (token) or a client certificate and key "
                   "(client-certificate-data and client-key-data)")


class KubeconfigError(ValueError):
    """The kubeconfig cannot be used; the message says why and what would work."""


@dataclass(frozen=True)
class KubeconfigContext:
    """One context of a kubeconfig, turned into gateway credentials."""

    name: str
    namespace: str
    credentials: Credentials


def parse_kubeconfig(text: str) -> dict[str, Any]:
    """The kubeconfig document (YAML or JSON), checked to be a Config with contexts."""
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise KubeconfigError(f"not a YAML document: {exc}") from exc
    if not isinstance(document, dict) or not isinstance(document.get("contexts"), list):
        raise KubeconfigError("not a kubeconfig: no list of contexts")
    return document


def context_names(document: dict[str, Any]) -> list[str]:
    return [str(c.get("name")) for c in document["contexts"] if isinstance(c, dict)]


def _named(document: dict[str, Any], section: str, name: str) -> dict[str, Any]:
    for entry in document.get(section) or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(section.rstrip("s"))
            if isinstance(body, dict):
                return body
    raise KubeconfigError(f"{section.rstrip('s')} {name!r} is not defined in the kubeconfig")


def _pem(block: dict[str, Any], field: str) -> str | None:
    value = block.get(f"{field}-data")
    if value is None:
        if block.get(field):
            raise KubeconfigError(f"{field} names a file; embed it as {field}-data "
                                  "(kubectl config view --flatten --minify)")
        return None
    try:
        return base64.b64decode(str(value), validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise KubeconfigError(f"{field}-data is not base64-encoded PEM") from exc


def _user_secrets(user: dict[str, Any]) -> dict[str, str | None]:
    for unsupported in ("exec", "auth-provider"):
        if unsupported in user:
            raise KubeconfigError(f"users with {unsupported} are not supported; "
                                  f"use {SUPPORTED_USERS}")
    if user.get("tokenFile") or user.get("username"):
        raise KubeconfigError(
            f"token files and basic auth are not supported; use {SUPPORTED_USERS}")
    token = user.get("token") or None
    cert, key = _pem(user, "client-certificate"), _pem(user, "client-key")
    if (cert is None) != (key is None):
        raise KubeconfigError("a client certificate needs its key (and a key its certificate)")
    if token is None and cert is None:
        raise KubeconfigError(f"the user has no credentials; use {SUPPORTED_USERS}")
    return {"token": token, "client_cert": cert, "client_key": key}


def read_context(text: str, context: str | None = None) -> KubeconfigContext:
    """The credentials of `context` (the current context when None) of a kubeconfig text."""
    document = parse_kubeconfig(text)
    name = context or document.get("current-context")
    if not name:
        raise KubeconfigError(
            f"choose a context: {', '.join(context_names(document)) or 'none defined'}")
    names = context_names(document)
    if name not in names:
        raise KubeconfigError(f"no context {name!r}; contexts: {', '.join(names)}")
    ctx = _named(document, "contexts", name)
    cluster = _named(document, "clusters", str(ctx.get("cluster")))
    user = _named(document, "users", str(ctx.get("user")))
    server = cluster.get("server")
    if not server:
        raise KubeconfigError(f"cluster {ctx.get('cluster')!r} has no server URL")
    secrets = _user_secrets(user)
    credentials = Credentials(
        api_url=str(server), ca_cert=_pem(cluster, "certificate-authority"),
        verify_tls=not cluster.get("insecure-skip-tls-verify", False),
        token=secrets["token"], client_cert=secrets["client_cert"],
        client_key=secrets["client_key"],
    )
    return KubeconfigContext(name=str(name), namespace=str(ctx.get("namespace") or ""),
                             credentials=credentials)


def credentials_from_kubeconfig(*, path: str | Path, context: str | None = None) -> Credentials:
    """Read one context of a kubeconfig file into `Credentials` (the current one by default)."""
    return read_context(Path(path).read_text(), context).credentials
