"""Step 4: the review checklist beside the exact YAML, and the YAML's minimal highlighting.

The checklist is read from the rendered manifest itself (what will be submitted), with the
draft and the verifications on record beside it; the findings say whether each item holds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext as _

from clusters.models import VerificationState
from jobs.core.findings.capacity import role_preflights
from jobs.core.spec import CheckContext, JobSpec, RoleSpec, role_match
from jobs.wizard.fields import FindingView
from jobs.wizard.presenters import VERDICT_LABELS, finding_url

__all__ = ["FindingGroup", "Review", "TaskReview", "build_review", "highlight_yaml"]

COMPATIBILITY_FIELD = "image_compatibility_confirmed"


@dataclass
class LinkedFinding:
    finding: FindingView
    url: str


@dataclass
class FindingGroup:
    title: str
    findings: list[LinkedFinding]


@dataclass
class TaskReview:
    index: int
    role: str
    task_name: str
    head: bool
    node_selector: list[str]
    replicas: int
    verification_state: str
    verified_nodes: int | None
    verification_current: bool
    image: str
    env: list[str]
    limits: list[str]
    requests: list[str]
    mounts: list[str]
    prepare_script: str
    errors: int
    # The role's pre-flight (SPEC 15, `RolePreflight.as_dict()`); None when not judged.
    capacity: Mapping[str, Any] | None = None

    @property
    def capacity_ok(self) -> bool:
        return bool(self.capacity) and self.capacity["verdict"] == "fits_now"  # type: ignore[index]

    @property
    def capacity_label(self) -> str:
        verdict = self.capacity["verdict"] if self.capacity else ""
        return str(VERDICT_LABELS.get(verdict, verdict))

    @property
    def verified_ok(self) -> bool:
        return self.verification_state == VerificationState.APPROVED and self.verification_current

    @property
    def verification_label(self) -> str:
        """The state as people read it, in the page's language (never compared)."""
        return _state_label(self.verification_state)

    @property
    def single_replica(self) -> bool:
        return self.replicas == 1

    @property
    def no_errors(self) -> bool:
        return self.errors == 0


@dataclass
class Review:
    name: str
    namespace: str
    name_errors: int
    tasks: list[TaskReview]
    images: list[str]
    compatibility_confirmed: bool
    head: TaskReview | None
    run_script: str
    tensorboard_log_dir: str
    network_domain: str
    ssh_key_names: list[str]
    groups: list[FindingGroup] = field(default_factory=list)
    compatibility_findings: list[FindingView] = field(default_factory=list)
    has_errors: bool = False

    @property
    def images_differ(self) -> bool:
        return len(self.images) > 1

    @property
    def name_ok(self) -> bool:
        return self.name_errors == 0


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _mounts(pod: Mapping[str, Any], container: Mapping[str, Any]) -> list[str]:
    volumes = {v.get("name"): v for v in _list(pod.get("volumes")) if isinstance(v, dict)}
    shown = []
    for mount in _list(container.get("volumeMounts")):
        volume = volumes.get(mount.get("name"), {})
        if "hostPath" in volume:
            source = _("host directory %(path)s") % {"path": volume["hostPath"].get("path", "")}
        else:
            claim = _dict(_dict(_dict(volume.get("ephemeral")).get("volumeClaimTemplate"))
                          .get("spec"))
            source = _("object storage %(class)s") % {"class": claim.get("storageClassName", "")}
        shown.append(f"{mount.get('mountPath', '')} ← {source}")
    return shown


def _task_review(index: int, task: Mapping[str, Any], role: RoleSpec, ctx: CheckContext,
                 findings: Sequence[FindingView],
                 capacity: Mapping[str, Any] | None = None) -> TaskReview:
    pod = _dict(_dict(task.get("template")).get("spec"))
    container = _dict((_list(pod.get("containers")) or [{}])[0])
    resources = _dict(container.get("resources"))
    selector = {k: v for k, v in role.selector if isinstance(k, str) and isinstance(v, str)}
    view = ctx.verification_for(role.cluster, selector) if role.cluster and selector else None
    match = role_match(role, ctx)
    return TaskReview(
        index=index, role=role.name, task_name=str(task.get("name", "")),
        head=task.get("head") is True, replicas=int(task.get("replicas") or 0),
        node_selector=[f"{k}={v}" for k, v in _dict(pod.get("nodeSelector")).items()],
        verification_state=view.state if view else "",
        verified_nodes=len(view.node_signature) if view else None,
        verification_current=view is not None
        and sorted(view.node_signature) == sorted(match.signature()),
        image=str(container.get("image", "")),
        env=[f"{e.get('name')}={e.get('value')}" for e in _list(container.get("env"))],
        limits=[f"{k}: {v}" for k, v in _dict(resources.get("limits")).items()],
        requests=[f"{k}: {v}" for k, v in _dict(resources.get("requests")).items()],
        mounts=_mounts(pod, container), prepare_script=role.prepare_script,
        errors=sum(1 for f in findings if f.is_error and f.place.role == index),
        capacity=capacity,
    )


