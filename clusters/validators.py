"""Validation of a cluster's API server address."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.utils.translation import gettext as _

_HOST_LABEL = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def valid_host(host: str) -> bool:
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            return False
        return True
    return len(host) <= 253 and all(_HOST_LABEL.match(label) for label in host.split("."))


def validate_api_url(value: str) -> None:
    """An http(s) base URL of a Kubernetes API server: any host name (single-label names
    such as `kube-apiserver` included), IPv4 or [IPv6], optional port and path prefix."""
    try:
        parts = urlsplit(value)
    except ValueError:
        parts = urlsplit("")
    host = parts.netloc.rsplit(":", 1)[0] if not parts.netloc.endswith("]") else parts.netloc
    try:
        port = parts.port
    except ValueError:
        port = -1
    if (
        parts.scheme not in ("http", "https")
        or not parts.netloc
        or "@" in parts.netloc
        or parts.query
        or parts.fragment
        or port == -1
        or not valid_host(host)
    ):
        raise ValidationError(
            _("Enter the API server's http(s) URL, for example https://kube-apiserver:6443."),
            code="invalid_api_url",
        )
