"""Create the demo teams, users and records, and register the demo fleet's clusters (idempotent)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser
from django.db import transaction

from clusters.inventory.services import cluster_update
from clusters.kueue import ADMISSION_KUEUE
from clusters.models import Cluster
from clusters.simulator.fleet import load_fleet
from jobs.core.sshkeys import fingerprint_sha256
from jobs.models import LaunchList, SSHKey
from rlark_site.foundation.tenancy.models import MemberRole, Membership, Team

User = get_user_model()

DEMO_PASSWORD = "rlark-demo"
ADMIN_PASSWORD = "rlark-admin"
TEAMS = [("vision-rl", "Vision RL"), ("nlp-rl", "NLP RL")]
MEMBERS = [
    ("alice", "vision-rl", MemberRole.MEMBER),
    ("bob", "vision-rl", MemberRole.MAINTAINER),
    ("carol", "nlp-rl", MemberRole.MEMBER),
]
# The image the walkthrough uses (docs/walkthrough.md), recorded on the demo launch list so a
# job following it shows no launch_list.image finding; the simulator does not pull it.
DEMO_IMAGE = "registry.example.com/rlinf/rlinf@sha256:" + "ab" * 32
# A syntactically valid ed25519 public key (demo only; nobody holds its private half).
DEMO_SSH_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIDemoKeyForRLarkWalkthroughOnly0000000000000 alice@laptop"
)


class Command(BaseCommand):
    help = "Create demo teams/users/records and register (and poll) the demo fleet's clusters."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--fleet", required=True, help="fleet YAML file")
        parser.add_argument("--simulator-url", required=True, help="base URL of the simulator")
        parser.add_argument("--no-poll", action="store_true", help="register without polling")

    def handle(self, *args: Any, **options: Any) -> None:
        self._people()
        register = ["register_fleet", "--fleet", options["fleet"],
                    "--simulator-url", options["simulator_url"]]
        call_command(*register)
        self._kueue(options["fleet"])  # before the poll, so that it reads the queues too
        if not options["no_poll"]:
            call_command(*register, "--poll")  # registering again changes nothing
        self.stdout.write(self.style.SUCCESS("demo data ready"))

    @transaction.atomic
    def _kueue(self, fleet_path: str) -> None:
        """A fleet cluster running Kueue admits through it in RLark too: each demo team is
        mapped to the cluster's LocalQueue named `<team>-queue` (deploy/fleets/demo.yaml's
        gpu-b), in the cluster's namespace."""
        for spec in load_fleet(fleet_path).clusters:
            if spec.kueue is None:
                continue
            names = {q.name for q in spec.kueue.local_queues if q.namespace == spec.namespace}
            queues = {slug: f"{slug}-queue" for slug, _ in TEAMS if f"{slug}-queue" in names}
            cluster = Cluster.objects.filter(name=spec.name).first()
            if cluster is not None:
                cluster_update(cluster=cluster, admission=ADMISSION_KUEUE, kueue_queues=queues)

    @transaction.atomic
    def _people(self) -> None:
        teams = {}
        for slug, name in TEAMS:
            teams[slug], _ = Team.objects.get_or_create(slug=slug, defaults={"name": name})
        admin = User.objects.filter(username="admin").first()
        if admin is None:
            User.objects.create_superuser("admin", password=ADMIN_PASSWORD)
        for username, slug, role in MEMBERS:
            user = User.objects.filter(username=username).first()
            if user is None:
                user = User.objects.create_user(username, password=DEMO_PASSWORD)
            Membership.objects.get_or_create(team=teams[slug], user=user, defaults={"role": role})
        alice = User.objects.get(username="alice")
        vision = teams["vision-rl"]
        if not SSHKey.objects.filter(team=vision, name="alice-laptop").exists():
            SSHKey.objects.create(team=vision, name="alice-laptop", public_key=DEMO_SSH_KEY,
                                  fingerprint=fingerprint_sha256(DEMO_SSH_KEY), created_by=alice)
        if not LaunchList.objects.filter(team=vision).exists():
            LaunchList.objects.create(
                team=vision, title="PPO math 7B — first run", created_by=alice,
                entry="python -m rlinf.train --config ppo_math_7b.yaml", image=DEMO_IMAGE,
                datasets="gsm8k (train split) from /mnt/data/gsm8k",
                models_used="Qwen2.5-7B-Instruct from /mnt/models/qwen2.5-7b",
                hyperparameters="lr=1e-6, rollout batch 512, kl 0.001",
                expected_signals=[
                    {"signal": "first rollout batch logged with reward mean",
                     "where": "Head Task log / TensorBoard scalar rollout/reward_mean",
                     "within_minutes": 20},
                ],
                # RLinf's step lines (the simulator prints them every 5 s); a demo stall is
                # seen two minutes after freezing a run (docs/progress.md, "Try it").
                progress={"pattern": "", "stall_after_seconds": 120,
                          "cancel_after_stalled_seconds": None},
            )
