"""Fleet files: several simulated clusters, their nodes, storage classes and faults.

`load_fleet` / `parse_fleet` validate a fleet document and report every problem
with the path of the entry it concerns (for example
`clusters[1] (gpu-b).nodes[3] (b-node-03).allocatable["nvidia.com/gpu"]`);
`generate_fleet` builds large synthetic fleets for benchmarks.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

import jsonschema
import yaml

try:  # the Rust implementation of the same draft, when installed (tests and benches have it)
    import jsonschema_rs
except ImportError:  # pragma: no cover - the image without the test tools
    jsonschema_rs = None  # type: ignore[assignment]

from clusters.labels import is_dns_label, is_dns_subdomain
from clusters.podrequests import PodSpecError, Requests, pod_requests
from clusters.quantities import is_quantity
from clusters.simulator.faults import (
    FAULTS_SCHEMA,
    FaultSpec,
    fault_problems,
    fault_spec_from_dict,
)
from clusters.simulator.kueuespec import (
    KUEUE_SCHEMA,
    KueueSpec,
    kueue_problems,
    kueue_spec_from_dict,
)
from clusters.simulator.scheduler import Usage, fit_refusal, node_allocatable, reserve

CONTROL_SEGMENT = "_control"

_LABEL_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

NODE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": {"type": "string", "minLength": 1},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "allocatable": {
            "type": "object",
            "additionalProperties": {"type": ["integer", "string"]},
        },
        "ready": {"type": "boolean"},
    },
}

_QUANTITIES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "maxProperties": 64,
    "propertyNames": {"minLength": 1, "maxLength": 253},
    "additionalProperties": {"type": ["integer", "string"]},
}

POD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "node", "requests"],
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 253},
        "namespace": {"type": "string", "minLength": 1, "maxLength": 63},
        "node": {"type": "string", "minLength": 1, "maxLength": 253},
        "requests": _QUANTITIES_SCHEMA,
        "init_requests": _QUANTITIES_SCHEMA,
        "overhead": _QUANTITIES_SCHEMA,
        "labels": {"type": "object", "maxProperties": 64,
                   "additionalProperties": {"type": "string"}},
    },
}
"""A foreign workload pod: the fleet file's `pods:` entries and `POST /_control/.../pods`."""

FOREIGN_NAMESPACE = "default"
FOREIGN_IMAGE = "registry.example.com/foreign/workload:1"

FLEET_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["clusters"],
    "properties": {
        # RLark's own registration data (see clusters.inventory.fleet); clusters do not see it.
        "network_domains": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["name", "clusters"],
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "clusters": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
        "clusters": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["name", "namespace"],
                "properties": {
                    "name": {"type": "string"},
                    "namespace": {"type": "string"},
                    "token": {"type": ["string", "null"]},
                    "storage_classes": {"type": "array", "items": {"type": "string"}},
                    "nodes": {"type": "array", "items": NODE_SCHEMA},
                    "pods": {"type": "array", "items": POD_SCHEMA},
                    "faults": FAULTS_SCHEMA,
                    "kueue": KUEUE_SCHEMA,
                },
            },
        },
    },
}

_FAST_VALIDATOR: Any = (jsonschema_rs.Draft202012Validator(FLEET_SCHEMA)
                        if jsonschema_rs is not None else None)
"""A quick yes for a valid fleet (200,000 foreign pods: under a second, against minutes);
`jsonschema` checks a document it does not pass and words every problem."""


class FleetError(ValueError):
    """A fleet document is invalid; `problems` lists every problem found."""

    def __init__(self, problems: Sequence[str], *, source: str = "fleet") -> None:
        self.problems = list(problems)
        super().__init__(f"invalid {source}:\n  " + "\n  ".join(self.problems))


@dataclass(frozen=True)
class NodeSpec:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    allocatable: dict[str, str] = field(default_factory=dict)
    ready: bool = True


@dataclass(frozen=True)
class ForeignPodSpec:
    """A pod of someone else's workload, bound to `node`: it takes capacity there and shows
    in the cluster's pods lists (one container `main` with `requests`; `init_requests` as one
    init container; `overhead` as the pod's `spec.overhead`)."""

    name: str
    node: str
    namespace: str = FOREIGN_NAMESPACE
    requests: dict[str, str] = field(default_factory=dict)
    init_requests: dict[str, str] = field(default_factory=dict)
    overhead: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)

    def pod_spec(self) -> dict[str, Any]:
        """The pod's `spec` as the API serves it."""
        spec: dict[str, Any] = {
            "nodeName": self.node,
            "containers": [_container("main", self.requests)],
        }
        if self.init_requests:
            spec["initContainers"] = [_container("init", self.init_requests)]
        if self.overhead:
            spec["overhead"] = dict(self.overhead)
        return spec

    def request(self) -> Requests:
        """Its effective request (scheduler units), as kube-scheduler counts it (computed
        once per shape: a fleet's pods are mostly a few shapes)."""
        return dict(_shape_request(tuple(self.requests.items()),
                                   tuple(self.init_requests.items()),
                                   tuple(self.overhead.items())))


