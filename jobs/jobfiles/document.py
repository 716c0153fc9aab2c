"""A draft as a job file's `spec`, the file's text, and what differs between two specs.

The spec is the draft body as the API answers it (`RoleOutSerializer`: selectors and devices
as objects unless a key repeats), in the serializer's key order, with empty optional values left
out (absent and empty store the same). Applying `spec_of(job)` back gives the same rows, so the
same manifest. The YAML is written by the manifest renderer's dumper: deterministic, and every
string that another reader could retype (``'16'``, ``'on'``) is quoted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from jobs.core.jobfile import API_VERSION, KIND
from jobs.core.render import dump_yaml
from jobs.drafts.serializers import RoleOutSerializer
from jobs.jobfiles.schema import spec_field_names
from jobs.models import Job, Role

__all__ = ["document_of", "dump_job_file", "spec_changes", "spec_of"]

# Always written (even when empty or default): what a reader looks for first.
_ROLE_ALWAYS = ("name", "gpus")
_SPEC_ALWAYS = ("task_type", "roles")
_MOUNT_KEYS = ("kind", "source", "target", "storage_class", "size")


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {} or value is False


def _mount(mount: Any) -> Any:
    if not isinstance(mount, Mapping):
        return mount
    return {k: mount[k] for k in _MOUNT_KEYS
            if k in mount and (k in ("kind", "target") or not _empty(mount[k]))}


def _role(role: Role) -> dict[str, Any]:
    data = RoleOutSerializer(role).data
    entry = {k: v for k, v in data.items() if k in _ROLE_ALWAYS or not _empty(v)}
    if isinstance(entry.get("mounts"), list):
        entry["mounts"] = [_mount(m) for m in entry["mounts"]]
    if isinstance(entry.get("cpu"), Mapping) or isinstance(entry.get("memory"), Mapping):
        for key in ("cpu", "memory"):
            if isinstance(entry.get(key), Mapping):
                entry[key] = {k: entry[key][k] for k in ("request", "limit") if k in entry[key]}
    return _plain(entry)


def _plain(value: Any) -> Any:
    """ReturnDict/OrderedDict and tuples as plain dicts and lists (for the YAML dumper)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def spec_of(job: Job, roles: Iterable[Role] | None = None) -> dict[str, Any]:
    """The job-file spec of a draft (stored, or `draft_preview`'s unsaved one with `roles`)."""
    listed = list(job.roles.order_by("position") if roles is None else roles)
    values: dict[str, Any] = {
        "task_type": job.task_type,
        "header_role": job.header_role,
        "roles": [_role(role) for role in listed],
        "network_domain": job.network_domain,
        "ssh_keys": [str(n) for n in job.ssh_key_names or []],
        "run_script": job.run_script,
        "tensorboard_log_dir": job.tensorboard_log_dir,
        "image_compatibility_confirmed": job.image_compatibility_confirmed,
        "launch_list": job.launch_list_id,
        "deployment_parameters": job.deployment_parameters_id,
    }
    return {name: values[name] for name in spec_field_names()
            if name in _SPEC_ALWAYS or not _empty(values[name])}


def document_of(*, name: str, team: str, spec: Mapping[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": name, "team": team}, "spec": dict(spec)}


def dump_job_file(document: Mapping[str, Any], *, comment: Sequence[str]) -> str:
    """The file's text: `comment` lines as ``# ...``, then the document (deterministic)."""
    head = "".join(f"# {line}\n" if line else "#\n" for line in comment)
    return head + dump_yaml(document)


# --- what changed -----------------------------------------------------------------------------


def _change(path: str, kind: str, old: Any, new: Any) -> dict[str, Any]:
    return {"path": path, "change": kind, "from": old, "to": new}


def _role_key(role: Any) -> str:
    return str(role.get("name", "")).lower() if isinstance(role, Mapping) else ""


def _pair_roles(old: Sequence[Any], new: Sequence[Any]) -> dict[int, int]:
    """new index -> old index: the same name ignoring case, else the same free position (as
    `jobs.drafts.services` pairs roles when it saves them)."""
    by_name = {_role_key(r): i for i, r in enumerate(old) if _role_key(r)}
    pairs: dict[int, int] = {}
    for index, role in enumerate(new):
        same = by_name.get(_role_key(role))
        if same is not None and same not in pairs.values():
            pairs[index] = same
    for index in range(len(new)):
        if index not in pairs and index < len(old) and index not in pairs.values():
            pairs[index] = index
    return pairs


def _field_changes(prefix: str, old: Mapping[str, Any], new: Mapping[str, Any],
                   order: Sequence[str]) -> list[dict[str, Any]]:
    keys = [k for k in order if k in old or k in new]
    keys += [k for k in [*new, *old] if k not in keys]
    found = []
    for key in dict.fromkeys(keys):
        before, after = old.get(key), new.get(key)
        if before != after and not (_empty(before) and _empty(after)):
            found.append(_change(f"{prefix}.{key}", "changed", before, after))
    return found


_ROLE_ORDER = ("name", "cluster", "selector", "gpus", "devices", "cpu", "memory", "image",
               "image_digest", "prepare_script", "env", "mounts")


def spec_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Field by field, in the file's order: ``{path, change, from, to}``; roles paired by name."""
    order = spec_field_names()
    found = _field_changes("spec", {k: v for k, v in old.items() if k != "roles"},
                           {k: v for k, v in new.items() if k != "roles"},
                           [k for k in order if k != "roles"])
    old_roles = list(old.get("roles") or [])
    new_roles = list(new.get("roles") or [])
    pairs = _pair_roles(old_roles, new_roles)
    role_changes: list[dict[str, Any]] = []
    for index, role in enumerate(new_roles):
        if index not in pairs:
            role_changes.append(_change(f"spec.roles[{index}]", "added", None,
                                        role.get("name") if isinstance(role, Mapping) else role))
            continue
        before = old_roles[pairs[index]]
        if isinstance(before, Mapping) and isinstance(role, Mapping):
            role_changes.extend(_field_changes(f"spec.roles[{index}]", before, role, _ROLE_ORDER))
    for index, role in enumerate(old_roles):
        if index not in pairs.values():
            role_changes.append(_change(f"spec.roles[{index}]", "removed",
                                        role.get("name") if isinstance(role, Mapping) else role,
                                        None))
    moved = [i for i, j in pairs.items() if i != j]
    if moved and not role_changes:
        role_changes.append(_change("spec.roles", "changed",
                                    [_role_key(r) for r in old_roles],
                                    [_role_key(r) for r in new_roles]))
    position = order.index("roles")
    before_roles = [c for c in found if order.index(c["path"].split(".")[1]) < position]
    after_roles = [c for c in found if c not in before_roles]
    return before_roles + role_changes + after_roles
