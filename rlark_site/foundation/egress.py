"""Outbound requests to addresses someone who is not trusted with the network chose (SPEC 18).

A team maintainer sets the team's webhook URL; RLark's workers POST to it. Such a request never
reaches an internal address: loopback, private, link-local (cloud metadata at 169.254.169.254
among them), shared (CG-NAT), multicast, reserved, unspecified, documentation and benchmarking
ranges, the NAT64, 6to4 and Teredo prefixes, and IPv4-mapped, -compatible and -translated IPv6
forms of any of these. Operators open chosen ranges with `RLARK_WEBHOOK_ALLOWED_NETWORKS`.

How, with Microsoft's AntiSSRF library (`microsoft-antissrf`, the `AntiSSRF` package) on
`requests`:

- The host is resolved once; *every* address it resolves to must pass the policy (allowed
  networks first, then the blocked ones), and the connection goes to that validated address
  with the URL's host name as `Host` and as the TLS server name (SNI and certificate check):
  an answer that changes between validation and connection (DNS rebinding) is never asked for.
- Numeric host spellings (`2130706433`, `0x7f.1`, `0177.0.0.1`) are resolved as the OS does
  (`getaddrinfo`), so they are checked as the address they mean.
- Redirects are never followed: a 3xx is an answer like any other.
- The environment's proxies are not used (`trust_env` off): the connection is the one checked.

`blocked_literal` applies the same networks to a URL's host at save time, without DNS: a URL
naming an internal address literally (or `localhost`) is refused when it is set.

What is recorded of a failed try is an error class (`ErrorClass`), never the error's text:
the text of a connection error says which internal ports answer.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any
from urllib.parse import unquote, urlsplit

import requests
from AntiSSRF import AntiSSRFError, AntiSSRFPolicy, IPAddressRanges, PolicyConfigOptions
from AntiSSRF._antissrf_agent import _AntiSSRFAdapter
from django.conf import settings

__all__ = [
    "BLOCKED_NETWORKS",
    "Answer",
    "ErrorClass",
    "address_blocked",
    "allowed_networks",
    "blocked_literal",
    "parse_networks",
    "post",
]

logger = logging.getLogger(__name__)

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# AntiSSRF's recommended list (IANA's special-purpose registries, 169.254.169.254 and Azure's
# 168.63.129.16 included) plus the IPv6 forms that carry an IPv4 address it does not list:
# IPv4-compatible (::a.b.c.d, deprecated by RFC 4291) and IPv4-translated (::ffff:0:a.b.c.d,
# RFC 2765). IPv4-mapped addresses (::ffff:a.b.c.d) are checked as the IPv4 address they map.
EXTRA_BLOCKED = ("::/96", "::ffff:0:0:0/96")
BLOCKED_NETWORKS: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(cidr) for cidr in (*IPAddressRanges.recommended_latest, *EXTRA_BLOCKED))
LOCALHOST_NAMES = ("localhost", ".localhost")  # RFC 6761: always loopback
LOCALHOST_ADDRESSES = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))


class ErrorClass(StrEnum):
    """What the delivery log records of a try that got no HTTP answer."""

    BLOCKED = "blocked address"
    REFUSED = "refused"
    TIMEOUT = "timeout"
    TLS = "tls"
    DNS = "dns"
    CONNECTION = "connection"  # reset, unreachable, closed mid-answer
    INVALID_URL = "invalid url"


@dataclass(frozen=True)
class Answer:
    """One try: the HTTP status, or (status None) the class of the error."""

    status: int | None
    error: ErrorClass | None = None


def parse_networks(cidrs: Iterable[str]) -> tuple[IPNetwork, ...]:
    """CIDRs (a bare address is its own /32 or /128); ValueError names the first bad one."""
    networks = []
    for cidr in cidrs:
        try:
            networks.append(ipaddress.ip_network(cidr.strip(), strict=False))
        except ValueError as exc:
            raise ValueError(f"not a network: {cidr!r}") from exc
    return tuple(networks)


def allowed_networks() -> tuple[IPNetwork, ...]:
    """The networks `RLARK_WEBHOOK_ALLOWED_NETWORKS` opens (none by default)."""
    return parse_networks(settings.RLARK_WEBHOOK_ALLOWED_NETWORKS)


def _unmapped(address: IPAddress) -> IPAddress:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _within(address: IPAddress, networks: Iterable[IPNetwork]) -> bool:
    return any(address.version == net.version and address in net for net in networks)


def address_blocked(address: IPAddress, allowed: Iterable[IPNetwork] = ()) -> bool:
    """The rule: an address in an allowed network passes; otherwise one in a blocked network
    does not. The same decision AntiSSRF's policy makes at connect time (`_policy`)."""
    address = _unmapped(address)
    allowed = tuple(allowed)
    return not _within(address, allowed) and _within(address, BLOCKED_NETWORKS)


