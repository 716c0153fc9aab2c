"""The placement rules (`clusters.placement`) and the proof that the job's findings engine and
the admin verification queue judge a placement the same way.

For the same matches, asks and confirmations, `jobs.core.findings.check` (a one-role job) and
`clusters.verifications.selectors.verification_checks` (a request) must report the same
placement findings: code, severity, message and detail; only `role` and `field` may differ.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusters.matching import match_selector
from clusters.models import Cluster, Verification
from clusters.placement import (
    CONFIRMABLE_CODES,
    LISTED_NODES_MAX,
    PLACEMENT_CODES,
    device_capacity_finding,
    gpu_finding,
    host_path_finding,
    request_placement_findings,
    request_refusals,
    selector_placement_findings,
)
from clusters.types import ClusterFacts, MatchedNode, SelectorMatch, VerificationView
from clusters.verifications.selectors import verification_checks, verification_result
from jobs.core.findings import check
from jobs.core.spec import CheckContext, JobSpec, Mount, RoleSpec, selector_key
from rlark_site.foundation.findings import Finding
from tests.factories import load_fleet_rows, stored_request

CLUSTER = "gpu-a"
CONDITION = ("rlinf.io/pool", "a100")
DEVICES = ("rlinf.io/nvme", "rlinf.io/rdma")


def node(index: int, *, cluster: str = CLUSTER, gpu: int | None = 8,
         devices: tuple[tuple[str, int], ...] = ()) -> MatchedNode:
    return MatchedNode(cluster=cluster, name=f"node-{index:02d}", namespace=f"rl-{cluster}",
                       gpu=gpu, devices=devices)


def matched(*nodes: MatchedNode, confined: bool = True) -> SelectorMatch:
    clusters = frozenset({CLUSTER} if confined else {n.cluster for n in nodes} | {"gpu-b"})
    return SelectorMatch(nodes=tuple(nodes), condition_clusters=((CONDITION, clusters),))


def codes(findings: list[Finding]) -> list[str]:
    return [f.code for f in findings]


# -- the rules ----------------------------------------------------------------------------------


def test_no_match_is_only_no_match() -> None:
    findings = selector_placement_findings(matched(), cluster=CLUSTER, header=False)
    assert codes(findings) == ["selector.no_match"]


def test_a_header_selector_without_a_match_also_misses_its_single_node() -> None:
    findings = selector_placement_findings(matched(), cluster=CLUSTER, header=True)
    assert codes(findings) == ["selector.no_match", "header.replicas"]


def test_foreign_nodes_are_listed_up_to_the_limit() -> None:
    foreign = [node(i, cluster="gpu-b") for i in range(LISTED_NODES_MAX + 5)]
    match = matched(node(99), *foreign, confined=False)
    cross = selector_placement_findings(match, cluster=CLUSTER, header=False)[0]
    assert cross.code == "selector.cross_cluster" and cross.severity == "error"
    assert cross.detail["count"] == LISTED_NODES_MAX + 5
    assert len(cross.detail["nodes"]) == LISTED_NODES_MAX
    assert cross.detail["nodes"][0] == {"cluster": "gpu-b", "name": "node-00",
                                        "namespace": "rl-gpu-b"}


def test_confinement_is_not_judged_without_a_known_cluster() -> None:
    match = matched(node(0, cluster="gpu-b"), confined=False)
    assert selector_placement_findings(match, cluster=None, header=False) == []


def test_the_header_finding_points_where_the_caller_says() -> None:
    match = matched(node(0), node(1))
    (header,) = selector_placement_findings(
        match, cluster=CLUSTER, header=True, role="Actor", field="roles[0].selector",
        header_field="for_header_role",
    )
    assert (header.role, header.field, header.detail["count"]) == ("Actor", "for_header_role", 2)


@pytest.mark.parametrize(
    ("gpus", "gpu_max", "confirmed", "code"),
    [
        (0, None, None, None),
        (8, 8, None, None),
        (9, 8, None, "gpu.exceeds_capacity"),
        (9, 8, 16, "gpu.exceeds_capacity"),  # a confirmation does not raise reported capacity
        (1, None, None, "gpu.unconfirmed"),
        (1, 0, None, "gpu.unconfirmed"),
        (4, None, 2, "gpu.unconfirmed"),
        (4, None, 4, None),
    ],
)
def test_gpu_rule(gpus: int, gpu_max: int | None, confirmed: int | None,
                  code: str | None) -> None:
    finding = gpu_finding(matched(node(0, gpu=gpu_max)), gpus=gpus, confirmed_gpu=confirmed)
    assert (finding.code if finding else None) == code
    assert finding is None or finding.severity == "error"


@pytest.mark.parametrize(
    ("count", "allocatable", "confirmed", "code"),
    [
        (2, 2, 0, None),
        (3, 2, 0, "device.exceeds_capacity"),
        (3, 2, 3, None),
        (1, None, 0, "device.exceeds_capacity"),  # a node without the device has 0
    ],
)
def test_device_rule(count: int, allocatable: int | None, confirmed: int,
                     code: str | None) -> None:
    devices = (("rlinf.io/rdma", allocatable),) if allocatable is not None else ()
    finding = device_capacity_finding(
        matched(node(0, devices=devices)), name="rlinf.io/rdma", count=count,
        confirmed_devices={"rlinf.io/rdma": confirmed}, field="devices[0]",
    )
    assert (finding.code if finding else None) == code


def test_device_capacity_is_not_judged_without_a_match() -> None:
    assert device_capacity_finding(matched(), name="rlinf.io/rdma", count=1,
                                   confirmed_devices={}, field="devices[0]") is None


def test_host_path_rule() -> None:
    assert host_path_finding("/data", confirmed_paths={"/data"}, field="f") is None
    finding = host_path_finding("/data", confirmed_paths={"/data/other"}, field="f")
    assert finding is not None and finding.detail == {"host_path": "/data"}


# -- the job and the queue agree ----------------------------------------------------------------


def job_placement(
    match: SelectorMatch, *, header: bool, gpus: int, devices: dict[str, int],
    host_paths: list[str], confirmed: VerificationView,
    selector: tuple[tuple[str, str], ...] = (CONDITION,),
) -> list[Finding]:
    """The placement findings the job's engine reports for one role over `match`."""
    key = selector_key(dict(selector))
    role = RoleSpec(
        name="Actor", cluster=CLUSTER, selector=selector, gpus=gpus,
        devices=tuple(devices.items()),
        mounts=tuple(Mount(kind="host_path", source=path, target=f"/mnt/{i}")
                     for i, path in enumerate(host_paths)),
    )
    spec = JobSpec(team="vision-rl", name="job", task_type="custom", roles=(role,),
                   header_role="Actor" if header else "")
    ctx = CheckContext(
        clusters={CLUSTER: ClusterFacts(name=CLUSTER, namespace="rl", device_names=frozenset(
            DEVICES))},
        matches={key: match},
        verifications={(CLUSTER, key): confirmed},
    )
    return [f for f in check(spec, ctx) if f.code in PLACEMENT_CODES]


