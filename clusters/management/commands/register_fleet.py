"""`manage.py register_fleet --fleet FILE --simulator-url URL [--poll]` (idempotent)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from clusters.inventory.fleet import read_fleet_file, registrations
from clusters.inventory.services import (
    PollOutcome,
    cluster_register,
    network_domain_register,
    poll_cluster,
)
from clusters.simulator.fleet import FleetError
from rlark_site.foundation.exceptions import ApplicationError


class Command(BaseCommand):
    help = (
        "Register every cluster of a fleet file as served by the fleet simulator "
        "(api_url = <simulator-url>/<cluster>), its network domains, and optionally poll them."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--fleet", required=True, help="fleet YAML file")
        parser.add_argument(
            "--simulator-url", required=True, help="simulator base URL, e.g. http://127.0.0.1:8700"
        )
        parser.add_argument("--poll", action="store_true", help="poll each cluster afterwards")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            fleet_file = read_fleet_file(options["fleet"])
        except (FleetError, OSError) as error:
            raise CommandError(str(error)) from error
        try:
            clusters = self._register(fleet_file, options["simulator_url"])
        except ApplicationError as error:
            raise CommandError(error.message) from error
        if options["poll"]:
            for cluster_id in clusters:
                self._poll(cluster_id)

    def _register(self, fleet_file: Any, simulator_url: str) -> list[int]:
        cluster_ids = []
        for registration in registrations(fleet_file.fleet, simulator_url=simulator_url):
            cluster, created = cluster_register(registration=registration)
            cluster_ids.append(cluster.id)
            verb = "registered" if created else "already registered, kept in line"
            self.stdout.write(f"cluster {cluster.name}: {verb} ({cluster.api_url})")
        for domain in fleet_file.network_domains:
            network_domain_register(name=domain.name, cluster_names=domain.clusters)
            self.stdout.write(f"network domain {domain.name}: {', '.join(domain.clusters)}")
        return cluster_ids

    def _poll(self, cluster_id: int) -> None:
        result = poll_cluster(cluster_id=cluster_id)
        if result.outcome == PollOutcome.OK:
            self.stdout.write(self.style.SUCCESS(f"polled {result.summary()}"))
        else:
            self.stderr.write(self.style.WARNING(f"poll {result.summary()}"))
