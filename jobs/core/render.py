"""The manifest renderer: a pure function from a checked job spec to an ``rlinf.io/v1alpha1`` Job.

Render, then dump, then apply: `render_manifest` builds plain data, `dump_yaml` turns it
into deterministic YAML, `build_manifest` carries both with the YAML's sha256, and only the
submission code performs the side effect. The field-by-field contract is docs/manifest.md.

Precondition: `jobs.core.findings.check` reports no error for the spec. The renderer does not
repeat the checks; on a spec that breaks them it still returns a manifest (never raises),
but that manifest is not meant to be submitted.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from clusters.kueue import (
    POD_GROUP_NAME_LABEL,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    QUEUE_NAME_LABEL,
)
from clusters.types import GPU_RESOURCE
from jobs.core.images import pinned_image
from jobs.core.spec import (
    DEFAULT_OBJECT_STORAGE_SIZE,
    CheckContext,
    JobSpec,
    as_items,
    as_text,
    field_of,
    header_index,
    is_count,
    job_namespace,
    role_match,
    role_selector,
    spec_roles,
)
from jobs.core.sshkeys import SSHKeyError, normalize_openssh_public_key
from jobs.core.startscript import (
    RAY_TEMP_DIR_ENV,
    TaskPlan,
    build_start_script,
    head_address,
    rank_offsets,
)

__all__ = [
    "ANNOTATION_DEPLOYMENT_PARAMETERS",
    "ANNOTATION_LAUNCH_LIST",
    "ANNOTATION_SPEC_SHA256",
    "API_VERSION",
    "KIND",
    "LABEL_JOB",
    "LABEL_TASK",
    "LABEL_TEAM",
    "Manifest",
    "build_manifest",
    "dump_yaml",
    "kueue_queue",
    "plan_tasks",
    "render_manifest",
    "start_scripts",
]

API_VERSION = "rlinf.io/v1alpha1"
KIND = "Job"
MANAGED_BY = "rlark"
CONTAINER_NAME = "main"
LABEL_TEAM = "rlinf.io/team"
LABEL_JOB = "rlinf.io/job"
LABEL_TASK = "rlinf.io/task"
ANNOTATION_LAUNCH_LIST = "rlinf.io/launch-list"
ANNOTATION_DEPLOYMENT_PARAMETERS = "rlinf.io/deployment-parameters"
ANNOTATION_SPEC_SHA256 = "rlark.io/spec-sha256"


def plan_tasks(spec: JobSpec, ctx: CheckContext) -> list[TaskPlan]:
    """Each role's place in the job: replicas, rank offset, the head's address."""
    roles = spec_roles(spec)
    head = header_index(spec)
    replicas = [role_match(role, ctx).count for role in roles]
    offsets = rank_offsets(replicas=replicas, head_index=head)
    job_name = as_text(field_of(spec, "name"))
    head_task = as_text(field_of(roles[head], "name")).lower() if head is not None else ""
    address = head_address(
        job_name=job_name,
        head_task=head_task,
        network_domain=as_text(field_of(spec, "network_domain")),
    )
    return [
        TaskPlan(
            job_name=job_name,
            role_name=as_text(field_of(role, "name")),
            task_name=as_text(field_of(role, "name")).lower(),
            head=index == head,
            replicas=replicas[index],
            rank_offset=offsets[index],
            total_nodes=sum(replicas),
            head_address=address,
        )
        for index, role in enumerate(roles)
    ]


def _ssh_keys(spec: JobSpec) -> list[str]:
    keys = []
    for key in as_items(field_of(spec, "ssh_keys", ())):
        try:
            keys.append(normalize_openssh_public_key(key))
        except SSHKeyError:
            keys.append(as_text(key).strip())
    return keys


def _env(role: object) -> list[dict[str, str]]:
    return [
        {"name": as_text(field_of(item, "name")), "value": as_text(field_of(item, "value"))}
        for item in as_items(field_of(role, "env", ()))
    ]


def start_scripts(spec: JobSpec, ctx: CheckContext) -> list[str]:
    """The start script of every task, in role order."""
    roles = spec_roles(spec)
    keys = _ssh_keys(spec)
    run_script = as_text(field_of(spec, "run_script"))
    return [
        build_start_script(
            plan=plan,
            ssh_keys=keys,
            prepare_script=as_text(field_of(role, "prepare_script")),
            run_script=run_script,
            ray_temp_dir=any(e["name"] == RAY_TEMP_DIR_ENV for e in _env(role)),
        )
        for role, plan in zip(roles, plan_tasks(spec, ctx), strict=True)
    ]


# -- the manifest ----------------------------------------------------------------------------


def _quantity(value: object) -> str:
    return value if isinstance(value, str) else ""


def _resources(role: object) -> dict[str, dict[str, str]]:
    limits: dict[str, str] = {}
    requests: dict[str, str] = {}
    for name in ("cpu", "memory"):
        pair = field_of(role, name, None)
        if request := _quantity(field_of(pair, "request")):
            requests[name] = request
        if limit := _quantity(field_of(pair, "limit")):
            limits[name] = limit
    extended: dict[str, str] = {}
    gpus = field_of(role, "gpus", 0)
    if is_count(gpus) and gpus > 0:
        extended[GPU_RESOURCE] = str(gpus)
    devices = [d for d in as_items(field_of(role, "devices", ())) if isinstance(d, (tuple, list))]
    for device in sorted((d for d in devices if len(d) == 2), key=lambda d: str(d[0])):
        name, count = device
        if isinstance(name, str) and is_count(count) and count > 0:
            extended[name] = str(count)
    limits.update(extended)
    requests.update(extended)
    return {key: value for key, value in (("limits", limits), ("requests", requests)) if value}


def _volume(index: int, mount: object) -> dict[str, Any]:
    name = f"mount-{index}"
    if field_of(mount, "kind") == "host_path":
        source = as_text(field_of(mount, "source"))
        return {"name": name, "hostPath": {"path": source, "type": "Directory"}}
    claim = {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": as_text(field_of(mount, "storage_class")),
        "resources": {
            "requests": {"storage": as_text(field_of(mount, "size")) or DEFAULT_OBJECT_STORAGE_SIZE}
        },
    }
    return {"name": name, "ephemeral": {"volumeClaimTemplate": {"spec": claim}}}


def _container(role: object, script: str) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": pinned_image(
            as_text(field_of(role, "image")), as_text(field_of(role, "image_digest"))
        ),
        "command": ["bash", "-c"],
        "args": [script],
    }
    if env := _env(role):
        container["env"] = env
    if resources := _resources(role):
        container["resources"] = resources
    mounts = as_items(field_of(role, "mounts", ()))
    if mounts:
        container["volumeMounts"] = [
            {"name": f"mount-{i}", "mountPath": as_text(field_of(m, "target"))}
            for i, m in enumerate(mounts)
        ]
    return container


def kueue_queue(spec: JobSpec, ctx: CheckContext) -> str | None:
    """The team's LocalQueue when the Job goes to a Kueue cluster (the Header role's cluster,
    where the Job is created), else None; `admission.no_queue` reports a team without one."""
    head = header_index(spec)
    if head is None:
        return None
    facts = ctx.clusters.get(as_text(field_of(spec_roles(spec)[head], "cluster")))
    return facts.kueue_queue(field_of(spec, "team")) if facts is not None else None


def _template_metadata(plan: TaskPlan, job_name: str, queue: str | None) -> dict[str, Any]:
    """A task's pod template metadata: RLark's labels, and on a Kueue cluster Kueue's plain pod
    group (every pod of the Job, the group's size the sum of all replicas)."""
    labels = {LABEL_JOB: job_name, LABEL_TASK: plan.task_name}
    if queue is None:
        return {"labels": labels}
    labels[QUEUE_NAME_LABEL] = queue
    labels[POD_GROUP_NAME_LABEL] = job_name
    return {"labels": labels,
            "annotations": {POD_GROUP_TOTAL_COUNT_ANNOTATION: str(plan.total_nodes)}}


def _task(role: object, plan: TaskPlan, script: str, job_name: str,
          queue: str | None) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "nodeSelector": dict(sorted(role_selector(role).items())),
        "containers": [_container(role, script)],
    }
    if mounts := as_items(field_of(role, "mounts", ())):
        pod_spec["volumes"] = [_volume(i, m) for i, m in enumerate(mounts)]
    return {
        "name": plan.task_name,
        "head": plan.head,
        "replicas": plan.replicas,
        "template": {"metadata": _template_metadata(plan, job_name, queue), "spec": pod_spec},
    }


