"""`admission.*` findings (SPEC 15): a team without a LocalQueue on a Kueue cluster, a queue the
cluster does not have, and a job asking more than its ClusterQueue could ever give (nominal
quota plus what it may borrow in its cohort), with the quota view the poll read. Pure."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from clusters.kueue import ClusterQueueView, KueueView, LocalQueueView, ResourceQuota
from jobs.core.findings import check
from jobs.core.spec import CheckContext, JobSpec
from rlark_site.foundation.findings import Finding
from tests.jobs.fleet_context import clean_context, clean_roles, clean_spec

NS = "rl-gpu-a"
AS_OF = "2026-12-01T10:00:00+00:00"


def actor_only() -> JobSpec:
    """The Actor alone: 1 worker with 8 GPUs, 4 rdma, 16 CPUs, 64Gi (the Header role)."""
    return replace(clean_spec(), roles=(clean_roles()[0],), network_domain="")


def gpu_quota(flavor: str = "default", nominal: str = "8",
              **limits: str) -> tuple[ResourceQuota, ...]:
    """Plenty of cpu, memory and rdma; `nominal` GPUs (with `limits` on the GPUs only)."""
    amounts = (("cpu", "1000"), ("memory", "10Ti"), ("nvidia.com/gpu", nominal),
               ("rlinf.io/rdma", "64"))
    return tuple(ResourceQuota(flavor=flavor, resource=r, nominal=n,
                               **(limits if r == "nvidia.com/gpu" else {})) for r, n in amounts)


def enough() -> KueueView:
    return view(ClusterQueueView("team-a", quotas=gpu_quota()))


def view(*queues: ClusterQueueView, local: tuple[LocalQueueView, ...] | None = None,
         as_of: str = AS_OF) -> KueueView:
    if local is None:
        local = (LocalQueueView(namespace=NS, name="vq", cluster_queue="team-a"),)
    return KueueView(cluster_queues=queues, local_queues=local, as_of=as_of)


def context(spec: JobSpec, kueue: KueueView | None, *, admission: str = "kueue",
            queues: tuple[tuple[str, str], ...] = (("vision-rl", "vq"),)) -> CheckContext:
    ctx = clean_context(spec)
    facts = replace(ctx.clusters["gpu-a"], admission=admission, kueue_queues=queues, kueue=kueue)
    return replace(ctx, clusters={**ctx.clusters, "gpu-a": facts})


def admission(spec: JobSpec, ctx: CheckContext) -> list[Finding]:
    return [f for f in check(spec, ctx) if f.code.startswith("admission.")]


def test_a_cluster_without_kueue_has_no_admission_findings() -> None:
    spec = actor_only()
    assert admission(spec, context(spec, None, admission="none", queues=())) == []


def test_a_team_without_a_local_queue_cannot_submit() -> None:
    spec = actor_only()
    (finding,) = admission(spec, context(spec, None, queues=(("nlp-rl", "nq"),)))
    assert (finding.code, finding.severity, finding.field) == (
        "admission.no_queue", "error", "roles[0].cluster")
    assert finding.detail == {"cluster": "gpu-a", "team": "vision-rl"}
    assert "team vision-rl has no LocalQueue" in finding.message


def test_queues_never_read_say_nothing_more() -> None:
    spec = actor_only()
    assert admission(spec, context(spec, None)) == []
    assert admission(spec, context(spec, view(as_of=""))) == []


def test_a_local_queue_missing_from_the_namespace_is_a_warning() -> None:
    spec = actor_only()
    other = (LocalQueueView(namespace="elsewhere", name="vq", cluster_queue="team-a"),)
    (finding,) = admission(spec, context(spec, view(ClusterQueueView("team-a", quotas=gpu_quota()),
                                                    local=other)))
    assert (finding.code, finding.severity) == ("admission.queue_unknown", "warning")
    assert finding.detail["namespace"] == NS


def test_a_job_within_the_quota_has_no_finding() -> None:
    spec = actor_only()
    assert admission(spec, context(spec, enough())) == []


def test_more_gpus_than_the_nominal_quota_without_a_cohort_is_an_error() -> None:
    spec = actor_only()
    (finding,) = admission(spec, context(spec, view(
        ClusterQueueView("team-a", quotas=gpu_quota(nominal="4")))))
    assert (finding.code, finding.severity, finding.role) == (
        "admission.exceeds_quota", "error", None)
    detail = finding.detail
    assert (detail["resource"], detail["requested"], detail["quota"]) == (
        "nvidia.com/gpu", "8", "4")
    assert finding.detail["cluster_queue"] == "team-a"
    assert finding.detail["local_queue"] == "vq"
    assert finding.detail["flavors"] == [
        {"flavor": "default", "nominal": "4", "borrowing_limit": None, "potential": "4"}]
    assert "ClusterQueue team-a can ever give 4" in finding.message


def test_a_borrowing_limit_without_a_cohort_borrows_nothing() -> None:
    spec = actor_only()
    queue = ClusterQueueView("team-a", quotas=gpu_quota(nominal="4", borrowing_limit="100"))
    codes = [f.code for f in admission(spec, context(spec, view(queue)))]
    assert codes == ["admission.exceeds_quota"]


def test_what_the_cohort_lends_counts_up_to_the_borrowing_limit() -> None:
    spec = actor_only()
    lender = ClusterQueueView("team-b", cohort="research", quotas=gpu_quota(nominal="8"))
    unlimited = ClusterQueueView("team-a", cohort="research", quotas=gpu_quota(nominal="4"))
    assert admission(spec, context(spec, view(unlimited, lender))) == []
    capped = ClusterQueueView("team-a", cohort="research",
                              quotas=gpu_quota(nominal="4", borrowing_limit="2"))
    (finding,) = admission(spec, context(spec, view(capped, lender)))
    assert (finding.detail["requested"], finding.detail["quota"]) == ("8", "6")


def test_a_lending_limit_caps_what_a_member_lends() -> None:
    spec = actor_only()
    lender = ClusterQueueView("team-b", cohort="research",
                              quotas=gpu_quota(nominal="8", lending_limit="2"))
    borrower = ClusterQueueView("team-a", cohort="research", quotas=gpu_quota(nominal="4"))
    (finding,) = admission(spec, context(spec, view(borrower, lender)))
    assert finding.detail["quota"] == "6"


def test_a_resource_the_cluster_queue_does_not_cover_is_never_admitted() -> None:
    spec = actor_only()
    quotas = tuple(q for q in gpu_quota() if q.resource != "cpu")
    (finding,) = admission(spec, context(spec, view(ClusterQueueView("team-a", quotas=quotas))))
    assert (finding.detail["resource"], finding.detail["quota"]) == ("cpu", "0")
    assert "has no quota for cpu" in finding.message


def test_a_role_must_fit_in_one_flavor() -> None:
    """Rollout: 12 workers x 8 GPUs = 96; two flavors of 64 hold the job (104 <= 128) but
    Kueue gives a role's pod set one flavor."""
    spec = replace(clean_spec(), roles=clean_roles()[:2], network_domain="")
    quotas = gpu_quota("a100", "64") + gpu_quota("h100", "64")
    (finding,) = admission(spec, context(spec, view(ClusterQueueView("team-a", quotas=quotas))))
    assert (finding.role, finding.field) == ("Rollout", "roles[1].gpus")
    assert (finding.detail["requested"], finding.detail["quota"]) == ("96", "64")


