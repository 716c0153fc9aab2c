"""The job's deployment parameters: an admin confirmed them, the confirmation is current, and
they describe the job (roles, clusters, selectors, GPUs, devices, mounts, network domain, and
each role's approved verification referenced)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from jobs.core.parameters import (
    ParametersView,
    effective_confirmation,
    job_content,
    normal_mounts,
    pairs_as_dict,
    same_value,
)
from jobs.core.spec import CheckContext, JobSpec, field_of, is_count, spec_roles
from rlark_site.foundation.findings import Finding, new_finding
from rlark_site.foundation.findings import translate as _

FIELD = "deployment_parameters"


def _field_words() -> dict[str, str]:
    return {
        "cluster": _("cluster"), "selector": _("selector"), "gpus": _("GPUs"),
        "devices": _("devices"), "cpu": _("CPU"), "memory": _("memory"),
        "mounts": _("mounts"), "network_domain": _("network domain"),
        "header_role": _("Header role"), "storage_notes": _("storage notes"),
        "network_notes": _("network notes"), "verifications": _("verifications"),
        "roles": _("roles"),
    }


def describe_change(change: Mapping[str, Any]) -> str:
    """One change in words: "role Actor's GPUs changed", "the job's network domain changed"."""
    part = _("the record") if change.get("part") == "record" else _("the job")
    role, what = change.get("role"), str(change.get("field"))
    if role is not None and what == "added":
        return _("role %(role)s was added to %(part)s") % {"role": role, "part": part}
    if role is not None and what == "removed":
        return _("role %(role)s was removed from %(part)s") % {"role": role, "part": part}
    words = _field_words().get(what, what)
    if role is not None:
        return _("role %(role)s's %(field)s changed in %(part)s") % {
            "role": role, "field": words, "part": part}
    return _("the %(field)s of %(part)s changed") % {"field": words, "part": part}


def _record_role(view: ParametersView, name: str) -> Mapping[str, Any] | None:
    for role in view.roles:
        if isinstance(role, Mapping) and role.get("role") == name:
            return role
    return None


def _mismatch(code: str, message: str, where: str, role: str | None,
              **detail: Any) -> Finding:
    return new_finding(code, message, role=role, field=where, **detail)


def _resource_pair(value: object) -> dict[str, str]:
    """A CPU or memory `{request, limit}` as text, a part not given as "" (the record's API
    stores `{}` for "not given", the job an empty pair)."""
    pair = value if isinstance(value, Mapping) else {
        "request": field_of(value, "request", ""), "limit": field_of(value, "limit", "")}
    return {part: "" if pair.get(part) is None else str(pair.get(part))
            for part in ("request", "limit")}


def _resource_mismatches(where: str, name: object, role: object,
                         record: Mapping[str, Any]) -> Iterator[Finding]:
    messages = {
        "cpu": _("The deployment parameters give role %(role)s CPU %(theirs)s, the job "
                 "%(ours)s."),
        "memory": _("The deployment parameters give role %(role)s memory %(theirs)s, the job "
                    "%(ours)s."),
    }
    for kind, message in messages.items():
        theirs = _resource_pair(record.get(kind))
        ours = _resource_pair(field_of(role, kind, None))
        if theirs != ours:
            yield _mismatch(
                f"deployment_parameters.{kind}_mismatch",
                message % {"role": name, "theirs": _pair_words(theirs),
                           "ours": _pair_words(ours)},
                f"{where}.{kind}", name if isinstance(name, str) else None,
                record=theirs, job=ours,
            )


def _pair_words(pair: Mapping[str, str]) -> str:
    return _("request %(request)s, limit %(limit)s") % {
        "request": pair["request"] or "—", "limit": pair["limit"] or "—"}


def _role_mismatches(index: int, role: object, record: Mapping[str, Any]) -> Iterator[Finding]:
    name = field_of(role, "name")
    where = f"roles[{index}]"
    cluster = field_of(role, "cluster")
    if record.get("cluster", "") != cluster:
        yield _mismatch(
            "deployment_parameters.cluster_mismatch",
            _("The deployment parameters place role %(role)s in cluster %(theirs)s, the job in "
              "%(ours)s.") % {"role": name, "theirs": repr(record.get("cluster", "")),
                              "ours": repr(cluster)},
            f"{where}.cluster", name, record=record.get("cluster", ""), job=cluster,
        )
    selector = pairs_as_dict(field_of(role, "selector", ()))
    theirs = record.get("selector") if isinstance(record.get("selector"), Mapping) else None
    if selector is None or theirs is None or dict(theirs) != selector:
        yield _mismatch(
            "deployment_parameters.selector_mismatch",
            _("The deployment parameters give role %(role)s another selector than the job.")
            % {"role": name},
            f"{where}.selector", name, record=theirs, job=selector,
        )
    gpus = field_of(role, "gpus", 0)
    if not same_value(record.get("gpus", 0), gpus):
        yield _mismatch(
            "deployment_parameters.gpus_mismatch",
            _("The deployment parameters give role %(role)s %(theirs)s GPUs per worker, the job "
              "%(ours)s.") % {"role": name, "theirs": record.get("gpus", 0), "ours": gpus},
            f"{where}.gpus", name, record=record.get("gpus", 0), job=gpus,
        )
    devices = pairs_as_dict(field_of(role, "devices", ()))
    their_devices = record.get("devices") or {}
    if devices is None or not isinstance(their_devices, Mapping) or not (
        set(devices) == set(their_devices)
        and all(same_value(their_devices[k], devices[k]) for k in devices)
    ):
        yield _mismatch(
            "deployment_parameters.devices_mismatch",
            _("The deployment parameters give role %(role)s other devices than the job.")
            % {"role": name},
            f"{where}.devices", name, record=their_devices, job=devices,
        )
    yield from _resource_mismatches(where, name, role, record)
    mounts = normal_mounts(field_of(role, "mounts", ()))
    if normal_mounts(record.get("mounts") or []) != mounts:
        yield _mismatch(
            "deployment_parameters.mounts_mismatch",
            _("The deployment parameters give role %(role)s other mounts than the job.")
            % {"role": name},
            f"{where}.mounts", name,
            record=[list(m) for m in normal_mounts(record.get("mounts") or [])],
            job=[list(m) for m in mounts],
        )


def mismatch_findings(spec: JobSpec, view: ParametersView) -> Iterator[Finding]:
    """The record against the job: role by role (by name), then the network domain."""
    names = set()
    for index, role in enumerate(spec_roles(spec)):
        name = field_of(role, "name")
        names.add(name)
        record = _record_role(view, name)
        if record is None:
            yield _mismatch(
                "deployment_parameters.role_missing",
                _("The deployment parameters do not describe role %(role)s.") % {"role": name},
                f"roles[{index}].name", name if isinstance(name, str) else None,
                role_name=str(name)[:100],
            )
            continue
        yield from _role_mismatches(index, role, record)
    for record in view.roles:
        extra = record.get("role") if isinstance(record, Mapping) else None
        if extra not in names:
            yield _mismatch(
                "deployment_parameters.role_extra",
                _("The deployment parameters describe role %(role)s, which the job does not "
                  "have.") % {"role": extra},
                FIELD, None, role_name=str(extra)[:100],
            )
    network_domain = field_of(spec, "network_domain")
    if view.network_domain != network_domain:
        yield _mismatch(
            "deployment_parameters.network_domain_mismatch",
            _("The deployment parameters name network domain %(theirs)s, the job %(ours)s.")
            % {"theirs": repr(view.network_domain), "ours": repr(network_domain)},
            "network_domain", None, record=view.network_domain, job=network_domain,
        )


def unreferenced_findings(spec: JobSpec, ctx: CheckContext,
                          view: ParametersView) -> Iterator[Finding]:
    """Each role's approved verification must be one the record references."""
    for index, role in enumerate(spec_roles(spec)):
        cluster = field_of(role, "cluster")
        selector = pairs_as_dict(field_of(role, "selector", ()))
        if not isinstance(cluster, str) or not selector:
            continue
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in selector.items()):
            continue
        verification = ctx.verification_for(cluster, selector)
        if verification is None or verification.state != "approved":
            continue
        if verification.id not in view.verification_ids:
            name = field_of(role, "name")
            yield new_finding(
                "deployment_parameters.verification_unreferenced",
                _("Role %(role)s's approved verification #%(id)s is not referenced by the "
                  "deployment parameters.") % {"role": name, "id": verification.id},
                role=name if isinstance(name, str) else None, field=f"roles[{index}].selector",
                verification=verification.id,
            )


