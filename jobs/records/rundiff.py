"""A semantic diff of two runs: what changed, by role and field, read from the frozen manifests.

The raw YAML diff of two runs is mostly noise (the job name is in labels, addresses and the
start script); here each manifest's own job name is replaced by one placeholder first, then
each Task (one per role) is compared field by field: image, GPUs, devices, CPU, memory,
selector, replicas, prepare and run scripts, env, mounts, head flag. Pure functions of the two
YAML texts; the raw diff stays one click away.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

__all__ = ["FieldChange", "RoleChange", "RunDiff", "semantic_diff"]

NAME_PLACEHOLDER = "<job name>"
GPU = "nvidia.com/gpu"
_SCRIPT = (r"cat > \"\$\{{RLARK_SCRIPT_DIR\}}/{file}\" <<'(?P<tag>\w+)'\n"
           r"(?P<body>.*?)\n\s*(?P=tag)\n")
_PREPARE = re.compile(_SCRIPT.format(file="prepare.sh"), re.S)
_RUN = re.compile(_SCRIPT.format(file="run.sh"), re.S)


@dataclass(frozen=True)
class FieldChange:
    field: str
    old: str
    new: str
    lines: tuple[str, ...] = ()  # a short unified diff for scripts

    def as_dict(self) -> dict[str, Any]:
        return {"field": self.field, "from": self.old, "to": self.new, "lines": list(self.lines)}


@dataclass(frozen=True)
class RoleChange:
    role: str
    change: str  # "changed" | "added" | "removed"
    fields: tuple[FieldChange, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"role": self.role, "change": self.change,
                "fields": [f.as_dict() for f in self.fields]}


@dataclass(frozen=True)
class RunDiff:
    job: tuple[FieldChange, ...] = ()
    roles: tuple[RoleChange, ...] = field(default_factory=tuple)

    @property
    def empty(self) -> bool:
        return not self.job and not self.roles

    def as_dict(self) -> dict[str, Any]:
        return {"job": [f.as_dict() for f in self.job], "roles": [r.as_dict() for r in self.roles]}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _load(text: str, name: str) -> dict[str, Any]:
    """The manifest with its own job name replaced (the name's own changes are left out)."""
    document = yaml.safe_load(text.replace(name, NAME_PLACEHOLDER) if name else text)
    return _dict(document)


def _container(task: Mapping[str, Any]) -> dict[str, Any]:
    pod = _dict(_dict(task.get("template")).get("spec"))
    return _dict((_list(pod.get("containers")) or [{}])[0])


def _script(pattern: re.Pattern[str], task: Mapping[str, Any]) -> str:
    text = "\n".join(str(a) for a in _list(_container(task).get("args")))
    found = pattern.search(text)
    return found.group("body").strip("\n") if found else ""


def _resource(kind: str, name: str) -> Callable[[Mapping[str, Any]], Any]:
    def read(task: Mapping[str, Any]) -> Any:
        resources = _dict(_container(task).get("resources"))
        return _dict(resources.get(kind)).get(name)
    return read


def _both(name: str) -> Callable[[Mapping[str, Any]], Any]:
    def read(task: Mapping[str, Any]) -> Any:
        resources = _dict(_container(task).get("resources"))
        values = {kind: _dict(resources.get(kind)).get(name) for kind in ("requests", "limits")}
        return {k: v for k, v in values.items() if v is not None}
    return read


def _devices(task: Mapping[str, Any]) -> dict[str, Any]:
    limits = _dict(_dict(_container(task).get("resources")).get("limits"))
    return {k: v for k, v in limits.items() if k.startswith("rlinf.io/")}


def _mounts(task: Mapping[str, Any]) -> list[str]:
    pod = _dict(_dict(task.get("template")).get("spec"))
    volumes = {v.get("name"): v for v in _list(pod.get("volumes")) if isinstance(v, dict)}
    shown = []
    for mount in _list(_container(task).get("volumeMounts")):
        volume = {k: v for k, v in _dict(volumes.get(mount.get("name"))).items() if k != "name"}
        shown.append(f"{mount.get('mountPath', '')} ← {json.dumps(volume, sort_keys=True)}")
    return sorted(shown)


FIELDS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "image": lambda task: _container(task).get("image"),
    "gpus": _resource("limits", GPU),
    "devices": _devices,
    "cpu": _both("cpu"),
    "memory": _both("memory"),
    "selector": lambda task: _dict(_dict(_dict(task.get("template")).get("spec"))
                                   .get("nodeSelector")),
    "replicas": lambda task: task.get("replicas"),
    "head": lambda task: task.get("head") is True,
    "prepare_script": lambda task: _script(_PREPARE, task),
    "run_script": lambda task: _script(_RUN, task),
    "env": lambda task: {e.get("name"): e.get("value")
                         for e in _list(_container(task).get("env")) if isinstance(e, dict)},
    "mounts": _mounts,
}
SCRIPTS = ("prepare_script", "run_script")


def _shown(value: Any) -> str:
    if value is None or value == {} or value == []:
        return "—"
    if isinstance(value, dict):
        return ", ".join(f"{k}={v}" for k, v in sorted(value.items()))
    if isinstance(value, list):
        return "; ".join(str(v) for v in value)
    return str(value)


def _change(name: str, old: Any, new: Any) -> FieldChange:
    if name in SCRIPTS:
        lines = tuple(difflib.unified_diff(str(old).splitlines(), str(new).splitlines(),
                                           lineterm="", n=1))[2:]
        return FieldChange(name, _shown(old), _shown(new), lines)
    return FieldChange(name, _shown(old), _shown(new))


def _task_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[FieldChange, ...]:
    return tuple(_change(name, read(old), read(new)) for name, read in FIELDS.items()
                 if read(old) != read(new))


def _tasks(manifest: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    tasks = _list(_dict(manifest.get("spec")).get("tasks"))
    return {str(t.get("name")): t for t in tasks if isinstance(t, dict)}


def _job_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> tuple[FieldChange, ...]:
    before = {k: v for k, v in _dict(old.get("spec")).items() if k != "tasks"}
    after = {k: v for k, v in _dict(new.get("spec")).items() if k != "tasks"}
    return tuple(FieldChange(key, _shown(before.get(key)), _shown(after.get(key)))
                 for key in sorted(before.keys() | after.keys())
                 if before.get(key) != after.get(key))


def semantic_diff(*, old_yaml: str, old_name: str, new_yaml: str, new_name: str) -> RunDiff:
    """What changed from the old run to the new one, by role (Task) and field."""
    old, new = _load(old_yaml, old_name), _load(new_yaml, new_name)
    old_tasks, new_tasks = _tasks(old), _tasks(new)
    roles: list[RoleChange] = []
    for name, task in new_tasks.items():
        if name not in old_tasks:
            roles.append(RoleChange(name, "added"))
        elif changes := _task_changes(old_tasks[name], task):
            roles.append(RoleChange(name, "changed", changes))
    roles.extend(RoleChange(name, "removed") for name in old_tasks if name not in new_tasks)
    return RunDiff(job=_job_changes(old, new), roles=tuple(roles))