def _job_spec(spec: JobSpec, ctx: CheckContext) -> dict[str, Any]:
    plans = plan_tasks(spec, ctx)
    scripts = start_scripts(spec, ctx)
    roles = spec_roles(spec)
    job_name = as_text(field_of(spec, "name"))
    section: dict[str, Any] = {"minAvailable": sum(plan.replicas for plan in plans)}
    if domain := as_text(field_of(spec, "network_domain")):
        section["networkDomain"] = domain
    if keys := _ssh_keys(spec):
        section["sshAuthorizedKeys"] = keys
    if log_dir := as_text(field_of(spec, "tensorboard_log_dir")):
        section["tensorboard"] = {"logDir": log_dir}
    queue = kueue_queue(spec, ctx)
    section["tasks"] = [
        _task(role, plan, script, job_name, queue)
        for role, plan, script in zip(roles, plans, scripts, strict=True)
    ]
    return section


def _record_id(value: object) -> str:
    return str(value) if is_count(value) else ""


def _render(spec: JobSpec, ctx: CheckContext) -> tuple[dict[str, Any], str]:
    """The manifest, and the YAML of its ``spec`` (hashed into an annotation)."""
    job_spec = _job_spec(spec, ctx)
    spec_yaml = dump_yaml(job_spec)
    deployment_parameters = field_of(spec, "deployment_parameters_id", None)
    metadata = {
        "name": as_text(field_of(spec, "name")),
        "namespace": job_namespace(spec, ctx),
        "labels": {
            "app.kubernetes.io/managed-by": MANAGED_BY,
            LABEL_TEAM: as_text(field_of(spec, "team")),
        },
        "annotations": {
            ANNOTATION_LAUNCH_LIST: _record_id(field_of(spec, "launch_list_id", None)),
            ANNOTATION_DEPLOYMENT_PARAMETERS: _record_id(deployment_parameters),
            ANNOTATION_SPEC_SHA256: _sha256(spec_yaml),
        },
    }
    manifest = {"apiVersion": API_VERSION, "kind": KIND, "metadata": metadata, "spec": job_spec}
    return manifest, spec_yaml


