"""Clusters, the global node inventory, and admin verifications of selectors."""

from __future__ import annotations

from datetime import datetime

import pgtrigger
from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.core.validators import RegexValidator
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from clusters.access import MAX_TEMPLATE, validate_command_template, validate_url_template
from clusters.kueue import ADMISSION_KUEUE, ADMISSION_NONE, KueueView
from clusters.labels import DNS_LABEL_PATTERN
from clusters.validators import validate_api_url
from rlark_site.foundation.audit.tracking import audited
from rlark_site.foundation.tenancy.models import Team

dns_label_validator = RegexValidator(
    DNS_LABEL_PATTERN,
    _("1–63 lower-case letters, digits or hyphens, starting and ending with a letter or digit."),
)


class AdmissionMode(models.TextChoices):
    """How a cluster admits RLark's Jobs (SPEC 15): as they come, or through Kueue."""

    NONE = ADMISSION_NONE, _("none (the scheduler alone)")
    KUEUE = ADMISSION_KUEUE, _("Kueue")


class ClusterState(models.TextChoices):
    NEVER_POLLED = "never_polled", _("never polled")
    OK = "ok", _("ok")
    STALE = "stale", _("stale")
    DISABLED = "disabled", _("disabled")


@audited(
    exclude=[
        "state", "last_polled_at", "last_success_at", "last_error", "failure_count",
        "next_poll_at", "poll_lease_until", "generation", "occupancy_as_of", "occupancy_error",
        "occupancy_pods",
    ]
)
class Cluster(models.Model):
    """A Kubernetes cluster RLark submits to. Credentials are Fernet-encrypted at rest."""

    name = models.CharField(max_length=63, unique=True, validators=[dns_label_validator])
    namespace = models.CharField(max_length=63, validators=[dns_label_validator])
    api_url = models.CharField(max_length=500, validators=[validate_api_url])
    token_encrypted = models.TextField(blank=True, default="")
    ca_cert_encrypted = models.TextField(blank=True, default="")
    # Mutual TLS instead of (or beside) a token: PEM certificate and private key.
    client_cert_encrypted = models.TextField(blank=True, default="")
    client_key_encrypted = models.TextField(blank=True, default="")
    verify_tls = models.BooleanField(default=True)
    enabled = models.BooleanField(default=True)
    # Access links shown on the pages of this cluster's jobs (`clusters.access`); blank: the
    # kubectl port-forward / exec commands.
    tensorboard_url_template = models.CharField(
        max_length=MAX_TEMPLATE, blank=True, default="", validators=[validate_url_template])
    ray_dashboard_url_template = models.CharField(
        max_length=MAX_TEMPLATE, blank=True, default="", validators=[validate_url_template])
    exec_command_template = models.CharField(
        max_length=MAX_TEMPLATE, blank=True, default="", validators=[validate_command_template])
    # Admission (SPEC 15, `clusters.kueue`): "kueue" puts the team's LocalQueue (the map: team
    # slug -> LocalQueue name, in the Job's namespace) on every pod template of its Jobs.
    admission = models.CharField(max_length=10, choices=AdmissionMode.choices,
                                 default=AdmissionMode.NONE)
    kueue_queues = models.JSONField(default=dict, blank=True)
    # Poll bookkeeping (not audited: it changes on every poll).
    state = models.CharField(
        max_length=20, choices=ClusterState.choices, default=ClusterState.NEVER_POLLED
    )
    last_polled_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    failure_count = models.PositiveIntegerField(default=0)
    next_poll_at = models.DateTimeField(null=True, blank=True)
    poll_lease_until = models.DateTimeField(null=True, blank=True)
    # Increases whenever the cluster's node set or any node's labels change.
    generation = models.BigIntegerField(default=0)
    # Occupancy (`NodeOccupancy`): when the last good pod listing was counted (None: never),
    # how many bound, running pods it counted, and why the latest listing was not used ("" when
    # it was). Poll bookkeeping, not audited.
    occupancy_as_of = models.DateTimeField(null=True, blank=True)
    occupancy_pods = models.PositiveIntegerField(default=0)
    occupancy_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


