"""Writes of the cluster registry and the inventory poll.

A poll claims its cluster with a conditional UPDATE of `poll_lease_until` (two pollers
never work on one cluster), reads everything from the cluster through the gateway
outside any transaction, then writes the snapshot in one transaction that also checks
the lease is still its own, releases it and records the outcome. A failing cluster is
retried with exponential backoff and shown as stale; it never touches other clusters.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum

from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import ProtectedError, Q
from django.utils import timezone
from django.utils.translation import gettext as _

from clusters.credentials import CredentialError, credentials_for, decrypt, encrypt, reencrypt
from clusters.credentials import is_current as credential_is_current
from clusters.inventory import conf
from clusters.inventory.kueue import KueueRead, read_kueue, store_kueue
from clusters.inventory.occupancy import OccupancyProblem, Tally, tally
from clusters.inventory.sync import (
    RemoteJob,
    Snapshot,
    SyncStats,
    apply_snapshot,
    write_occupancy,
)
from clusters.k8s import (
    BadRequest,
    Credentials,
    KubeError,
    NodeInfo,
    NotFound,
    PodUsage,
    iter_node_pages,
    iter_pod_usage_pages,
    list_jobs,
    list_storage_classes,
)
from clusters.kueue import ADMISSION_CHOICES, normalised_queue_map, queue_map_problems
from clusters.models import Cluster, ClusterState, NetworkDomain
from clusters.signals import inventory_changed
from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.tenancy.models import Team

logger = logging.getLogger(__name__)

_ERROR_MAX = 2000


# The registry


def _validated(cluster: Cluster) -> Cluster:
    try:
        cluster.full_clean()
    except ValidationError as exc:
        errors = exc.message_dict
        message = "; ".join(f"{field}: {' '.join(texts)}" for field, texts in errors.items())
        raise ApplicationError(message, extra={"errors": errors}) from exc
    return cluster


def _enabled_state(cluster: Cluster) -> str:
    return ClusterState.OK if cluster.last_success_at else ClusterState.NEVER_POLLED


@transaction.atomic
def cluster_create(
    *,
    name: str,
    namespace: str,
    api_url: str,
    token: str = "",
    ca_cert: str = "",
    verify_tls: bool = True,
    enabled: bool = True,
    client_cert: str = "",
    client_key: str = "",
    tensorboard_url_template: str = "",
    ray_dashboard_url_template: str = "",
    exec_command_template: str = "",
    admission: str = "none",
    kueue_queues: Mapping[str, str] | None = None,
) -> Cluster:
    """Register a cluster; it is polled at the next beat round."""
    queues = _admission_checked(admission, kueue_queues or {})
    cluster = _validated(
        Cluster(
            name=name,
            namespace=namespace,
            api_url=api_url,
            token_encrypted=encrypt(token),
            ca_cert_encrypted=encrypt(ca_cert),
            client_cert_encrypted=encrypt(client_cert),
            client_key_encrypted=encrypt(client_key),
            verify_tls=verify_tls,
            enabled=enabled,
            tensorboard_url_template=tensorboard_url_template,
            ray_dashboard_url_template=ray_dashboard_url_template,
            exec_command_template=exec_command_template,
            admission=admission,
            kueue_queues=queues,
            state=ClusterState.NEVER_POLLED if enabled else ClusterState.DISABLED,
        )
    )
    cluster.save()
    return cluster


@transaction.atomic
def cluster_update(
    *,
    cluster: Cluster,
    namespace: str | None = None,
    api_url: str | None = None,
    token: str | None = None,
    ca_cert: str | None = None,
    verify_tls: bool | None = None,
    enabled: bool | None = None,
    client_cert: str | None = None,
    client_key: str | None = None,
    tensorboard_url_template: str | None = None,
    ray_dashboard_url_template: str | None = None,
    exec_command_template: str | None = None,
    admission: str | None = None,
    kueue_queues: Mapping[str, str] | None = None,
) -> Cluster:
    """Change a cluster. None keeps a field; an empty credential or template removes it.

    Only fields whose value really changes are saved, so the audit shows real changes.
    """
    changed: set[str] = set()

    def put(field: str, value: object) -> None:
        if getattr(cluster, field) != value:
            setattr(cluster, field, value)
            changed.add(field)

    if namespace is not None:
        put("namespace", namespace)
    if api_url is not None:
        put("api_url", api_url)
    if verify_tls is not None:
        put("verify_tls", verify_tls)
    for template, value in (("tensorboard_url_template", tensorboard_url_template),
                            ("ray_dashboard_url_template", ray_dashboard_url_template),
                            ("exec_command_template", exec_command_template)):
        if value is not None:
            put(template, value)
    if token is not None and _secret_differs(cluster.token_encrypted, token):
        put("token_encrypted", encrypt(token))
    if ca_cert is not None and _secret_differs(cluster.ca_cert_encrypted, ca_cert):
        put("ca_cert_encrypted", encrypt(ca_cert))
    for stored, value in (("client_cert_encrypted", client_cert),
                          ("client_key_encrypted", client_key)):
        if value is not None and _secret_differs(getattr(cluster, stored), value):
            put(stored, encrypt(value))
    if admission is not None or kueue_queues is not None:
        wanted = admission if admission is not None else cluster.admission
        queues = cluster.kueue_queues if kueue_queues is None else kueue_queues
        put("kueue_queues", _admission_checked(wanted, queues))
        put("admission", wanted)
    if enabled is not None and enabled != cluster.enabled:
        put("enabled", enabled)
        put("state", _enabled_state(cluster) if enabled else ClusterState.DISABLED)
        put("next_poll_at", timezone.now() if enabled else None)
    if changed:
        _validated(cluster).save(update_fields=sorted(changed))
    return cluster


def _admission_checked(admission: str, kueue_queues: Mapping[str, str]) -> dict[str, str]:
    """The team → LocalQueue map as stored, or ApplicationError (400) saying what is wrong:
    `admission` one of `none`/`kueue`, the map bounded, of known teams and DNS-label queues."""
    errors: dict[str, list[str]] = {}
    if admission not in ADMISSION_CHOICES:
        errors["admission"] = [_("Admission must be one of: %(choices)s.")
                               % {"choices": ", ".join(ADMISSION_CHOICES)}]
    known = set(Team.objects.filter(slug__in=[str(t)[:50] for t in kueue_queues][:1000])
                .values_list("slug", flat=True)) if isinstance(kueue_queues, Mapping) else set()
    if problems := queue_map_problems(kueue_queues, known_teams=known):
        errors["kueue_queues"] = problems
    if errors:
        message = "; ".join(f"{field}: {' '.join(texts)}" for field, texts in errors.items())
        raise ApplicationError(message, extra={"field": next(iter(errors)), "errors": errors})
    return normalised_queue_map(kueue_queues)


def _secret_differs(stored: str, wanted: str) -> bool:
    try:
        return decrypt(stored) != wanted
    except CredentialError:
        return True


def cluster_set_enabled(*, cluster: Cluster, enabled: bool) -> Cluster:
    """Stop or resume polling a cluster (its nodes stay in the inventory)."""
    return cluster_update(cluster=cluster, enabled=enabled)


@transaction.atomic
def cluster_delete(*, cluster: Cluster) -> None:
    """Remove a cluster and its inventory; refused while verifications refer to it."""
    try:
        cluster.delete()
    except ProtectedError as exc:
        raise ApplicationError(
            _("Cluster %(name)s has verifications on record; disable it instead.")
            % {"name": cluster.name},
            status_code=409,
        ) from exc


def _queue_poll(cluster_id: int) -> None:
    """Queue a poll task once the current transaction commits."""
    from clusters.tasks import poll_cluster_task  # the task module imports this one

    transaction.on_commit(lambda: poll_cluster_task.delay(cluster_id))


@transaction.atomic
def cluster_poll_request(*, cluster: Cluster) -> None:
    """Poll a cluster now (on demand), in the background."""
    if not cluster.enabled:
        raise ApplicationError(
            _("Cluster %(name)s is disabled; enable it before polling.") % {"name": cluster.name},
            status_code=409,
        )
    _queue_poll(cluster.id)


def credentials_rotate() -> int:
    """Re-encrypt every stored credential with the newest key; returns how many changed.

    Credentials already under the newest key are left alone (no audit noise).
    """
    rotated = 0
    for cluster_id in Cluster.objects.order_by("id").values_list("id", flat=True):
        with transaction.atomic():
            cluster = Cluster.objects.select_for_update().get(id=cluster_id)
            fields = [
                field
                for field in ("token_encrypted", "ca_cert_encrypted", "client_cert_encrypted",
                              "client_key_encrypted")
                if not credential_is_current(getattr(cluster, field))
            ]
            for field in fields:
                try:
                    setattr(cluster, field, reencrypt(getattr(cluster, field)))
                except CredentialError as error:
                    raise CredentialError(f"Cluster {cluster.name}: {error}") from error
            if fields:
                cluster.save(update_fields=fields)
                rotated += 1
    return rotated


@dataclass(frozen=True)
class ClusterRegistration:
    """A cluster as a fleet file (or another source of truth) describes it."""

    name: str
    namespace: str
    api_url: str
    token: str
    verify_tls: bool


@transaction.atomic
def cluster_register(*, registration: ClusterRegistration) -> tuple[Cluster, bool]:
    """Create the cluster, or bring an existing one in line; `(cluster, created)`.

    Idempotent: registering the same description twice changes nothing (and writes nothing).
    """
    cluster = Cluster.objects.select_for_update().filter(name=registration.name).first()
    if cluster is None:
        created = cluster_create(
            name=registration.name,
            namespace=registration.namespace,
            api_url=registration.api_url,
            token=registration.token,
            verify_tls=registration.verify_tls,
        )
        return created, True
    updated = cluster_update(
        cluster=cluster,
        namespace=registration.namespace,
        api_url=registration.api_url,
        token=registration.token,
        verify_tls=registration.verify_tls,
    )
    return updated, False


@transaction.atomic
def network_domain_register(*, name: str, cluster_names: Sequence[str]) -> NetworkDomain:
    """Create (or update) a network domain spanning exactly the named clusters."""
    clusters = list(Cluster.objects.filter(name__in=cluster_names))
    missing = sorted(set(cluster_names) - {c.name for c in clusters})
    if missing:
        raise ApplicationError(
            _("Network domain %(name)s: unknown clusters %(missing)s.")
            % {"name": name, "missing": ", ".join(missing)}
        )
    domain = NetworkDomain.objects.filter(name=name).first()
    if domain is None:
        domain = NetworkDomain(name=name)
        try:
            domain.full_clean()
        except ValidationError as exc:
            raise ApplicationError(f"Network domain {name}: {exc.messages[0]}") from exc
        domain.save()
    domain.clusters.set(clusters)
    return domain


# The inventory poll


class PollOutcome(StrEnum):
    OK = "ok"
    FAILED = "failed"
    BUSY = "busy"  # another poller holds the lease
    SKIPPED = "skipped"  # missing or disabled


@dataclass(frozen=True)
class PollResult:
    """What one `poll_cluster` call did."""

    cluster_id: int
    cluster: str
    outcome: PollOutcome
    error: str = ""
    generation: int = 0
    pages: int = 0
    stats: SyncStats = field(default_factory=SyncStats)  # what the poll wrote (OK only)
    occupancy_problem: str = ""  # why the pod listing was not used (OK polls only)

    @property
    def ok(self) -> bool:
        return self.outcome == PollOutcome.OK

    @property
    def changed(self) -> bool:
        return self.stats.changed

    def summary(self) -> str:
        """One line for logs and commands."""
        if self.outcome != PollOutcome.OK:
            detail = f" ({self.error})" if self.error else ""
            return f"{self.cluster}: {self.outcome.value}{detail}"
        stats = self.stats
        occupancy = (f"occupancy not updated ({self.occupancy_problem})"
                     if self.occupancy_problem else
                     f"occupancy of {stats.pods} pods ({stats.occupancy_written} nodes written)")
        return (
            f"{self.cluster}: ok, {stats.nodes} nodes in {self.pages} pages "
            f"(new {stats.created}, changed {stats.updated}, unchanged {stats.unchanged}, "
            f"gone {stats.gone}, back {stats.returned}), generation {self.generation}; "
            f"{occupancy}"
        )


class _LeaseLost(Exception):
    """The lease expired and another poller took the cluster over."""


def _claim(cluster_id: int) -> datetime | None:
    """Take the cluster's poll lease; returns its expiry (our token) or None when busy."""
    now = timezone.now()
    until = now + conf.lease_duration()
    claimed = (
        Cluster.objects.filter(id=cluster_id, enabled=True)
        .filter(Q(poll_lease_until__isnull=True) | Q(poll_lease_until__lte=now))
        .update(poll_lease_until=until)
    )
    return until if claimed else None


