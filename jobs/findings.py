"""The single validation engine: every rule of SPEC section 4, as findings.

`check(spec, ctx)` is pure (no database: everything outside the draft comes from `ctx`)
and total: it never raises, whatever the draft holds (wrong types, huge or hostile
strings). Findings come in a stable order: the job itself, then each role in order,
then the common configuration, then the size of what would be rendered. Every code,
its severity and meaning is listed in docs/findings.md.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from django.apps import apps
from django.conf import settings
from django.utils.translation import gettext

from clusters.labels import is_valid_label_value, selector_problems
from jobs.images import is_digest, is_placeholder, parse_image_reference, pinned_image
from jobs.quantities import QuantityError, parse_quantity
from jobs.render import header_index, role_match, spec_roles, start_scripts
from jobs.spec import (
    MOUNT_KINDS,
    TASK_TYPES,
    CheckContext,
    Finding,
    JobSpec,
    SelectorMatch,
    Severity,
    VerificationView,
    as_items,
    as_text,
    is_count,
)
from jobs.sshkeys import validate_openssh_public_key
from jobs.startscript import (
    MAX_START_SCRIPT_BYTES,
    RAY_TEMP_DIR_ENV,
    RESERVED_ENV_NAMES,
    TUNABLE_ENV_NAMES,
)

__all__ = [
    "MAX_MANIFEST_SCRIPT_BYTES",
    "SYSTEM_DIRECTORIES",
    "SYSTEM_TREES",
    "check",
    "has_errors",
]

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
# Kubernetes stores an object in etcd up to 1.5 MiB; the start scripts are most of a Job.
MAX_MANIFEST_SCRIPT_BYTES = 1_000_000

_DNS_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?")
_ROLE_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9]*[A-Za-z0-9])?")
_C_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SECONDS = re.compile(r"[0-9]{1,6}")
_CD_WORD = re.compile(r"(?<![\w./-])(?:cd|pushd)(?![\w./-])")
_NAME_MAX = 63
_SHOWN_MAX = 100
_CD_LINE_MAX = 4096
_LISTED_NODES_MAX = 50
_COMMAND_STARTS = frozenset(
    {
        ";",
        "&&",
        "||",
        "|",
        "&",
        "(",
        ")",
        "{",
        "!",
        "if",
        "then",
        "else",
        "elif",
        "do",
        "while",
        "until",
        "time",
    }
)


def _(message: str) -> str:
    """Translate at check time when Django is ready; the text itself otherwise."""
    if settings.configured and apps.ready:
        return gettext(message)
    return message


def has_errors(findings: Iterable[Finding]) -> bool:
    """Whether any finding blocks submission."""
    return any(finding.severity == "error" for finding in findings)


# -- small helpers ---------------------------------------------------------------------------


def _finding(
    code: str,
    message: str,
    *,
    role: str | None = None,
    field: str | None = None,
    severity: Severity = "error",
    **detail: Any,
) -> Finding:
    return Finding(
        code=code, severity=severity, message=message, role=role, field=field, detail=detail
    )


def _get(obj: object, name: str, default: Any = "") -> Any:
    return getattr(obj, name, default)


def _shown(value: object) -> str:
    """A short, JSON-safe rendering of user input for messages and details."""
    if isinstance(value, str):
        return value[:_SHOWN_MAX]
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)[:_SHOWN_MAX]
    return type(value).__name__


def _text_problem(value: object) -> str | None:
    """Why `value` cannot be embedded as text (not a string, NUL, not encodable), or None."""
    if not isinstance(value, str):
        return "not_text"
    if "\x00" in value:
        return "nul_character"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "not_encodable"
    return None


def _optional_text(value: object) -> object:
    """None stands for an absent optional text."""
    return "" if value is None else value


def _normal_path(value: object) -> str | None:
    """The absolute path `value` names, normalised; None unless absolute, clean and without '..'."""
    if _text_problem(value) is not None:
        return None
    assert isinstance(value, str)
    if not value.startswith("/") or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        return None
    parts = [part for part in value.split("/") if part not in ("", ".")]
    if ".." in parts:
        return None
    return "/" + "/".join(parts)


def _within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def _node_list(nodes: Sequence[Any]) -> list[dict[str, str]]:
    return [
        {"cluster": n.cluster, "name": n.name, "namespace": n.namespace}
        for n in nodes[:_LISTED_NODES_MAX]
    ]


# -- the job ---------------------------------------------------------------------------------


def _record_findings(spec: JobSpec, ctx: CheckContext) -> Iterator[Finding]:
    record = _get(spec, "launch_list_id", None)
    if not (is_count(record) and record > 0):
        yield _finding(
            "launch_list.missing",
            _("Link a launch list: a job cannot be submitted without one."),
            field="launch_list",
        )
    record = _get(spec, "deployment_parameters_id", None)
    if not (is_count(record) and record > 0):
        yield _finding(
            "deployment_parameters.missing",
            _("Link the deployment parameters: a job cannot be submitted without them."),
            field="deployment_parameters",
        )
    yield from _record_link_findings(spec, ctx)


def _record_link_findings(spec: JobSpec, ctx: CheckContext) -> Iterator[Finding]:
    """The launch list and the deployment parameters must reference each other (or be unlinked,
    in which case submission links them)."""
    launch_list = _get(spec, "launch_list_id", None)
    parameters = _get(spec, "deployment_parameters_id", None)
    if not (is_count(launch_list) and is_count(parameters)):
        return
    points_at = _get(ctx, "parameters_launch_list_id", None)
    pointed_by = _get(ctx, "launch_list_parameters_id", None)
    if (points_at is not None and points_at != launch_list) or (
        pointed_by is not None and pointed_by != parameters
    ):
        yield _finding(
            "deployment_parameters.launch_list_mismatch",
            _(
                "The deployment parameters and the launch list of this job do not reference each "
                "other; link the two records to each other first."
            ),
            field="deployment_parameters",
            parameters_launch_list=points_at,
            launch_list_parameters=pointed_by,
        )


def _job_findings(spec: JobSpec, ctx: CheckContext) -> Iterator[Finding]:
    yield from _record_findings(spec, ctx)
    name = _get(spec, "name")
    if not (isinstance(name, str) and len(name) <= _NAME_MAX and _DNS_LABEL.fullmatch(name)):
        yield _finding(
            "job.name.invalid",
            _(
                "The job name must be 1-63 lower-case letters, digits or '-', starting and ending "
                "with a letter or digit."
            ),
            field="name",
            value=_shown(name),
        )
    elif name in ctx.taken_names:
        yield _finding(
            "job.name.taken",
            _("The job name %(name)s is already used by another job or by a Job on a cluster.")
            % {"name": name},
            field="name",
            value=name,
        )
    team = _get(spec, "team")
    if not is_valid_label_value(team):
        yield _finding(
            "job.team.invalid",
            _("The team name cannot be used as a Kubernetes label value."),
            field="team",
            value=_shown(team),
        )
    task_type = _get(spec, "task_type")
    if not (isinstance(task_type, str) and task_type in TASK_TYPES):
        yield _finding(
            "job.type.invalid",
            _("Unknown job type %(type)s; choose one of: %(types)s.")
            % {"type": repr(_shown(task_type)), "types": ", ".join(TASK_TYPES)},
            field="task_type",
            value=_shown(task_type),
            choices=list(TASK_TYPES),
        )
    yield from _roles_and_header(spec)


def _roles_and_header(spec: JobSpec) -> Iterator[Finding]:
    if not spec_roles(spec):
        yield _finding("roles.empty", _("Add at least one role."), field="roles")
        return
    header = _get(spec, "header_role")
    if header is None or header == "":
        yield _finding("header.missing", _("Choose the Header role."), field="header_role")
    elif header_index(spec) is None:
        yield _finding(
            "header.unknown",
            _("The Header role %(name)s is not one of the job's roles.")
            % {"name": repr(_shown(header))},
            field="header_role",
            value=_shown(header),
        )


# -- one role --------------------------------------------------------------------------------


class _Role:
    """One role as the rules read it, with what the context says about it."""

    def __init__(self, *, spec: JobSpec, ctx: CheckContext, index: int, role: object) -> None:
        self.spec = spec
        self.ctx = ctx
        self.index = index
        self.role = role
        name = _get(role, "name", None)
        self.name = name if isinstance(name, str) else None
        self.label = self.name[:_SHOWN_MAX] if self.name is not None else None
        self.is_header = header_index(spec) == index
        cluster = _get(role, "cluster")
        self.cluster = cluster if isinstance(cluster, str) and cluster in ctx.clusters else None
        self.selector_ok = not selector_problems(_get(role, "selector", ()))
        self.match = role_match(role, ctx) if self.selector_ok else SelectorMatch(nodes=())
        self.verification = self._verification()

    def field(self, path: str) -> str:
        return f"roles[{self.index}].{path}"

    def finding(self, code: str, message: str, where: str, **kwargs: Any) -> Finding:
        return _finding(code, message, role=self.label, field=self.field(where), **kwargs)

    def _verification(self) -> VerificationView | None:
        if self.cluster is None or not self.selector_ok:
            return None
        selector = dict(as_items(_get(self.role, "selector", ())))
        return self.ctx.verification_for(self.cluster, selector)

    @property
    def confirmed(self) -> VerificationView | None:
        """The verification, when it is approved and still matches today's nodes."""
        view = self.verification
        if view is None or view.state != "approved":
            return None
        if sorted(view.node_signature) != sorted(self.match.signature()):
            return None
        return view