_Items = tuple[tuple[str, str], ...]


@lru_cache(maxsize=1024)
def _shape_request(requests: _Items, init_requests: _Items, overhead: _Items) -> Mapping[str, int]:
    """The request rule over a foreign pod's spec (its name and node do not change it)."""
    shape = ForeignPodSpec(name="", node="", requests=dict(requests),
                           init_requests=dict(init_requests), overhead=dict(overhead))
    return MappingProxyType(pod_requests(shape.pod_spec()))


def _container(name: str, requests: dict[str, str]) -> dict[str, Any]:
    return {"name": name, "image": FOREIGN_IMAGE, "resources": {"requests": dict(requests)}}


@dataclass(frozen=True)
class ClusterSpec:
    name: str
    namespace: str
    token: str | None
    storage_classes: tuple[str, ...]
    nodes: tuple[NodeSpec, ...]
    faults: FaultSpec = field(default_factory=FaultSpec)
    pods: tuple[ForeignPodSpec, ...] = ()
    kueue: KueueSpec | None = None  # Kueue's queues (None: no Kueue on the cluster)


@dataclass(frozen=True)
class Fleet:
    clusters: tuple[ClusterSpec, ...]
    # Cross-cluster network domains: name -> the clusters it spans. A Job naming one in
    # `spec.networkDomain` may place its tasks on nodes of every cluster of that domain.
    network_domains: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def cluster(self, name: str) -> ClusterSpec:
        for cluster in self.clusters:
            if cluster.name == name:
                return cluster
        raise KeyError(name)

    @property
    def node_count(self) -> int:
        return sum(len(cluster.nodes) for cluster in self.clusters)


def describe_path(document: Any, path: Iterable[Any]) -> str:
    """Render a path into the document, naming list entries that have a `name`."""
    parts = []
    current = document
    for step in path:
        entry: Any = None
        if isinstance(step, int):
            if isinstance(current, list) and 0 <= step < len(current):
                entry = current[step]
            name = entry.get("name") if isinstance(entry, dict) else None
            parts.append(f"[{step}]" + (f" ({name})" if isinstance(name, str) else ""))
        else:
            entry = current.get(step) if isinstance(current, dict) else None
            parts.append(f".{step}" if _PLAIN_KEY.match(str(step)) else f'["{step}"]')
        current = entry
    return "".join(parts).lstrip(".") or "fleet"


def label_problems(labels: dict[str, str]) -> list[str]:
    """Kubernetes label-syntax problems of a label mapping, keyed by the label."""
    problems = []
    for key, value in labels.items():
        prefix, _, name = key.rpartition("/")
        if (prefix and not is_dns_subdomain(prefix)) or not _LABEL_NAME.match(name):
            problems.append(f'labels["{key}"]: not a valid label key')
        if value and not _LABEL_NAME.match(value):
            problems.append(f'labels["{key}"]: value "{value}" is not a valid label value')
    return problems


def allocatable_problems(allocatable: dict[str, Any]) -> list[str]:
    """Problems of an allocatable mapping: values must be non-negative quantities."""
    problems = []
    for key, value in allocatable.items():
        valid = value >= 0 if isinstance(value, int) else is_quantity(str(value).strip())
        if not valid or isinstance(value, bool):
            problems.append(f'allocatable["{key}"]: {value!r} is not a non-negative quantity')
    return problems


def quantities_problems(quantities: dict[str, Any], *, key: str) -> list[str]:
    """Problems of a `{resource: quantity}` mapping of a foreign pod."""
    problems = []
    for resource, value in quantities.items():
        valid = value >= 0 if isinstance(value, int) else is_quantity(str(value).strip())
        if not valid or isinstance(value, bool):
            problems.append(f'{key}["{resource}"]: {value!r} is not a non-negative quantity')
    return problems


def foreign_pod_problems(pod: dict[str, Any], node_names: set[str] | frozenset[str]) -> list[str]:
    """Problems of a schema-valid foreign pod mapping besides capacity."""
    problems = []
    if not is_dns_subdomain(pod["name"]):
        problems.append("name: must be a DNS subdomain")
    if not is_dns_label(pod.get("namespace", FOREIGN_NAMESPACE)):
        problems.append("namespace: must be a DNS label")
    if pod["node"] not in node_names:
        problems.append(f"node: {pod['node']} is not a node of this cluster")
    for key in ("requests", "init_requests", "overhead"):
        problems += quantities_problems(pod.get(key, {}), key=key)
    problems += label_problems(pod.get("labels", {}))
    if not problems:
        try:
            foreign_pod_spec_from_dict(pod).request()
        except PodSpecError as error:
            problems.append(str(error))
    return problems