def _not_claimed(cluster_id: int) -> PollResult:
    cluster = Cluster.objects.filter(id=cluster_id).first()
    if cluster is None:
        return PollResult(cluster_id, "", PollOutcome.SKIPPED, "no such cluster")
    if not cluster.enabled:
        return PollResult(cluster_id, cluster.name, PollOutcome.SKIPPED, "disabled")
    return PollResult(
        cluster_id, cluster.name, PollOutcome.BUSY, "another poll holds the lease"
    )


def _list_nodes(credentials: Credentials) -> tuple[list[NodeInfo], int]:
    """Every node, page by page; one restart when the continue token expires mid-listing."""
    for restart in (False, True):
        nodes: list[NodeInfo] = []
        pages = 0
        try:
            for page in iter_node_pages(
                credentials=credentials,
                page_size=conf.page_size(),
                timeout=conf.kube_timeout(),
                attempts=conf.read_attempts(),
            ):
                nodes.extend(page)
                pages += 1
            return nodes, pages
        except BadRequest as error:
            if restart or error.reason != "Expired":
                raise
    raise AssertionError("unreachable")


def _list_jobs(credentials: Credentials, namespace: str) -> list[RemoteJob]:
    """The rlinf.io Jobs in the cluster's namespace (none when the CRD is not installed)."""
    try:
        documents = list_jobs(
            credentials=credentials,
            namespace=namespace,
            timeout=conf.kube_timeout(),
            attempts=conf.read_attempts(),
        )
    except NotFound:
        return []
    jobs = []
    for document in documents:
        metadata = document.get("metadata") or {}
        if metadata.get("name"):
            jobs.append(
                RemoteJob(
                    namespace=str(metadata.get("namespace") or namespace),
                    name=str(metadata["name"]),
                    uid=str(metadata.get("uid") or ""),
                )
            )
    return jobs


