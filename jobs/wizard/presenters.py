"""What the wizard's templates show, built from a draft, its evaluation and the inventory.

Pure functions over values (no queries): the views load, these shape, templates render.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from django.utils.translation import gettext_lazy as _

from clusters.models import VerificationState
from clusters.types import ClusterCount
from jobs.core.spec import SelectorMatch, VerificationView
from jobs.wizard.fields import (
    STEP_COMMON,
    STEP_REVIEW,
    STEP_ROLES,
    STEP_WORKERS,
    FieldMap,
    FieldState,
    FindingView,
)
from jobs.wizard.selectors import ClusterOffer

__all__ = [
    "STEP_TITLES",
    "MatchView",
    "RolePanel",
    "RowCounts",
    "StepLink",
    "TabLink",
    "VerificationPanel",
    "match_view",
    "role_panel",
    "role_paths",
    "shown_rows",
    "step_links",
    "tab_links",
    "verification_panel",
]

STEP_TITLES = {
    STEP_ROLES: _("Roles and resources"),
    STEP_WORKERS: _("Worker configuration"),
    STEP_COMMON: _("Common configuration"),
    STEP_REVIEW: _("YAML preview and submit"),
}
NODES_SHOWN = 50
BLANK_ENV_ROWS = 3
BLANK_MOUNT_ROWS = 2
# Stands for the row number in a row template; the copy a user adds gets its place on the page.
NEW_ROW = "__ROW__"


# -- navigation ------------------------------------------------------------------------------


@dataclass(frozen=True)
class StepLink:
    number: int
    title: str
    errors: int
    current: bool
    enabled: bool


def step_links(*, current: int, findings: Sequence[FindingView], enabled: bool = True,
               ) -> list[StepLink]:
    """The four steps with the error count of each (a new, unsaved draft has only step 1)."""
    return [
        StepLink(
            number=number, title=str(title), current=number == current,
            errors=sum(1 for f in findings if f.is_error and f.place.step == number),
            enabled=enabled or number == STEP_ROLES,
        )
        for number, title in STEP_TITLES.items()
    ]


@dataclass(frozen=True)
class TabLink:
    index: int
    name: str
    errors: int
    current: bool
    header: bool


def tab_links(*, names: Sequence[str], current: int, header: int | None,
              findings: Sequence[FindingView]) -> list[TabLink]:
    return [
        TabLink(
            index=index, name=name, current=index == current, header=index == header,
            errors=sum(
                1 for f in findings
                if f.is_error and f.place.step == STEP_WORKERS and f.place.role == index
            ),
        )
        for index, name in enumerate(names)
    ]


# -- step 2: one role ------------------------------------------------------------------------


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def _pairs(value: Any) -> list[tuple[str, str]]:
    if isinstance(value, Mapping):
        value = list(value.items())
    if not isinstance(value, (list, tuple)):
        return []
    return [
        (_text(item[0]), _text(item[1]))
        for item in value if isinstance(item, (list, tuple)) and len(item) == 2
    ]


def _rows(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, (list, tuple)):
        return []
    return [item for item in value if isinstance(item, Mapping)]


@dataclass(frozen=True)
class RowCounts:
    """How many rows of each list the tab shows (stored rows first, then the blank ones)."""

    devices: int
    env: int
    mounts: int


def shown_rows(body: Mapping[str, Any], offer: ClusterOffer) -> RowCounts:
    """The rows a tab renders for `body`: its own rows, a row per device the cluster offers
    that the role does not ask for yet, and blank env and mount rows to type into."""
    devices = _pairs(body.get("devices"))
    taken = {name for name, _count in devices}
    return RowCounts(
        devices=len(devices) + sum(1 for name in offer.device_names if name not in taken),
        env=len(_rows(body.get("env"))) + BLANK_ENV_ROWS,
        mounts=len(_rows(body.get("mounts"))) + BLANK_MOUNT_ROWS,
    )


def role_paths(index: int, rows: RowCounts) -> list[str]:
    """Every field path the step 2 panel of role `index` renders. Rows are numbered by their
    place on the page, blank ones included, so an unsaved row has its own path (and findings)."""
    base = f"roles[{index}]"
    paths = [base] + [f"{base}.{name}" for name in (
        "cluster", "selector", "gpus", "devices", "image", "image_digest", "prepare_script",
        "env", "mounts", "cpu.request", "cpu.limit", "memory.request", "memory.limit",
    )]  # fmt: skip
    paths += [f"{base}.devices[{j}]" for j in range(rows.devices)]
    for j in range(rows.env):
        paths += [f"{base}.env[{j}].name", f"{base}.env[{j}].value"]
    for j in range(rows.mounts):
        paths += [f"{base}.mounts[{j}].{part}"
                  for part in ("kind", "source", "target", "storage_class", "size")]
    return paths


@dataclass(frozen=True)
class LabelOption:
    value: str
    count: int
    selected: bool
    free_gpu: int | None = None  # free GPUs of the nodes carrying it (None: unknown, no GPUs)


@dataclass(frozen=True)
class LabelSelect:
    key: str
    id: str
    options: tuple[LabelOption, ...]
    selected: bool


@dataclass(frozen=True)
class DeviceRow:
    name: str
    count: str
    field: FieldState
    offered: bool
    maximum: int | None


@dataclass(frozen=True)
class EnvRow:
    name: str
    value: str
    name_field: FieldState
    value_field: FieldState


@dataclass(frozen=True)
class MountRow:
    kind: str
    source: str
    target: str
    storage_class: str
    size: str
    kind_field: FieldState
    source_field: FieldState
    target_field: FieldState
    storage_class_field: FieldState
    size_field: FieldState
    storage_choices: tuple[str, ...]


@dataclass(frozen=True)
class NodeRow:
    cluster: str
    name: str
    namespace: str
    foreign: bool
    ready: bool


@dataclass
class MatchView:
    """The live, read-only result of a role's selector against the global inventory."""

    index: int
    cluster: str
    selector_given: bool
    count: int
    nodes: list[NodeRow]
    hidden: int
    foreign_count: int
    gpu_max: int | None
    devices_max: dict[str, int]
    confining: list[str]
    is_header: bool
    selector: FieldState
    gpus: FieldState
    per_cluster: tuple[ClusterCount, ...] = ()
    # The global node list filtered by the selector: every match, a page at a time.
    all_nodes_query: str = ""
    # The role's pre-flight (SPEC 15, `RolePreflight.as_dict()`) and its verdict's words.
    capacity: Mapping[str, Any] | None = None

    @property
    def capacity_label(self) -> str:
        verdict = self.capacity["verdict"] if self.capacity else ""
        return str(VERDICT_LABELS.get(verdict, verdict))


