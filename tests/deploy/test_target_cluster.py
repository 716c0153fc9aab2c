"""The RBAC a cluster admin applies in each target cluster grants what RLark's Kubernetes
gateway calls, read-only where RLark only reads, and nothing else."""

from __future__ import annotations

import re
from typing import Any

from clusters.kueue import KueueView, cluster_queue_view, local_queue_view, queue_map_problems
from clusters.quantities import is_quantity
from tests.deploy.conftest import REPO, TARGET_CLUSTER, by_kind, render

KUEUE = "kueue.x-k8s.io"
# Each client method the gateway may call, as the (API group, resource, verb)s it needs (the
# custom-object verbs serve rlinf.io Jobs and Kueue's objects alike).
CLIENT_CALLS: dict[str, set[tuple[str, str, str]]] = {
    "list_node": {("", "nodes", "list")},
    "list_storage_class": {("storage.k8s.io", "storageclasses", "list")},
    "create_namespaced_custom_object": {("rlinf.io", "jobs", "create")},
    "get_namespaced_custom_object": {("rlinf.io", "jobs", "get")},
    "list_namespaced_custom_object": {("rlinf.io", "jobs", "list"), (KUEUE, "workloads", "list"),
                                      (KUEUE, "localqueues", "list")},
    "list_cluster_custom_object": {("rlinf.io", "jobs", "list"), (KUEUE, "clusterqueues", "list"),
                                   (KUEUE, "localqueues", "list")},
    "delete_namespaced_custom_object": {("rlinf.io", "jobs", "delete")},
    "list_namespaced_pod": {("", "pods", "list")},
    "list_pod_for_all_namespaces": {("", "pods", "list")},
    "list_namespaced_event": {("", "events", "list")},
    "GET /api/v1/namespaces/{namespace}/pods/{name}/log": {("", "pods/log", "get")},
    "GET /apis/{VISIBILITY_GROUP}/{VISIBILITY_VERSION}/namespaces/{{namespace}}": {
        ("visibility.kueue.x-k8s.io", "localqueues/pendingworkloads", "get")},
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
        r'method="(\w+)",\s*resource_path=\(?f?"([^"]+)"', source)}
    return (methods - NOT_API_CALLS) | raw


def test_every_call_of_the_gateway_is_granted() -> None:
    calls = _gateway_calls()
    unknown = calls - set(CLIENT_CALLS)
    assert not unknown, f"new gateway calls to map to RBAC: {sorted(unknown)}"
    needed = {grant for c in calls if c in CLIENT_CALLS for grant in CLIENT_CALLS[c]}
    assert needed, "the gateway's calls were not found"
    assert needed <= _granted()


def test_the_role_grants_only_the_listed_verbs() -> None:
    assert _granted() == {
        ("", "nodes", "get"), ("", "nodes", "list"),
        ("storage.k8s.io", "storageclasses", "get"), ("storage.k8s.io", "storageclasses", "list"),
        ("rlinf.io", "jobs", "create"), ("rlinf.io", "jobs", "get"),
        ("rlinf.io", "jobs", "list"), ("rlinf.io", "jobs", "delete"),
        *{("", r, v) for r in ("pods", "pods/log", "events") for v in ("get", "list")},
        *{(KUEUE, r, "list") for r in ("clusterqueues", "localqueues", "workloads")},
        ("visibility.kueue.x-k8s.io", "localqueues/pendingworkloads", "get"),
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


# -- the example Kueue queues (deploy/target-cluster/kueue) ---------------------------------------

KUEUE_EXAMPLE = TARGET_CLUSTER / "kueue"


def _kueue_objects() -> list[dict[str, Any]]:
    return render(KUEUE_EXAMPLE)


def test_the_example_has_a_flavor_two_cluster_queues_in_one_cohort_and_a_queue_each() -> None:
    objects = _kueue_objects()
    assert {o["apiVersion"] for o in objects} == {"kueue.x-k8s.io/v1beta1"}
    flavors = by_kind(objects, "ResourceFlavor")
    queues = by_kind(objects, "ClusterQueue")
    local = by_kind(objects, "LocalQueue")
    assert set(flavors) == {"a100"} and set(queues) == {"vision-rl", "nlp-rl"}
    assert {q["spec"]["cohort"] for q in queues.values()} == {"research"}
    assert {q["spec"]["clusterQueue"] for q in local.values()} == set(queues)
    namespace = by_kind(render(TARGET_CLUSTER), "Namespace")
    assert {q["metadata"]["namespace"] for q in local.values()} == set(namespace)


def test_every_flavor_quotes_each_covered_resource_in_order() -> None:
    """Kueue's webhook: a resource group's flavors list exactly its coveredResources, in
    order, each with a quantity; a borrowing limit needs a cohort; flavors must exist."""
    objects = _kueue_objects()
    flavors = set(by_kind(objects, "ResourceFlavor"))
    for queue in by_kind(objects, "ClusterQueue").values():
        for group in queue["spec"]["resourceGroups"]:
            for flavor in group["flavors"]:
                assert flavor["name"] in flavors
                assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
                for resource in flavor["resources"]:
                    assert is_quantity(str(resource["nominalQuota"]))
                    if "borrowingLimit" in resource:
                        assert queue["spec"].get("cohort")
                        assert is_quantity(str(resource["borrowingLimit"]))
        covered = {r for g in queue["spec"]["resourceGroups"] for r in g["coveredResources"]}
        assert {"cpu", "memory", "nvidia.com/gpu"} <= covered  # what RLark's pods request


def test_rlarks_readers_see_the_example_as_kueue_would() -> None:
    """The same objects through clusters.kueue: the quota each team could ever get, and a map
    of the example's teams to its LocalQueues that the cluster setting accepts."""
    objects = _kueue_objects()
    view = KueueView(
        cluster_queues=tuple(q for q in (cluster_queue_view(o) for o in objects
                                         if o["kind"] == "ClusterQueue") if q),
        local_queues=tuple(q for q in (local_queue_view(o) for o in objects
                                       if o["kind"] == "LocalQueue") if q),
    )
    vision, nlp = view.cluster_queue("vision-rl"), view.cluster_queue("nlp-rl")
    assert vision is not None and nlp is not None
    assert view.potential(vision, "a100", "nvidia.com/gpu") == 48  # 32 + its limit of 16
    assert view.potential(nlp, "a100", "nvidia.com/gpu") == 32  # 16 + its limit of 16
    queues = {"vision-rl": "vision-rl-queue", "nlp-rl": "nlp-rl-queue"}
    assert queue_map_problems(queues, known_teams=set(queues)) == []
    assert {(q.name, q.cluster_queue) for q in view.local_queues} == {
        ("vision-rl-queue", "vision-rl"), ("nlp-rl-queue", "nlp-rl")}