def _count_pods(credentials: Credentials, node_names: set[str]) -> tuple[Tally, int]:
    """The cluster-wide listing of bound, running pods, added up per node as the pages come
    (one page held at a time), and how many pages it took; one restart when the continue
    token expires mid-listing."""
    for restart in (False, True):
        pages = 0

        def counted_pages() -> Iterator[list[PodUsage]]:
            nonlocal pages
            for page in iter_pod_usage_pages(
                credentials=credentials, page_size=conf.page_size(),
                max_pods=conf.occupancy_max_pods(), max_pages=conf.occupancy_max_pages(),
                timeout=conf.kube_timeout(), attempts=conf.read_attempts(),
            ):
                pages += 1
                yield page

        try:
            return tally(counted_pages(), nodes=node_names), pages
        except BadRequest as error:
            if restart or error.reason != "Expired":
                raise
    raise AssertionError("unreachable")


def _read_occupancy(credentials: Credentials, nodes: list[NodeInfo]) -> tuple[
        Tally | None, str, int]:
    """(the pods added up per node, "", pages) or (None, why not, 0): a pod listing that
    fails or is not one (too large, garbage) is a problem of the cluster's occupancy only."""
    try:
        counted, pages = _count_pods(credentials, {node.name for node in nodes if node.name})
    except (KubeError, OccupancyProblem) as error:
        return None, _error_text(error), 0
    return counted, "", pages