VERDICT_LABELS = {
    "fits_now": _("Fits now"),
    "will_queue": _("Will queue"),
    "never_fits": _("Never fits"),
    "unknown": _("Capacity unknown"),
}


def match_view(*, index: int, cluster: str, selector: Mapping[str, str], match: SelectorMatch,
               is_header: bool, fields: FieldMap,
               capacity: Mapping[str, Any] | None = None) -> MatchView:
    foreign = [n for n in match.nodes if n.cluster != cluster]
    local = [n for n in match.nodes if n.cluster == cluster]
    shown = (foreign + local)[:NODES_SHOWN]
    conditions = ",".join(f"{k}={v}" for k, v in sorted(selector.items()))
    return MatchView(
        index=index, cluster=cluster, selector_given=bool(selector), count=match.count,
        per_cluster=match.per_cluster(), all_nodes_query=urlencode({"selector": conditions}),
        nodes=[
            NodeRow(cluster=n.cluster, name=n.name, namespace=n.namespace,
                    foreign=n.cluster != cluster, ready=n.ready)
            for n in shown
        ],
        hidden=match.count - len(shown), foreign_count=len(foreign),
        gpu_max=match.gpu_max() if match.count else None, devices_max=match.devices_max(),
        confining=[f"{k}={v}" for k, v in match.confining_conditions(cluster)],
        is_header=is_header, capacity=capacity,
        selector=fields.get(f"roles[{index}].selector"), gpus=fields.get(f"roles[{index}].gpus"),
    )


@dataclass(frozen=True)
class VerificationPanel:
    index: int
    state: str  # "" when none is on record
    verification_id: int | None
    current: bool  # the snapshot still equals today's matches
    can_request: bool

    @property
    def state_label(self) -> str:
        labels = dict(VerificationState.choices)
        return str(labels.get(self.state, self.state))


