"""Every pre-flight verdict on the demo fleet, as docs/capacity.md's table "Every verdict on
the demo fleet" tells it (issue 21: the demo fleet gets a Kueue-managed cluster and a busy
node so `make run` shows every verdict). The fleet is deploy/fleets/demo.yaml served by the
simulator over HTTP, seeded and polled by `seed_demo` as `make run` does; each row's job is
a draft of alice (vision-rl) whose one role runs on gpu-b, read back through
`GET jobs/{name}/`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from clusters.inventory.services import cluster_set_enabled
from clusters.models import Cluster
from jobs.drafts.services import job_create
from jobs.management.commands.seed_demo import DEMO_IMAGE
from rlark_site.foundation.tenancy.models import Team
from tests.conftest import DEMO_FLEET

pytestmark = pytest.mark.django_db

CAPACITY_DOC = Path(__file__).resolve().parents[2] / "docs" / "capacity.md"
ROW = re.compile(r"^\| `(\w+)` \| `([^`=]+)=([^`]+)` \| (\d+) \| (.+) \|$")


def doc_rows() -> list[tuple[str, dict[str, str], int, str]]:
    text = CAPACITY_DOC.read_text()
    table = text.split("**Every verdict on the demo fleet**")[1].split("\n\n")[1]
    rows = [ROW.match(line) for line in table.splitlines()[2:]]
    assert all(rows), table
    return [(m[1], {m[2]: m[3]}, int(m[4]), m[5]) for m in rows if m]


def test_the_table_shows_every_verdict() -> None:
    assert {verdict for verdict, *_rest in doc_rows()} == {
        "fits_now", "will_queue", "never_fits", "unknown"}


def test_each_rows_job_has_its_verdict_on_the_demo_fleet(
        demo_simulator: Any, api_client_for: Any) -> None:
    call_command("seed_demo", fleet=str(DEMO_FLEET), simulator_url=demo_simulator.base_url)
    alice = get_user_model().objects.get(username="alice")
    team = Team.objects.get(slug="vision-rl")
    api = api_client_for(alice)
    rows = doc_rows()
    later = [row for row in rows if "disables gpu-b" in row[3]]
    assert len(later) == 1
    for index, (verdict, selector, gpus, why) in enumerate(
            [row for row in rows if row not in later] + later):
        if row_disables := "disables gpu-b" in why:
            cluster_set_enabled(cluster=Cluster.objects.get(name="gpu-b"), enabled=False)
        name = f"demo-{index}"
        job_create(team=team, user=alice, data={
            "name": name, "task_type": "custom", "header_role": "Actor",
            "roles": [{"name": "Actor", "cluster": "gpu-b", "image": DEMO_IMAGE, "gpus": gpus,
                       "selector": {**selector, "topology.rlinf.io/cluster": "gpu-b"}}],
            "run_script": "python -m rlinf.train"})
        detail = api.get(f"/api/v1/jobs/{name}/").json()
        assert detail["capacity"]["verdict"] == verdict, (selector, gpus, detail["capacity"])
        codes = {f["code"] for f in detail["findings"]}
        for code in re.findall(r"`((?:capacity|gpu|admission)\.\w+)`", why):
            assert code in codes, (selector, code, codes)
        assert row_disables == (verdict == "unknown")