def _role_name_findings(r: _Role, earlier: Sequence[object]) -> Iterator[Finding]:
    name = r.name
    if name is None or len(name) > _NAME_MAX or not _ROLE_NAME.fullmatch(name):
        yield r.finding(
            "role.name.invalid",
            _(
                "A role name is 1-63 letters, digits or '-', starting and ending with a letter or "
                "digit."
            ),
            "name",
            value=_shown(_get(r.role, "name", None)),
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


def _cluster_findings(r: _Role) -> Iterator[Finding]:
    cluster = _get(r.role, "cluster")
    if cluster is None or cluster == "":
        yield r.finding("role.cluster.missing", _("Choose the role's cluster."), "cluster")
    elif r.cluster is None:
        yield r.finding(
            "role.cluster.unknown",
            _("Cluster %(cluster)s is not known to RLark.") % {"cluster": repr(_shown(cluster))},
            "cluster",
            value=_shown(cluster),
        )


def _selector_findings(r: _Role) -> Iterator[Finding]:
    for problem in selector_problems(_get(r.role, "selector", ())):
        yield r.finding(problem.code, problem.message, "selector", **problem.detail)
    if not r.selector_ok:
        return
    match = r.match
    if match.count == 0:
        yield r.finding(
            "selector.no_match",
            _("The selector matches no node of any cluster."),
            "selector",
        )
    if r.is_header and match.count != 1:
        yield r.finding(
            "header.replicas",
            _("The Header role's selector must match exactly 1 node; it matches %(count)d.")
            % {"count": match.count},
            "selector",
            count=match.count,
            nodes=_node_list(match.nodes),
        )
    yield from _placement_findings(r)
    not_ready = [n for n in match.nodes if not n.ready]
    if not_ready:
        yield r.finding(
            "selector.not_ready",
            _("%(count)d matched node(s) are not Ready; their workers will wait until they are.")
            % {"count": len(not_ready)},
            "selector",
            severity="warning",
            nodes=_node_list(not_ready),
        )
    yield from _hostname_findings(r)
    yield from _verification_findings(r)


def _placement_findings(r: _Role) -> Iterator[Finding]:
    if r.cluster is None:
        return
    foreign = r.match.foreign_nodes(r.cluster)
    if foreign:
        yield r.finding(
            "selector.cross_cluster",
            _("The selector also matches %(count)d node(s) outside cluster %(cluster)s.")
            % {"count": len(foreign), "cluster": r.cluster},
            "selector",
            cluster=r.cluster,
            count=len(foreign),
            nodes=_node_list(foreign),
        )
    if not r.match.confining_conditions(r.cluster):
        yield r.finding(
            "selector.no_cluster_label",
            _(
                "No single condition of the selector matches only nodes of cluster %(cluster)s; "
                "add one (for example the cluster's topology label)."
            )
            % {"cluster": r.cluster},
            "selector",
            cluster=r.cluster,
        )


def _hostname_findings(r: _Role) -> Iterator[Finding]:
    job = _get(r.spec, "name")
    if r.match.count == 0 or r.name is None or not isinstance(job, str):
        return
    if not (_ROLE_NAME.fullmatch(r.name) and _DNS_LABEL.fullmatch(job)):
        return
    hostname = f"{job}-{r.name.lower()}-{r.match.count - 1}"
    if len(hostname) > _NAME_MAX:
        yield r.finding(
            "role.hostname.too_long",
            _(
                "Pod hostnames <job>-<task>-<index> must fit in 63 characters; %(host)s has "
                "%(length)d. Shorten the job or role name."
            )
            % {"host": hostname[:_SHOWN_MAX], "length": len(hostname)},
            "name",
            length=len(hostname),
            max=_NAME_MAX,
        )


def _verification_findings(r: _Role) -> Iterator[Finding]:
    if r.cluster is None:
        return
    view = r.verification
    if view is None or view.state not in ("approved", "stale"):
        yield r.finding(
            "selector.unverified",
            _("No approved verification for this selector on cluster %(cluster)s; request one.")
            % {"cluster": r.cluster},
            "selector",
            cluster=r.cluster,
            verification=view.id if view else None,
            state=view.state if view else None,
        )
    elif r.confirmed is None:
        yield r.finding(
            "selector.verification_stale",
            _(
                "The approved verification no longer equals today's matched nodes; request a new "
                "one."
            ),
            "selector",
            cluster=r.cluster,
            verification=view.id,
            state=view.state,
            approved_nodes=[list(pair) for pair in view.node_signature[:_LISTED_NODES_MAX]],
            current_nodes=_node_list(r.match.nodes),
        )


def _gpu_findings(r: _Role) -> Iterator[Finding]:
    gpus = _get(r.role, "gpus", 0)
    if not is_count(gpus) or gpus < 0:
        yield r.finding(
            "gpu.invalid",
            _("GPUs per worker must be a whole number, 0 or more."),
            "gpus",
            value=_shown(gpus),
        )
        return
    if gpus == 0 or r.match.count == 0:
        return
    gpu_max = r.match.gpu_max()
    if gpu_max is not None and gpu_max > 0:
        if gpus > gpu_max:
            yield r.finding(
                "gpu.exceeds_capacity",
                _("%(gpus)d GPUs per worker is more than the %(max)d every matched node has.")
                % {"gpus": gpus, "max": gpu_max},
                "gpus",
                requested=gpus,
                max=gpu_max,
            )
        return
    confirmed = r.confirmed
    if confirmed is None or confirmed.confirmed_gpu is None or confirmed.confirmed_gpu < gpus:
        yield r.finding(
            "gpu.unconfirmed",
            _(
                "The matched nodes report no GPU capacity; %(gpus)d GPUs per worker needs an "
                "admin's confirmation on the verification."
            )
            % {"gpus": gpus},
            "gpus",
            requested=gpus,
            max=gpu_max,
            confirmed=confirmed.confirmed_gpu if confirmed else None,
        )


def _device_findings(r: _Role) -> Iterator[Finding]:
    facts = r.ctx.clusters.get(r.cluster) if r.cluster else None
    maxima = r.match.devices_max() if r.match.count else {}
    confirmed = dict(r.confirmed.confirmed_devices) if r.confirmed else {}
    seen: set[str] = set()
    for j, device in enumerate(as_items(_get(r.role, "devices", ()))):
        path = f"devices[{j}]"
        if not isinstance(device, (tuple, list)) or len(device) != 2:
            yield r.finding("device.invalid", _("A device is a name and a count."), path)
            continue
        name, count = device
        if (
            not isinstance(name, str)
            or not name.startswith("rlinf.io/")
            or (facts is not None and name not in facts.device_names)
        ):
            yield r.finding(
                "device.unknown",
                _("%(name)s is not an rlinf.io/* resource the cluster reports.")
                % {"name": repr(_shown(name))},
                path,
                name=_shown(name),
                available=sorted(facts.device_names) if facts else [],
            )
            continue
        if name in seen:
            yield r.finding(
                "device.duplicate",
                _("Device %(name)s is listed twice.") % {"name": name},
                path,
                name=name,
            )
            continue
        seen.add(name)
        if not is_count(count) or count < 1:
            yield r.finding(
                "device.invalid",
                _("The count of %(name)s must be a whole number, 1 or more.") % {"name": name},
                path,
                name=name,
                value=_shown(count),
            )
            continue
        limit = maxima.get(name, 0)
        if r.match.count and count > limit and confirmed.get(name, 0) < count:
            yield r.finding(
                "device.exceeds_capacity",
                _(
                    "%(count)d × %(name)s per worker is more than the %(max)d every matched node "
                    "has."
                )
                % {"count": count, "name": name, "max": limit},
                path,
                name=name,
                requested=count,
                max=limit,
            )


def _resource_findings(r: _Role) -> Iterator[Finding]:
    for kind in ("cpu", "memory"):
        pair = _get(r.role, kind, None)
        parsed: dict[str, Any] = {}
        for part in ("request", "limit"):
            value = _optional_text(_get(pair, part))
            if value == "":
                continue
            try:
                parsed[part] = parse_quantity(value)  # type: ignore[arg-type]
            except QuantityError:
                yield r.finding(
                    "resources.invalid",
                    _("%(value)s is not a Kubernetes quantity (for example 500m, 2, 64Gi).")
                    % {"value": repr(_shown(value))},
                    f"{kind}.{part}",
                    value=_shown(value),
                )
        if "request" in parsed and "limit" in parsed and parsed["request"] > parsed["limit"]:
            yield r.finding(
                "resources.invalid",
                _("The %(kind)s request is above its limit.") % {"kind": kind},
                f"{kind}.request",
                request=_shown(_get(pair, "request")),
                limit=_shown(_get(pair, "limit")),
            )


def _image_findings(r: _Role) -> Iterator[Finding]:
    image = _optional_text(_get(r.role, "image"))
    digest = _optional_text(_get(r.role, "image_digest"))
    if isinstance(image, str) and not image.strip():
        yield r.finding("image.missing", _("The image is required."), "image")
        return
    if is_placeholder(image):
        yield r.finding(
            "image.placeholder",
            _("The form's placeholder is not an image; enter the real reference."),
            "image",
        )
        return
    reference = parse_image_reference(image)  # type: ignore[arg-type]
    if reference is None:
        yield r.finding(
            "image.invalid",
            _("%(image)s is not an image reference ([registry/]path[:tag][@sha256:<digest>]).")
            % {"image": repr(_shown(image))},
            "image",
            value=_shown(image),
        )
        return
    if digest != "" and not is_digest(digest):
        yield r.finding(
            "image.invalid",
            _("The recorded digest must be sha256: followed by 64 lower-case hex digits."),
            "image_digest",
            value=_shown(digest),
        )
        return
    if reference.digest:
        if digest and digest != reference.digest:
            yield r.finding(
                "image.invalid",
                _("The recorded digest differs from the digest in the image reference."),
                "image_digest",
                reference=reference.digest,
                recorded=digest,
            )
        return
    if not reference.tag or reference.tag == "latest":
        yield r.finding(
            "image.mutable_tag",
            _(
                "Pin the image: use a digest reference (@sha256:...) or a version tag with its "
                "digest recorded; 'latest' and untagged references change under you."
            ),
            "image",
            tag=reference.tag,
        )
    elif not digest:
        yield r.finding(
            "image.digest_missing",
            _("Record the actual digest of tag %(tag)s beside it (or use a digest reference).")
            % {"tag": reference.tag},
            "image_digest",
            tag=reference.tag,
        )


def _text_reason(reason: str) -> str:
    """The user-facing words for a `_text_problem` (or value) reason."""
    reasons = {
        "not_text": _("it is not text"),
        "nul_character": _("it contains a NUL character"),
        "not_encodable": _("it is not valid Unicode text"),
        "too_long": _("it is too long to pass to a process"),
        "not_seconds": _("it must be a whole number of seconds"),
    }
    return reasons.get(reason, reason)


def _script_findings(value: object, make: Callable[..., Finding], path: str) -> Iterator[Finding]:
    problem = _text_problem(_optional_text(value))
    if problem is not None:
        yield make(
            "script.invalid",
            _("The script cannot be used: %(reason)s.") % {"reason": _text_reason(problem)},
            path,
            reason=problem,
        )


def _env_findings(r: _Role) -> Iterator[Finding]:
    seen: set[str] = set()
    for j, item in enumerate(as_items(_get(r.role, "env", ()))):
        name, value = _get(item, "name", None), _optional_text(_get(item, "value", None))
        path = f"env[{j}]"
        if not isinstance(name, str) or not _C_IDENTIFIER.fullmatch(name) or len(name) > 255:
            yield r.finding(
                "env.name.invalid",
                _(
                    "%(name)s is not a variable name (letters, digits and '_', not starting with a "
                    "digit)."
                )
                % {"name": repr(_shown(name))},
                f"{path}.name",
                value=_shown(name),
            )
        elif name in RESERVED_ENV_NAMES:
            yield r.finding(
                "env.name.reserved",
                _("%(name)s is set by RLark's start script; choose another name.") % {"name": name},
                f"{path}.name",
                name=name,
                reserved=sorted(RESERVED_ENV_NAMES),
            )
        elif name in seen:
            yield r.finding(
                "env.name.duplicate",
                _("%(name)s is set twice in this role.") % {"name": name},
                f"{path}.name",
                name=name,
            )
        if isinstance(name, str):
            seen.add(name)
        yield from _env_value_findings(r, name, value, path)


def _env_value_findings(r: _Role, name: object, value: object, path: str) -> Iterator[Finding]:
    problem = _text_problem(value)
    if problem is None and len(str(value).encode("utf-8")) + 256 >= MAX_START_SCRIPT_BYTES:
        problem = "too_long"
    if problem is None and name in TUNABLE_ENV_NAMES and not _SECONDS.fullmatch(str(value)):
        problem = "not_seconds"
    if problem is not None:
        yield r.finding(
            "env.value.invalid",
            _("The value of %(name)s cannot be used: %(reason)s.")
            % {"name": repr(_shown(name)), "reason": _text_reason(problem)},
            f"{path}.value",
            reason=problem,
        )
    elif name == RAY_TEMP_DIR_ENV and _normal_path(value) is None:
        yield r.finding(
            "env.ray_temp_dir",
            _(
                "RAY_TEMP_DIR must be an absolute path without '..'; it is passed to "
                "ray start --temp-dir."
            ),
            f"{path}.value",
            value=_shown(value),
        )


def _cd_targets(script: object) -> list[str]:
    """Absolute directories the script changes into with ``cd`` or ``pushd`` (best effort)."""
    if _text_problem(script) is not None:
        return []
    assert isinstance(script, str)
    targets: list[str] = []
    for line in script.split("\n"):
        if len(line) > _CD_LINE_MAX or not _CD_WORD.search(line):
            continue
        try:
            lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
            lexer.whitespace_split = True
            tokens = list(lexer)
        except ValueError:
            continue
        for i, token in enumerate(tokens):
            if token in ("cd", "pushd") and (i == 0 or tokens[i - 1] in _COMMAND_STARTS):
                path = _cd_argument(tokens[i + 1 : i + 4])
                if path is not None:
                    targets.append(path)
    return targets


def _cd_argument(tokens: Sequence[str]) -> str | None:
    """The literal absolute directory after ``cd`` (options skipped), normalised, or None."""
    arguments = [token for token in tokens if not token.startswith("-")]
    if not arguments or "$" in arguments[0] or "`" in arguments[0]:
        return None
    return _normal_path(arguments[0])


def _role_scripts_cd(r: _Role) -> list[str]:
    targets = _cd_targets(_get(r.role, "prepare_script"))
    if r.is_header:
        targets += _cd_targets(_get(r.spec, "run_script"))
    return targets


def _mount_findings(r: _Role) -> Iterator[Finding]:
    targets: list[tuple[int, str]] = []
    cd_targets = _role_scripts_cd(r)
    for j, mount in enumerate(as_items(_get(r.role, "mounts", ()))):
        yield from _mount_kind_findings(r, j, mount)
        target = _normal_path(_get(mount, "target", None))
        if target is None:
            yield r.finding(
                "mount.path.invalid",
                _("The target must be an absolute path without '..'."),
                f"mounts[{j}].target",
                value=_shown(_get(mount, "target", None)),
            )
            continue
        yield from _target_findings(r, j, target, targets, cd_targets)
        targets.append((j, target))


def _mount_kind_findings(r: _Role, j: int, mount: object) -> Iterator[Finding]:
    kind = _get(mount, "kind", None)
    if kind not in MOUNT_KINDS:
        yield r.finding(
            "mount.kind.invalid",
            _("A mount is a host directory (host_path) or object storage (object_storage)."),
            f"mounts[{j}].kind",
            value=_shown(kind),
            choices=list(MOUNT_KINDS),
        )
    elif kind == "host_path":
        yield from _host_path_findings(r, j, mount)
    else:
        yield from _object_storage_findings(r, j, mount)


def _host_path_findings(r: _Role, j: int, mount: object) -> Iterator[Finding]:
    source = _normal_path(_get(mount, "source", None))
    if source is None:
        yield r.finding(
            "mount.path.invalid",
            _("The host directory must be an absolute path without '..'."),
            f"mounts[{j}].source",
            value=_shown(_get(mount, "source", None)),
        )
        return
    confirmed = r.confirmed
    paths = {_normal_path(p) for p in confirmed.confirmed_host_paths} if confirmed else set()
    if source not in paths:
        yield r.finding(
            "mount.host_path.unconfirmed",
            _("An admin has not confirmed that %(path)s exists on every matched node.")
            % {"path": source},
            f"mounts[{j}].source",
            host_path=source,
        )


def _object_storage_findings(r: _Role, j: int, mount: object) -> Iterator[Finding]:
    storage_class = _get(mount, "storage_class", None)
    facts = r.ctx.clusters.get(r.cluster) if r.cluster else None
    if facts is not None and storage_class not in facts.storage_classes:
        yield r.finding(
            "mount.storage_class.unknown",
            _("%(name)s is not a storage class of cluster %(cluster)s.")
            % {"name": repr(_shown(storage_class)), "cluster": facts.name},
            f"mounts[{j}].storage_class",
            value=_shown(storage_class),
            available=sorted(facts.storage_classes),
        )
    size = _optional_text(_get(mount, "size", None))
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
                value=_shown(size),
            )


