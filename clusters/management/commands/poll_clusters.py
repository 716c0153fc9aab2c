"""`manage.py poll_clusters [--cluster NAME]`: poll inventories now, in this process."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from clusters.inventory.services import PollOutcome, poll_cluster
from clusters.models import Cluster


class Command(BaseCommand):
    help = (
        "Poll the inventory of every enabled cluster (or of one) synchronously, "
        "whether or not it is due. Exits with an error when a poll fails."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--cluster", help="only this cluster (by name)")

    def handle(self, *args: Any, **options: Any) -> None:
        clusters = Cluster.objects.filter(enabled=True).order_by("name")
        if options["cluster"]:
            clusters = Cluster.objects.filter(name=options["cluster"])
            if not clusters.exists():
                raise CommandError(f"No cluster named {options['cluster']!r}.")
        failed = []
        for cluster_id in clusters.values_list("id", flat=True):
            result = poll_cluster(cluster_id=cluster_id)
            if result.outcome == PollOutcome.OK:
                self.stdout.write(self.style.SUCCESS(result.summary()))
            else:
                self.stderr.write(self.style.WARNING(result.summary()))
                failed.append(result.cluster)
        if failed:
            raise CommandError(f"Not polled: {', '.join(failed)}.")