def verification_panel(*, index: int, view: VerificationView | None, match: SelectorMatch,
                       placeable: bool) -> VerificationPanel:
    """The verification on record for the role's (cluster, selector), and whether to offer
    a new request (none on record, rejected, stale or drifted; never while one is pending)."""
    state = view.state if view is not None else ""
    current = view is not None and sorted(view.node_signature) == sorted(match.signature())
    approved_now = state == "approved" and current
    return VerificationPanel(
        index=index, state=state, verification_id=view.id if view is not None else None,
        current=current,
        can_request=placeable and state != "pending" and not approved_now,
    )


@dataclass
class RolePanel:
    index: int
    name: str
    is_header: bool
    cluster: str
    cluster_choices: list[str]
    label_selects: list[LabelSelect]
    selector_text: str
    gpus: str
    devices: list[DeviceRow]
    image: str
    image_digest: str
    prepare_script: str
    env: list[EnvRow]
    mounts: list[MountRow]
    # Blank rows for "Add a variable" / "Add a mount" (rlark/behaviours.js numbers the copies).
    env_template: EnvRow
    mount_template: MountRow
    cpu_request: str
    cpu_limit: str
    memory_request: str
    memory_limit: str
    storage_classes: tuple[str, ...]
    fs: dict[str, FieldState]  # this role's fields by short name (templates cannot index paths)
    # Every field whose findings the live panel refreshes out of band (all but the selector,
    # whose findings sit inside the panel itself).
    live_fields: list[FieldState]
    match: MatchView
    verification: VerificationPanel
    general: list[FindingView] = field(default_factory=list)


def _label_selects(index: int, pairs: list[tuple[str, str]], offer: ClusterOffer,
                   ) -> tuple[list[LabelSelect], list[tuple[str, str]]]:
    """One select per offered key with the draft's value chosen; the rest is manual text."""
    chosen: dict[str, str] = {}
    manual: list[tuple[str, str]] = []
    for key, value in pairs:
        if key not in chosen and offer.offers_pair(key, value):
            chosen[key] = value
        else:
            manual.append((key, value))
    selects = [
        LabelSelect(
            key=label.key, id=f"role-{index}-label-{n}",
            options=tuple(
                LabelOption(v.value, v.count, chosen.get(label.key) == v.value, v.free_gpu)
                for v in label.values
            ),
            selected=label.key in chosen,
        )
        for n, label in enumerate(offer.labels)
    ]
    return selects, manual


def _device_rows(index: int, body: Mapping[str, Any], offer: ClusterOffer, fields: FieldMap,
                 maxima: Mapping[str, int]) -> list[DeviceRow]:
    stored = _pairs(body.get("devices"))
    rows = [
        DeviceRow(name=name, count=count, field=fields.get(f"roles[{index}].devices[{j}]"),
                  offered=name in offer.device_names, maximum=maxima.get(name))
        for j, (name, count) in enumerate(stored)
    ]
    taken = {name for name, _count in stored}
    offered = [name for name in offer.device_names if name not in taken]
    rows += [
        DeviceRow(name=name, count="",
                  field=fields.get(f"roles[{index}].devices[{len(stored) + n}]"),
                  offered=True, maximum=maxima.get(name))
        for n, name in enumerate(offered)
    ]
    return rows


def _env_rows(index: int, body: Mapping[str, Any], fields: FieldMap) -> list[EnvRow]:
    stored = _rows(body.get("env"))
    rows = [
        EnvRow(name=_text(item.get("name")), value=_text(item.get("value")),
               name_field=fields.get(f"roles[{index}].env[{j}].name"),
               value_field=fields.get(f"roles[{index}].env[{j}].value"))
        for j, item in enumerate(stored)
    ]
    rows += [
        EnvRow(name="", value="", name_field=fields.get(f"roles[{index}].env[{j}].name"),
               value_field=fields.get(f"roles[{index}].env[{j}].value"))
        for j in range(len(stored), len(stored) + BLANK_ENV_ROWS)
    ]
    return rows


