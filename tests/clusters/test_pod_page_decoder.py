"""The occupancy listing's typed page decoder (`clusters.k8s.pods`) against the references.

Each page is decoded three ways: the typed decoder (`bound_pods_of_page`, msgspec structs
that read only what the request rule needs), the plain-JSON reduction it falls back to
(`json.loads` + `bound_pod_from_object`), and, for the well-formed shapes, the `kubernetes`
client's own deserializer (`ApiClient.deserialize` into `V1PodList`, serialised back and
given to the request rule). They must agree on every pod, and on hostile pages the typed
decoder must fail (or succeed) exactly as the reference does. Pure: no database, no server.
"""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kubernetes import client as k8s

from clusters.k8s import KubeError
from clusters.k8s import pods as gateway
from clusters.podrequests import pod_requests
from tests.clusters.test_podrequests import CASES

GPU = "nvidia.com/gpu"


def _pod(name: str, spec: dict[str, Any], *, node: str = "n-1", phase: str = "Running",
         **metadata: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}", **metadata},
            "spec": {"nodeName": node, **spec},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}]}}


def _page(*items: Any, token: Any = None) -> bytes:
    metadata = {"resourceVersion": "7"} | ({"continue": token} if token is not None else {})
    return json.dumps({"apiVersion": "v1", "kind": "PodList", "metadata": metadata,
                       "items": list(items)}).encode()


def _reference(body: bytes) -> tuple[list[gateway.BoundPod], object]:
    """The plain-JSON reduction, pod by pod (what the typed decoder must equal)."""
    document = gateway.decode_json(body, status=200)
    found = document.get("items") or []
    if not isinstance(found, list):
        raise KubeError("the pod list's items are not a list", reason="BadResponse")
    reduced = [pod for pod in map(gateway.bound_pod_from_object, found) if pod is not None]
    metadata = document.get("metadata") or {}
    return reduced, metadata.get("continue") if isinstance(metadata, dict) else None


def _outcome(decode: Any, body: bytes) -> tuple[str, Any]:
    try:
        return "ok", decode(body)
    except KubeError as error:
        return "error", (error.reason, str(error))


def _is_typed(body: bytes) -> bool:
    """Whether the typed path answers the page (else the reference does)."""
    import msgspec

    try:
        gateway._typed_bound_pods(gateway._PAGE_DECODER.decode(body).items or [])
    except msgspec.MsgspecError:
        return False
    return True


def _usages(body: bytes) -> tuple[list[gateway.PodUsage], object]:
    """The reference's pods as occupancy counts them (what `pod_usages_of_page` must equal)."""
    pods, token = _reference(body)
    return [pod.usage for pod in pods], token


@pytest.mark.parametrize(("shape", "spec", "expected"), CASES, ids=[c[0] for c in CASES])
def test_the_typed_decoder_equals_the_reference_on_every_pod_shape(
    shape: str, spec: dict[str, Any], expected: dict[str, int]
) -> None:
    body = _page(_pod("p", spec), _pod("q", spec, node="n-2"), token="next")

    (pods, token), reference = gateway.bound_pods_of_page(body), _reference(body)

    # an untracked resource's list quantity is outside the structs: read by the reference
    assert _is_typed(body) == ("garbage" not in shape)
    assert (pods, token) == reference
    assert gateway.pod_usages_of_page(body) == _usages(body)
    assert [dict(pod.requests) for pod in pods] == [expected, expected]


_STRING_QUANTITIES = [case for case in CASES if "JSON numbers" not in case[0]
                      and "garbage is never read" not in case[0]]


@pytest.mark.parametrize(("shape", "spec", "expected"), _STRING_QUANTITIES,
                         ids=[c[0] for c in _STRING_QUANTITIES])
