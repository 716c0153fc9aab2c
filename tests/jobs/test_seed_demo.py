"""`manage.py seed_demo` (what `make run` seeds): the demo launch list records the image the
walkthrough uses, so a job following docs/walkthrough.md shows no launch_list.image finding."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from clusters.models import Cluster
from jobs.core.findings import check
from jobs.core.spec import LaunchListImages
from jobs.models import LaunchList
from tests.conftest import DEMO_FLEET
from tests.jobs.fleet_context import clean_context, clean_spec, with_role

pytestmark = pytest.mark.django_db

WALKTHROUGH = Path(__file__).resolve().parents[2] / "docs" / "walkthrough.md"


def test_the_demo_launch_list_records_the_walkthroughs_image(demo_simulator: Any) -> None:
    call_command("seed_demo", fleet=str(DEMO_FLEET), simulator_url=demo_simulator.base_url,
                 no_poll=True)
    call_command("seed_demo", fleet=str(DEMO_FLEET), simulator_url=demo_simulator.base_url,
                 no_poll=True)  # idempotent
    [launch_list] = LaunchList.objects.filter(team__slug="vision-rl")
    image = launch_list.image
    # the walkthrough names it as "repo@sha256:abab…ab (`ab` 32 times)"
    shown = re.search(r"`(\S+@sha256:)abab…ab` \(`ab` 32 times", WALKTHROUGH.read_text())
    assert shown is not None and image == shown.group(1) + "ab" * 32
    spec = clean_spec()
    for index in range(len(spec.roles)):
        spec = with_role(spec, index, image=image)
    ctx = replace(clean_context(spec), launch_list_images=LaunchListImages(image=image))
    assert [f.code for f in check(spec, ctx) if f.code.startswith("launch_list.")] == []


def test_the_demo_maps_its_teams_to_the_kueue_clusters_local_queues(demo_simulator: Any) -> None:
    """deploy/fleets/demo.yaml's gpu-b runs Kueue: seed_demo turns its admission to kueue with
    each demo team's LocalQueue, and a poll reads its ClusterQueues (make run shows them)."""
    call_command("seed_demo", fleet=str(DEMO_FLEET), simulator_url=demo_simulator.base_url)
    call_command("seed_demo", fleet=str(DEMO_FLEET), simulator_url=demo_simulator.base_url,
                 no_poll=True)  # idempotent
    clusters = {c.name: c for c in Cluster.objects.all()}
    assert (clusters["gpu-b"].admission, clusters["gpu-b"].kueue_queues) == (
        "kueue", {"nlp-rl": "nlp-rl-queue", "vision-rl": "vision-rl-queue"})
    assert {clusters[n].admission for n in ("gpu-a", "cpu-c")} == {"none"}
    queues = clusters["gpu-b"].kueue.view()
    assert [q.name for q in queues.cluster_queues] == ["nlp-rl", "vision-rl"]
    vision = queues.cluster_queue("vision-rl")
    assert vision is not None
    assert queues.potential(vision, "default-flavor", "nvidia.com/gpu") == 24
