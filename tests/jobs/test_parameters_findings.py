"""The deployment-parameters findings of the engine, without a database: each mismatch between
the record and the job, an unreferenced approved verification, the confirmation's state and
its staleness (with the reasons it gives)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from jobs.core.findings import check
from jobs.core.findings.parameters import describe_change
from jobs.core.parameters import (
    content_changes,
    job_content,
    record_content,
    record_roles_from_spec,
)
from jobs.core.spec import JobSpec, Mount, ParametersView, ResourcePair
from tests.jobs.fleet_context import (
    clean_context,
    clean_spec,
    load_demo_fleet,
    parameters_for,
    with_role,
)
from tests.jobs.fleet_context import context_for as fleet_context_for

PREFIX = "deployment_parameters."


def parameter_findings(spec: JobSpec, view: ParametersView | str | None = "confirmed",
                       **ctx: Any) -> list[Any]:
    context = clean_context(spec, parameters=view, **ctx)
    return [f for f in check(spec, context) if f.code.startswith(PREFIX)]


def codes(findings: list[Any]) -> list[str]:
    return [f.code for f in findings]


def confirmed_for(spec: JobSpec) -> ParametersView:
    """Parameters filled from `spec` and confirmed for it (verification ids as the fleet's)."""
    context = clean_context(spec)
    assert context.parameters is not None
    return context.parameters


def with_record_roles(view: ParametersView, roles: list[dict[str, Any]], **changes: Any
                      ) -> ParametersView:
    """The same confirmation, the record's roles changed (the content too, as the DB would)."""
    content = {**view.content, "roles": roles}
    return replace(view, roles=tuple(roles), content=content, **changes)


def test_parameters_filled_from_the_job_and_confirmed_have_no_finding() -> None:
    assert parameter_findings(clean_spec()) == []


def test_the_whole_clean_job_has_no_error() -> None:
    spec = clean_spec()
    assert [f for f in check(spec, clean_context(spec)) if f.severity == "error"] == []


@pytest.mark.parametrize("state", ["pending", "rejected"])
def test_unconfirmed_parameters_block_submission(state: str) -> None:
    spec = clean_spec()
    view = replace(confirmed_for(spec), state=state, decision_note="wrong racks.")
    [finding] = parameter_findings(spec, view)
    assert (finding.code, finding.severity, finding.field) == (
        "deployment_parameters.unconfirmed", "error", "deployment_parameters")
    assert finding.detail["state"] == state
    if state == "rejected":
        assert "wrong racks." in finding.message


def test_parameters_the_context_does_not_know_are_unconfirmed() -> None:
    [finding] = parameter_findings(clean_spec(), None)
    assert finding.code == "deployment_parameters.unconfirmed"
    assert finding.detail["state"] == "unknown"


def test_no_linked_parameters_is_only_missing() -> None:
    spec = clean_spec(deployment_parameters_id=None)
    found = codes([f for f in check(spec, clean_context(spec)) if f.code.startswith(PREFIX)])
    assert found == ["deployment_parameters.missing"]


def test_a_role_the_record_lacks_is_missing() -> None:
    spec = clean_spec()
    view = confirmed_for(spec)
    roles = [r for r in view.roles if r["role"] != "Rollout"]
    found = parameter_findings(spec, with_record_roles(view, roles))
    missing = [f for f in found if f.code == "deployment_parameters.role_missing"]
    assert [(f.role, f.field) for f in missing] == [("Rollout", "roles[1].name")]


def test_a_role_the_job_lacks_is_extra() -> None:
    spec = clean_spec()
    view = confirmed_for(spec)
    roles = [*view.roles, {**view.roles[0], "role": "Critic"}]
    found = parameter_findings(spec, with_record_roles(view, roles))
    extra = [f for f in found if f.code == "deployment_parameters.role_extra"]
    assert [(f.field, f.detail["role_name"]) for f in extra] == [
        ("deployment_parameters", "Critic")]


CHANGES = {
    "deployment_parameters.cluster_mismatch": ("cluster", "gpu-b", "roles[0].cluster"),
    "deployment_parameters.selector_mismatch": (
        "selector", {"kubernetes.io/hostname": "a-node-02"}, "roles[0].selector"),
    "deployment_parameters.gpus_mismatch": ("gpus", 4, "roles[0].gpus"),
    "deployment_parameters.devices_mismatch": ("devices", {"rlinf.io/rdma": 2}, "roles[0].devices"),
    "deployment_parameters.mounts_mismatch": (
        "mounts", [{"kind": "host_path", "source": "/data/other", "target": "/mnt/models"}],
        "roles[0].mounts"),
    "deployment_parameters.cpu_mismatch": (
        "cpu", {"request": "2", "limit": "64"}, "roles[0].cpu"),
    "deployment_parameters.memory_mismatch": (
        "memory", {"request": "", "limit": "1Ti"}, "roles[0].memory"),
}


@pytest.mark.parametrize("code", sorted(CHANGES))
def test_each_field_the_record_gives_otherwise_is_a_mismatch_of_its_own(code: str) -> None:
    spec = clean_spec()
    view = confirmed_for(spec)
    key, value, field = CHANGES[code]
    roles = [dict(r) for r in view.roles]
    roles[0] = {**roles[0], key: value}
    found = parameter_findings(spec, with_record_roles(view, roles))
    mismatches = [f for f in found if f.code.endswith("_mismatch")]
    assert [(f.code, f.role, f.field, f.severity) for f in mismatches] == [
        (code, "Actor", field, "error")]


def test_gpus_typed_as_text_are_not_the_same_count() -> None:
    spec = clean_spec()
    view = confirmed_for(spec)
    roles = [dict(r) for r in view.roles]
    roles[0]["gpus"] = "8"
    found = codes(parameter_findings(spec, with_record_roles(view, roles)))
    assert "deployment_parameters.gpus_mismatch" in found


def test_mount_order_does_not_matter() -> None:
    spec = clean_spec()
    view = confirmed_for(spec)
    roles = [dict(r) for r in view.roles]
    roles[0]["mounts"] = list(reversed(roles[0]["mounts"]))
    assert len(roles[0]["mounts"]) == 2
    found = codes(parameter_findings(spec, with_record_roles(view, roles)))
    assert "deployment_parameters.mounts_mismatch" not in found


def test_another_network_domain_is_a_mismatch() -> None:
    spec = clean_spec()
    view = replace(confirmed_for(spec), network_domain="gpu-only")
    [finding] = [f for f in parameter_findings(spec, view) if f.code.endswith("_mismatch")]
    assert (finding.code, finding.field, finding.detail) == (
        "deployment_parameters.network_domain_mismatch", "network_domain",
        {"record": "gpu-only", "job": "rl-mesh"})


def test_an_approved_verification_the_record_does_not_reference() -> None:
    spec = clean_spec()
    view = confirmed_for(spec)
    view = replace(view, verification_ids=view.verification_ids - {2})
    found = [f for f in parameter_findings(spec, view)
             if f.code == "deployment_parameters.verification_unreferenced"]
    assert [(f.role, f.field, f.detail["verification"]) for f in found] == [
        ("Rollout", "roles[1].selector", 2)]


def test_an_unapproved_verification_is_not_asked_for_here() -> None:
    spec = clean_spec()
    context = fleet_context_for(spec, load_demo_fleet(), verify=False)
    view = parameters_for(spec, [])
    found = [f.code for f in check(spec, replace(context, parameters=view))]
    assert "deployment_parameters.verification_unreferenced" not in found
    assert "selector.unverified" in found


def test_a_job_changed_after_the_confirmation_makes_it_stale_and_says_what() -> None:
    spec = clean_spec()
    view = confirmed_for(spec)
    changed = with_role(spec, 0, gpus=4)
    found = parameter_findings(changed, view)
    stale = [f for f in found if f.code == "deployment_parameters.confirmation_stale"]
    assert len(stale) == 1
    assert stale[0].detail["changes"] == [{"part": "job", "role": "Actor", "field": "gpus"}]
    assert "role Actor's GPUs changed in the job" in stale[0].message
    # ... and the record no longer describes the job either.
    assert "deployment_parameters.gpus_mismatch" in codes(found)


def test_a_job_change_outside_the_parameters_keeps_the_confirmation() -> None:
    spec = clean_spec()
    view = confirmed_for(spec)
    changed = replace(spec, run_script="cd /srv && python train.py\n", name="another-name")
    assert parameter_findings(changed, view) == []


def test_a_record_changed_after_the_confirmation_is_stale() -> None:
    spec = clean_spec()
    view = confirmed_for(spec)
    changed = replace(view, content={**view.content, "storage_notes": "moved to NVMe"})
    [finding] = parameter_findings(spec, changed)
    assert finding.code == "deployment_parameters.confirmation_stale"
    assert finding.detail["changes"] == [
        {"part": "record", "role": None, "field": "storage_notes"}]


def test_a_stored_stale_state_stays_stale_even_when_changed_back() -> None:
    spec = clean_spec()
    reasons = ({"part": "record", "role": "Actor", "field": "gpus"},)
    view = replace(confirmed_for(spec), state="stale", stale_reasons=reasons)
    [finding] = parameter_findings(spec, view)
    assert finding.code == "deployment_parameters.confirmation_stale"
    assert finding.detail["changes"] == [dict(r) for r in reasons]


def test_a_role_added_to_the_job_is_a_reason() -> None:
    spec = clean_spec()
    view = confirmed_for(spec)
    grown = replace(spec, roles=(*spec.roles, replace(spec.roles[2], name="Critic")))
    stale = [f for f in parameter_findings(grown, view)
             if f.code == "deployment_parameters.confirmation_stale"]
    assert stale[0].detail["changes"] == [{"part": "job", "role": "Critic", "field": "added"}]
    assert "role Critic was added to the job" in stale[0].message


def test_reasons_read_well() -> None:
    assert describe_change({"part": "record", "role": None, "field": "network_domain"}) == (
        "the network domain of the record changed")
    assert describe_change({"part": "job", "role": "Env", "field": "removed"}) == (
        "role Env was removed from the job")


def test_fill_from_job_writes_what_the_job_has() -> None:
    spec = with_role(clean_spec(), 1, mounts=(Mount(kind="host_path", source="/a", target="/b"),))
    roles = record_roles_from_spec(spec)
    assert roles[1]["mounts"] == [{"kind": "host_path", "source": "/a", "target": "/b"}]
    assert roles[0]["selector"] == {"kubernetes.io/hostname": "a-head-01"}
    assert roles[0]["devices"] == {"rlinf.io/rdma": 4}
    assert job_content(spec)["roles"][1]["mounts"][0]["source"] == "/a"


def test_wild_input_never_raises() -> None:
    spec = replace(clean_spec(), roles=("not a role", None), network_domain=5)  # type: ignore[arg-type]
    view = replace(confirmed_for(clean_spec()), roles=("junk", {"role": None}))
    parameter_findings(spec, view)


def test_line_breaks_as_a_browser_sends_them_are_no_change() -> None:
    typed = record_content(roles=[], network_domain="", storage_notes="a\r\nb",
                           network_notes="", verifications=[])
    stored = record_content(roles=[], network_domain="", storage_notes="a\nb",
                            network_notes="", verifications=[])
    assert content_changes({"record": stored}, record=typed, job=None) == []


@pytest.mark.parametrize("kind", ["cpu", "memory"])
def test_a_cpu_or_memory_change_after_confirmation_is_its_own_mismatch(kind: str) -> None:
    """Changed in the job after the admin confirmed: stale, and the mismatch says which."""
    spec = clean_spec()
    view = confirmed_for(spec)
    changed = with_role(spec, 0, **{kind: ResourcePair(request="3", limit="")})
    found = parameter_findings(changed, view)
    assert sorted(codes(found)) == sorted([f"deployment_parameters.{kind}_mismatch",
                                           "deployment_parameters.confirmation_stale"])
    [mismatch] = [f for f in found if f.code.endswith("_mismatch")]
    assert (mismatch.role, mismatch.field) == ("Actor", f"roles[0].{kind}")
    assert mismatch.detail["job"] == {"request": "3", "limit": ""}
    # A resource the record leaves blank and the job leaves out are the same.
    blank = [dict(r) for r in view.roles]
    blank[0] = {**blank[0], kind: {}}
    bare = with_role(spec, 0, **{kind: ResourcePair()})
    assert f"deployment_parameters.{kind}_mismatch" not in codes(
        parameter_findings(bare, with_record_roles(view, blank)))