def _fetch(cluster: Cluster) -> Snapshot:
    credentials = credentials_for(cluster)
    nodes, pages = _list_nodes(credentials)
    storage_classes = list_storage_classes(
        credentials=credentials, timeout=conf.kube_timeout(), attempts=conf.read_attempts()
    )
    jobs = _list_jobs(credentials, cluster.namespace)
    occupancy, problem, pod_pages = _read_occupancy(credentials, nodes)
    return Snapshot(nodes=nodes, pages=pages, storage_classes=storage_classes, jobs=jobs,
                    occupancy=occupancy, occupancy_problem=problem, pod_pages=pod_pages)


def _locked_with_lease(cluster_id: int, lease: datetime) -> Cluster:
    cluster = Cluster.objects.select_for_update().filter(id=cluster_id).first()
    if cluster is None or cluster.poll_lease_until != lease:
        raise _LeaseLost
    return cluster


def _announce(cluster: Cluster, generation: int) -> None:
    transaction.on_commit(
        lambda: inventory_changed.send(sender=Cluster, cluster=cluster, generation=generation)
    )


def _ok_result(cluster: Cluster, snapshot: Snapshot, stats: SyncStats) -> PollResult:
    return PollResult(
        cluster_id=cluster.id,
        cluster=cluster.name,
        outcome=PollOutcome.OK,
        generation=cluster.generation,
        pages=snapshot.pages,
        stats=stats,
        occupancy_problem=snapshot.occupancy_problem,
    )


