"""Build the findings engine's inputs from the database: the ONE path every check takes.

The wizard, the API and submission all call `evaluate(job)` (or `spec_from_job` +
`check_context_for`), so a job is judged the same way wherever it is looked at.

`check_context_for` loads everything in a fixed number of queries: the SSH keys, the
clusters, the team's verifications, one statement for the rest (whether the name is taken,
the launch list's images, the deployment parameters with their verifications' states, the
network domains), and one for the roles' matches with the matched nodes' capacity and
occupancy (`clusters.inventory.selectors.matches_capacity`: the matches and the pre-flight's
inputs, whatever the number of roles). Nothing it does grows with the number of jobs or nodes
stored.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.db import connection
from django.utils.translation import gettext

from clusters.inventory.selectors import ClusterInventory, cluster_inventory, matches_capacity
from clusters.verifications.selectors import verification_views, verification_views_by_team
from jobs.core.findings import check, has_errors, parameters_check
from jobs.core.parameters import record_content
from jobs.core.spec import (
    CheckContext,
    ClusterFacts,
    EnvVar,
    JobSpec,
    LaunchListImages,
    Mount,
    ParametersView,
    ResourcePair,
    RoleSpec,
    VerificationView,
    selector_key,
)
from jobs.models import DeploymentParameters, Job, Role, SSHKey
from rlark_site.foundation.findings import Finding
from rlark_site.foundation.rawsql import jsonb
from rlark_site.foundation.tenancy.models import Team

__all__ = [
    "Evaluation",
    "check_context_for",
    "cluster_inventory_of",
    "evaluate",
    "name_findings",
    "name_is_taken",
    "parameters_view",
    "record_content_of",
    "role_spec",
    "spec_from_job",
]

SelectorKey = tuple[tuple[str, str], ...]
VerificationKey = tuple[str, SelectorKey]


@dataclass(frozen=True)
class Evaluation:
    """A job as the engine saw it: the frozen spec, the world it was checked in, the findings.

    `inventory` holds the spec's clusters as they were read for `ctx` (storage classes and
    devices in the database's order), so a page showing what a cluster offers does not read
    them again. Unpacks as ``spec, ctx, findings``.
    """

    spec: JobSpec
    ctx: CheckContext
    findings: list[Finding]
    inventory: Mapping[str, ClusterInventory] = field(default_factory=dict)

    @property
    def has_errors(self) -> bool:
        return has_errors(self.findings)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.spec, self.ctx, self.findings))


# --- spec ---------------------------------------------------------------------------------


def _text(value: Any) -> str:
    """Free text as stored; numbers become their JSON spelling, null becomes blank."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _pairs(value: Any) -> tuple[tuple[Any, Any], ...]:
    """`[[k, v], ...]` (or a mapping) as a tuple of pairs, in the order given."""
    if isinstance(value, Mapping):
        return tuple(value.items())
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(
        (item[0], item[1]) for item in value if isinstance(item, (list, tuple)) and len(item) == 2
    )


def _resource_pair(value: Any) -> ResourcePair:
    if not isinstance(value, Mapping):
        return ResourcePair()
    return ResourcePair(request=_text(value.get("request")), limit=_text(value.get("limit")))


def _env(value: Any) -> tuple[EnvVar, ...]:
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(
        EnvVar(name=_text(item.get("name")), value=_text(item.get("value")))
        for item in value
        if isinstance(item, Mapping)
    )


def _mounts(value: Any) -> tuple[Mount, ...]:
    if not isinstance(value, (list, tuple)):
        return ()
    return tuple(
        Mount(
            kind=_text(item.get("kind")),
            target=_text(item.get("target")),
            source=_text(item.get("source")),
            storage_class=_text(item.get("storage_class")),
            size=_text(item.get("size")),
        )
        for item in value
        if isinstance(item, Mapping)
    )


def role_spec(role: Role) -> RoleSpec:
    """One stored role as the engine sees it (values kept as typed)."""
    return RoleSpec(
        name=role.name,
        cluster=role.cluster,
        selector=_pairs(role.selector),
        gpus=role.gpus,
        devices=_pairs(role.devices),
        cpu=_resource_pair(role.cpu),
        memory=_resource_pair(role.memory),
        image=role.image,
        image_digest=role.image_digest,
        prepare_script=role.prepare_script,
        env=_env(role.env),
        mounts=_mounts(role.mounts),
    )