def foreign_pod_spec_from_dict(pod: dict[str, Any]) -> ForeignPodSpec:
    """Build a `ForeignPodSpec` from a validated mapping (quantities become strings)."""
    return ForeignPodSpec(
        name=pod["name"],
        node=pod["node"],
        namespace=pod.get("namespace", FOREIGN_NAMESPACE),
        requests={k: str(v).strip() for k, v in pod.get("requests", {}).items()},
        init_requests={k: str(v).strip() for k, v in pod.get("init_requests", {}).items()},
        overhead={k: str(v).strip() for k, v in pod.get("overhead", {}).items()},
        labels=dict(pod.get("labels", {})),
    )


def _pods_problems(where: str, cluster: dict[str, Any]) -> list[str]:
    """Problems of a cluster's `pods:`: shape, names, nodes, and that they fit together."""
    nodes = {node["name"]: node_spec_from_dict(node) for node in cluster.get("nodes", [])}
    node_names = frozenset(nodes)
    problems: list[str] = []
    names: set[str] = set()
    usage: Usage = {}
    for index, pod in enumerate(cluster.get("pods", [])):
        pod_where = f"{where}.pods[{index}] ({pod['name']})"
        if pod["name"] in names:
            problems.append(f"{pod_where}.name: duplicate pod name in this cluster")
        names.add(pod["name"])
        found = foreign_pod_problems(pod, node_names)
        problems += [f"{pod_where}.{p}" for p in found]
        if found:
            continue
        request, key = foreign_pod_spec_from_dict(pod).request(), ("", pod["node"])
        used: Mapping[str, int] = usage.get(key, {})
        refused = fit_refusal(request, node_allocatable(nodes[pod["node"]]), used)
        if refused is not None:
            problems.append(f"{pod_where}: does not fit on node {pod['node']}: "
                            + ", ".join(refused.reasons))
        else:
            reserve(usage, key, request)
    return problems