def _target_findings(
    r: _Role, j: int, target: str, earlier: list[tuple[int, str]], cd_targets: list[str]
) -> Iterator[Finding]:
    path = f"mounts[{j}].target"
    duplicate = next((i for i, other in earlier if other == target), None)
    if duplicate is not None:
        yield r.finding(
            "mount.target.duplicate",
            _("Mount %(other)d already uses target %(target)s.")
            % {"other": duplicate, "target": target},
            path,
            target=target,
            other=duplicate,
        )
        return
    if target in SYSTEM_DIRECTORIES or any(_within(target, tree) for tree in SYSTEM_TREES):
        yield r.finding(
            "mount.target.shadows",
            _("%(target)s would hide a system directory of the image.") % {"target": target},
            path,
            target=target,
            reason="system_directory",
        )
    for i, other in earlier:
        if _within(target, other) or _within(other, target):
            yield r.finding(
                "mount.target.shadows",
                _("%(target)s and %(other)s are nested; one mount would hide part of the other.")
                % {"target": target, "other": other},
                path,
                target=target,
                reason="nested",
                other=i,
            )
    hidden = sorted({d for d in cd_targets if _within(d, target)})
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


def _role_findings(r: _Role, earlier_names: Sequence[object]) -> Iterator[Finding]:
    yield from _role_name_findings(r, earlier_names)
    yield from _cluster_findings(r)
    yield from _selector_findings(r)
    yield from _gpu_findings(r)
    yield from _device_findings(r)
    yield from _resource_findings(r)
    yield from _image_findings(r)
    yield from _script_findings(_get(r.role, "prepare_script"), r.finding, "prepare_script")
    yield from _env_findings(r)
    yield from _mount_findings(r)


