"""The job itself: its records, its name, its team, its type, its roles and Header; role names."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from clusters.labels import is_dns_label, is_valid_label_value
from jobs.core.findings.base import (
    NAME_MAX,
    ROLE_NAME,
    CheckedRole,
    shown,
)
from jobs.core.spec import (
    TASK_TYPES,
    CheckContext,
    JobSpec,
    field_of,
    header_index,
    is_count,
    spec_roles,
)
from rlark_site.foundation.findings import Finding, new_finding
from rlark_site.foundation.findings import translate as _


def role_name_findings(r: CheckedRole, earlier: Sequence[object]) -> Iterator[Finding]:
    name = r.name
    if name is None or len(name) > NAME_MAX or not ROLE_NAME.fullmatch(name):
        yield r.finding(
            "role.name.invalid",
            _(
                "A role name is 1-63 letters, digits or '-', starting and ending with a letter or "
                "digit."
            ),
            "name",
            value=shown(field_of(r.role, "name", None)),
        )
        return
    lowered = name.lower()
    if any(isinstance(n, str) and n.lower() == lowered for n in earlier):
        yield r.finding(
            "role.name.duplicate",
            _("Another role is already named %(name)s (names are compared ignoring case).")
            % {"name": name},
            "name",
            value=name,
        )


def record_findings(spec: JobSpec, ctx: CheckContext) -> Iterator[Finding]:
    record = field_of(spec, "launch_list_id", None)
    if not (is_count(record) and record > 0):
        yield new_finding(
            "launch_list.missing",
            _("Link a launch list: a job cannot be submitted without one."),
            field="launch_list",
        )
    record = field_of(spec, "deployment_parameters_id", None)
    if not (is_count(record) and record > 0):
        yield new_finding(
            "deployment_parameters.missing",
            _("Link the deployment parameters: a job cannot be submitted without them."),
            field="deployment_parameters",
        )
    yield from record_link_findings(spec, ctx)


def record_link_findings(spec: JobSpec, ctx: CheckContext) -> Iterator[Finding]:
    """The launch list and the deployment parameters must reference each other (or be unlinked,
    in which case submission links them)."""
    launch_list = field_of(spec, "launch_list_id", None)
    parameters = field_of(spec, "deployment_parameters_id", None)
    if not (is_count(launch_list) and is_count(parameters)):
        return
    points_at = field_of(ctx, "parameters_launch_list_id", None)
    pointed_by = field_of(ctx, "launch_list_parameters_id", None)
    if (points_at is not None and points_at != launch_list) or (
        pointed_by is not None and pointed_by != parameters
    ):
        yield new_finding(
            "deployment_parameters.launch_list_mismatch",
            _(
                "The deployment parameters and the launch list of this job do not reference each "
                "other; link the two records to each other first."
            ),
            field="deployment_parameters",
            parameters_launch_list=points_at,
            launch_list_parameters=pointed_by,
        )


def job_findings(spec: JobSpec, ctx: CheckContext) -> Iterator[Finding]:
    yield from record_findings(spec, ctx)
    name = field_of(spec, "name")
    if not is_dns_label(name):
        yield new_finding(
            "job.name.invalid",
            _(
                "The job name must be 1-63 lower-case letters, digits or '-', starting and ending "
                "with a letter or digit."
            ),
            field="name",
            value=shown(name),
        )
    elif name in ctx.taken_names:
        yield new_finding(
            "job.name.taken",
            _("The job name %(name)s is already used by another job or by a Job on a cluster.")
            % {"name": name},
            field="name",
            value=name,
        )
    team = field_of(spec, "team")
    if not is_valid_label_value(team):
        yield new_finding(
            "job.team.invalid",
            _("The team name cannot be used as a Kubernetes label value."),
            field="team",
            value=shown(team),
        )
    task_type = field_of(spec, "task_type")
    if not (isinstance(task_type, str) and task_type in TASK_TYPES):
        yield new_finding(
            "job.type.invalid",
            _("Unknown job type %(type)s; choose one of: %(types)s.")
            % {"type": repr(shown(task_type)), "types": ", ".join(TASK_TYPES)},
            field="task_type",
            value=shown(task_type),
            choices=list(TASK_TYPES),
        )
    yield from roles_and_header(spec)


def roles_and_header(spec: JobSpec) -> Iterator[Finding]:
    if not spec_roles(spec):
        yield new_finding("roles.empty", _("Add at least one role."), field="roles")
        return
    header = field_of(spec, "header_role")
    if header is None or header == "":
        yield new_finding("header.missing", _("Choose the Header role."), field="header_role")
    elif header_index(spec) is None:
        yield new_finding(
            "header.unknown",
            _("The Header role %(name)s is not one of the job's roles.")
            % {"name": repr(shown(header))},
            field="header_role",
            value=shown(header),
        )