def test_limits_count_where_no_request_is_given() -> None:
    actor = replace(clean_roles()[0], cpu=replace(clean_roles()[0].cpu, request="", limit="2000"))
    spec = replace(actor_only(), roles=(actor,))
    (finding,) = admission(spec, context(spec, enough()))
    assert (finding.detail["resource"], finding.detail["requested"]) == ("cpu", "2000")


def test_a_malformed_stored_view_never_raises() -> None:
    spec = actor_only()
    garbage: list[Any] = [None, 7, {"name": 3}, {"name": "team-a", "quotas": [
        {"flavor": "f", "resource": "nvidia.com/gpu", "nominal": "lots"}, "x"]}]
    kueue = KueueView.from_stored(garbage, [{"name": "vq", "namespace": NS,
                                             "cluster_queue": "team-a"}, []], as_of=AS_OF)
    codes = [f.code for f in admission(spec, context(spec, kueue))]
    assert codes and set(codes) == {"admission.exceeds_quota"}


# -- cases for the engine's table of every code (tests/jobs/test_findings.py) ---------------------


def no_queue_case() -> tuple[JobSpec, CheckContext]:
    return clean_spec(), context(clean_spec(), None, queues=())


def queue_unknown_case() -> tuple[JobSpec, CheckContext]:
    return clean_spec(), context(clean_spec(), view(local=()))


def exceeds_quota_case() -> tuple[JobSpec, CheckContext]:
    queue = ClusterQueueView("team-a", quotas=gpu_quota(nominal="4"))
    return clean_spec(), context(clean_spec(), view(queue))