def test_the_typed_decoder_equals_the_kubernetes_clients_deserializer(
    shape: str, spec: dict[str, Any], expected: dict[str, int]
) -> None:
    """The client's full model deserializer (every field typed) and the rule over what it
    serialises back: the same node, phase and request for each pod."""
    full = {**spec, "containers": spec.get("containers") or [{"name": "main"}]}
    for key in ("containers", "initContainers"):  # the client's model requires names
        if full.get(key):
            full[key] = [{"name": f"c{i}", "image": "x", **c} for i, c in enumerate(full[key])]
    body = _page(_pod("p", full), _pod("done", full, phase="Succeeded"))
    api_client = k8s.ApiClient()

    listed = api_client.deserialize(body.decode(), "V1PodList", "application/json")
    served = [api_client.sanitize_for_serialization(pod) for pod in listed.items]
    pods, _token = gateway.bound_pods_of_page(body)

    assert _is_typed(body)
    assert [(pod.node, pod.phase, dict(pod.requests)) for pod in pods] == [
        (pod["spec"]["nodeName"], pod["status"]["phase"], pod_requests(pod["spec"]))
        for pod in served if pod["status"]["phase"] == "Running"]
    assert [dict(pod.requests) for pod in pods] == [expected]


HOSTILE: list[tuple[str, bytes]] = [
    ("not JSON", b"<html>"),
    ("a JSON array", b"[1, 2]"),
    ("items is an object", b'{"items": {"a": 1}}'),
    ("items is null", b'{"items": null}'),
    ("an item is a string", _page("pod")),
    ("metadata is a list", _page({"metadata": [], "spec": {"nodeName": "n"}})),
    ("spec is a string", _page({"metadata": {}, "spec": "x"})),
    ("nodeName is a number", _page(_pod("n", {}, node=7))),  # type: ignore[arg-type]
    ("containers is a string", _page(_pod("s", {"containers": "main"}))),
    ("a container is a number", _page(_pod("s", {"containers": [7]}))),
    ("resources is a list", _page(_pod("r", {"containers": [{"resources": []}]}))),
    ("a quantity is a boolean", _page(_pod("b", {"containers": [
        {"resources": {"requests": {GPU: True}}}]}))),
    ("a quantity is null", _page(_pod("z", {"containers": [
        {"resources": {"requests": {"cpu": None}}}]}))),
    ("a quantity is an object", _page(_pod("o", {"containers": [
        {"resources": {"requests": {"memory": {"lots": 1}}}}]}))),
    ("a quantity is not one", _page(_pod("e", {"containers": [
        {"resources": {"requests": {GPU: "eight"}}}]}))),
    ("an absurd quantity", _page(_pod("q", {"containers": [
        {"resources": {"requests": {GPU: "1e999"}}}]}))),
    ("1e30 GPUs", _page(_pod("g", {"containers": [{"resources": {"requests": {GPU: "1e30"}}}]}))),
    ("a number quantity too large for a float", b'{"items": [{"spec": {"nodeName": "n", '
     b'"containers": [{"resources": {"requests": {"cpu": 1e999}}}]}}]}'),
    ("a huge integer quantity", b'{"items": [{"spec": {"nodeName": "n", "containers": '
     b'[{"resources": {"requests": {"memory": 123456789012345678901234567890}}}]}}]}'),
    ("restartPolicy is a number", _page(_pod("i", {"initContainers": [
        {"restartPolicy": 1, "resources": {"requests": {"cpu": "1"}}}]}))),
    ("a label value is a number", _page(_pod("l", {}, labels={"n": 1, "app": "x"}))),
    ("labels is a string", _page(_pod("l", {}, labels="app=x"))),
    ("phase is a number", _page({**_pod("f", {}), "status": {"phase": 3}})),
    ("more containers than any pod has", _page(_pod("m", {"containers": [{}] * 1001}))),
    ("the continue token is a number", _page(_pod("t", {}), token=5)),
    ("pod-level resources is a string", _page(_pod("p", {"resources": "lots"}))),
    ("overhead is a list", _page(_pod("h", {"overhead": ["cpu"]}))),
    ("bare pods: no metadata, no status", _page({"spec": {"nodeName": "n"}}, {})),
    ("null everywhere", _page({"metadata": None, "spec": None, "status": None},
                              {"metadata": {"name": None}, "spec": {"nodeName": None}})),
    ("NaN as a quantity", b'{"items": [{"spec": {"nodeName": "n", "containers": '
     b'[{"resources": {"requests": {"cpu": NaN}}}]}}]}'),
]