def queue_placement(
    match: SelectorMatch, *, header: bool, gpus: int, devices: dict[str, int],
    host_paths: list[str], confirmed: VerificationView,
) -> list[Finding]:
    """The placement findings the admin queue shows for a request over `match`."""
    request = Verification(
        cluster=Cluster(name=CLUSTER), selector=dict([CONDITION]), for_header_role=header,
        requested_gpu=gpus, requested_devices=devices, requested_host_paths=host_paths,
        confirmed_gpu=confirmed.confirmed_gpu,
        confirmed_devices=dict(confirmed.confirmed_devices),
        confirmed_host_paths=list(confirmed.confirmed_host_paths),
    )
    return verification_checks(request, match)


def verdicts(findings: list[Finding]) -> list[tuple[str, str, str, dict[str, Any]]]:
    return [(f.code, f.severity, str(f.message), f.detail) for f in findings]


nodes_strategy = st.lists(
    st.builds(
        lambda cluster, gpu, nvme, rdma: (cluster, gpu, nvme, rdma),
        st.sampled_from([CLUSTER, CLUSTER, "gpu-b"]),
        st.one_of(st.none(), st.integers(0, 8)),
        st.one_of(st.none(), st.integers(0, 4)),
        st.one_of(st.none(), st.integers(0, 4)),
    ),
    max_size=6,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    raw_nodes=nodes_strategy,
    confined=st.booleans(),
    header=st.booleans(),
    gpus=st.integers(0, 10),
    devices=st.dictionaries(st.sampled_from(DEVICES), st.integers(1, 6)),
    host_paths=st.lists(st.sampled_from(["/data/models", "/data/sets", "/scratch"]),
                        unique=True),
    confirmed_gpu=st.one_of(st.none(), st.integers(0, 10)),
    confirmed_devices=st.dictionaries(st.sampled_from(DEVICES), st.integers(0, 6)),
    confirmed_paths=st.lists(st.sampled_from(["/data/models", "/scratch"]), unique=True),
)
def test_the_job_and_the_queue_report_the_same_placement_findings(
    raw_nodes: list[tuple[str, int | None, int | None, int | None]], confined: bool,
    header: bool, gpus: int, devices: dict[str, int], host_paths: list[str],
    confirmed_gpu: int | None, confirmed_devices: dict[str, int], confirmed_paths: list[str],
) -> None:
    nodes = sorted(
        (
            MatchedNode(
                cluster=cluster, name=f"node-{i}", namespace=f"rl-{cluster}", gpu=gpu,
                devices=tuple((n, c) for n, c in zip(DEVICES, (nvme, rdma), strict=True)
                              if c is not None),
            )
            for i, (cluster, gpu, nvme, rdma) in enumerate(raw_nodes)
        ),
        key=lambda n: (n.cluster, n.name),
    )
    match = matched(*nodes, confined=confined)
    devices = dict(sorted(devices.items()))
    confirmed = VerificationView(
        id=1, state="approved", node_signature=match.signature(), confirmed_gpu=confirmed_gpu,
        confirmed_devices=tuple(sorted(confirmed_devices.items())),
        confirmed_host_paths=tuple(confirmed_paths),
    )
    asks: dict[str, Any] = {"header": header, "gpus": gpus, "devices": devices,
                            "host_paths": host_paths, "confirmed": confirmed}
    job = job_placement(match, **asks)
    queue = queue_placement(match, **asks)
    assert verdicts(job) == verdicts(queue)
    assert {f.role for f in job} <= {"Actor"} and {f.role for f in queue} <= {None}


