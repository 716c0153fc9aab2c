"""Fleet files as RLark registers them: the simulator's format plus `network_domains:`.

```yaml
clusters: [...]                 # as in docs/simulator.md
network_domains:                # optional
  - name: rdma-fabric
    clusters: [gpu-a, gpu-b]
```
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from clusters.inventory.services import ClusterRegistration
from clusters.labels import is_dns_label
from clusters.simulator.fleet import Fleet, FleetError, load_yaml, parse_fleet


@dataclass(frozen=True)
class NetworkDomainSpec:
    name: str
    clusters: tuple[str, ...]


@dataclass(frozen=True)
class FleetFile:
    fleet: Fleet
    network_domains: tuple[NetworkDomainSpec, ...]


def _domain_problems(index: int, entry: Any, cluster_names: set[str]) -> list[str]:
    where = f"network_domains[{index}]"
    if not isinstance(entry, dict) or set(entry) != {"name", "clusters"}:
        return [f"{where}: must be a mapping with exactly the keys name and clusters"]
    problems = []
    name, clusters = entry["name"], entry["clusters"]
    if not is_dns_label(name):
        problems.append(f"{where}.name: must be a DNS label")
    if not isinstance(clusters, list) or not clusters:
        return [*problems, f"{where}.clusters: must be a non-empty list of cluster names"]
    for cluster in clusters:
        if not isinstance(cluster, str) or cluster not in cluster_names:
            problems.append(f"{where}.clusters: {cluster!r} is not a cluster of this fleet")
    if len(set(map(str, clusters))) != len(clusters):
        problems.append(f"{where}.clusters: a cluster is listed twice")
    return problems


def parse_network_domains(
    document: Any, *, cluster_names: Sequence[str]
) -> list[NetworkDomainSpec]:
    """Validate the optional `network_domains` list; raises `FleetError` with every problem."""
    if document is None:
        return []
    if not isinstance(document, list):
        raise FleetError(["network_domains: must be a list"])
    known = set(cluster_names)
    problems = [p for i, entry in enumerate(document) for p in _domain_problems(i, entry, known)]
    names = [str(e["name"]) for e in document if isinstance(e, dict) and "name" in e]
    problems += [
        f"network_domains: the name {name} is used twice"
        for name in sorted({n for n in names if names.count(n) > 1})
    ]
    if problems:
        raise FleetError(problems)
    return [NetworkDomainSpec(e["name"], tuple(e["clusters"])) for e in document]


def parse_fleet_file(document: Any, *, source: str = "fleet") -> FleetFile:
    """Validate a parsed fleet document, `network_domains` included."""
    domains = None
    if isinstance(document, dict) and "network_domains" in document:
        document = dict(document)
        domains = document.pop("network_domains")
    fleet = parse_fleet(document, source=source)
    names = [cluster.name for cluster in fleet.clusters]
    try:
        parsed_domains = parse_network_domains(domains, cluster_names=names)
    except FleetError as error:
        raise FleetError(error.problems, source=source) from error
    return FleetFile(fleet=fleet, network_domains=tuple(parsed_domains))


def read_fleet_file(path: str | Path) -> FleetFile:
    """Read and validate a fleet YAML file."""
    try:
        document = load_yaml(Path(path).read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise FleetError([f"not valid YAML: {exc}"], source=str(path)) from exc
    return parse_fleet_file(document, source=str(path))


def registrations(fleet: Fleet, *, simulator_url: str) -> list[ClusterRegistration]:
    """How each fleet cluster is reached through a simulator at `simulator_url`.

    TLS is verified only for https URLs (the simulator itself speaks plain http).
    """
    base = simulator_url.rstrip("/")
    return [
        ClusterRegistration(
            name=cluster.name,
            namespace=cluster.namespace,
            api_url=f"{base}/{cluster.name}",
            token=cluster.token or "",
            verify_tls=base.startswith("https://"),
        )
        for cluster in fleet.clusters
    ]