def _record_occupancy(cluster: Cluster, snapshot: Snapshot, stats: SyncStats,
                      now: datetime) -> None:
    """Write the counted occupancy (changed rows only) and its time; or, when the listing
    could not be used, keep the last good one and say why."""
    if snapshot.occupancy is None:
        cluster.occupancy_error = snapshot.occupancy_problem[:_ERROR_MAX]
        logger.warning("occupancy of %s not updated: %s", cluster.name, cluster.occupancy_error)
        return
    stats.pods = snapshot.occupancy.pods
    stats.occupancy_written = write_occupancy(
        cluster=cluster, counted=snapshot.occupancy, now=now, batch_size=conf.page_size())
    cluster.occupancy_as_of = now
    cluster.occupancy_pods = snapshot.occupancy.pods
    cluster.occupancy_error = ""


@transaction.atomic
def _record_success(cluster_id: int, lease: datetime, snapshot: Snapshot,
                    kueue: KueueRead | None = None) -> PollResult:
    cluster = _locked_with_lease(cluster_id, lease)
    stats = apply_snapshot(cluster=cluster, snapshot=snapshot, batch_size=conf.page_size())
    store_kueue(cluster=cluster, read=kueue)
    now = timezone.now()
    _record_occupancy(cluster, snapshot, stats, now)
    cluster.generation += int(stats.node_set_or_labels_changed)
    cluster.state = ClusterState.OK
    cluster.last_polled_at = cluster.last_success_at = now
    cluster.last_error = ""
    cluster.failure_count = 0
    cluster.next_poll_at = now + conf.poll_interval()
    cluster.poll_lease_until = None
    cluster.save(
        update_fields=[
            "generation", "state", "last_polled_at", "last_success_at", "last_error",
            "failure_count", "next_poll_at", "poll_lease_until", "occupancy_as_of",
            "occupancy_pods", "occupancy_error",
        ]
    )
    if stats.changed:
        _announce(cluster, cluster.generation)
    return _ok_result(cluster, snapshot, stats)