# -- common configuration --------------------------------------------------------------------


def _image_identity(image: str, recorded_digest: str) -> str:
    """What an image reference pins: ``name@digest`` when a digest is known (the tag then
    does not matter), else the reference itself."""
    reference = parse_image_reference(image)
    if reference is None:
        return image
    digest = reference.digest or (recorded_digest if is_digest(recorded_digest) else "")
    return f"{reference.name}@{digest}" if digest else image


def _mixed_image_findings(spec: JobSpec, roles: Sequence[object]) -> Iterator[Finding]:
    images: dict[str, str] = {}
    identities: set[str] = set()
    for role in roles:
        image, name = _get(role, "image"), _get(role, "name")
        if isinstance(image, str) and parse_image_reference(image) and isinstance(name, str):
            digest = as_text(_get(role, "image_digest"))
            images.setdefault(name[:_SHOWN_MAX], pinned_image(image, digest))
            identities.add(_image_identity(image, digest))
    if len(identities) > 1 and _get(spec, "image_compatibility_confirmed") is not True:
        yield _finding(
            "image.mixed",
            _(
                "The roles use different images; confirm that their Ray, Python and RLinf "
                "versions are compatible."
            ),
            field="image_compatibility_confirmed",
            images=images,
        )


def _network_findings(
    spec: JobSpec, ctx: CheckContext, roles: Sequence[object]
) -> Iterator[Finding]:
    clusters = sorted({c for role in roles if isinstance(c := _get(role, "cluster"), str) and c})
    domain = _optional_text(_get(spec, "network_domain"))
    if domain == "":
        if len(clusters) > 1:
            yield _finding(
                "network_domain.required",
                _("The roles run in %(count)d clusters; choose a network domain that spans them.")
                % {"count": len(clusters)},
                field="network_domain",
                clusters=clusters,
            )
        return
    spanned = ctx.network_domains.get(domain) if isinstance(domain, str) else None
    if spanned is None:
        yield _finding(
            "network_domain.unknown",
            _("%(name)s is not a known network domain.") % {"name": repr(_shown(domain))},
            field="network_domain",
            value=_shown(domain),
            available=sorted(ctx.network_domains),
        )
        return
    missing = [c for c in clusters if c not in spanned]
    if missing:
        yield _finding(
            "network_domain.partial",
            _("Network domain %(name)s does not span cluster(s) %(missing)s used by the roles.")
            % {"name": domain, "missing": ", ".join(missing)},
            field="network_domain",
            severity="warning",
            missing=missing,
            spanned=sorted(spanned),
        )


