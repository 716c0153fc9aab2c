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
    """The kubeconfig cannot be used; the message says why and what would work.

    `code` and `params` name the reason for the pages and the API, which say it in the
    user's language (clusters.inventory.forms.kubeconfig_reason); the message is English."""

    def __init__(self, code: str, message: str, **params: str) -> None:
        super().__init__(message)
        self.code = code
        self.params = params


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
        raise KubeconfigError("not_yaml", f"not a YAML document: {exc}", detail=str(exc)) from exc
    if not isinstance(document, dict) or not isinstance(document.get("contexts"), list):
        raise KubeconfigError("not_kubeconfig", "not a kubeconfig: no list of contexts")
    return document


def context_names(document: dict[str, Any]) -> list[str]:
    return [str(c.get("name")) for c in document["contexts"] if isinstance(c, dict)]


def _named(document: dict[str, Any], section: str, name: str) -> dict[str, Any]:
    for entry in document.get(section) or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            body = entry.get(section.rstrip("s"))
            if isinstance(body, dict):
                return body
    kind = section.rstrip("s")
    raise KubeconfigError(f"undefined_{kind}", f"{kind} {name!r} is not defined in the kubeconfig",
                          name=name)


def _pem(block: dict[str, Any], field: str) -> str | None:
    value = block.get(f"{field}-data")
    if value is None:
        if block.get(field):
            raise KubeconfigError("file_reference",
                                  f"{field} names a file; embed it as {field}-data "
                                  "(kubectl config view --flatten --minify)", field=field)
        return None
    try:
        return base64.b64decode(str(value), validate=True).decode("ascii")
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise KubeconfigError("not_base64", f"{field}-data is not base64-encoded PEM",
                              field=f"{field}-data") from exc


def _user_secrets(user: dict[str, Any]) -> dict[str, str | None]:
    for unsupported in ("exec", "auth-provider"):
        if unsupported in user:
            raise KubeconfigError("unsupported_user", f"users with {unsupported} are not "
                                  f"supported; use {SUPPORTED_USERS}", kind=unsupported)
    if user.get("tokenFile") or user.get("username"):
        raise KubeconfigError(
            "token_file_or_basic_auth",
            f"token files and basic auth are not supported; use {SUPPORTED_USERS}")
    token = user.get("token") or None
    cert, key = _pem(user, "client-certificate"), _pem(user, "client-key")
    if (cert is None) != (key is None):
        raise KubeconfigError("half_certificate",
                              "a client certificate needs its key (and a key its certificate)")
    if token is None and cert is None:
        raise KubeconfigError("no_credentials",
                              f"the user has no credentials; use {SUPPORTED_USERS}")
    return {"token": token, "client_cert": cert, "client_key": key}


def read_context(text: str, context: str | None = None) -> KubeconfigContext:
    """The credentials of `context` (the current context when None) of a kubeconfig text."""
    document = parse_kubeconfig(text)
    name = context or document.get("current-context")
    if not name:
        listed = ", ".join(context_names(document))
        raise KubeconfigError("choose_context" if listed else "no_contexts",
                              f"choose a context: {listed or 'none defined'}", names=listed)
    names = context_names(document)
    if name not in names:
        raise KubeconfigError("no_such_context",
                              f"no context {name!r}; contexts: {', '.join(names)}",
                              name=str(name), names=", ".join(names))
    ctx = _named(document, "contexts", name)
    cluster = _named(document, "clusters", str(ctx.get("cluster")))
    user = _named(document, "users", str(ctx.get("user")))
    server = cluster.get("server")
    if not server:
        raise KubeconfigError("no_server", f"cluster {ctx.get('cluster')!r} has no server URL",
                              name=str(ctx.get("cluster")))
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