def retry_delay(failure_count: int) -> timedelta:
    """The pause after the `failure_count`-th failure in a row: base, 2x, 4x, ... up to the cap."""
    doubled = conf.retry_base() * 2 ** max(0, min(failure_count - 1, 30))
    return min(doubled, conf.retry_cap())


def _error_text(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:_ERROR_MAX]


@transaction.atomic
def _record_failure(cluster_id: int, lease: datetime, error: BaseException) -> PollResult:
    cluster = _locked_with_lease(cluster_id, lease)
    now = timezone.now()
    cluster.state = ClusterState.STALE
    cluster.last_polled_at = now
    cluster.last_error = _error_text(error)
    cluster.failure_count += 1
    cluster.next_poll_at = now + retry_delay(cluster.failure_count)
    cluster.poll_lease_until = None
    cluster.save(
        update_fields=[
            "state", "last_polled_at", "last_error", "failure_count", "next_poll_at",
            "poll_lease_until",
        ]
    )
    logger.warning("inventory poll of %s failed: %s", cluster.name, cluster.last_error)
    return PollResult(
        cluster.id, cluster.name, PollOutcome.FAILED, cluster.last_error,
        generation=cluster.generation,
    )


def poll_cluster(*, cluster_id: int) -> PollResult:
    """Poll one cluster's nodes, storage classes and Jobs (and a Kueue cluster's queues,
    `clusters.inventory.kueue`) into the inventory.

    Returns BUSY without calling the cluster when another poll holds its lease, and
    SKIPPED for a missing or disabled cluster. Cluster errors (HTTP 5xx, 401, timeouts,
    refused connections, undecryptable credentials) end as FAILED with the cluster
    marked stale; anything unexpected is recorded the same way and then re-raised.
    """
    lease = _claim(cluster_id)
    if lease is None:
        return _not_claimed(cluster_id)
    try:
        cluster = Cluster.objects.get(id=cluster_id)
        snapshot = _fetch(cluster)
        return _record_success(cluster_id, lease, snapshot, read_kueue(cluster))
    except _LeaseLost:
        return _lease_lost(cluster_id)
    except (KubeError, CredentialError) as error:
        return _failed(cluster_id, lease, error)
    except Exception as error:
        _failed(cluster_id, lease, error)
        raise


def _lease_lost(cluster_id: int) -> PollResult:
    name = Cluster.objects.filter(id=cluster_id).values_list("name", flat=True).first()
    return PollResult(cluster_id, name or "", PollOutcome.BUSY, "the poll lease was lost")


def _failed(cluster_id: int, lease: datetime, error: BaseException) -> PollResult:
    try:
        return _record_failure(cluster_id, lease, error)
    except _LeaseLost:
        return _lease_lost(cluster_id)


@transaction.atomic
def clusters_due_claim() -> list[int]:
    """Ids of enabled clusters due for a poll, each pushed one interval ahead.

    Pushing `next_poll_at` at once means a poll that is queued but not started yet is not
    queued again by the next beat round; the poll itself then sets the real next time.
    """
    now = timezone.now()
    due = list(
        Cluster.objects.select_for_update(skip_locked=True)
        .filter(enabled=True)
        .filter(Q(next_poll_at__isnull=True) | Q(next_poll_at__lte=now))
        .filter(Q(poll_lease_until__isnull=True) | Q(poll_lease_until__lte=now))
        .order_by("id")
        .values_list("id", flat=True)
    )
    if due:
        Cluster.objects.filter(id__in=due).update(next_poll_at=now + conf.poll_interval())
    return due


def poll_due_clusters() -> list[int]:
    """Queue one poll task per due cluster (after commit); returns their ids."""
    with transaction.atomic():
        due = clusters_due_claim()
        for cluster_id in due:
            _queue_poll(cluster_id)
    return due