def render_manifest(spec: JobSpec, ctx: CheckContext) -> dict[str, Any]:
    """The Job as plain data (dicts in manifest key order, lists, str, int, bool)."""
    return _render(spec, ctx)[0]


# -- YAML ------------------------------------------------------------------------------------

# Plain scalars another YAML reader (Go's yaml.v2, used by kubectl) could take for a number,
# a boolean or null: always quoted, even where PyYAML's own resolver would not need it.
_AMBIGUOUS = re.compile(
    r"[-+]?\.?[0-9].*|[-+]?\.(?:inf|Inf|INF|nan|NaN|NAN)|(?i:y|n|yes|no|true|false|on|off|null)|[~=]|<<",
    re.DOTALL,
)
# Characters every YAML reader and both emitters keep as they are in a plain, quoted or
# literal scalar. Tabs, control characters, YAML's other line breaks (\r, \x85, \u2028,
# \u2029), the byte-order mark, characters beyond U+FFFF (libyaml escapes them) and lone
# surrogates are written as escapes, in double quotes.
_PRINTABLE = "\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd"
_PRINTABLE_LINE = re.compile(f"[{_PRINTABLE}]*")
_PRINTABLE_LINES = re.compile(f"[{_PRINTABLE}\n]*")
_BLANK_BEFORE_BREAK = re.compile(r" (?:\n|\Z)")

# libyaml's emitter when PyYAML has it (ten times faster), else PyYAML's own: `_represent_str`
# decides every style that matters, and both emitters then write the same bytes.
_BaseDumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _make_dumper(base: type[yaml.SafeDumper]) -> type[yaml.SafeDumper]:
    """A safe dumper on `base`: no tags, no anchors, RLark's string styles."""

    class Dumper(base):  # type: ignore[valid-type,misc]
        def ignore_aliases(self, data: Any) -> bool:
            return True

    Dumper.add_representer(str, _represent_str)
    return Dumper


def _literal_allowed(text: str) -> bool:
    """Printable lines, no blank at a line's end, and at most one final line break (keeping
    more needs ``|+``, after which emitters may end the document with ``...``)."""
    body = text.removesuffix("\n")
    return (
        bool(body)
        and not body.endswith("\n")
        and _PRINTABLE_LINES.fullmatch(text) is not None
        and _BLANK_BEFORE_BREAK.search(text) is None
    )


def _string_style(data: str) -> str | None:
    """Literal block for clean multi-line text, double quotes for anything with special
    characters, single quotes where a reader could retype a plain scalar, else plain."""
    if "\n" in data:
        return "|" if _literal_allowed(data) else '"'
    if _PRINTABLE_LINE.fullmatch(data) is None:
        return '"'
    if _AMBIGUOUS.fullmatch(data):
        return "'"
    return None


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=_string_style(data))


_Dumper = _make_dumper(_BaseDumper)
_PurePythonDumper = _make_dumper(yaml.SafeDumper)


def _dump(data: Mapping[str, Any], dumper: type[yaml.SafeDumper]) -> str:
    return yaml.dump(
        data,
        Dumper=dumper,
        sort_keys=False,
        default_flow_style=False,
        allow_unicode=True,
        width=1 << 30,
    )


def dump_yaml(manifest: Mapping[str, Any]) -> str:
    """Deterministic block-style YAML of `manifest`: one document, keys in insertion order."""
    try:
        return _dump(manifest, _Dumper)
    except UnicodeEncodeError:
        # Lone surrogates (only in drafts the engine rejects): libyaml cannot take them,
        # PyYAML's emitter writes them as escapes.
        return _dump(manifest, _PurePythonDumper)


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Manifest:
    """A rendered Job: its data, its YAML, and the sha256 of that YAML (UTF-8)."""

    data: dict[str, Any]
    yaml: str
    sha256: str


def _indented(text: str) -> str:
    return "\n".join(f"  {line}" if line else line for line in text.split("\n"))


def build_manifest(spec: JobSpec, ctx: CheckContext) -> Manifest:
    """Render and dump in one step (the value submission freezes into the run record).

    The ``spec`` part is dumped once: block-style YAML nests by indentation alone, so the
    whole document is the rest of it followed by ``spec:`` and that YAML indented by two
    (equal, byte for byte, to `dump_yaml` of the whole; the tests hold it so).
    """
    data, spec_yaml = _render(spec, ctx)
    head = dump_yaml({key: value for key, value in data.items() if key != "spec"})
    text = f"{head}spec:\n{_indented(spec_yaml)}"
    return Manifest(data=data, yaml=text, sha256=_sha256(text))