# The present rows of a transition table, as (cluster, labels).
_PRESENT_SQL = "SELECT id, cluster_id, labels FROM {table} WHERE NOT gone"
# The label pairs of some rows, each counted with a sign.
_LABEL_PAIRS_SQL = """
SELECT r.cluster_id, kv.key, kv.value, {sign} AS d FROM ({rows}) r
CROSS JOIN LATERAL jsonb_each_text(
    CASE WHEN jsonb_typeof(r.labels) = 'object' THEN r.labels ELSE '{{}}'::jsonb END
) AS kv(key, value)"""
_LABEL_COUNT_SQL = """
INSERT INTO "clusters_clusterlabel" AS l ("cluster_id", "key", "value", "nodes")
SELECT cluster_id, key, value, sum(d) FROM ({pairs}) AS pairs
GROUP BY cluster_id, key, value HAVING sum(d) <> 0
ON CONFLICT ("key", "value", "cluster_id") DO UPDATE SET "nodes" = l."nodes" + EXCLUDED."nodes";
DELETE FROM "clusters_clusterlabel" WHERE "nodes" <= 0;
RETURN NULL;"""


def _label_count_sql(*, added: str | None = None, removed: str | None = None) -> str:
    """Trigger body keeping `ClusterLabel` equal to the label pairs of the present nodes.

    `added` / `removed` name the transition tables whose present rows count +1 / -1. With
    both (an update), a row whose cluster, labels and gone flag did not change is taken out
    of each side first (`EXCEPT`, hashed: linear, whatever the planner guesses of transition
    tables), so bookkeeping updates such as a new `resource_version` expand no labels at all.
    """
    sides = [(table, other, sign) for table, other, sign in
             ((added, removed, 1), (removed, added, -1)) if table]
    parts = []
    for table, other, sign in sides:
        rows = _PRESENT_SQL.format(table=table)
        if other:
            rows = f"{rows} EXCEPT {_PRESENT_SQL.format(table=other)}"
        parts.append(_LABEL_PAIRS_SQL.format(sign=sign, rows=rows))
    return _LABEL_COUNT_SQL.format(pairs=" UNION ALL ".join(parts))


