"""The findings engine: every code fires on the input it names and stays quiet on a clean job.

The clean job is the demo fleet's 3-role RL run (tests/jobs/fleet_context.py). Its only
finding is the warning that the Rollout pool includes a NotReady node (a-node-12).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from clusters.capacity import NodeCapacity
from clusters.preflight import ClusterOccupancy, needs_units
from clusters.quantities import QuantityError, parse_quantity
from jobs.core.findings import check, has_errors
from jobs.core.findings.admission import worker_requests
from jobs.core.images import parse_image_reference, pinned_image
from jobs.core.spec import (
    CheckContext,
    EnvVar,
    JobSpec,
    LaunchListImages,
    Mount,
    ParametersView,
    ResourcePair,
    RoleSpec,
    VerificationView,
    role_match,
    selector_key,
    spec_roles,
)
from jobs.core.sshkeys import SSHKeyError, fingerprint_sha256, validate_openssh_public_key
from rlark_site.foundation.findings import Finding
from tests.jobs import test_admission_findings as admission_cases
from tests.jobs.fleet_context import (
    ALICE_FINGERPRINT,
    ALICE_KEY,
    BOB_FINGERPRINT,
    BOB_KEY,
    CAROL_FINGERPRINT,
    CAROL_KEY,
    DIGEST,
    IMAGE,
    clean_context,
    clean_spec,
    with_role,
)

DOCS = Path(__file__).resolve().parents[2] / "docs" / "findings.md"
BASELINE = {"selector.not_ready"}
TAG_DIGEST = "sha256:" + "0c" * 32

Case = Callable[[], tuple[JobSpec, CheckContext]]


def codes(findings: list[Finding]) -> set[str]:
    return {f.code for f in findings}


def run(spec: JobSpec, ctx: CheckContext | None = None) -> list[Finding]:
    return check(spec, ctx if ctx is not None else clean_context(spec))


def only(findings: list[Finding], code: str) -> Finding:
    matching = [f for f in findings if f.code == code]
    assert len(matching) == 1, findings
    return matching[0]


def spec_case(spec: JobSpec) -> Case:
    return lambda: (spec, clean_context(spec))


def role_case(index: int, **changes: object) -> Case:
    return spec_case(with_role(clean_spec(), index, **changes))


def images_case(images: LaunchListImages) -> tuple[JobSpec, CheckContext]:
    """The clean job against a launch list recording `images`."""
    return clean_spec(), replace(clean_context(clean_spec()), launch_list_images=images)


def parameters_case(
    change: Callable[[ParametersView], ParametersView], spec: JobSpec | None = None
) -> Case:
    """The clean job's deployment parameters (filled from it, confirmed), changed by `change`;
    with `spec`, that job checked against them."""
    def build() -> tuple[JobSpec, CheckContext]:
        ctx = clean_context(clean_spec())
        assert ctx.parameters is not None
        job = spec if spec is not None else clean_spec()
        return job, replace(clean_context(job), parameters=change(ctx.parameters))
    return build


def record_role_case(**changes: object) -> Case:
    """The record gives the Actor other values than the job."""
    def change(view: ParametersView) -> ParametersView:
        roles = [dict(r) for r in view.roles]
        roles[0].update(changes)
        return replace(view, roles=tuple(roles), content={**view.content, "roles": roles})
    return parameters_case(change)


def mount_case(*mounts: Mount, index: int = 0) -> Case:
    return role_case(index, mounts=mounts)


def env_case(*env: EnvVar, index: int = 0) -> Case:
    return role_case(index, env=env)


def verification_case(
    view: Callable[
        [CheckContext, tuple[str, tuple[tuple[str, str], ...]]], VerificationView | None
    ],
) -> Case:
    def build() -> tuple[JobSpec, CheckContext]:
        spec = clean_spec()
        ctx = clean_context(spec)
        key = ("gpu-a", selector_key({"rlinf.io/pool": "a100-a"}))
        verifications = dict(ctx.verifications)
        replacement = view(ctx, key)
        if replacement is None:
            del verifications[key]
        else:
            verifications[key] = replacement
        return spec, replace(ctx, verifications=verifications)

    return build


def roles_case(roles: tuple[RoleSpec, ...], **changes: object) -> Case:
    return spec_case(clean_spec(roles=roles, **changes))


def many_roles(count: int, **changes: Any) -> tuple[RoleSpec, ...]:
    environment = clean_spec().roles[2]
    extra = tuple(replace(environment, name=f"Env{i}", **changes) for i in range(count))
    return (*clean_spec().roles[:2], *extra)


LONG = "echo " + "x" * 140_000 + "\n"
BIG = "echo " + "x" * 120_000 + "\n"

def capacity_case(*, free: bool, pods: int) -> tuple[JobSpec, CheckContext]:
    """The clean job with counted occupancy on every matched node (SPEC 15's pre-flight): each
    node's allocatable twice what one worker of any role there needs, `pods` pods allocatable,
    and all of it free or all of it taken."""
    spec = clean_spec()
    ctx = clean_context(spec)
    allocatable: dict[tuple[str, str], dict[str, int]] = {}
    for role in spec_roles(spec):
        needs = needs_units(worker_requests(role))
        for node in role_match(role, ctx).nodes:
            held = allocatable.setdefault((node.cluster, node.name), {})
            for resource, amount in needs.items():
                held[resource] = max(held.get(resource, 0), 2 * amount)
    capacity = {}
    for key, amounts in allocatable.items():
        amounts["pods"] = pods
        capacity[key] = NodeCapacity(allocatable=amounts,
                                     requested={} if free else dict(amounts), counted=True)
    occupancy = {cluster: ClusterOccupancy(as_of="2026-12-02T00:00:00Z")
                 for cluster, _node in allocatable}
    return spec, replace(ctx, capacity=capacity, occupancy=occupancy)


# Every code, with one input that must produce it.
FIRING: dict[str, Case] = {
    "capacity.will_queue": lambda: capacity_case(free=False, pods=110),
    "capacity.never_fits": lambda: capacity_case(free=True, pods=0),
    "launch_list.missing": spec_case(clean_spec(launch_list_id=None)),
    "deployment_parameters.missing": spec_case(clean_spec(deployment_parameters_id=None)),
    "deployment_parameters.launch_list_mismatch": lambda: (
        clean_spec(),
        replace(clean_context(clean_spec()), parameters_launch_list_id=9),
    ),
    "job.name.invalid": spec_case(clean_spec(name="PPO_math")),
    "job.name.taken": lambda: (
        clean_spec(),
        clean_context(clean_spec(), taken_names={"ppo-math-7b"}),
    ),
    "job.team.invalid": spec_case(clean_spec(team="vision rl")),
    "job.type.invalid": spec_case(clean_spec(task_type="rlhf")),
    "roles.empty": spec_case(clean_spec(roles=(), header_role="")),
    "role.name.invalid": role_case(1, name="Roll out"),
    "role.name.duplicate": role_case(2, name="rollout"),
    "role.cluster.missing": role_case(1, cluster=""),
    "role.cluster.unknown": role_case(1, cluster="gpu-z"),
    "header.missing": spec_case(clean_spec(header_role="")),
    "header.unknown": spec_case(clean_spec(header_role="Critic")),
    "header.replicas": role_case(0, selector=(("rlinf.io/pool", "a100-a"),)),
    "selector.empty": role_case(1, selector=()),
    "selector.syntax": role_case(1, selector=(("rlinf.io/pool", "a100 a"),)),
    "selector.duplicate_key": role_case(
        1, selector=(("rlinf.io/pool", "a100-a"), ("rlinf.io/pool", "a100-b"))
    ),
    "selector.no_match": role_case(1, selector=(("rlinf.io/pool", "v100-z"),)),
    "selector.cross_cluster": role_case(1, selector=(("rlinf.io/gpu-model", "a100"),)),
    "selector.no_cluster_label": role_case(
        1, selector=(("rlinf.io/gpu-model", "a100"), ("rlinf.io/zone", "zone-2"))
    ),
    "selector.not_ready": spec_case(clean_spec()),
    "role.hostname.too_long": spec_case(clean_spec(name="a" * 55)),
    "selector.unverified": verification_case(lambda ctx, key: None),
    "selector.verification_stale": verification_case(
        lambda ctx, key: replace(ctx.verifications[key], state="stale")
    ),
    "gpu.invalid": role_case(1, gpus="eight"),
    "gpu.exceeds_capacity": role_case(1, gpus=9),
    "gpu.unconfirmed": role_case(2, gpus=1),
    "device.invalid": role_case(1, devices=(("rlinf.io/rdma", 0),)),
    "device.duplicate": role_case(1, devices=(("rlinf.io/rdma", 1), ("rlinf.io/rdma", 1))),
    "device.unknown": role_case(1, devices=(("rlinf.io/sim-license", 1),)),
    "device.exceeds_capacity": role_case(1, devices=(("rlinf.io/rdma", 5),)),
    "resources.invalid": role_case(1, cpu=ResourcePair(request="lots")),
    "image.missing": role_case(1, image=""),
    "image.invalid": role_case(1, image="Registry.Example.com:notaport/x"),
    "image.placeholder": role_case(1, image="registry.example.com/team/image@sha256:<digest>"),
    "image.mutable_tag": role_case(1, image="registry.example.com/rlinf/rlinf:latest"),
    "image.digest_missing": role_case(1, image="registry.example.com/rlinf/rlinf:v0.3"),
    "image.mixed": role_case(
        1, image="registry.example.com/rlinf/rlinf:v0.3", image_digest=TAG_DIGEST
    ),
    "deployment_parameters.unconfirmed": parameters_case(lambda v: replace(v, state="pending")),
    "deployment_parameters.confirmation_stale": parameters_case(
        lambda v: v, spec=with_role(clean_spec(), 2, cpu=ResourcePair(request="4", limit="16"))
    ),
    "deployment_parameters.role_missing": parameters_case(
        lambda v: replace(v, roles=v.roles[:2])
    ),
    "deployment_parameters.role_extra": parameters_case(
        lambda v: replace(v, roles=(*v.roles, {**v.roles[0], "role": "Critic"}))
    ),
    "deployment_parameters.cluster_mismatch": record_role_case(cluster="gpu-b"),
    "deployment_parameters.selector_mismatch": record_role_case(selector={"a": "b"}),
    "deployment_parameters.gpus_mismatch": record_role_case(gpus=4),
    "deployment_parameters.devices_mismatch": record_role_case(devices={}),
    "deployment_parameters.mounts_mismatch": record_role_case(mounts=[]),
    "deployment_parameters.cpu_mismatch": record_role_case(cpu={"request": "1", "limit": ""}),
    "deployment_parameters.memory_mismatch": record_role_case(memory={"limit": "1Gi"}),
    "deployment_parameters.network_domain_mismatch": parameters_case(
        lambda v: replace(v, network_domain="gpu-only")
    ),
    "deployment_parameters.verification_unreferenced": parameters_case(
        lambda v: replace(v, verification_ids=frozenset())
    ),
    "launch_list.image.missing": lambda: images_case(LaunchListImages()),
    "launch_list.image.unlisted": lambda: images_case(
        LaunchListImages(role_images=(("Actor", IMAGE), ("rollout", IMAGE)))
    ),
    "launch_list.image.mismatch": lambda: images_case(
        LaunchListImages(image=f"registry.example.com/rlinf/rlinf@{TAG_DIGEST}")
    ),
    "script.invalid": role_case(1, prepare_script="echo a\x00b"),
    "env.name.invalid": env_case(EnvVar("1BAD", "x")),
    "env.name.duplicate": env_case(EnvVar("A", "1"), EnvVar("A", "2")),
    "env.name.reserved": env_case(EnvVar("RLINF_NODE_RANK", "3")),
    "env.value.invalid": env_case(EnvVar("RLINF_CLUSTER_CHECK_TIMEOUT", "ten minutes")),
    "env.ray_temp_dir": env_case(EnvVar("RAY_TEMP_DIR", "tmp/ray")),
    "mount.kind.invalid": mount_case(Mount(kind="nfs", target="/mnt/x")),
    "mount.path.invalid": mount_case(Mount(kind="host_path", source="/data", target="mnt/x")),
    "mount.target.duplicate": mount_case(
        Mount(kind="host_path", source="/data/models", target="/mnt/models"),
        Mount(kind="object_storage", storage_class="s3-fuse", target="/mnt/models/"),
    ),
    "mount.target.shadows": mount_case(
        Mount(kind="object_storage", storage_class="s3-fuse", target="/usr/local/lib")
    ),
    "mount.storage_class.unknown": mount_case(
        Mount(kind="object_storage", storage_class="ceph-rbd", target="/mnt/x")
    ),
    "mount.host_path.unconfirmed": mount_case(
        Mount(kind="host_path", source="/data/other", target="/mnt/x")
    ),
    "mount.size.invalid": mount_case(
        Mount(kind="object_storage", storage_class="s3-fuse", target="/mnt/x", size="lots")
    ),
    "run_script.empty": spec_case(clean_spec(run_script="  \n")),
    "ssh_key.invalid": spec_case(clean_spec(ssh_keys=("ssh-rsa AAAA not-a-key",))),
    "ssh_key.unknown": lambda: (
        clean_spec(),
        replace(clean_context(clean_spec()), unknown_ssh_key_names=("bob-laptop",)),
    ),
    "network_domain.unknown": spec_case(clean_spec(network_domain="mesh-z")),
    "network_domain.required": spec_case(clean_spec(network_domain="")),
    "network_domain.partial": spec_case(clean_spec(network_domain="gpu-only")),
    "tensorboard.path.invalid": spec_case(clean_spec(tensorboard_log_dir="tb/logs")),
    "start_script.too_long": role_case(1, prepare_script=LONG),
    "manifest.too_large": roles_case(many_roles(9, prepare_script=BIG)),
    "admission.no_queue": admission_cases.no_queue_case,
    "admission.queue_unknown": admission_cases.queue_unknown_case,
    "admission.exceeds_quota": admission_cases.exceeds_quota_case,
}


def test_the_clean_job_has_no_error_and_only_the_not_ready_warning() -> None:
    findings = run(clean_spec())
    assert codes(findings) == BASELINE
    assert not has_errors(findings)


@pytest.mark.parametrize("code", sorted(FIRING))
def test_code_fires_on_its_input(code: str) -> None:
    spec, ctx = FIRING[code]()
    assert code in codes(check(spec, ctx))


@pytest.mark.parametrize("code", sorted(set(FIRING) - BASELINE))
def test_code_is_quiet_on_the_clean_job(code: str) -> None:
    assert code not in codes(run(clean_spec()))


def test_not_ready_is_quiet_when_every_matched_node_is_ready() -> None:
    spec = with_role(
        clean_spec(), 1, selector=(("rlinf.io/pool", "a100-a"), ("rlinf.io/zone", "zone-1"))
    )
    assert "selector.not_ready" not in codes(run(spec))


def test_every_documented_code_is_tested_and_every_tested_code_documented() -> None:
    documented = set(re.findall(r"^\| `([a-z_.]+)` \|", DOCS.read_text(encoding="utf-8"), re.M))
    assert documented == set(FIRING)


def test_documented_severities_match_the_engine() -> None:
    rows = re.findall(
        r"^\| `([a-z_.]+)` \| (error|warning)", DOCS.read_text(encoding="utf-8"), re.M
    )
    documented = dict(rows)
    for code, case in FIRING.items():
        spec, ctx = case()
        severities = {f.severity for f in check(spec, ctx) if f.code == code}
        assert severities == {documented[code]}, code


def test_findings_are_job_then_roles_in_order_then_common() -> None:
    spec = clean_spec(
        name="Bad Name",
        network_domain="mesh-z",
        roles=(
            replace(clean_spec().roles[0], gpus=-1),
            replace(clean_spec().roles[1], image=""),
            clean_spec().roles[2],
        ),
    )
    order = [(f.code, f.role) for f in run(spec) if f.code != "selector.not_ready"]
    assert order == [
        ("job.name.invalid", None),
        ("gpu.invalid", "Actor"),
        ("image.missing", "Rollout"),
        ("network_domain.unknown", None),
    ]


def test_check_is_deterministic() -> None:
    spec = with_role(clean_spec(name="X", network_domain=""), 1, gpus=99, image="")
    assert run(spec) == run(spec)


# -- details and fields --------------------------------------------------------------------


def test_cross_cluster_lists_foreign_nodes_with_cluster_and_namespace() -> None:
    spec, ctx = FIRING["selector.cross_cluster"]()
    finding = only(check(spec, ctx), "selector.cross_cluster")
    assert finding.role == "Rollout" and finding.field == "roles[1].selector"
    assert finding.detail["cluster"] == "gpu-a"
    assert finding.detail["nodes"] == [
        {"cluster": "gpu-b", "name": f"b-node-{n}", "namespace": "rl-gpu-b"}
        for n in (13, 14, 15, 16)
    ]


def test_no_cluster_label_fires_without_cross_cluster_when_the_and_is_confined() -> None:
    spec, ctx = FIRING["selector.no_cluster_label"]()
    found = codes(check(spec, ctx))
    assert "selector.no_cluster_label" in found and "selector.cross_cluster" not in found


def test_a_single_confining_condition_is_enough() -> None:
    spec = with_role(
        clean_spec(),
        1,
        selector=(("rlinf.io/gpu-model", "a100"), ("topology.rlinf.io/cluster", "gpu-a")),
    )
    assert "selector.no_cluster_label" not in codes(run(spec))


def test_header_replicas_reports_the_count() -> None:
    spec, ctx = FIRING["header.replicas"]()
    finding = only(check(spec, ctx), "header.replicas")
    assert finding.role == "Actor" and finding.detail["count"] == 12


def test_header_without_a_match_is_both_no_match_and_replicas() -> None:
    spec = with_role(clean_spec(), 0, selector=(("kubernetes.io/hostname", "a-head-99"),))
    assert {"selector.no_match", "header.replicas"} <= codes(run(spec))


@pytest.mark.parametrize("gpus", ["eight", -1, 1.5, None, True, [8]])
def test_gpu_invalid_for_every_non_count(gpus: object) -> None:
    finding = only(run(with_role(clean_spec(), 1, gpus=gpus)), "gpu.invalid")
    assert finding.field == "roles[1].gpus"


def test_gpu_capacity_detail_names_the_maximum() -> None:
    spec, ctx = FIRING["gpu.exceeds_capacity"]()
    assert only(check(spec, ctx), "gpu.exceeds_capacity").detail["max"] == 8


def test_gpu_capacity_uses_the_smallest_node() -> None:
    spec = with_role(
        clean_spec(network_domain="rl-mesh"),
        1,
        cluster="gpu-b",
        selector=(("topology.rlinf.io/cluster", "gpu-b"), ("rlinf.io/gpu-model", "a100")),
        gpus=5,
    )
    assert only(run(spec), "gpu.exceeds_capacity").detail["max"] == 4


def test_gpu_unconfirmed_is_lifted_by_an_admin_confirmation() -> None:
    spec = with_role(clean_spec(), 2, gpus=1)
    ctx = clean_context(spec)
    key = ("cpu-c", selector_key({"rlinf.io/pool": "env-c"}))
    view = replace(ctx.verifications[key], confirmed_gpu=1)
    confirmed = replace(ctx, verifications={**ctx.verifications, key: view})
    assert "gpu.unconfirmed" not in codes(check(spec, confirmed))


def test_a_stale_confirmation_does_not_count() -> None:
    spec = with_role(clean_spec(), 2, gpus=1)
    ctx = clean_context(spec)
    key = ("cpu-c", selector_key({"rlinf.io/pool": "env-c"}))
    view = replace(ctx.verifications[key], confirmed_gpu=1, node_signature=(("cpu-c", "c-env-01"),))
    stale = replace(ctx, verifications={**ctx.verifications, key: view})
    assert {"gpu.unconfirmed", "selector.verification_stale"} <= codes(check(spec, stale))


@pytest.mark.parametrize("state", ["pending", "rejected"])
def test_pending_or_rejected_verification_is_unverified(state: str) -> None:
    spec, ctx = verification_case(lambda ctx, key: replace(ctx.verifications[key], state=state))()
    assert only(check(spec, ctx), "selector.unverified").detail["state"] == state


def test_approved_verification_of_other_nodes_is_stale() -> None:
    spec, ctx = verification_case(
        lambda ctx, key: replace(ctx.verifications[key], node_signature=(("gpu-a", "a-node-01"),))
    )()
    assert "selector.verification_stale" in codes(check(spec, ctx))


def test_verification_signature_order_does_not_matter() -> None:
    spec, ctx = verification_case(
        lambda ctx, key: replace(
            ctx.verifications[key],
            node_signature=tuple(reversed(ctx.verifications[key].node_signature)),
        )
    )()
    assert codes(check(spec, ctx)) == BASELINE


def test_device_capacity_names_the_maximum_and_confirmation_lifts_it() -> None:
    spec, ctx = FIRING["device.exceeds_capacity"]()
    finding = only(check(spec, ctx), "device.exceeds_capacity")
    assert finding.field == "roles[1].devices[0]" and finding.detail["max"] == 4
    key = ("gpu-a", selector_key({"rlinf.io/pool": "a100-a"}))
    view = replace(ctx.verifications[key], confirmed_devices=(("rlinf.io/rdma", 5),))
    confirmed = replace(ctx, verifications={**ctx.verifications, key: view})
    assert "device.exceeds_capacity" not in codes(check(spec, confirmed))


@pytest.mark.parametrize("count", [0, -1, "1", 1.0, None])
def test_device_count_must_be_a_positive_integer(count: object) -> None:
    spec = with_role(clean_spec(), 1, devices=(("rlinf.io/rdma", count),))
    assert "device.invalid" in codes(run(spec))


@pytest.mark.parametrize("name", ["nvidia.com/gpu", "rlinf.io/warp", 5])
def test_device_must_be_a_reported_rlinf_resource(name: object) -> None:
    spec = with_role(clean_spec(), 1, devices=((name, 1),))
    assert "device.unknown" in codes(run(spec))


@pytest.mark.parametrize(
    ("cpu", "memory", "field"),
    [
        (ResourcePair(request="4", limit="2"), ResourcePair(), "roles[1].cpu.request"),
        (ResourcePair(), ResourcePair(request="64GB"), "roles[1].memory.request"),
        (ResourcePair(limit="-1"), ResourcePair(), "roles[1].cpu.limit"),
        (ResourcePair(), ResourcePair(request="1Gi", limit="1000Mi"), "roles[1].memory.request"),
        (ResourcePair(request=16), ResourcePair(), "roles[1].cpu.request"),  # type: ignore[arg-type]
    ],
)
def test_resources_invalid(cpu: ResourcePair, memory: ResourcePair, field: str) -> None:
    finding = only(run(with_role(clean_spec(), 1, cpu=cpu, memory=memory)), "resources.invalid")
    assert finding.field == field


@pytest.mark.parametrize(
    ("cpu", "memory"),
    [
        (ResourcePair(request="500m", limit="1.5"), ResourcePair(request="1e3", limit="1Ki")),
        (ResourcePair(request="2", limit="2"), ResourcePair(request="64Gi", limit="64Gi")),
        (ResourcePair(limit="4"), ResourcePair(request="0.5Gi")),
    ],
)
def test_valid_resources(cpu: ResourcePair, memory: ResourcePair) -> None:
    assert "resources.invalid" not in codes(run(with_role(clean_spec(), 1, cpu=cpu, memory=memory)))


@pytest.mark.parametrize(
    ("image", "digest", "code"),
    [
        ("registry.example.com/rlinf/rlinf", "", "image.mutable_tag"),
        ("registry.example.com/rlinf/rlinf:latest", TAG_DIGEST, "image.mutable_tag"),
        ("registry.example.com/rlinf/rlinf:v1", "sha256:abc", "image.invalid"),
        ("registry.example.com/rlinf/rlinf@sha256:abc", "", "image.invalid"),
        (f"registry.example.com/rlinf/rlinf@{TAG_DIGEST}", "sha256:" + "11" * 32, "image.invalid"),
        ("  ", "", "image.missing"),
        (None, "", "image.missing"),
        (5, "", "image.invalid"),
        ("REGISTRY.EXAMPLE.COM/TEAM/IMAGE@SHA256:<DIGEST> ", "", "image.placeholder"),
    ],
)
def test_image_rules(image: object, digest: str, code: str) -> None:
    spec = with_role(clean_spec(), 1, image=image, image_digest=digest)
    assert code in codes(run(spec))


@pytest.mark.parametrize(
    "image",
    [
        "rlinf/rlinf:v0.3",
        "localhost:5000/rlinf:v0.3",
        "registry.example.com:5000/a/b/c:2024.10-cu124",
        "docker.io/library/python:3.11-slim",
    ],
)
def test_a_tag_with_its_recorded_digest_is_accepted(image: str) -> None:
    spec = clean_spec(
        roles=tuple(replace(r, image=image, image_digest=TAG_DIGEST) for r in clean_spec().roles)
    )
    recorded = LaunchListImages(image=pinned_image(image, TAG_DIGEST))  # name:tag@digest
    assert codes(run(spec, replace(clean_context(spec), launch_list_images=recorded))) == BASELINE


def test_mixed_images_are_accepted_once_confirmed() -> None:
    spec, ctx = FIRING["image.mixed"]()
    finding = only(check(spec, ctx), "image.mixed")
    assert finding.field == "image_compatibility_confirmed"
    assert set(finding.detail["images"]) == {"Actor", "Rollout", "Environment"}
    confirmed = replace(spec, image_compatibility_confirmed=True)
    assert "image.mixed" not in codes(check(confirmed, ctx))


def test_the_same_digest_by_tag_or_by_digest_is_one_image() -> None:
    spec = with_role(
        clean_spec(), 1, image="registry.example.com/rlinf/rlinf:v0.3", image_digest=DIGEST
    )
    assert "image.mixed" not in codes(run(spec))


def test_env_field_paths_point_at_the_variable() -> None:
    spec = with_role(clean_spec(), 1, env=(EnvVar("A", "1"), EnvVar("B", "2"), EnvVar("B-C", "3")))
    finding = only(run(spec), "env.name.invalid")
    assert (finding.role, finding.field) == ("Rollout", "roles[1].env[2].name")


@pytest.mark.parametrize(
    "name", ["RLINF_TASK_INDEX", "RAY_ADDRESS", "BASH_ENV", "RLINF_HEAD_ADDRESS"]
)
def test_reserved_names(name: str) -> None:
    assert "env.name.reserved" in codes(run(env_case(EnvVar(name, "x"))()[0]))


@pytest.mark.parametrize("value", ["a\x00b", "\ud800", 5])
def test_env_values_that_cannot_be_embedded(value: object) -> None:
    assert "env.value.invalid" in codes(run(env_case(EnvVar("X", value))()[0]))  # type: ignore[arg-type]


def test_tunable_timeouts_accept_seconds() -> None:
    spec = env_case(
        EnvVar("RLINF_CLUSTER_CHECK_TIMEOUT", "120"), EnvVar("RLINF_HEAD_WAIT_TIMEOUT", "30")
    )()[0]
    assert codes(run(spec)) == BASELINE


@pytest.mark.parametrize("value", ["", "tmp/ray", "/tmp/../ray", "/tmp/ray\n"])
def test_ray_temp_dir_must_be_absolute(value: str) -> None:
    assert "env.ray_temp_dir" in codes(run(env_case(EnvVar("RAY_TEMP_DIR", value))()[0]))


@pytest.mark.parametrize(
    ("mount", "code", "field"),
    [
        (Mount(kind="host_path", source="data", target="/mnt/x"), "mount.path.invalid", "source"),
        (
            Mount(kind="host_path", source="/data/models", target="/mnt/../etc"),
            "mount.path.invalid",
            "target",
        ),
        (
            Mount(kind="object_storage", storage_class="s3-fuse", target=""),
            "mount.path.invalid",
            "target",
        ),
        (Mount(kind="", target="/mnt/x"), "mount.kind.invalid", "kind"),
    ],
)
def test_mount_field_paths(mount: Mount, code: str, field: str) -> None:
    spec = with_role(clean_spec(), 1, mounts=(mount,))
    assert only(run(spec), code).field == f"roles[1].mounts[0].{field}"


@pytest.mark.parametrize(
    "target", ["/", "/etc", "/usr/lib/python3", "/root/.ssh", "/dev/shm", "/tmp", "/opt", "/var"]
)
def test_system_directories_are_shadowed(target: str) -> None:
    mount = Mount(kind="object_storage", storage_class="s3-fuse", target=target)
    finding = only(run(with_role(clean_spec(), 1, mounts=(mount,))), "mount.target.shadows")
    assert finding.severity == "error" and finding.detail["reason"] == "system_directory"


@pytest.mark.parametrize("target", ["/tmp/cache", "/var/log/rlinf", "/opt/data", "/workspace2"])
def test_ordinary_directories_are_not_shadowed(target: str) -> None:
    mount = Mount(kind="object_storage", storage_class="s3-fuse", target=target)
    assert "mount.target.shadows" not in codes(run(with_role(clean_spec(), 1, mounts=(mount,))))


def test_nested_targets_shadow_each_other() -> None:
    spec = with_role(
        clean_spec(),
        0,
        mounts=(
            Mount(kind="host_path", source="/data/models", target="/mnt/models"),
            Mount(kind="object_storage", storage_class="s3-fuse", target="/mnt/models/cache"),
        ),
    )
    finding = only(run(spec), "mount.target.shadows")
    assert finding.field == "roles[0].mounts[1].target" and finding.detail["reason"] == "nested"


@pytest.mark.parametrize(
    "script",
    [
        "cd /workspace/rlinf && python train.py",
        "set -e\nif true; then cd '/workspace/rlinf/'; fi",
        "pushd /workspace/rlinf/sub >/dev/null",
        "(cd -P /workspace/rlinf; make)",
    ],
)
def test_a_mount_hiding_the_run_scripts_directory_is_a_warning(script: str) -> None:
    mount = Mount(kind="object_storage", storage_class="s3-fuse", target="/workspace/rlinf")
    spec = with_role(clean_spec(run_script=script), 0, mounts=(mount,))
    finding = only(run(spec), "mount.target.shadows")
    assert finding.severity == "warning" and finding.detail["reason"] == "working_directory"


@pytest.mark.parametrize(
    "script",
    [
        "cd /workspace && ls",  # the mount lies below the directory, it does not hide it
        "echo cd /workspace/rlinf",  # not a cd command
        "cd $HOME/rlinf",  # not a literal path
        "# cd /workspace/rlinf",
    ],
)
def test_scripts_that_do_not_enter_the_mount_are_fine(script: str) -> None:
    mount = Mount(kind="object_storage", storage_class="s3-fuse", target="/workspace/rlinf")
    spec = with_role(clean_spec(run_script=script), 0, mounts=(mount,))
    assert "mount.target.shadows" not in codes(run(spec))


def test_the_run_script_only_concerns_the_header_roles_mounts() -> None:
    mount = Mount(kind="object_storage", storage_class="s3-fuse", target="/workspace/rlinf")
    spec = with_role(clean_spec(run_script="cd /workspace/rlinf"), 1, mounts=(mount,))
    assert "mount.target.shadows" not in codes(run(spec))


def test_the_prepare_script_concerns_its_own_role() -> None:
    mount = Mount(kind="object_storage", storage_class="s3-fuse", target="/srv")
    spec = with_role(clean_spec(), 1, mounts=(mount,), prepare_script="cd /srv/app\n")
    assert only(run(spec), "mount.target.shadows").role == "Rollout"


def test_host_path_confirmation_normalises_paths() -> None:
    spec = with_role(
        clean_spec(),
        0,
        mounts=(Mount(kind="host_path", source="/data//models/", target="/mnt/models"),),
    )
    assert codes(run(spec)) == BASELINE


def test_ssh_key_findings_point_at_the_key() -> None:
    spec = clean_spec(ssh_keys=(clean_spec().ssh_keys[0], "ssh-ed25519 AAAAB3NzaC1yc2E= x"))
    finding = only(run(spec), "ssh_key.invalid")
    assert finding.field == "ssh_keys[1]" and "ssh-rsa" in finding.message


def test_ssh_key_unknown_names_the_key() -> None:
    spec, ctx = FIRING["ssh_key.unknown"]()
    assert only(check(spec, ctx), "ssh_key.unknown").detail["name"] == "bob-laptop"


def test_network_domain_is_optional_within_one_cluster() -> None:
    roles = tuple(r for r in clean_spec().roles if r.cluster == "gpu-a")
    assert codes(run(clean_spec(roles=roles, network_domain=""))) == BASELINE


def test_network_domain_partial_is_a_warning_listing_missing_clusters() -> None:
    finding = only(run(clean_spec(network_domain="gpu-only")), "network_domain.partial")
    assert finding.severity == "warning" and finding.detail["missing"] == ["cpu-c"]


def test_start_script_too_long_names_the_role_and_the_limit() -> None:
    spec, ctx = FIRING["start_script.too_long"]()
    finding = only(check(spec, ctx), "start_script.too_long")
    assert finding.role == "Rollout" and finding.detail["max"] == 128 * 1024 - 1


def test_role_name_duplicate_ignores_case_and_reports_the_later_role() -> None:
    spec, ctx = FIRING["role.name.duplicate"]()
    assert only(check(spec, ctx), "role.name.duplicate").field == "roles[2].name"


def test_header_must_name_the_role_exactly() -> None:
    assert "header.unknown" in codes(run(clean_spec(header_role="actor")))


@pytest.mark.parametrize("name", ["a", "ppo-7b", "x" * 63])
def test_valid_job_names(name: str) -> None:
    roles = tuple(replace(r, name=r.name[:2]) for r in clean_spec().roles)
    spec = clean_spec(name=name, roles=roles, header_role=roles[0].name)
    assert not {c for c in codes(run(spec)) if c.startswith("job.")}


@pytest.mark.parametrize("name", ["", "-a", "a-", "A", "a_b", "x" * 64, "ä", None, 7])
def test_invalid_job_names(name: object) -> None:
    assert "job.name.invalid" in codes(run(clean_spec(name=name)))


def test_taken_names_are_only_reported_for_valid_names() -> None:
    spec = clean_spec(name="Bad")
    found = codes(check(spec, clean_context(spec, taken_names={"Bad"})))
    assert "job.name.invalid" in found and "job.name.taken" not in found


@pytest.mark.parametrize("value", [None, 0, -3, "12", True])
def test_records_must_be_linked(value: object) -> None:
    found = codes(run(clean_spec(launch_list_id=value, deployment_parameters_id=value)))
    assert {"launch_list.missing", "deployment_parameters.missing"} <= found


@pytest.mark.parametrize(
    ("points_at", "pointed_by", "fires"),
    [
        (None, None, False),  # unlinked: submission links them
        (1, 2, False),  # the job's records reference each other
        (9, None, True),  # the parameters reference another launch list
        (None, 8, True),  # another set of parameters references the job's launch list
    ],
)
def test_records_must_reference_each_other(
    points_at: int | None, pointed_by: int | None, fires: bool
) -> None:
    spec = clean_spec(launch_list_id=1, deployment_parameters_id=2)
    ctx = replace(
        clean_context(spec),
        parameters_launch_list_id=points_at,
        launch_list_parameters_id=pointed_by,
    )
    found = codes(check(spec, ctx))
    assert ("deployment_parameters.launch_list_mismatch" in found) is fires


def test_each_task_type_is_accepted() -> None:
    for task_type in ("rl", "data_collection", "evaluation", "custom"):
        assert "job.type.invalid" not in codes(run(clean_spec(task_type=task_type)))


def test_roles_that_are_not_roles_are_reported_not_raised() -> None:
    spec = clean_spec(roles=(*clean_spec().roles, {"name": "Critic"}, None))  # type: ignore[arg-type]
    findings = run(spec)
    assert [f.field for f in findings if f.code == "role.name.invalid"] == [
        "roles[3].name",
        "roles[4].name",
    ]


def test_findings_serialise_to_json() -> None:
    import json

    spec, ctx = FIRING["selector.cross_cluster"]()
    payload = json.dumps([f.as_dict() for f in check(spec, ctx)])
    assert "selector.cross_cluster" in payload


def test_matches_come_from_the_context_only() -> None:
    spec = clean_spec()
    assert "selector.no_match" in codes(check(spec, replace(clean_context(spec), matches={})))


# -- the helpers the rules are built on ----------------------------------------------------


@pytest.mark.parametrize(
    ("key", "fingerprint"),
    [
        (ALICE_KEY, ALICE_FINGERPRINT),
        (BOB_KEY, BOB_FINGERPRINT),
        (CAROL_KEY, CAROL_FINGERPRINT),
        (f"  {ALICE_KEY}  \n", ALICE_FINGERPRINT),
    ],
)
def test_fingerprints_match_ssh_keygen(key: str, fingerprint: str) -> None:
    assert validate_openssh_public_key(key) is None
    assert fingerprint_sha256(key) == fingerprint


def _alice_blob() -> bytes:
    return base64.b64decode(ALICE_KEY.split()[1])


def _small_rsa_key() -> str:
    numbers = rsa.RSAPublicNumbers(65537, (1 << 767) | 12345)
    return numbers.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode()


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "empty"),
        ("ssh-dss AAAAB3NzaC1kc3M=", "Unsupported key type"),
        (f"no-pty {ALICE_KEY}", "Unsupported key type"),
        ("ssh-ed25519", "missing"),
        ("ssh-ed25519 not*base64", "base64"),
        (ALICE_KEY.replace("Zn alice", "Zn=== alice"), "base64"),
        ("ssh-rsa " + ALICE_KEY.split()[1], "declares ssh-rsa"),
        ("ssh-ed25519 " + base64.b64encode(_alice_blob() + b"xx").decode(), "not a valid"),
        ("ssh-ed25519 " + base64.b64encode(_alice_blob()[:-3]).decode(), "not a valid"),
        ("ssh-ed25519 AAAA", "too short"),
        (f"{ALICE_KEY}\n{BOB_KEY}", "single line"),
        (f"{ALICE_KEY} comment\x00", "single line"),
        (_small_rsa_key(), "1024 bits"),
        (None, "text"),
    ],
)
def test_invalid_ssh_keys_say_why(text: object, reason: str) -> None:
    message = validate_openssh_public_key(text)  # type: ignore[arg-type]
    assert message is not None and reason in message
    with pytest.raises(SSHKeyError):
        fingerprint_sha256(text)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "amount"),
    [
        ("500m", Decimal("0.5")),
        ("2", Decimal(2)),
        ("1.5", Decimal("1.5")),
        (".5", Decimal("0.5")),
        ("64Gi", Decimal(64 * 2**30)),
        ("1e3", Decimal(1000)),
        ("1E", Decimal(10**18)),
        ("1E3", Decimal(1000)),
        ("+2k", Decimal(2000)),
        ("100u", Decimal("0.0001")),
    ],
)
def test_quantities(text: str, amount: Decimal) -> None:
    assert parse_quantity(text) == amount


@pytest.mark.parametrize(
    "text", ["", " 2", "2 ", "-1", "2GB", "1e", "e3", "1.2.3", "Gi", "1e99999", "9" * 80, None, 2]
)
def test_not_quantities(text: object) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(text)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("rlinf", ("", "rlinf", "", "")),
        ("rlinf/rlinf:v1", ("", "rlinf/rlinf", "v1", "")),
        ("localhost:5000/a:b", ("localhost:5000", "a", "b", "")),
        ("Registry.Example.com/a/b-c__d.e", ("Registry.Example.com", "a/b-c__d.e", "", "")),
        (f"r.io/a:v1@{DIGEST}", ("r.io", "a", "v1", DIGEST)),
        ("[::1]:5000/a", ("[::1]:5000", "a", "", "")),
    ],
)
def test_image_references(text: str, parts: tuple[str, str, str, str]) -> None:
    reference = parse_image_reference(text)
    assert reference is not None
    assert (reference.registry, reference.path, reference.tag, reference.digest) == parts


@pytest.mark.parametrize(
    "text",
    ["", "Upper/Case", "a//b", "a:", "a@sha256:abc", "a@md5:" + "0" * 32, "-a", "a b", "a/b:c:d"],
)
def test_not_image_references(text: str) -> None:
    assert parse_image_reference(text) is None


def test_pinned_image_adds_the_recorded_digest_to_a_tag_only() -> None:
    assert pinned_image("r.io/a:v1", DIGEST) == f"r.io/a:v1@{DIGEST}"
    assert pinned_image(f"r.io/a@{DIGEST}", "") == f"r.io/a@{DIGEST}"
    assert pinned_image("r.io/a:v1", "not-a-digest") == "r.io/a:v1"


def test_the_pre_flight_is_quiet_when_every_matched_node_has_room() -> None:
    spec, ctx = capacity_case(free=True, pods=110)
    found = codes(check(spec, ctx))
    assert "capacity.will_queue" not in found and "capacity.never_fits" not in found