def _ssh_findings(spec: JobSpec, ctx: CheckContext) -> Iterator[Finding]:
    for name in ctx.unknown_ssh_key_names:
        yield _finding(
            "ssh_key.unknown",
            _("The team has no SSH key named %(name)s.") % {"name": repr(_shown(name))},
            field="ssh_keys",
            name=_shown(name),
        )
    keys = _get(spec, "ssh_keys", ())
    if not isinstance(keys, (list, tuple)):
        keys = (keys,)
    for k, key in enumerate(keys):
        reason = validate_openssh_public_key(key)
        if reason is not None:
            yield _finding("ssh_key.invalid", reason, field=f"ssh_keys[{k}]")


def _common_findings(
    spec: JobSpec, ctx: CheckContext, roles: Sequence[object]
) -> Iterator[Finding]:
    yield from _mixed_image_findings(spec, roles)
    yield from _network_findings(spec, ctx, roles)
    yield from _ssh_findings(spec, ctx)
    run_script = _optional_text(_get(spec, "run_script"))
    if isinstance(run_script, str) and not run_script.strip():
        yield _finding(
            "run_script.empty",
            _("The run script is required: the Head Task runs it after Ray starts."),
            field="run_script",
        )
    yield from _script_findings(run_script, _common_script_finding, "run_script")
    log_dir = _optional_text(_get(spec, "tensorboard_log_dir"))
    if log_dir != "" and _normal_path(log_dir) is None:
        yield _finding(
            "tensorboard.path.invalid",
            _("The TensorBoard log directory must be an absolute path in the container."),
            field="tensorboard_log_dir",
            value=_shown(log_dir),
        )