@pytest.mark.parametrize(("case", "body"), HOSTILE, ids=[h[0] for h in HOSTILE])
def test_a_hostile_page_decodes_or_fails_exactly_as_the_reference(case: str,
                                                                  body: bytes) -> None:
    typed = _outcome(lambda b: gateway.bound_pods_of_page(b), body)

    assert typed == _outcome(_reference, body)
    assert _outcome(lambda b: gateway.pod_usages_of_page(b), body) == _outcome(_usages, body)
    if typed[0] == "error":
        assert typed[1][0] == "BadResponse" and typed[1][1]


def test_a_bad_quantity_names_the_pod_and_the_field() -> None:
    body = _page(_pod("fine", {"containers": [{"resources": {"requests": {"cpu": "1"}}}]}),
                 _pod("bad", {"containers": [{}, {"resources": {"requests": {GPU: "eight"}}}]}))

    for reduce in (gateway.bound_pods_of_page, gateway.pod_usages_of_page):
        with pytest.raises(KubeError, match=r"pod ns/bad: spec.containers\[1\].resources."
                                            r"requests.nvidia.com/gpu: 'eight' is not a quantity"):
            reduce(body)


_QUANTITY_VALUES: list[Any] = ["1", "100m", "0.5", "2Gi", "8Ei", "0", "1e3", "eight", "1e999",
                               "", "-1", 1, 2.5, True, None, [], {"a": 1}]
_QUANTITIES = st.sampled_from(_QUANTITY_VALUES)
_RESOURCES = st.sampled_from(["cpu", "memory", GPU, "rlinf.io/rdma", "ephemeral-storage"])
_REQUESTS = st.one_of(st.none(), st.dictionaries(_RESOURCES, _QUANTITIES, max_size=3))
_CONTAINER = st.fixed_dictionaries({}, optional={
    "resources": st.one_of(st.none(), st.fixed_dictionaries({}, optional={
        "requests": _REQUESTS})),
    "restartPolicy": st.sampled_from(["Always", "OnFailure", None, 1]),
})
_SPEC = st.fixed_dictionaries({}, optional={
    "nodeName": st.sampled_from(["n-1", "n-2", "", None]),
    "containers": st.one_of(st.none(), st.lists(_CONTAINER, max_size=3)),
    "initContainers": st.one_of(st.none(), st.lists(_CONTAINER, max_size=3)),
    "resources": st.one_of(st.none(), st.fixed_dictionaries({"requests": _REQUESTS})),
    "overhead": _REQUESTS,
})
_POD = st.fixed_dictionaries({"spec": _SPEC}, optional={
    "metadata": st.fixed_dictionaries({}, optional={
        "name": st.sampled_from(["a", "b"]), "namespace": st.sampled_from(["x", None]),
        "uid": st.sampled_from(["u1", "u2"]),
        "labels": st.dictionaries(st.sampled_from(["app", "job"]),
                                  st.sampled_from(["v", 1, None]), max_size=2)}),
    "status": st.fixed_dictionaries({}, optional={
        "phase": st.sampled_from(["Running", "Pending", "Succeeded", "Failed", None])}),
})


@settings(max_examples=300, deadline=None)
@given(st.lists(_POD, max_size=4))
def test_any_pod_shape_decodes_as_the_reference_does(items: list[dict[str, Any]]) -> None:
    body = json.dumps({"items": items}).encode()

    assert _outcome(lambda b: gateway.bound_pods_of_page(b), body) == _outcome(_reference, body)
    assert _outcome(lambda b: gateway.pod_usages_of_page(b), body) == _outcome(_usages, body)


