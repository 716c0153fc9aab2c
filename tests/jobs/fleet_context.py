"""Build a `CheckContext` from a fleet description by scanning its nodes (tests only).

This is the database-free twin of `jobs.context`: the same global matching rule (every
node of every cluster, ordered by cluster then node name), computed in memory.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from jobs.core.parameters import job_content, record_content, record_roles_from_spec
from jobs.core.spec import (
    CheckContext,
    ClusterFacts,
    EnvVar,
    JobSpec,
    LaunchListImages,
    MatchedNode,
    Mount,
    ParametersView,
    ResourcePair,
    RoleSpec,
    SelectorMatch,
    VerificationView,
    selector_key,
)

REPO = Path(__file__).resolve().parents[2]
DEMO_FLEET_PATH = REPO / "deploy" / "fleets" / "demo.yaml"
CRD_PATH = REPO / "deploy" / "crds" / "rlinf.io_jobs.yaml"


@functools.cache
def load_demo_fleet() -> dict[str, Any]:
    """The demo fleet, parsed once (treat it as read-only)."""
    return yaml.safe_load(DEMO_FLEET_PATH.read_text(encoding="utf-8"))


def _count(value: Any) -> int | None:
    return int(value) if isinstance(value, (int, str)) and str(value).isdigit() else None


def _nodes(fleet: Mapping[str, Any]) -> list[tuple[dict[str, str], MatchedNode]]:
    nodes = []
    for cluster in fleet["clusters"]:
        for node in cluster.get("nodes", []):
            allocatable = node.get("allocatable") or {}
            devices = tuple(
                sorted(
                    (name, int(value))
                    for name, value in allocatable.items()
                    if name.startswith("rlinf.io/")
                )
            )
            matched = MatchedNode(
                cluster=cluster["name"],
                name=node["name"],
                namespace=cluster["namespace"],
                gpu=_count(allocatable.get("nvidia.com/gpu")),
                devices=devices,
                ready=node.get("ready", True),
            )
            nodes.append((dict(node.get("labels") or {}), matched))
    nodes.sort(key=lambda item: (item[1].cluster, item[1].name))
    return nodes


def match_in_fleet(fleet: Mapping[str, Any], selector: Mapping[str, str]) -> SelectorMatch:
    """Global matches of `selector`, with the clusters each single condition reaches."""
    nodes = _nodes(fleet)
    matched = tuple(
        node for labels, node in nodes if all(labels.get(k) == v for k, v in selector.items())
    )
    per_condition = tuple(
        (
            (key, value),
            frozenset(node.cluster for labels, node in nodes if labels.get(key) == value),
        )
        for key, value in sorted(selector.items())
    )
    return SelectorMatch(nodes=matched, condition_clusters=per_condition)


def cluster_facts(fleet: Mapping[str, Any]) -> dict[str, ClusterFacts]:
    facts = {}
    for cluster in fleet["clusters"]:
        devices = {
            name
            for node in cluster.get("nodes", [])
            for name in (node.get("allocatable") or {})
            if name.startswith("rlinf.io/")
        }
        facts[cluster["name"]] = ClusterFacts(
            name=cluster["name"],
            namespace=cluster["namespace"],
            storage_classes=frozenset(cluster.get("storage_classes", [])),
            device_names=frozenset(devices),
        )
    return facts


def approved(
    match: SelectorMatch,
    *,
    verification_id: int = 1,
    confirmed_gpu: int | None = None,
    confirmed_devices: Iterable[tuple[str, int]] = (),
    confirmed_host_paths: Iterable[str] = (),
) -> VerificationView:
    return VerificationView(
        id=verification_id,
        state="approved",
        node_signature=match.signature(),
        confirmed_gpu=confirmed_gpu,
        confirmed_devices=tuple(confirmed_devices),
        confirmed_host_paths=tuple(confirmed_host_paths),
    )


def parameters_for(spec: JobSpec, verification_ids: Iterable[int] = (), *,
                   state: str = "confirmed", record_id: int | None = None) -> ParametersView:
    """Deployment parameters filled from `spec` ("Fill from job"), in `state`; confirmed ones
    were confirmed for exactly this job."""
    ids = sorted(set(verification_ids))
    content = record_content(
        roles=record_roles_from_spec(spec), network_domain=spec.network_domain,
        storage_notes="", network_notes="", verifications=[(pk, "approved") for pk in ids],
    )
    confirmed = {"record": content, "job": job_content(spec)} if state != "pending" else {}
    pk = record_id if record_id is not None else spec.deployment_parameters_id
    return ParametersView(
        id=pk if isinstance(pk, int) else 0, title="parameters", state=state,
        roles=tuple(content["roles"]), network_domain=spec.network_domain,
        verification_ids=frozenset(ids), content=content, confirmed=confirmed,
    )


def context_for(
    spec: JobSpec,
    fleet: Mapping[str, Any],
    *,
    verify: bool = True,
    confirmed_host_paths: Iterable[str] = (),
    network_domains: Mapping[str, frozenset[str]] | None = None,
    taken_names: Iterable[str] = (),
    parameters: ParametersView | str | None = "confirmed",
) -> CheckContext:
    """Matches for every role's selector and, with `verify`, an approved verification each.

    `parameters` is the job's deployment parameters: by default filled from `spec` and
    confirmed (`parameters_for`), or a view given, or None for none found."""
    matches: dict[tuple[tuple[str, str], ...], SelectorMatch] = {}
    verifications: dict[tuple[str, tuple[tuple[str, str], ...]], VerificationView] = {}
    paths = tuple(confirmed_host_paths)
    roles = spec.roles if isinstance(spec.roles, (list, tuple)) else ()
    for index, role in enumerate(roles):
        pairs = getattr(role, "selector", ())
        if not isinstance(pairs, tuple) or not all(
            isinstance(p, tuple) and len(p) == 2 for p in pairs
        ):
            continue
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in pairs):
            continue
        selector = dict(pairs)
        match = match_in_fleet(fleet, selector)
        matches[selector_key(selector)] = match
        cluster = getattr(role, "cluster", None)
        if verify and isinstance(cluster, str):
            verifications[(cluster, selector_key(selector))] = approved(
                match, verification_id=index + 1, confirmed_host_paths=paths
            )
    if isinstance(parameters, str):
        ids = [view.id for view in verifications.values() if view.state == "approved"]
        parameters = parameters_for(spec, ids, state=parameters) if isinstance(
            getattr(spec, "roles", None), (list, tuple)) else None
    return CheckContext(
        clusters=cluster_facts(fleet),
        matches=matches,
        verifications=verifications,
        network_domains=dict(network_domains or {}),
        taken_names=frozenset(taken_names),
        parameters=parameters,
    )


# -- a clean 3-role RL job on the demo fleet ---------------------------------------------------

DIGEST = "sha256:" + "3f" * 32
IMAGE = f"registry.example.com/rlinf/rlinf@{DIGEST}"
# Generated with ssh-keygen; the fingerprints below are what `ssh-keygen -lf` printed.
ALICE_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHmwG2qUWPisUBb+7aUEn83Us4wZCGIkFBb03Ku/YCZn alice@laptop"
)
ALICE_FINGERPRINT = "SHA256:8TZc9PvhuOay5jJw3izPlSYYMjqQCH+Fg50NGGPAJXA"
BOB_KEY = (
    "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQDUC2w8Omu1dxQK9bCLA4KhjdSt57H8PQwARilmFEV5cbUGWxlH1iDED"
    "YJbo2uNZ4A8SFGzZRz4ftkfKIi9+RuHEnAVDqiHdF3BVcgU8P35QJhuVqwj6ITO1HqHvyfzCp+qL/6yBuM0hTv29Uf3CK"
    "YJiCnV4POzriEdEzdcmjpoJ+v/qwoRLewc3RCOEn2qzr5YeGGxVsuMTsfcoxATPIO4Ie5bZh4ZEJRbFhNbJxxJFAMkE0P"
    "rTh5mFlmxAgPWPCpBrk6g+Uhs5wex15KNmInLTTR7YHpcfIkD8OvFUEtH8ykoO0358nL1YcZL2/1rR5hpFagaVHQ7L21X"
    "IW+HqMRf bob"
)
BOB_FINGERPRINT = "SHA256:KK5GRXO9ttk5/jB4LbSuYVXTbhAggG73klpe+R3sSkU"
CAROL_KEY = (
    "ecdsa-sha2-nistp256 AAAAE2VjZHNhLXNoYTItbmlzdHAyNTYAAAAIbmlzdHAyNTYAAABBBID0OQKdkUv2mIeWXDSSuY"
    "k4uZ+e3DOjT3O0htykAI/lZ4RluhwFokQRwbpMth/H5N+AWqkIN4cCbtvqTTci5ho="
)
CAROL_FINGERPRINT = "SHA256:b2/6qkFa1qVKwaFzhKFWsBuTe96y8q5IHD+W4JrjyXw"

NETWORK_DOMAINS = {
    "rl-mesh": frozenset({"gpu-a", "gpu-b", "cpu-c"}),
    "gpu-only": frozenset({"gpu-a", "gpu-b"}),
}
CONFIRMED_HOST_PATHS = ("/data/models",)


def clean_roles() -> tuple[RoleSpec, ...]:
    """Actor (header) on a-head-01, Rollout on the a100-a pool (gpu-a), Environment in cpu-c."""
    return (
        RoleSpec(
            name="Actor",
            cluster="gpu-a",
            selector=(("kubernetes.io/hostname", "a-head-01"),),
            gpus=8,
            devices=(("rlinf.io/rdma", 4),),
            cpu=ResourcePair(request="16", limit="32"),
            memory=ResourcePair(request="64Gi", limit="128Gi"),
            image=IMAGE,
            prepare_script="source /opt/venv/bin/activate\n",
            env=(EnvVar("HF_HOME", "/mnt/cache"), EnvVar("RAY_TEMP_DIR", "/mnt/ray")),
            mounts=(
                Mount(kind="host_path", source="/data/models", target="/mnt/models"),
                Mount(kind="object_storage", storage_class="s3-fuse", target="/mnt/ckpt"),
            ),
        ),
        RoleSpec(
            name="Rollout",
            cluster="gpu-a",
            selector=(("rlinf.io/pool", "a100-a"),),
            gpus=8,
            devices=(("rlinf.io/rdma", 2),),
            image=IMAGE,
            prepare_script="source /opt/venv/bin/activate\n",
            env=(EnvVar("VLLM_USE_V1", "1"),),
        ),
        RoleSpec(
            name="Environment",
            cluster="cpu-c",
            selector=(("rlinf.io/pool", "env-c"),),
            gpus=0,
            devices=(("rlinf.io/sim-license", 1),),
            cpu=ResourcePair(request="4", limit="8"),
            memory=ResourcePair(request="16Gi"),
            image=IMAGE,
            mounts=(
                Mount(kind="object_storage", storage_class="nfs", target="/mnt/env", size="10Gi"),
            ),
        ),
    )


def clean_spec(**changes: Any) -> JobSpec:
    spec = JobSpec(
        team="vision-rl",
        name="ppo-math-7b",
        task_type="rl",
        roles=clean_roles(),
        header_role="Actor",
        network_domain="rl-mesh",
        ssh_keys=(ALICE_KEY,),
        run_script="cd /workspace/rlinf\npython -m rlinf.train --config ppo.yaml\n",
        tensorboard_log_dir="/mnt/ckpt/tb",
        launch_list_id=12,
        deployment_parameters_id=7,
    )
    return replace(spec, **changes)


def with_role(spec: JobSpec, index: int, **changes: Any) -> JobSpec:
    roles = list(spec.roles)
    roles[index] = replace(roles[index], **changes)
    return replace(spec, roles=tuple(roles))


def clean_context(spec: JobSpec, **overrides: Any) -> CheckContext:
    """The demo fleet seen by `spec`: every role's selector matched and approved, and a launch
    list that records the clean roles' image for all roles."""
    options: dict[str, Any] = {
        "confirmed_host_paths": CONFIRMED_HOST_PATHS,
        "network_domains": NETWORK_DOMAINS,
    }
    options.update(overrides)
    ctx = context_for(spec, load_demo_fleet(), **options)
    return replace(ctx, launch_list_images=LaunchListImages(image=IMAGE))