def _groups(findings: Sequence[FindingView], roles: Sequence[RoleSpec],
            step_url: Callable[[int, int | None], str]) -> list[FindingGroup]:
    by_role: dict[int | None, list[LinkedFinding]] = {}
    for finding in findings:
        linked = LinkedFinding(finding, finding_url(finding, step_url=step_url))
        by_role.setdefault(finding.place.role, []).append(linked)
    groups = []
    if None in by_role:
        groups.append(FindingGroup(_("Job"), by_role[None]))
    for index, role in enumerate(roles):
        if index in by_role:
            groups.append(FindingGroup(_("Role %(name)s") % {"name": role.name or index + 1},
                                       by_role[index]))
    return groups


def build_review(*, spec: JobSpec, ctx: CheckContext, manifest: Mapping[str, Any],
                 findings: Sequence[FindingView], ssh_key_names: Sequence[str],
                 step_url: Callable[[int, int | None], str]) -> Review:
    tasks = _list(_dict(manifest.get("spec")).get("tasks"))
    capacity = [r.as_dict() for r in role_preflights(spec, ctx)]
    reviews = [
        _task_review(index, _dict(task), role, ctx, findings,
                     capacity[index] if index < len(capacity) else None)
        for index, (task, role) in enumerate(zip(tasks, spec.roles, strict=False))
    ]
    metadata = _dict(manifest.get("metadata"))
    return Review(
        name=str(metadata.get("name", "")), namespace=str(metadata.get("namespace", "")),
        name_errors=sum(1 for f in findings if f.is_error and f.field == "name"),
        tasks=reviews,
        images=list(dict.fromkeys(t.image for t in reviews if t.image)),
        compatibility_confirmed=spec.image_compatibility_confirmed,
        head=next((t for t in reviews if t.head), None),
        run_script=spec.run_script, tensorboard_log_dir=spec.tensorboard_log_dir,
        network_domain=spec.network_domain, ssh_key_names=list(ssh_key_names),
        groups=_groups(findings, spec.roles, step_url),
        compatibility_findings=[f for f in findings if f.field == COMPATIBILITY_FIELD],
        has_errors=any(f.is_error for f in findings),
    )


# -- highlighting ----------------------------------------------------------------------------

_KEY = re.compile(r"^(?P<indent>\s*(?:- )*)(?P<key>[^\s#'\"-][^:]*?|\"[^\"]*\"|'[^']*'):"
                  r"(?P<rest>(?:\s.*)?)$")
_ITEM = re.compile(r"^(?P<indent>\s*- )(?P<rest>.*)$")
_BLOCK = re.compile(r"^\s*[|>][-+0-9]*\s*$")


def _span(css: str, text: str) -> str:
    return f'<span class="{css}">{escape(text)}</span>' if text else ""


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def highlight_yaml(text: str) -> SafeString:
    """HTML for `text` with keys, values and block scalars marked (everything escaped).

    Lines inside a block scalar (the start scripts) are shown as one string, never parsed.
    """
    out: list[str] = []
    block_indent: int | None = None
    for line in text.split("\n"):
        if block_indent is not None and (not line.strip() or _indent(line) > block_indent):
            out.append(_span("y-str", line) or "")
            continue
        block_indent = None
        key = _KEY.match(line)
        if key is not None:
            rest = key.group("rest")
            css = "y-str" if _BLOCK.match(rest) is None else "y-block"
            out.append(escape(key.group("indent")) + _span("y-key", key.group("key")) + ":"
                       + _span(css, rest))
            if css == "y-block":
                block_indent = len(key.group("indent"))
            continue
        item = _ITEM.match(line)
        if item is not None:
            rest = item.group("rest")
            block = _BLOCK.match(rest) is not None
            out.append(escape(item.group("indent")) + _span("y-block" if block else "y-str", rest))
            block_indent = _indent(line) if block else None
            continue
        out.append(escape(line))
    return mark_safe("\n".join(out))  # noqa: S308 - every piece above is escaped


def _state_label(state: str) -> str:
    """A verification state as people read it, in the page's language."""
    return str(VerificationState(state).label) if state in VerificationState.values else state