def _literal_addresses(host: str) -> list[IPAddress]:
    """The addresses a host names without DNS: an IP in any spelling the OS accepts as
    numeric, or `localhost`; [] for a name that needs resolving."""
    host = unquote(host).strip("[]").rstrip(".").lower()  # fe80::1%25eth0: a zone
    if not host:
        return []
    if host == LOCALHOST_NAMES[0] or host.endswith(LOCALHOST_NAMES[1]):
        return list(LOCALHOST_ADDRESSES)
    try:
        infos = socket.getaddrinfo(host, None, flags=socket.AI_NUMERICHOST)
    except (socket.gaierror, UnicodeError, ValueError):
        return []
    return [ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos]


def blocked_literal(url: str, allowed: Iterable[IPNetwork] = ()) -> bool:
    """Whether the URL names an internal address literally (checked at save time)."""
    try:
        host = urlsplit(url.strip()).hostname or ""
    except ValueError:
        return False
    allowed = tuple(allowed)
    return any(address_blocked(address, allowed) for address in _literal_addresses(host))


def _policy(allowed: Iterable[IPNetwork]) -> AntiSSRFPolicy:
    policy = AntiSSRFPolicy(PolicyConfigOptions.NONE)
    policy.add_denied_addresses([str(net) for net in BLOCKED_NETWORKS])
    opened = [str(net) for net in allowed]
    if opened:
        policy.add_allowed_addresses(opened)
    policy.allow_plain_text_http = True  # webhooks may be http://
    policy.add_xff_header = False
    return policy


class _PinnedAdapter(_AntiSSRFAdapter):
    """AntiSSRF's adapter (resolve, validate, connect to the validated address), with the
    `Host` header it sets completed: the port when the URL has one, brackets around an IPv6
    address (RFC 9112 3.2; AntiSSRF 1.0 sends the bare host name)."""

    def build_connection_pool_key_attributes(self, request: Any, verify: Any,
                                             cert: Any = None) -> tuple[dict[str, Any], Any]:
        host_params, pool_kwargs = super().build_connection_pool_key_attributes(
            request, verify, cert)
        parts = urlsplit(request.url)
        host = parts.hostname or ""
        host = f"[{host}]" if ":" in host else host
        request.headers["Host"] = f"{host}:{parts.port}" if parts.port else host
        return host_params, pool_kwargs


def _session(allowed: Iterable[IPNetwork]) -> requests.Session:
    session = requests.Session()
    session.trust_env = False
    adapter = _PinnedAdapter(_policy(allowed))
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    """Whether `kind` is anywhere in the chain of `exc`: its cause and context, and the
    reason urllib3 and requests keep as an attribute or an argument."""
    pending: list[object] = [exc]
    seen: set[int] = set()
    while pending:
        current = pending.pop()
        if not isinstance(current, BaseException) or id(current) in seen:
            continue
        if isinstance(current, kind):
            return True
        seen.add(id(current))
        pending.extend([current.__cause__, current.__context__,
                        getattr(current, "reason", None), *current.args])
    return False


def classify(exc: BaseException) -> ErrorClass:
    """The class of an error of `post` (its text is never kept)."""
    if isinstance(exc, AntiSSRFError):
        return ErrorClass.BLOCKED
    if isinstance(exc, (requests.exceptions.InvalidURL, requests.exceptions.MissingSchema,
                        requests.exceptions.InvalidSchema, UnicodeError)):
        return ErrorClass.INVALID_URL
    if isinstance(exc, requests.exceptions.Timeout) or _caused_by(exc, TimeoutError):
        return ErrorClass.TIMEOUT
    if isinstance(exc, requests.exceptions.SSLError):
        return ErrorClass.TLS
    if _caused_by(exc, socket.gaierror):
        return ErrorClass.DNS
    if _caused_by(exc, ConnectionRefusedError):
        return ErrorClass.REFUSED
    return ErrorClass.CONNECTION


def post(url: str, *, body: bytes, headers: Mapping[str, str], timeout: float,
         allowed: Iterable[IPNetwork] = ()) -> Answer:
    """POST `body` to `url` once, only to an address the rule lets through; no redirect is
    followed and the answer's body is not read."""
    if urlsplit(url).scheme not in ("http", "https"):
        return Answer(None, ErrorClass.INVALID_URL)
    try:
        with _session(allowed) as session:
            response = session.post(url, data=body, headers=dict(headers), timeout=timeout,
                                    allow_redirects=False, stream=True)
            response.close()
    except (requests.RequestException, AntiSSRFError, OSError, ValueError) as exc:
        error = classify(exc)
        logger.info("webhook POST failed: %s (%s)", error, type(exc).__name__)
        return Answer(None, error)
    return Answer(response.status_code)