def _common_script_finding(code: str, message: str, path: str, **detail: Any) -> Finding:
    return _finding(code, message, field=path, **detail)


def _size_findings(spec: JobSpec, ctx: CheckContext, roles: Sequence[object]) -> Iterator[Finding]:
    """The rendered start scripts must fit in one exec argument, and together in one object."""
    if any(_text_problem(_optional_text(_get(role, "prepare_script"))) for role in roles):
        return
    if _text_problem(_optional_text(_get(spec, "run_script"))) is not None:
        return
    sizes = [len(script.encode("utf-8")) for script in start_scripts(spec, ctx)]
    for role, size in zip(roles, sizes, strict=True):
        if size > MAX_START_SCRIPT_BYTES:
            name = _get(role, "name")
            yield _finding(
                "start_script.too_long",
                _(
                    "The start script would be %(size)d bytes; Linux accepts at most %(max)d. "
                    "Shorten the scripts or move them into the image."
                )
                % {"size": size, "max": MAX_START_SCRIPT_BYTES},
                role=name[:_SHOWN_MAX] if isinstance(name, str) else None,
                field="run_script",
                size=size,
                max=MAX_START_SCRIPT_BYTES,
            )
    if sum(sizes) > MAX_MANIFEST_SCRIPT_BYTES:
        yield _finding(
            "manifest.too_large",
            _(
                "The start scripts add up to %(size)d bytes, more than a Kubernetes object "
                "holds (%(max)d)."
            )
            % {"size": sum(sizes), "max": MAX_MANIFEST_SCRIPT_BYTES},
            size=sum(sizes),
            max=MAX_MANIFEST_SCRIPT_BYTES,
        )


# -- the engine ------------------------------------------------------------------------------


def check(spec: JobSpec, ctx: CheckContext) -> list[Finding]:
    """Every finding for `spec` against `ctx`, in a stable order; never raises."""
    findings = list(_job_findings(spec, ctx))
    roles = spec_roles(spec)
    names: list[object] = []
    for index, role in enumerate(roles):
        findings += _role_findings(_Role(spec=spec, ctx=ctx, index=index, role=role), names)
        names.append(_get(role, "name", None))
    findings += _common_findings(spec, ctx, roles)
    findings += _size_findings(spec, ctx, roles)
    return findings
