"""The ways into a running job's head pod: the cluster's access links (URL and command
templates set by a platform admin, `clusters.access`) filled in for the job, or, for each
one the cluster does not set, the kubectl command that works with the cluster's kubeconfig
context."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

import yaml
from django.utils.translation import gettext as _

from clusters.access import AccessValues, render_command, render_url
from clusters.models import Cluster
from jobs.models import RunRecord

__all__ = ["AccessEntry", "access_entries", "access_values"]

RAY_DASHBOARD_PORT = 8265
TENSORBOARD_PORT = 6006


@dataclass(frozen=True)
class AccessEntry:
    """One way in: a `link` (an http(s) URL) or a `command` to run; `configured` when it
    comes from the cluster's template rather than the kubectl default."""

    name: str  # tensorboard | ray_dashboard | shell
    title: str
    kind: str  # link | command
    value: str
    configured: bool


def access_values(record: RunRecord) -> AccessValues | None:
    """The placeholders' values for the record's head pod (the manifest's Head Task, first
    replica), or None when the manifest names no Head Task."""
    manifest = yaml.safe_load(record.manifest_yaml) or {}
    spec = manifest.get("spec") if isinstance(manifest, dict) else None
    spec = spec if isinstance(spec, dict) else {}
    tasks = spec.get("tasks") or []
    head = next((t for t in tasks if isinstance(t, dict) and t.get("head")), None)
    if head is None:
        return None
    tensorboard = spec.get("tensorboard") or {}
    log_dir = tensorboard.get("logDir", "") if isinstance(tensorboard, dict) else ""
    task = str(head.get("name", ""))
    return AccessValues(namespace=record.namespace, job=record.job_name, task=task,
                        pod=f"{record.job_name}-{task}-0", log_dir=str(log_dir or ""))


def _port_forward(values: AccessValues, port: int) -> str:
    return (f"kubectl -n {shlex.quote(values.namespace)} port-forward "
            f"{shlex.quote(values.pod)} {port}:{port}")


def _exec(values: AccessValues) -> str:
    return (f"kubectl -n {shlex.quote(values.namespace)} exec -it {shlex.quote(values.pod)} "
            "-c main -- bash")


def _link(name: str, title: str, template: str, values: AccessValues,
          port: int) -> AccessEntry:
    url = render_url(template, values) if template else None
    if url is not None:
        return AccessEntry(name, title, "link", url, configured=True)
    return AccessEntry(name, title, "command", _port_forward(values, port), configured=False)


def access_entries(record: RunRecord, cluster: Cluster | None = None) -> list[AccessEntry]:
    """The TensorBoard and Ray dashboard links and the shell command of the record's head
    pod; [] when there is no Head Task. `cluster` defaults to the record's (by name)."""
    values = access_values(record)
    if values is None:
        return []
    if cluster is None:
        cluster = Cluster.objects.filter(name=record.cluster).first()
    tensorboard = cluster.tensorboard_url_template if cluster else ""
    ray = cluster.ray_dashboard_url_template if cluster else ""
    command = render_command(cluster.exec_command_template, values) if (
        cluster and cluster.exec_command_template) else None
    return [
        _link("ray_dashboard", _("Ray dashboard"), ray, values, RAY_DASHBOARD_PORT),
        _link("tensorboard", _("TensorBoard"), tensorboard, values, TENSORBOARD_PORT),
        AccessEntry("shell", _("Shell in the head pod"), "command",
                    command if command is not None else _exec(values),
                    configured=command is not None),
    ]