@pytest.mark.django_db
def test_a_stored_request_and_a_job_on_the_same_inventory_agree(team: Any, member: Any) -> None:
    """Through the database: the queue judges the stored snapshot (its summary and node pages),
    the job today's live match; on an unchanged inventory they say the same."""
    load_fleet_rows()
    selector = {"rlinf.io/gpu-model": "a100"}  # 13 nodes in gpu-a, 4 in gpu-b
    asks: dict[str, Any] = {"header": True, "gpus": 16, "devices": {"rlinf.io/rdma": 9},
                            "host_paths": ["/data/models"]}
    # Written directly: the request service refuses a selector failing these checks.
    verification = stored_request(
        team=team, user=member, cluster=CLUSTER, selector=selector,
        for_header_role=asks["header"], requested_gpu=asks["gpus"],
        requested_devices=asks["devices"], requested_host_paths=asks["host_paths"],
    )
    queue = verification_result(verification).checks
    match = match_selector(selector)
    nothing_confirmed = VerificationView(id=verification.pk, state="approved",
                                         node_signature=match.signature())
    job = job_placement(match, confirmed=nothing_confirmed, selector=tuple(selector.items()),
                        **asks)
    assert codes(queue) == [
        "header.replicas", "selector.cross_cluster", "selector.no_cluster_label",
        "gpu.exceeds_capacity", "device.exceeds_capacity", "mount.host_path.unconfirmed",
    ]
    assert verdicts(job) == verdicts(queue)


def test_the_queue_fields_name_the_request_inputs() -> None:
    match = matched(node(0, gpu=None), node(1, gpu=None))
    confirmed = VerificationView(id=1, state="approved", node_signature=match.signature())
    findings = queue_placement(match, header=True, gpus=2, devices={"rlinf.io/rdma": 1},
                               host_paths=["/data/models"], confirmed=confirmed)
    assert [(f.code, f.field) for f in findings] == [
        ("header.replicas", "for_header_role"),
        ("gpu.unconfirmed", "requested_gpu"),
        ("device.exceeds_capacity", "requested_devices.rlinf.io/rdma"),
        ("mount.host_path.unconfirmed", "requested_host_paths"),
    ]
    job = job_placement(match, header=True, gpus=2, devices={"rlinf.io/rdma": 1},
                        host_paths=["/data/models"], confirmed=confirmed)
    assert [(f.code, f.field) for f in job] == [
        ("header.replicas", "roles[0].selector"),
        ("gpu.unconfirmed", "roles[0].gpus"),
        ("device.exceeds_capacity", "roles[0].devices[0]"),
        ("mount.host_path.unconfirmed", "roles[0].mounts[0].source"),
    ]
    assert {f.severity for f in job + findings} == {"error"}


def test_a_request_is_refused_for_every_placement_error_an_admin_cannot_lift() -> None:
    assert CONFIRMABLE_CODES < set(PLACEMENT_CODES)
    foreign = matched(node(0), node(1, cluster="gpu-b"), confined=False)
    findings = request_placement_findings(
        foreign, cluster=CLUSTER, for_header_role=True, gpu=16, devices={"rlinf.io/rdma": 1},
        host_paths=["/data/models"],
    )
    assert [f.code for f in request_refusals(findings)] == [
        "header.replicas", "selector.cross_cluster", "selector.no_cluster_label",
        "gpu.exceeds_capacity",
    ]
    assert [f.code for f in findings if f not in request_refusals(findings)] == [
        "device.exceeds_capacity", "mount.host_path.unconfirmed",
    ]


def test_asking_for_what_an_admin_confirms_is_not_a_refusal() -> None:
    uncounted = matched(node(0, gpu=None), node(1, gpu=None))
    findings = request_placement_findings(
        uncounted, cluster=CLUSTER, for_header_role=False, gpu=2, devices={"rlinf.io/rdma": 1},
        host_paths=["/data/models"],
    )
    assert {f.code for f in findings} == set(CONFIRMABLE_CODES)
    assert request_refusals(findings) == []
    assert request_refusals(request_placement_findings(
        matched(), cluster=CLUSTER, for_header_role=False, gpu=0, devices={}, host_paths=[],
    ))[0].code == "selector.no_match"