def test_the_request_cache_stays_bounded_and_its_answers_read_only() -> None:
    cache = gateway._REQUESTS_CACHE
    cache.clear()
    shapes = cache.max_entries + 500
    body = _page(*[_pod(f"p{i}", {"containers": [
        {"resources": {"requests": {"cpu": f"{i + 1}m"}}}]}) for i in range(shapes)])

    pods, _token = gateway.bound_pods_of_page(body)

    assert 0 < len(cache) <= cache.max_entries
    assert [pod.requests["cpu"] for pod in pods] == list(range(1, shapes + 1))
    with pytest.raises(TypeError):
        pods[0].requests["cpu"] = 0  # type: ignore[index]


def test_the_request_cache_is_bounded_in_bytes_and_keeps_no_long_key() -> None:
    """Shapes of long container text: the keys kept stay under the byte bound, and a spec
    longer than a key may be is answered without being kept."""
    cache = gateway._REQUESTS_CACHE
    cache.clear()
    padding = "x" * (cache.max_key_bytes // 2)
    many = [_pod(f"p{i}", {"containers": [{"image": padding, "resources": {"requests": {
        "cpu": f"{i + 1}m"}}}]}) for i in range(2 * cache.max_bytes // len(padding))]
    requests = {f"rlinf.io/d{i}": "1" for i in range(8)}
    long = _pod("long", {"containers": [{"image": "y" * cache.max_key_bytes,
                                         "resources": {"requests": requests}}]})

    pods, _token = gateway.pod_usages_of_page(_page(*many))
    assert [pod.requests["cpu"] for pod in pods] == list(range(1, len(many) + 1))
    assert 0 < cache.bytes <= cache.max_bytes
    cache.clear()
    (usage,), _token = gateway.pod_usages_of_page(_page(long))

    assert dict(usage.requests) == dict.fromkeys(requests, 1)
    assert (len(cache), cache.bytes) == (0, 0)


def test_a_text_and_a_number_quantity_are_cached_apart() -> None:
    """"1" (text) and 1 (a JSON number) are one quantity to the rule, but not the same JSON
    text: each shape is answered by the rule itself, never by the other's cached answer."""
    cache = gateway._REQUESTS_CACHE
    cache.clear()
    text = _pod("t", {"containers": [{"resources": {"requests": {GPU: "1"}}}]})
    number = _pod("n", {"containers": [{"resources": {"requests": {GPU: 1}}}]})

    pods, _token = gateway.bound_pods_of_page(_page(text, number, text))

    assert [dict(pod.requests) for pod in pods] == [{GPU: 1}, {GPU: 1}, {GPU: 1}]
    assert len(cache) == 2


def test_pods_of_one_shape_share_one_answer() -> None:
    gateway._REQUESTS_CACHE.clear()
    spec = {"containers": [{"name": "main", "resources": {"requests": {"cpu": "1"}}}],
            "initContainers": [{"restartPolicy": "Always",
                                "resources": {"requests": {"cpu": "500m"}}}]}

    usages, _token = gateway.pod_usages_of_page(_page(*[_pod(f"p{i}", spec) for i in range(3)]))

    assert [dict(usage.requests) for usage in usages] == [{"cpu": 1500}] * 3
    assert usages[0].requests is usages[1].requests is usages[2].requests
    assert len(gateway._REQUESTS_CACHE) == 1


def test_the_reduced_page_keeps_nothing_of_the_pods_bodies() -> None:
    """500 pods with 8 KiB of annotations and status each (about 4.5 MB of page): what the
    decoder hands on is the 500 small tuples, not the bodies."""
    padding = "x" * 4096
    body = _page(*[{**_pod(f"p{i}", {"containers": [
        {"resources": {"requests": {"cpu": "1", GPU: "1"}}}]},
        annotations={"note": padding}),
        "status": {"phase": "Running", "message": padding}} for i in range(500)])

    tracemalloc.start()
    try:
        pods, _token = gateway.bound_pods_of_page(body)
        held = tracemalloc.get_traced_memory()[0]
        usages, _token = gateway.pod_usages_of_page(body)
        held_usages = tracemalloc.get_traced_memory()[0] - held
    finally:
        tracemalloc.stop()

    assert len(body) > 4_000_000 and len(pods) == len(usages) == 500
    assert held < len(body) // 10  # about 240 KB of tuples and names; the page: 4.2 MB
    assert held_usages < len(body) // 10
