"""The RBAC a cluster admin applies in each target cluster grants what RLark's Kubernetes
gateway calls, read-only where RLark only reads, and nothing else."""

from __future__ import annotations

import re
from typing import Any

from tests.deploy.conftest import REPO, TARGET_CLUSTER, by_kind, render

# Each client method the gateway may call, as the (API group, resource, verb) it needs.
CLIENT_CALLS = {
    "list_node": ("", "nodes", "list"),
    "list_storage_class": ("storage.k8s.io", "storageclasses", "list"),
    "create_namespaced_custom_object": ("rlinf.io", "jobs", "create"),
    "get_namespaced_custom_object": ("rlinf.io", "jobs", "get"),
    "list_namespaced_custom_object": ("rlinf.io", "jobs", "list"),
    "list_cluster_custom_object": ("rlinf.io", "jobs", "list"),
    "delete_namespaced_custom_object": ("rlinf.io", "jobs", "delete"),
    "list_namespaced_pod": ("", "pods", "list"),
    "list_namespaced_event": ("", "events", "list"),
    "GET /api/v1/namespaces/{namespace}/pods/{name}/log": ("", "pods/log", "get"),
}
NOT_API_CALLS = {"read_text"}


def _granted() -> set[tuple[str, str, str]]:
    role = by_kind(render(TARGET_CLUSTER), "ClusterRole")["rlark"]
    return {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]}


def _gateway_calls() -> set[str]:
    source = "\n".join(p.read_text() for p in (REPO / "clusters" / "k8s").glob("*.py"))
    methods = set(re.findall(r"\.((?:list|get|read|create|delete|patch|replace|watch)_\w+)\(",
                             source))
    raw = {f"{method} {path}" for method, path in re.findall(
        r'method="(\w+)", resource_path="([^"]+)"', source)}
    return (methods - NOT_API_CALLS) | raw


def test_every_call_of_the_gateway_is_granted() -> None:
    calls = _gateway_calls()
    unknown = calls - set(CLIENT_CALLS)
    assert not unknown, f"new gateway calls to map to RBAC: {sorted(unknown)}"
    needed = {CLIENT_CALLS[c] for c in calls if c in CLIENT_CALLS}
    assert needed, "the gateway's calls were not found"
    assert needed <= _granted()


def test_the_role_grants_only_the_listed_verbs() -> None:
    assert _granted() == {
        ("", "nodes", "get"), ("", "nodes", "list"),
        ("storage.k8s.io", "storageclasses", "get"), ("storage.k8s.io", "storageclasses", "list"),
        ("rlinf.io", "jobs", "create"), ("rlinf.io", "jobs", "get"),
        ("rlinf.io", "jobs", "list"), ("rlinf.io", "jobs", "delete"),
        *{("", r, v) for r in ("pods", "pods/log", "events") for v in ("get", "list")},
    }


def test_the_binding_gives_the_role_to_the_service_account_whose_token_is_issued() -> None:
    objects = render(TARGET_CLUSTER)
    binding: Any = by_kind(objects, "ClusterRoleBinding")["rlark"]
    account = by_kind(objects, "ServiceAccount")["rlark"]
    token = by_kind(objects, "Secret")["rlark-token"]
    assert binding["roleRef"]["name"] == "rlark"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "rlark",
                                    "namespace": account["metadata"]["namespace"]}]
    assert token["type"] == "kubernetes.io/service-account-token"
    assert token["metadata"]["annotations"]["kubernetes.io/service-account.name"] == "rlark"