def _requested_key_names(job: Job) -> list[str]:
    names = job.ssh_key_names if isinstance(job.ssh_key_names, list) else []
    return [_text(name) for name in names]


def team_ssh_keys(team: Team | int) -> dict[str, str]:
    """The team's SSH keys by name (one query); read once per request and pass it down."""
    return dict(SSHKey.objects.filter(team=team).values_list("name", "public_key"))


def _resolve_ssh_keys(
    names: Sequence[str], team_keys: Mapping[str, str]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(public key lines for the known names, the unknown names), each once, in request order."""
    lines: list[str] = []
    unknown: list[str] = []
    for name in dict.fromkeys(names):
        if name in team_keys:
            lines.append(team_keys[name])
        else:
            unknown.append(name)
    return tuple(lines), tuple(unknown)


def spec_from_job(job: Job, *, team_keys: Mapping[str, str] | None = None,
                  roles: Sequence[Role] | None = None) -> JobSpec:
    """The frozen spec of a job draft; SSH key names are resolved to the team's key lines.

    Prefetch `roles` and select `team` to keep this at one query (the SSH keys; none when the
    caller passes the `team_keys` it already read). `roles`: the roles to judge instead of the
    stored ones (an unsaved draft, `jobs.drafts.services.draft_preview`).
    """
    keys = team_ssh_keys(job.team_id) if team_keys is None else team_keys
    lines, _unknown = _resolve_ssh_keys(_requested_key_names(job), keys)
    return JobSpec(
        team=job.team.slug,
        name=job.name,
        task_type=job.task_type,
        roles=tuple(role_spec(role) for role in (job.roles.all() if roles is None else roles)),
        header_role=job.header_role,
        network_domain=job.network_domain,
        ssh_keys=lines,
        run_script=job.run_script,
        tensorboard_log_dir=job.tensorboard_log_dir,
        image_compatibility_confirmed=job.image_compatibility_confirmed,
        launch_list_id=job.launch_list_id,
        deployment_parameters_id=job.deployment_parameters_id,
    )


# --- context ------------------------------------------------------------------------------


def _usable_selector(role: RoleSpec) -> dict[str, str]:
    """The role's conditions as a mapping; conditions that cannot be labels at all are left out.

    Syntax problems are the engine's to report; they only must not break matching.
    """
    return {k: v for k, v in role.selector if isinstance(k, str) and isinstance(v, str)}


def _cluster_names(spec: JobSpec) -> list[str]:
    return sorted({role.cluster for role in spec.roles if isinstance(role.cluster, str)} - {""})


def cluster_inventory_of(spec: JobSpec) -> dict[str, ClusterInventory]:
    """The clusters the spec's roles name, as `check_context_for` reads them (one query)."""
    return cluster_inventory(_cluster_names(spec))


def cluster_facts(inventory: Mapping[str, ClusterInventory]) -> dict[str, ClusterFacts]:
    return {
        name: ClusterFacts(
            name=name,
            namespace=row.namespace,
            storage_classes=frozenset(row.storage_classes),
            device_names=frozenset(row.device_names),
            admission=row.admission,
            kueue_queues=row.kueue_queues,
            kueue=row.kueue,
        )
        for name, row in inventory.items()
    }


# Whether `name` is another RLark job's, or a cluster Job's that is not `exclude`'s own run
# (the row in its run record's cluster and namespace). A NULL `exclude` excludes nothing.
_NAME_TAKEN_SQL = """
EXISTS (SELECT 1 FROM jobs_job j WHERE j.name = %(name)s AND j.id IS DISTINCT FROM %(exclude)s)
OR EXISTS (
    SELECT 1 FROM clusters_clusterjob cj JOIN clusters_cluster c ON c.id = cj.cluster_id
    WHERE cj.name = %(name)s AND NOT EXISTS (
        SELECT 1 FROM jobs_runrecord r
        WHERE r.job_id = %(exclude)s AND r.job_name = cj.name AND r.cluster = c.name
            AND r.namespace = cj.namespace
    )
)
"""


def name_is_taken(name: str, *, exclude_job_id: int | None = None) -> bool:
    """Whether another RLark job, or a Job on any cluster that is not this one's, has `name`.

    Only this one name is looked up (one query). Once a job is submitted its own Job shows up
    on the cluster too; the row in its cluster and namespace is then not "another" Job.
    """
    if not name:
        return False
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {_NAME_TAKEN_SQL}", {"name": name, "exclude": exclude_job_id})
        row = cursor.fetchone()
    return bool(row and row[0])


def name_findings(name: str, *, taken: bool) -> list[Finding]:
    """The engine's findings about a job name alone (``job.name.*``), without a database.

    Used where a draft cannot be saved under a name, so the refusal speaks the engine's words.
    """
    spec = JobSpec(team="", name=name, task_type="custom", roles=())
    ctx = CheckContext(taken_names=frozenset({name}) if taken else frozenset())
    findings = [f for f in check(spec, ctx) if f.code.startswith("job.name.")]
    if taken and not any(f.code == "job.name.taken" for f in findings):
        # The engine reports only the syntax of a malformed name; it is taken all the same.
        findings.append(Finding(
            code="job.name.taken", severity="error", field="name", detail={"value": name[:100]},
            message=gettext("The job name is already used by another job or by a Job on a "
                            "cluster."),
        ))
    return findings


def _verifications_for(
    team: Team, pairs: Iterable[VerificationKey]
) -> dict[VerificationKey, VerificationView]:
    """The team's relevant verification for each (cluster, selector key) pair (one query)."""
    return verification_views(team, pairs)


def _verification_pairs(spec: JobSpec) -> list[VerificationKey]:
    pairs: dict[VerificationKey, None] = {}
    for role in spec.roles:
        selector = _usable_selector(role)
        if isinstance(role.cluster, str) and role.cluster and selector:
            pairs[(role.cluster, selector_key(selector))] = None
    return list(pairs)


def check_context_for(
    spec: JobSpec,
    *,
    team: Team,
    exclude_job_id: int | None = None,
    ssh_key_names: Sequence[str] = (),
    team_keys: Mapping[str, str] | None = None,
    inventory: Mapping[str, ClusterInventory] | None = None,
) -> CheckContext:
    """Everything outside the draft the rules need, in a bounded number of queries.

    `exclude_job_id` is the job being checked (its own name is not "taken" by itself);
    `ssh_key_names` are the key names the draft asks for (unknown ones are reported);
    `team_keys` are the team's keys if the caller already read them (else one query);
    `inventory` is `cluster_inventory_of(spec)` if the caller already read it (else one query).
    """
    if team_keys is None:
        team_keys = team_ssh_keys(team)
    if inventory is None:
        inventory = cluster_inventory_of(spec)
    _lines, unknown = _resolve_ssh_keys([_text(n) for n in ssh_key_names], team_keys)
    world = _read_world(spec, exclude_job_id=exclude_job_id)
    read = matches_capacity(s for role in spec.roles if (s := _usable_selector(role)))
    return CheckContext(
        clusters=cluster_facts(inventory),
        matches=dict(read.matches),
        capacity=read.capacity.nodes,
        occupancy=read.capacity.occupancy,
        verifications=_verifications_for(team, _verification_pairs(spec)),
        network_domains=world.network_domains,
        taken_names=frozenset({spec.name}) if world.name_taken else frozenset(),
        unknown_ssh_key_names=unknown,
        launch_list_images=world.launch_list_images,
        **_record_links(spec, team, world.parameters),
    )


# What the rules need beyond the draft and the inventory, in one statement: whether the name is
# taken, the launch list's images, the deployment parameters the job links or that link its
# launch list (with their verifications' states), and every network domain with its clusters.
_WORLD_SQL = f"""
SELECT
    {_NAME_TAKEN_SQL} AS name_taken,
    (SELECT jsonb_build_array(l.image, l.role_images) FROM jobs_launchlist l
     WHERE l.id = %(launch_list)s) AS launch_list,
    (SELECT coalesce(jsonb_agg(jsonb_build_object(
        'id', d.id, 'team_id', d.team_id, 'launch_list_id', d.launch_list_id,
        'title', d.title, 'state', d.confirmation_state, 'roles', d.roles,
        'network_domain', d.network_domain, 'storage_notes', d.storage_notes,
        'network_notes', d.network_notes, 'confirmed', d.confirmed_content,
        'decision_note', d.confirmation_note, 'stale_reasons', d.confirmation_stale_reasons,
        'verifications', (
            SELECT coalesce(jsonb_agg(jsonb_build_array(v.id, v.state)), '[]'::jsonb)
            FROM jobs_deploymentparameters_verifications dv
            JOIN clusters_verification v ON v.id = dv.verification_id
            WHERE dv.deploymentparameters_id = d.id
        )
    )), '[]'::jsonb)
     FROM jobs_deploymentparameters d
     WHERE d.id = %(parameters)s OR d.launch_list_id = %(launch_list)s) AS parameters,
    (SELECT coalesce(jsonb_object_agg(domain.name, domain.clusters), '{{}}'::jsonb) FROM (
        SELECT n.name, coalesce(jsonb_agg(c.name) FILTER (WHERE c.name IS NOT NULL),
                                '[]'::jsonb) AS clusters
        FROM clusters_networkdomain n
        LEFT JOIN clusters_networkdomain_clusters nc ON nc.networkdomain_id = n.id
        LEFT JOIN clusters_cluster c ON c.id = nc.cluster_id
        GROUP BY n.name
    ) AS domain) AS network_domains
"""  # noqa: S608  (fixed fragments; values are parameters)


@dataclass(frozen=True)
class _World:
    name_taken: bool
    launch_list_images: LaunchListImages | None
    parameters: list[dict[str, Any]]  # rows as `_WORLD_SQL` builds them
    network_domains: dict[str, frozenset[str]]


def _record_id(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _read_world(spec: JobSpec, *, exclude_job_id: int | None) -> _World:
    """`_WORLD_SQL` for the spec (one query)."""
    name = spec.name if isinstance(spec.name, str) else ""
    params = {"name": name, "exclude": exclude_job_id,
              "launch_list": _record_id(spec.launch_list_id),
              "parameters": _record_id(spec.deployment_parameters_id)}
    with connection.cursor() as cursor:
        cursor.execute(_WORLD_SQL, params)
        taken, launch_list, parameters, domains = cursor.fetchone()
    return _World(
        name_taken=bool(name) and bool(taken),
        launch_list_images=_launch_list_images(jsonb(launch_list)),
        parameters=jsonb(parameters),
        network_domains={n: frozenset(clusters) for n, clusters in jsonb(domains).items()},
    )


def _launch_list_images(row: list[Any] | None) -> LaunchListImages | None:
    """The images a launch list records; None without a launch list."""
    if row is None:
        return None
    image, role_images = row
    per_role = role_images.items() if isinstance(role_images, dict) else ()
    return LaunchListImages(
        image=image, role_images=tuple((str(k), str(v)) for k, v in per_role)
    )


def record_content_of(parameters: DeploymentParameters) -> dict[str, Any]:
    """The record's confirmable content (`jobs.core.parameters.record_content`): one query,
    none when the caller prefetched `verifications`."""
    return record_content(
        roles=parameters.roles, network_domain=parameters.network_domain,
        storage_notes=parameters.storage_notes, network_notes=parameters.network_notes,
        verifications=[(v.pk, v.state) for v in parameters.verifications.all()],
    )


def _parameters_view(*, id: int, title: str, state: str, roles: Any, network_domain: str,
                     content: dict[str, Any], confirmed: Any, decision_note: str,
                     stale_reasons: Any) -> ParametersView:
    return ParametersView(
        id=id, title=title, state=state,
        roles=tuple(roles if isinstance(roles, list) else ()),
        network_domain=network_domain,
        verification_ids=frozenset(pk for pk, _state in content["verifications"]),
        content=content, confirmed=dict(confirmed or {}),
        decision_note=decision_note, stale_reasons=tuple(stale_reasons or ()),
    )


def parameters_view(parameters: DeploymentParameters) -> ParametersView:
    """The record as the findings engine sees it."""
    return _parameters_view(
        id=parameters.pk, title=parameters.title, state=parameters.confirmation_state,
        roles=parameters.roles, network_domain=parameters.network_domain,
        content=record_content_of(parameters), confirmed=parameters.confirmed_content,
        decision_note=parameters.confirmation_note,
        stale_reasons=parameters.confirmation_stale_reasons,
    )


def _parameters_view_of_row(row: Mapping[str, Any]) -> ParametersView:
    """`parameters_view` of a row `_WORLD_SQL` read."""
    content = record_content(
        roles=row["roles"], network_domain=row["network_domain"],
        storage_notes=row["storage_notes"], network_notes=row["network_notes"],
        verifications=[(pk, state) for pk, state in row["verifications"]],
    )
    return _parameters_view(
        id=row["id"], title=row["title"], state=row["state"], roles=row["roles"],
        network_domain=row["network_domain"], content=content, confirmed=row["confirmed"],
        decision_note=row["decision_note"], stale_reasons=row["stale_reasons"],
    )


def _record_links(spec: JobSpec, team: Team, rows: Sequence[Mapping[str, Any]]
                  ) -> dict[str, Any]:
    """How the job's launch list and deployment parameters reference each other, and the
    parameters themselves, from the records `_WORLD_SQL` read."""
    if not any(isinstance(i, int) for i in (spec.launch_list_id, spec.deployment_parameters_id)):
        return {}
    links: dict[str, Any] = {}
    for row in rows:
        if row["id"] == spec.deployment_parameters_id:
            links["parameters_launch_list_id"] = row["launch_list_id"]
            if row["team_id"] == team.pk:
                links["parameters"] = _parameters_view_of_row(row)
        if row["launch_list_id"] is not None and row["launch_list_id"] == spec.launch_list_id:
            links["launch_list_parameters_id"] = row["id"]
    return links


def evaluate(job: Job, *, team_keys: Mapping[str, str] | None = None,
             roles: Sequence[Role] | None = None) -> Evaluation:
    """Check a stored job: its spec, the context it was checked in, and the findings.

    `team_keys`: the team's SSH keys by name (`team_ssh_keys`) if the caller read them.
    `roles`: judge these roles instead of the stored ones (an unsaved draft: nothing is read
    or written for the job itself beyond what the engine's world needs).
    """
    if team_keys is None:
        team_keys = team_ssh_keys(job.team_id)  # read once for the spec and the context
    spec = spec_from_job(job, team_keys=team_keys, roles=roles)
    inventory = cluster_inventory_of(spec)
    ctx = check_context_for(
        spec, team=job.team, exclude_job_id=job.pk, ssh_key_names=_requested_key_names(job),
        team_keys=team_keys, inventory=inventory,
    )
    return Evaluation(spec=spec, ctx=ctx, findings=check(spec, ctx), inventory=inventory)


def parameters_findings_of(
    items: Sequence[tuple[DeploymentParameters, Job]], *,
    team_keys: Mapping[int, Mapping[str, str]],
) -> dict[int, list[Finding]]:
    """What `evaluate(job)` says of each record's deployment parameters (`parameters_check`),
    by record pk, for records each paired with a job linking it, in a bounded number of
    queries whatever their number: every team's verifications at once, the records pointing
    at the jobs' launch lists at once. Give the jobs with their `team` and `roles` and the
    records with their `verifications` (`jobs.records.confirmation.confirmation_jobs`);
    `team_keys`: each job team's SSH keys by team id."""
    specs = {record.pk: spec_from_job(job, team_keys=team_keys[job.team_id])
             for record, job in items}
    wanted: dict[int, list[VerificationKey]] = {}
    for record, job in items:
        wanted.setdefault(job.team_id, []).extend(_verification_pairs(specs[record.pk]))
    views = verification_views_by_team(wanted)
    launch_lists = {job.launch_list_id for _record, job in items if job.launch_list_id}
    pointing = dict(
        DeploymentParameters.objects.filter(launch_list_id__in=launch_lists)
        .values_list("launch_list_id", "id")
    ) if launch_lists else {}
    findings: dict[int, list[Finding]] = {}
    for record, job in items:
        ctx = CheckContext(
            verifications=views.get(job.team_id, {}),
            parameters=parameters_view(record) if record.team_id == job.team_id else None,
            parameters_launch_list_id=record.launch_list_id,
            launch_list_parameters_id=(pointing.get(job.launch_list_id)
                                       if job.launch_list_id else None),
        )
        findings[record.pk] = parameters_check(specs[record.pk], ctx)
    return findings
