"""Mounts: host directories, object storage, and what their targets would hide."""

from __future__ import annotations

from collections.abc import Iterator

from clusters.placement import host_path_finding
from clusters.quantities import QuantityError, parse_quantity
from jobs.core.findings.base import (
    CheckedRole,
    normal_path,
    optional_text,
    shown,
    within,
)
from jobs.core.findings.scripts import role_scripts_cd
from jobs.core.spec import (
    MOUNT_KINDS,
    as_items,
    field_of,
)
from rlark_site.foundation.findings import Finding
from rlark_site.foundation.findings import translate as _

# A mount target may not be one of these directories ...
SYSTEM_DIRECTORIES = ("/", "/home", "/opt", "/tmp", "/var")  # noqa: S108
# ... nor one of these or anything below them (the image's system, devices, root's home).
SYSTEM_TREES = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/root",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
)


def mount_findings(r: CheckedRole) -> Iterator[Finding]:
    targets: list[tuple[int, str]] = []
    cd_targets = role_scripts_cd(r)
    for j, mount in enumerate(as_items(field_of(r.role, "mounts", ()))):
        yield from mount_kind_findings(r, j, mount)
        target = normal_path(field_of(mount, "target", None))
        if target is None:
            yield r.finding(
                "mount.path.invalid",
                _("The target must be an absolute path without '..'."),
                f"mounts[{j}].target",
                value=shown(field_of(mount, "target", None)),
            )
            continue
        yield from target_findings(r, j, target, targets, cd_targets)
        targets.append((j, target))


def mount_kind_findings(r: CheckedRole, j: int, mount: object) -> Iterator[Finding]:
    kind = field_of(mount, "kind", None)
    if kind not in MOUNT_KINDS:
        yield r.finding(
            "mount.kind.invalid",
            _("A mount is a host directory (host_path) or object storage (object_storage)."),
            f"mounts[{j}].kind",
            value=shown(kind),
            choices=list(MOUNT_KINDS),
        )
    elif kind == "host_path":
        yield from host_path_findings(r, j, mount)
    else:
        yield from object_storage_findings(r, j, mount)


def host_path_findings(r: CheckedRole, j: int, mount: object) -> Iterator[Finding]:
    source = normal_path(field_of(mount, "source", None))
    if source is None:
        yield r.finding(
            "mount.path.invalid",
            _("The host directory must be an absolute path without '..'."),
            f"mounts[{j}].source",
            value=shown(field_of(mount, "source", None)),
        )
        return
    confirmed = r.confirmed
    confirmed_paths = confirmed.confirmed_host_paths if confirmed else ()
    paths = {path for p in confirmed_paths if (path := normal_path(p)) is not None}
    finding = host_path_finding(
        source, confirmed_paths=paths, role=r.label, field=r.field(f"mounts[{j}].source")
    )
    if finding is not None:
        yield finding


def object_storage_findings(r: CheckedRole, j: int, mount: object) -> Iterator[Finding]:
    storage_class = field_of(mount, "storage_class", None)
    facts = r.ctx.clusters.get(r.cluster) if r.cluster else None
    if facts is not None and storage_class not in facts.storage_classes:
        yield r.finding(
            "mount.storage_class.unknown",
            _("%(name)s is not a storage class of cluster %(cluster)s.")
            % {"name": repr(shown(storage_class)), "cluster": facts.name},
            f"mounts[{j}].storage_class",
            value=shown(storage_class),
            available=sorted(facts.storage_classes),
        )
    size = optional_text(field_of(mount, "size", None))
    if size != "":
        try:
            valid = parse_quantity(size) > 0  # type: ignore[arg-type]
        except QuantityError:
            valid = False
        if not valid:
            yield r.finding(
                "mount.size.invalid",
                _("The size must be a positive Kubernetes quantity such as 10Gi."),
                f"mounts[{j}].size",
                value=shown(size),
            )


def duplicate_target_message(number: int, target: str) -> str:
    """`mount.target.duplicate`'s message: `number` is the earlier mount's, from 1 as the
    page's labels count (its `other` detail stays the 0-based index of the body's row)."""
    return _("Mount %(other)d already uses target %(target)s.") % {"other": number,
                                                                    "target": target}


def target_findings(
    r: CheckedRole, j: int, target: str, earlier: list[tuple[int, str]], cd_targets: list[str]
) -> Iterator[Finding]:
    path = f"mounts[{j}].target"
    duplicate = next((i for i, other in earlier if other == target), None)
    if duplicate is not None:
        yield r.finding(
            "mount.target.duplicate",
            duplicate_target_message(duplicate + 1, target),
            path,
            target=target,
            other=duplicate,
        )
        return
    if target in SYSTEM_DIRECTORIES or any(within(target, tree) for tree in SYSTEM_TREES):
        yield r.finding(
            "mount.target.shadows",
            _("%(target)s would hide a system directory of the image.") % {"target": target},
            path,
            target=target,
            reason="system_directory",
        )
    for i, other in earlier:
        if within(target, other) or within(other, target):
            yield r.finding(
                "mount.target.shadows",
                _("%(target)s and %(other)s are nested; one mount would hide part of the other.")
                % {"target": target, "other": other},
                path,
                target=target,
                reason="nested",
                other=i,
            )
    hidden = sorted({d for d in cd_targets if within(d, target)})
    if hidden:
        yield r.finding(
            "mount.target.shadows",
            _(
                "The scripts cd into %(dirs)s, which this mount replaces with its own content; "
                "make sure the mount holds what the scripts expect there."
            )
            % {"dirs": ", ".join(hidden)},
            path,
            severity="warning",
            target=target,
            reason="working_directory",
            directories=hidden,
        )