@audited(exclude=["last_seen", "resource_version"])
class Node(models.Model):
    """One node of one cluster, as last polled. Vanished nodes are marked gone, not deleted."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    namespace = models.CharField(max_length=63)
    labels = models.JSONField(default=dict)
    gpu = models.IntegerField(null=True, blank=True)  # allocatable nvidia.com/gpu
    devices = models.JSONField(default=dict)  # allocatable rlinf.io/* counts
    # Allocatable cpu (millicores), memory (bytes) and pods; None when not reported.
    cpu_milli = models.BigIntegerField(null=True, blank=True)
    memory_bytes = models.BigIntegerField(null=True, blank=True)
    pods = models.IntegerField(null=True, blank=True)
    ready = models.BooleanField(default=True)
    gone = models.BooleanField(default=False)
    first_seen = models.DateTimeField(auto_now_add=True)
    # Stored only when the node vanishes: the last successful poll that listed it. A present
    # node was listed by its cluster's last successful poll (see `seen_at`), so polls do not
    # rewrite every row to say so.
    last_seen = models.DateTimeField(null=True, blank=True)
    # The node's `metadata.resourceVersion` when the row was last compared with the cluster:
    # a poll skips nodes it sees at the same version (poll bookkeeping, not audited).
    resource_version = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="unique_node_per_cluster")
        ]
        indexes = [
            # fastupdate off: with GIN's pending list, rows the poll writes wait unsorted until
            # a vacuum and every containment lookup scans them all (38 ms instead of 0.4 ms
            # on 50,000 freshly written nodes); a poll's write costs a little more instead.
            GinIndex(fields=["labels"], name="node_labels_gin", opclasses=["jsonb_path_ops"],
                     fastupdate=False),
            models.Index(fields=["gone", "cluster"], name="node_gone_cluster"),
        ]
        triggers = [
            pgtrigger.Trigger(
                name="label_count_insert", level=pgtrigger.Statement, when=pgtrigger.After,
                operation=pgtrigger.Insert, referencing=pgtrigger.Referencing(new="new_rows"),
                func=_label_count_sql(added="new_rows"),
            ),
            pgtrigger.Trigger(
                name="label_count_update", level=pgtrigger.Statement, when=pgtrigger.After,
                operation=pgtrigger.Update,
                referencing=pgtrigger.Referencing(old="old_rows", new="new_rows"),
                func=_label_count_sql(added="new_rows", removed="old_rows"),
            ),
            pgtrigger.Trigger(
                name="label_count_delete", level=pgtrigger.Statement, when=pgtrigger.After,
                operation=pgtrigger.Delete, referencing=pgtrigger.Referencing(old="old_rows"),
                func=_label_count_sql(removed="old_rows"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.name}"

    @property
    def seen_at(self) -> datetime | None:
        """When a successful poll last listed this node (select `cluster` with the node)."""
        return self.last_seen if self.gone else self.cluster.last_success_at


class NodeOccupancy(models.Model):
    """What the pods bound to a node request, as the cluster's last good occupancy pass
    counted them (`Cluster.occupancy_as_of`); a node without a row was never counted.

    Not audited, and a row of its own rather than columns of the audited `Node`: it follows
    pod churn (every pod that starts or ends changes it), which the audit must not. A pass
    writes only the rows whose `requested` changed (`changed_at` says when that was).
    """

    node = models.OneToOneField(Node, on_delete=models.CASCADE, primary_key=True,
                                related_name="occupancy")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    # {resource: Kubernetes quantity string} for cpu, memory, pods, nvidia.com/gpu and
    # rlinf.io/*: the sum of the bound, running pods' effective requests (`pods`: how many);
    # resources nobody requests are left out.
    requested = models.JSONField(default=dict)
    changed_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["cluster"], name="node_occupancy_cluster")]

    def __str__(self) -> str:
        return f"{self.node_id}: {self.requested}"


class ClusterLabel(models.Model):
    """One `key=value` label pair carried by present nodes of a cluster, and by how many.

    Derived from `Node` by the statement triggers above, in the same transaction as the node
    write, whoever writes (the poll, a fixture, raw SQL): it is never written by hand. It
    answers "which clusters does this single condition reach" (`clusters.matching`) and "which
    pairs does this cluster offer" (the wizard) without expanding every node's labels. Not
    audited: it only restates `Node.labels`, whose every change is.
    """

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="label_pairs")
    key = models.TextField()
    value = models.TextField()
    nodes = models.IntegerField()  # present (not gone) nodes of the cluster carrying the pair

    class Meta:
        ordering = ["cluster", "key", "value"]
        constraints = [
            models.UniqueConstraint(fields=["key", "value", "cluster"], name="unique_cluster_label")
        ]
        indexes = [
            # Empty but for the moment inside a trigger between a count reaching 0 and its
            # row's removal: lets that removal find the row without scanning the table.
            models.Index(fields=["id"], condition=Q(nodes__lte=0), name="cluster_label_unused"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id}: {self.key}={self.value} ({self.nodes})"


@audited()
class StorageClass(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="storage_classes")
    name = models.CharField(max_length=253)

    class Meta:
        ordering = ["cluster__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "name"], name="unique_storage_class")
        ]

    def __str__(self) -> str:
        return self.name


@audited()
class NetworkDomain(models.Model):
    """An admin-defined cross-cluster network domain and the clusters it spans."""

    name = models.CharField(max_length=63, unique=True, validators=[dns_label_validator])
    description = models.TextField(blank=True, default="")
    clusters = models.ManyToManyField(Cluster, related_name="network_domains", blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class KueueQueues(models.Model):
    """What Kueue on a cluster reported at its last inventory poll: the ClusterQueues (quota
    per flavor and resource, what is used and reserved) and the LocalQueues, as
    `clusters.kueue.KueueView.as_dict` stores them. `error` says why the last read failed
    (the queues kept are the last good ones). Written by the poll only when it changed; not
    audited: it is the cluster's report, like a node's readiness, and it changes with every
    admitted job."""

    cluster = models.OneToOneField(Cluster, on_delete=models.CASCADE, primary_key=True,
                                   related_name="kueue")
    cluster_queues = models.JSONField(default=list)
    local_queues = models.JSONField(default=list)
    read_at = models.DateTimeField(null=True, blank=True)  # the last read that succeeded
    error = models.TextField(blank=True, default="")

    def __str__(self) -> str:
        return f"{self.cluster_id}: {len(self.cluster_queues)} ClusterQueues"

    def view(self) -> KueueView:
        return KueueView.from_stored(
            self.cluster_queues, self.local_queues,
            as_of=self.read_at.isoformat() if self.read_at else "", error=self.error,
        )


class ClusterJob(models.Model):
    """A Job seen on a cluster by the inventory poll (so job names stay unique fleet-wide)."""

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="remote_jobs")
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253, db_index=True)
    uid = models.CharField(max_length=64, blank=True, default="")
    seen_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "namespace", "name"], name="unique_cluster_job"
            )
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id}/{self.namespace}/{self.name}"


class VerificationState(models.TextChoices):
    PENDING = "pending", _("pending")
    APPROVED = "approved", _("approved")
    REJECTED = "rejected", _("rejected")
    STALE = "stale", _("stale")


@audited()
class Verification(models.Model):
    """A platform admin's check of one (cluster, selector) combination against the inventory.

    The matches are computed when requested and stored with the inventory generations they
    came from; an approval holds for exactly that snapshot.
    """

    team = models.ForeignKey(Team, on_delete=models.CASCADE, related_name="verifications")
    cluster = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="verifications")
    selector = models.JSONField()  # {key: value}
    selector_key = models.TextField()  # canonical "k=v,k2=v2" (sorted) for exact lookups
    for_header_role = models.BooleanField(default=False)
    requested_gpu = models.IntegerField(null=True, blank=True)
    requested_devices = models.JSONField(default=dict, blank=True)
    requested_host_paths = models.JSONField(default=list, blank=True)
    request_note = models.TextField(blank=True, default="")
    # Which job draft and role asked (names, since clusters does not know jobs); empty when
    # the request came from the API without them.
    requested_for_job = models.CharField(max_length=63, blank=True, default="")
    requested_for_role = models.CharField(max_length=63, blank=True, default="")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # Snapshot of the automated result at request time.
    matches = models.JSONField(default=list)  # [{cluster, name, namespace, gpu, devices, ready}]
    match_signature = models.JSONField(default=list)  # [[cluster, node], ...] sorted
    # What pages and answers show of the snapshot instead of its node list (it never grows
    # with the fleet): {count, per_cluster: [{cluster, count, ready}], gpu_max, devices_max}.
    match_summary = models.JSONField(default=dict)
    inventory_generations = models.JSONField(default=dict)  # {cluster: generation}
    # Decision.
    state = models.CharField(
        max_length=20, choices=VerificationState.choices, default=VerificationState.PENDING
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True, default="")
    confirmed_gpu = models.IntegerField(null=True, blank=True)
    confirmed_devices = models.JSONField(default=dict, blank=True)
    confirmed_host_paths = models.JSONField(default=list, blank=True)
    # Drift: set when a later poll changes the matched node set of an approval.
    stale_at = models.DateTimeField(null=True, blank=True)
    drift = models.JSONField(default=dict, blank=True)  # {added: [...], removed: [...]}

    class Meta:
        ordering = ["created_at", "id"]
        indexes = [
            models.Index(fields=["team", "cluster", "selector_key"], name="verification_lookup"),
            models.Index(fields=["state", "created_at"], name="verification_queue"),
        ]

    def __str__(self) -> str:
        return f"{self.cluster_id}: {self.selector_key} ({self.state})"