def _mount_row(base: str, item: Mapping[str, Any], fields: FieldMap,
               storage: tuple[str, ...]) -> MountRow:
    storage_class = _text(item.get("storage_class"))
    choices = storage if not storage_class or storage_class in storage else (
        *storage, storage_class)
    return MountRow(
        kind=_text(item.get("kind")) or "host_path", source=_text(item.get("source")),
        target=_text(item.get("target")), storage_class=storage_class,
        size=_text(item.get("size")),
        kind_field=fields.get(f"{base}.kind"), source_field=fields.get(f"{base}.source"),
        target_field=fields.get(f"{base}.target"),
        storage_class_field=fields.get(f"{base}.storage_class"),
        size_field=fields.get(f"{base}.size"),
        storage_choices=choices,
    )


def _mount_rows(index: int, body: Mapping[str, Any], fields: FieldMap,
                storage: tuple[str, ...]) -> list[MountRow]:
    stored = _rows(body.get("mounts"))
    rows = [_mount_row(f"roles[{index}].mounts[{j}]", item, fields, storage)
            for j, item in enumerate(stored)]
    rows += [_mount_row(f"roles[{index}].mounts[{j}]", {}, fields, storage)
             for j in range(len(stored), len(stored) + BLANK_MOUNT_ROWS)]
    return rows


_SHORT_NAMES = {
    "role": "", "cluster": "cluster", "selector": "selector", "gpus": "gpus",
    "devices": "devices", "image": "image", "image_digest": "image_digest",
    "prepare_script": "prepare_script", "env": "env", "mounts": "mounts",
    "cpu_request": "cpu.request", "cpu_limit": "cpu.limit",
    "memory_request": "memory.request", "memory_limit": "memory.limit",
}


def _resource(body: Mapping[str, Any], kind: str, part: str) -> str:
    pair = body.get(kind)
    return _text(pair.get(part)) if isinstance(pair, Mapping) else ""


def role_panel(*, index: int, body: Mapping[str, Any], is_header: bool, clusters: list[str],
               offer: ClusterOffer, fields: FieldMap, match: MatchView,
               verification: VerificationPanel, selector_text: str | None = None) -> RolePanel:
    """The step 2 panel of one role. `selector_text` overrides the manual conditions when a
    form is shown again with what the user typed."""
    cluster = _text(body.get("cluster"))
    selects, manual = _label_selects(index, _pairs(body.get("selector")), offer)
    if selector_text is None:
        selector_text = "\n".join(f"{k}={v}" for k, v in manual)
    choices = clusters if not cluster or cluster in clusters else [*clusters, cluster]
    return RolePanel(
        index=index, name=_text(body.get("name")), is_header=is_header, cluster=cluster,
        cluster_choices=choices, label_selects=selects, selector_text=selector_text,
        gpus=_text(body.get("gpus")),
        devices=_device_rows(index, body, offer, fields, match.devices_max),
        image=_text(body.get("image")), image_digest=_text(body.get("image_digest")),
        prepare_script=_text(body.get("prepare_script")),
        env=_env_rows(index, body, fields),
        mounts=_mount_rows(index, body, fields, offer.storage_classes),
        env_template=EnvRow(
            name="", value="", name_field=fields.get(f"roles[{index}].env[{NEW_ROW}].name"),
            value_field=fields.get(f"roles[{index}].env[{NEW_ROW}].value")),
        mount_template=_mount_row(f"roles[{index}].mounts[{NEW_ROW}]", {}, fields,
                                  offer.storage_classes),
        cpu_request=_resource(body, "cpu", "request"), cpu_limit=_resource(body, "cpu", "limit"),
        memory_request=_resource(body, "memory", "request"),
        memory_limit=_resource(body, "memory", "limit"),
        storage_classes=offer.storage_classes, match=match, verification=verification,
        fs={name: fields.get(f"roles[{index}]" + (f".{path}" if path else ""))
            for name, path in _SHORT_NAMES.items()},
        live_fields=[f for f in fields.states() if f.path != f"roles[{index}].selector"],
        general=fields.general,
    )


def finding_url(finding: FindingView, *, step_url: Callable[[int, int | None], str]) -> str:
    """The link from the review step back to the step (and role tab) and field."""
    url = step_url(finding.place.step, finding.place.role)
    return f"{url}#{finding.anchor}" if finding.anchor else url
