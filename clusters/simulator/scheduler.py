"""The simulator's kube-scheduler: filter nodes for one pod and explain a failure (pure).

A pod binds to the first node, by name, that passes the filters kube-scheduler's default
profile runs, in that profile's order, each with kube-scheduler's own reason text:

1. `TaintToleration`: a NotReady node carries `node.kubernetes.io/not-ready:NoSchedule`:
   `node(s) had untolerated taint(s)`;
2. `NodeAffinity` (the pod's `nodeSelector`): `node(s) didn't match Pod's node
   affinity/selector`;
3. `NodeResourcesFit`: `Too many pods`, `Insufficient cpu`, `Insufficient memory`,
   `Insufficient <resource>`, every one that is short on the node;
4. `InterPodAffinity` (the simulated operator puts one replica of a Task per node):
   `node(s) didn't match pod anti-affinity rules`.

Preemption cannot help with 1 and 2, nor with 3 when the node's allocatable itself is
smaller than the request; it could with the others.

A node stops at the first filter it fails. When every node fails, the message is
`FitError.Error()` of pkg/scheduler/framework/types.go: `0/N nodes are available: ` then
"<count> <reason>" for every reason, sorted as strings, joined with ", ", and a full stop;
then the DefaultPreemption PostFilter's message, `preemption: ` and the same form over its
dry run: a node whose failure preemption could resolve finds no victims (every simulated
pod has the same priority: `No preemption victims found for incoming pod`), every other
node `Preemption is not helpful for scheduling`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import TYPE_CHECKING

from clusters.podrequests import CPU, MEMORY, PODS, Requests, is_tracked, scheduler_units
from clusters.quantities import QuantityError, nano_units

if TYPE_CHECKING:  # the fleet file's checks use this module: no import at run time
    from clusters.simulator.fleet import NodeSpec

DEFAULT_NODE_RESOURCES = {"cpu": "64", "memory": "512Gi", "pods": "110"}
"""What a node reports for cpu, memory and pods when the fleet file does not say."""

UNTOLERATED_TAINT = "node(s) had untolerated taint(s)"
SELECTOR_MISMATCH = "node(s) didn't match Pod's node affinity/selector"
ANTI_AFFINITY = "node(s) didn't match pod anti-affinity rules"
TOO_MANY_PODS = "Too many pods"
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_NODES = "no nodes available to schedule pods"
NOT_ELIGIBLE = "not eligible due to preemptionPolicy=Never."

Usage = dict[tuple[str, str], Counter[str]]
"""What bound, live pods request on each node, by (cluster, node): scheduler units, `pods`."""


@dataclass(frozen=True)
class Candidate:
    """A node a pod may go to, and the cluster it belongs to."""

    cluster: str
    node: NodeSpec

    @property
    def key(self) -> tuple[str, str]:
        return (self.cluster, self.node.name)


@dataclass(frozen=True)
class Refusal:
    """Why one node cannot take the pod: the reasons, and whether preemption could help."""

    reasons: tuple[str, ...]
    resolvable: bool


def node_allocatable(node: NodeSpec) -> Mapping[str, int]:
    """The node's allocatable cpu, memory, pods and extended resources in scheduler units
    (cpu, memory and pods defaulted as node objects report them; an unreadable value is 0)."""
    return _allocatable(tuple(sorted(node.allocatable.items())))


@lru_cache(maxsize=4096)
def _allocatable(reported: tuple[tuple[str, str], ...]) -> Mapping[str, int]:
    allocatable: dict[str, int] = {}
    for resource, text in {**DEFAULT_NODE_RESOURCES, **dict(reported)}.items():
        if resource != PODS and not is_tracked(resource):
            continue
        try:
            allocatable[resource] = scheduler_units(resource, nano_units(str(text).strip()))
        except QuantityError:
            allocatable[resource] = 0
    return MappingProxyType(allocatable)  # shared by every caller: read-only


def fit_refusal(request: Mapping[str, int], allocatable: Mapping[str, int],
                 used: Mapping[str, int]) -> Refusal | None:
    """`NodeResourcesFit`: every resource short on the node, in the plugin's order."""
    reasons: list[str] = []
    resolvable = True
    if used.get(PODS, 0) + 1 > allocatable.get(PODS, 0):
        reasons.append(TOO_MANY_PODS)
    ordered = [r for r in (CPU, MEMORY) if r in request]
    ordered += sorted(r for r in request if r not in (CPU, MEMORY))
    for resource in ordered:
        amount, capacity = request[resource], allocatable.get(resource, 0)
        if amount > capacity - used.get(resource, 0):
            reasons.append(f"Insufficient {resource}")
            resolvable = resolvable and amount <= capacity
    return Refusal(tuple(reasons), resolvable) if reasons else None


def refusal(
    request: Mapping[str, int], candidate: Candidate, usage: Usage, *,
    selector: Mapping[str, str], siblings: Iterable[tuple[str, str]] = (),
) -> Refusal | None:
    """Why `candidate` cannot take a pod asking for `request` (None when it can).

    `siblings` are the nodes other replicas of the pod's Task are bound to.
    """
    node = candidate.node
    if not node.ready:
        return Refusal((UNTOLERATED_TAINT,), resolvable=False)
    if any(node.labels.get(key) != value for key, value in selector.items()):
        return Refusal((SELECTOR_MISMATCH,), resolvable=False)
    short = fit_refusal(request, node_allocatable(node), usage.get(candidate.key, Counter()))
    if short is not None:
        return short
    if candidate.key in set(siblings):
        return Refusal((ANTI_AFFINITY,), resolvable=True)
    return None


def _histogram(total: int, reasons: Iterable[str]) -> str:
    counted = sorted(f"{count} {reason}" for reason, count in Counter(reasons).items())
    return f"0/{total} nodes are available: {', '.join(counted)}."


def fit_error(total: int, refusals: Iterable[Refusal], *, preemption: bool = True) -> str:
    """kube-scheduler's message for a pod no node of `total` could take."""
    if total == 0:
        return NO_NODES
    refused = list(refusals)
    message = _histogram(total, (reason for r in refused for reason in r.reasons))
    if not preemption:
        return f"{message} preemption: {NOT_ELIGIBLE}"
    victims = sum(1 for r in refused if r.resolvable)
    dry_run = [NO_VICTIMS] * victims + [NOT_HELPFUL] * (total - victims)
    return f"{message} preemption: {_histogram(total, dry_run)}"


@dataclass
class Placement:
    """Where one pod went (`node`), or why it went nowhere (`message`)."""

    node: Candidate | None = None
    message: str = ""
    refusals: list[Refusal] = field(default_factory=list)


def place(
    request: Requests, candidates: list[Candidate], usage: Usage, *,
    selector: Mapping[str, str], siblings: Iterable[tuple[str, str]] = (),
    preemption: bool = True,
) -> Placement:
    """The first candidate (in the given order) that takes the pod, its usage updated; or
    kube-scheduler's message for why none does."""
    taken = set(siblings)
    refusals: list[Refusal] = []
    for candidate in candidates:
        refused = refusal(request, candidate, usage, selector=selector, siblings=taken)
        if refused is None:
            reserve(usage, candidate.key, request)
            return Placement(node=candidate)
        refusals.append(refused)
    return Placement(message=fit_error(len(candidates), refusals, preemption=preemption),
                     refusals=refusals)


def reserve(usage: Usage, key: tuple[str, str], request: Mapping[str, int]) -> None:
    """Count a bound pod's request (and the pod itself) on its node."""
    used = usage.setdefault(key, Counter())
    used.update(request)
    used[PODS] += 1