def confirmation_findings(spec: JobSpec, view: ParametersView) -> Iterator[Finding]:
    """Confirmed by a platform admin, and nothing confirmed has changed since."""
    if view.state in ("pending", "rejected"):
        message = (
            _("The deployment parameters %(title)s wait for a platform admin's confirmation.")
            if view.state == "pending" else
            _("A platform admin rejected the deployment parameters %(title)s: %(note)s Change "
              "them and request confirmation again.")
        )
        yield new_finding(
            "deployment_parameters.unconfirmed",
            message % {"title": view.title, "note": view.decision_note},
            field=FIELD, state=view.state, parameters=view.id,
        )
        return
    state, changes = effective_confirmation(view.state, view.confirmed, record=view.content,
                                            job=job_content(spec),
                                            stale_reasons=view.stale_reasons)
    if state == "stale":
        reasons = "; ".join(describe_change(c) for c in changes) or _("it was changed")
        yield new_finding(
            "deployment_parameters.confirmation_stale",
            _("The confirmation of the deployment parameters %(title)s is stale: %(reasons)s. "
              "Request a new confirmation.") % {"title": view.title, "reasons": reasons},
            field=FIELD, parameters=view.id, changes=changes,
        )


def parameters_findings(spec: JobSpec, ctx: CheckContext) -> Iterator[Finding]:
    record_id = field_of(spec, "deployment_parameters_id", None)
    if not (is_count(record_id) and record_id > 0):
        return  # deployment_parameters.missing says so
    view = field_of(ctx, "parameters", None)
    if not isinstance(view, ParametersView) or view.id != record_id:
        yield new_finding(
            "deployment_parameters.unconfirmed",
            _("The deployment parameters of this job are not known; link a record a platform "
              "admin confirmed."),
            field=FIELD, state="unknown", parameters=record_id,
        )
        return
    yield from mismatch_findings(spec, view)
    yield from unreferenced_findings(spec, ctx, view)
    yield from confirmation_findings(spec, view)


__all__ = ["describe_change", "parameters_findings"]