def _schema_problems(document: Any) -> list[str]:
    if _FAST_VALIDATOR is not None and _FAST_VALIDATOR.is_valid(document):
        return []
    validator = jsonschema.Draft202012Validator(FLEET_SCHEMA)
    errors = sorted(validator.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    return [f"{describe_path(document, e.absolute_path)}: {e.message}" for e in errors]


def _cluster_problems(index: int, cluster: dict[str, Any]) -> list[str]:
    where = f"clusters[{index}] ({cluster['name']})"
    problems = []
    if not is_dns_label(cluster["name"]) or cluster["name"] == CONTROL_SEGMENT:
        problems.append(f"{where}.name: must be a DNS label (a-z, 0-9, '-'), used in URLs")
    if not is_dns_label(cluster["namespace"]):
        problems.append(f"{where}.namespace: must be a DNS label")
    classes = cluster.get("storage_classes", [])
    for duplicate in sorted({c for c in classes if classes.count(c) > 1}):
        problems.append(f"{where}.storage_classes: {duplicate} appears twice")
    seen: set[str] = set()
    for node_index, node in enumerate(cluster.get("nodes", [])):
        node_where = f"{where}.nodes[{node_index}] ({node['name']})"
        if node["name"] in seen:
            problems.append(f"{node_where}.name: duplicate node name in this cluster")
        seen.add(node["name"])
        if not is_dns_subdomain(node["name"]):
            problems.append(f"{node_where}.name: must be a DNS subdomain")
        problems += [f"{node_where}.{p}" for p in label_problems(node.get("labels", {}))]
        problems += [f"{node_where}.{p}" for p in allocatable_problems(node.get("allocatable", {}))]
    if "faults" in cluster:
        problems += [f"{where}.faults: {p}" for p in fault_problems(cluster["faults"])]
    if "kueue" in cluster:
        problems += [f"{where}.kueue.{p}" for p in kueue_problems(cluster["kueue"])]
    return problems + _pods_problems(where, cluster)


def _semantic_problems(document: dict[str, Any]) -> list[str]:
    problems = []
    names = [cluster["name"] for cluster in document["clusters"]]
    for duplicate in sorted({name for name in names if names.count(name) > 1}):
        problems.append(f"clusters: the name {duplicate} is used by more than one cluster")
    for index, cluster in enumerate(document["clusters"]):
        problems += _cluster_problems(index, cluster)
    return problems


def node_spec_from_dict(node: dict[str, Any]) -> NodeSpec:
    """Build a `NodeSpec` from a validated node mapping (quantities become strings)."""
    return NodeSpec(
        name=node["name"],
        labels=dict(node.get("labels", {})),
        allocatable={key: str(value) for key, value in node.get("allocatable", {}).items()},
        ready=node.get("ready", True),
    )


def _cluster_spec(cluster: dict[str, Any]) -> ClusterSpec:
    return ClusterSpec(
        name=cluster["name"],
        namespace=cluster["namespace"],
        token=cluster.get("token"),
        storage_classes=tuple(cluster.get("storage_classes", [])),
        nodes=tuple(node_spec_from_dict(node) for node in cluster.get("nodes", [])),
        faults=fault_spec_from_dict(cluster.get("faults", {})),
        pods=tuple(foreign_pod_spec_from_dict(pod) for pod in cluster.get("pods", [])),
        kueue=kueue_spec_from_dict(cluster["kueue"]) if "kueue" in cluster else None,
    )


def parse_fleet(document: Any, *, source: str = "fleet") -> Fleet:
    """Validate a fleet document (already parsed from YAML) and build the `Fleet`."""
    problems = _schema_problems(document)
    if not problems:
        problems = _semantic_problems(document)
    if problems:
        raise FleetError(problems, source=source)
    domains = tuple(
        (str(domain["name"]), tuple(str(c) for c in domain["clusters"]))
        for domain in document.get("network_domains") or ()
    )
    return Fleet(
        clusters=tuple(_cluster_spec(cluster) for cluster in document["clusters"]),
        network_domains=domains,
    )


# PyYAML's safe loader in C (libyaml) when the wheel has it: the same documents, about four
# times faster on a fleet file of 100,000 nodes (minutes in pure Python).
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml(text: str) -> Any:
    """The document in `text`, read like `yaml.safe_load` (C loader when available). A JSON
    object (YAML's JSON subset, as the benches write a fleet of 200,000 pods) is read by the
    JSON decoder: the same document, a hundred times faster than libyaml."""
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except ValueError:
            pass  # YAML flow style that is not JSON: the YAML loader reads it (or says why)
    return yaml.load(text, Loader=_SAFE_LOADER)  # noqa: S506 - a safe loader


def load_fleet(path: str | Path) -> Fleet:
    """Read, validate and build the fleet in a YAML file."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        document = load_yaml(text)
    except yaml.YAMLError as exc:
        raise FleetError([f"not valid YAML: {exc}"], source=str(path)) from exc
    return parse_fleet(document, source=str(path))


_GPU_MODELS = ("a100", "h100", "l40s")
_ZONES = ("zone-1", "zone-2", "zone-3", "zone-4")
_STORAGE_CLASSES = ("s3-fuse", "local-nvme", "nfs", "ceph-rbd")


def _generated_node(rng: random.Random, cluster: str, index: int) -> dict[str, Any]:
    name = f"{cluster}-node-{index:05d}"
    has_gpu = rng.random() < 0.7
    labels = {
        "kubernetes.io/hostname": name,
        "topology.rlinf.io/cluster": cluster,
        "rlinf.io/pool": f"{cluster}-pool-{index % 8}",
        "rlinf.io/zone": rng.choice(_ZONES),
        "rlinf.io/rack": f"rack-{index // 16:03d}",
    }
    allocatable: dict[str, int] = {}
    if has_gpu:
        labels["rlinf.io/gpu-model"] = rng.choice(_GPU_MODELS)
        allocatable["nvidia.com/gpu"] = rng.choice((4, 8, 8, 8))
        allocatable["rlinf.io/rdma"] = rng.choice((0, 2, 4))
    else:
        allocatable["rlinf.io/sim-license"] = rng.choice((1, 2, 4))
    ready = rng.random() > 0.02
    return {"name": name, "labels": labels, "allocatable": allocatable, "ready": ready}


def generate_fleet(*, clusters: int, nodes_per_cluster: int, seed: int = 0) -> dict[str, Any]:
    """A synthetic fleet document for benchmarks, deterministic for a given seed.

    Clusters `sim-00`, `sim-01`, ... each get their own pools and cluster label;
    zones, GPU models and racks repeat across clusters, so selectors on those
    alone match nodes in several clusters, as in the demo fleet.
    """
    rng = random.Random(seed)
    document_clusters = []
    for cluster_index in range(clusters):
        name = f"sim-{cluster_index:02d}"
        document_clusters.append(
            {
                "name": name,
                "namespace": f"rl-{name}",
                "token": f"token-{name}",
                "storage_classes": sorted(rng.sample(_STORAGE_CLASSES, 2)),
                "nodes": [_generated_node(rng, name, i) for i in range(nodes_per_cluster)],
            }
        )
    return {"clusters": document_clusters}
