"""The common configuration (images, network domain, SSH keys, run script, TensorBoard) and
the size of what would be rendered."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from jobs.core.findings.base import (
    SHOWN_MAX,
    normal_path,
    optional_text,
    shown,
    text_problem,
)
from jobs.core.findings.images import mixed_image_findings
from jobs.core.findings.scripts import script_findings
from jobs.core.render import start_scripts
from jobs.core.spec import (
    CheckContext,
    JobSpec,
    field_of,
)
from jobs.core.sshkeys import validate_openssh_public_key
from jobs.core.startscript import (
    MAX_START_SCRIPT_BYTES,
)
from rlark_site.foundation.findings import Finding, new_finding
from rlark_site.foundation.findings import translate as _

# Kubernetes stores an object in etcd up to 1.5 MiB; the start scripts are most of a Job.
MAX_MANIFEST_SCRIPT_BYTES = 1_000_000


def common_findings(spec: JobSpec, ctx: CheckContext, roles: Sequence[object]) -> Iterator[Finding]:
    yield from mixed_image_findings(spec, roles)
    yield from network_findings(spec, ctx, roles)
    yield from ssh_findings(spec, ctx)
    run_script = optional_text(field_of(spec, "run_script"))
    if isinstance(run_script, str) and not run_script.strip():
        yield new_finding(
            "run_script.empty",
            _("The run script is required: the Head Task runs it after Ray starts."),
            field="run_script",
        )
    yield from script_findings(run_script, common_script_finding, "run_script")
    log_dir = optional_text(field_of(spec, "tensorboard_log_dir"))
    if log_dir != "" and normal_path(log_dir) is None:
        yield new_finding(
            "tensorboard.path.invalid",
            _("The TensorBoard log directory must be an absolute path in the container."),
            field="tensorboard_log_dir",
            value=shown(log_dir),
        )


def common_script_finding(code: str, message: str, path: str, **detail: Any) -> Finding:
    return new_finding(code, message, field=path, **detail)


def ssh_findings(spec: JobSpec, ctx: CheckContext) -> Iterator[Finding]:
    for name in ctx.unknown_ssh_key_names:
        yield new_finding(
            "ssh_key.unknown",
            _("The team has no SSH key named %(name)s.") % {"name": repr(shown(name))},
            field="ssh_keys",
            name=shown(name),
        )
    keys = field_of(spec, "ssh_keys", ())
    if not isinstance(keys, (list, tuple)):
        keys = (keys,)
    for k, key in enumerate(keys):
        reason = validate_openssh_public_key(key)
        if reason is not None:
            yield new_finding("ssh_key.invalid", reason, field=f"ssh_keys[{k}]")


def network_findings(
    spec: JobSpec, ctx: CheckContext, roles: Sequence[object]
) -> Iterator[Finding]:
    clusters = sorted(
        {c for role in roles if isinstance(c := field_of(role, "cluster"), str) and c}
    )
    domain = optional_text(field_of(spec, "network_domain"))
    if domain == "":
        if len(clusters) > 1:
            yield new_finding(
                "network_domain.required",
                _("The roles run in %(count)d clusters; choose a network domain that spans them.")
                % {"count": len(clusters)},
                field="network_domain",
                clusters=clusters,
            )
        return
    spanned = ctx.network_domains.get(domain) if isinstance(domain, str) else None
    if spanned is None:
        yield new_finding(
            "network_domain.unknown",
            _("%(name)s is not a known network domain.") % {"name": repr(shown(domain))},
            field="network_domain",
            value=shown(domain),
            available=sorted(ctx.network_domains),
        )
        return
    missing = [c for c in clusters if c not in spanned]
    if missing:
        yield new_finding(
            "network_domain.partial",
            _("Network domain %(name)s does not span cluster(s) %(missing)s used by the roles.")
            % {"name": domain, "missing": ", ".join(missing)},
            field="network_domain",
            severity="warning",
            missing=missing,
            spanned=sorted(spanned),
        )


def size_findings(spec: JobSpec, ctx: CheckContext, roles: Sequence[object]) -> Iterator[Finding]:
    """The rendered start scripts must fit in one exec argument, and together in one object."""
    if any(text_problem(optional_text(field_of(role, "prepare_script"))) for role in roles):
        return
    if text_problem(optional_text(field_of(spec, "run_script"))) is not None:
        return
    sizes = [len(script.encode("utf-8")) for script in start_scripts(spec, ctx)]
    for role, size in zip(roles, sizes, strict=True):
        if size > MAX_START_SCRIPT_BYTES:
            name = field_of(role, "name")
            yield new_finding(
                "start_script.too_long",
                _(
                    "The start script would be %(size)d bytes; Linux accepts at most %(max)d. "
                    "Shorten the scripts or move them into the image."
                )
                % {"size": size, "max": MAX_START_SCRIPT_BYTES},
                role=name[:SHOWN_MAX] if isinstance(name, str) else None,
                field="run_script",
                size=size,
                max=MAX_START_SCRIPT_BYTES,
            )
    if sum(sizes) > MAX_MANIFEST_SCRIPT_BYTES:
        yield new_finding(
            "manifest.too_large",
            _(
                "The start scripts add up to %(size)d bytes, more than a Kubernetes object "
                "holds (%(max)d)."
            )
            % {"size": sum(sizes), "max": MAX_MANIFEST_SCRIPT_BYTES},
            size=sum(sizes),
            max=MAX_MANIFEST_SCRIPT_BYTES,
        )
