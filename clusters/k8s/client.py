"""Credentials and the cached `kubernetes` API clients built from them."""

from __future__ import annotations

import contextlib
import gc
import json
import os
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TypeVar

import urllib3.exceptions
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from clusters.k8s.errors import KubeError, from_api_exception, from_transport_error
from rlark_site.foundation.conf import KUBE_TIMEOUT_DEFAULT

T = TypeVar("T")

DEFAULT_TIMEOUT = KUBE_TIMEOUT_DEFAULT
"""Default read timeout in seconds for every verb (the default of RLARK_KUBE_TIMEOUT)."""

CONNECT_TIMEOUT = 5.0
"""Upper bound for establishing the TCP/TLS connection (never above the read timeout)."""

_CACHE_SIZE = 64


@dataclass(frozen=True)
class Credentials:
    """How to reach one cluster's API server: a bearer token or a client certificate and key
    (mutual TLS). `ca_cert`, `client_cert` and `client_key` are PEM text, not paths."""

    api_url: str
    token: str | None = field(default=None, repr=False)
    ca_cert: str | None = field(default=None, repr=False)
    verify_tls: bool = True
    client_cert: str | None = field(default=None, repr=False)
    client_key: str | None = field(default=None, repr=False)


class _ClientCache:
    """A small thread-safe LRU of `ApiClient`s, one per distinct `Credentials`.

    `ApiClient` (and its urllib3 pool) is safe to share between threads; caching
    keeps connections alive between calls. Changed credentials are a new key.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._clients: OrderedDict[Credentials, k8s.ApiClient] = OrderedDict()

    def get(self, credentials: Credentials) -> k8s.ApiClient:
        with self._lock:
            api_client = self._clients.get(credentials)
            if api_client is None:
                api_client = _build_api_client(credentials)
                self._clients[credentials] = api_client
                if len(self._clients) > self._size:
                    self._clients.popitem(last=False)
            else:
                self._clients.move_to_end(credentials)
            return api_client


def _build_api_client(credentials: Credentials) -> k8s.ApiClient:
    configuration = k8s.Configuration(host=credentials.api_url.rstrip("/"))
    configuration.retries = False
    configuration.verify_ssl = credentials.verify_tls
    if credentials.ca_cert:
        configuration.ca_cert_data = credentials.ca_cert
    if credentials.token:
        configuration.api_key = {"authorization": credentials.token}
        configuration.api_key_prefix = {"authorization": "Bearer"}
    files: list[int] = []
    if credentials.client_cert and credentials.client_key:
        configuration.cert_file = _memory_file(credentials.client_cert, files)
        configuration.key_file = _memory_file(credentials.client_key, files)
    api_client = k8s.ApiClient(configuration)
    weakref.finalize(api_client, _close_all, files)
    return api_client


def _memory_file(text: str, opened: list[int]) -> str:
    """A path to `text` that exists only in this process's memory, never on disk.

    urllib3 loads a client certificate and key from paths, on every new connection; an
    anonymous memory file (Linux `memfd_create`) stays readable at /proc/self/fd/N for as
    long as its descriptor is open, which is as long as the client using it lives.
    """
    descriptor = os.memfd_create("rlark-client-credential", os.MFD_CLOEXEC)
    opened.append(descriptor)
    os.write(descriptor, text.encode("ascii"))
    return f"/proc/self/fd/{descriptor}"


def _close_all(descriptors: list[int]) -> None:
    for descriptor in descriptors:
        with contextlib.suppress(OSError):
            os.close(descriptor)


_cache = _ClientCache(_CACHE_SIZE)


def api_client_for(credentials: Credentials) -> k8s.ApiClient:
    """Return the shared `ApiClient` for these credentials."""
    return _cache.get(credentials)


def request_timeout(timeout: float) -> tuple[float, float]:
    """The client's `(connect, read)` timeout pair for a read timeout of `timeout` seconds."""
    return (min(CONNECT_TIMEOUT, timeout), timeout)


def invoke(call: Callable[[], T]) -> T:
    """Run one client call, turning every client or transport failure into a `KubeError`."""
    try:
        return call()
    except ApiException as exc:
        raise from_api_exception(exc) from exc
    except urllib3.exceptions.HTTPError as exc:
        raise from_transport_error(exc) from exc


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Keep the cyclic garbage collector from running while a page is decoded and reduced.

    A 500-node (or 500-pod) page decodes into thousands of dicts and lists, which reference
    counting frees as soon as the page is reduced to `NodeInfo`s (or `BoundPod`s). Left
    running, the collector would scan several times per page and move the half-built page into older
    generations; in a Django process that ends in a full collection of the whole heap
    (~150 ms) on almost every 10,000-node listing. The page holds no reference cycles,
    so pausing leaves the collector nothing to catch up on. The pause only ever
    re-enables a collector it found enabled.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def read_json(response: Any) -> dict[str, Any]:
    """Decode the body of a raw (`_preload_content=False`) response."""
    return decode_json(response.data, status=response.status)


def decode_json(body: bytes, *, status: int) -> dict[str, Any]:
    """Decode a response body that must be a JSON object (`status` names the response)."""
    try:
        document = json.loads(body)
    except ValueError as exc:
        raise KubeError(
            f"response is not JSON: {exc}", status=status, reason="BadResponse"
        ) from exc
    if not isinstance(document, dict):
        raise KubeError("response is not a JSON object", status=status, reason="BadResponse")
    return document


def as_object(value: object) -> dict[str, Any]:
    """Check that a decoded custom-object answer is a JSON object."""
    if not isinstance(value, dict):
        raise KubeError("response is not a JSON object", reason="BadResponse")
    return value
