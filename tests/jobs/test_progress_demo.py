"""The demo of issue 22 as README and docs tell it (`make run`): the walkthrough's job
`ppo-math-7b` advances on its page, the documented `curl` freezes it on the simulator, and a
progress pass `stall_after_seconds` later (the demo launch list's 120, which the docs name)
shows it stalled and sends `job_stalled`; `{"state": "advancing"}` resumes it and
`job_recovered` follows. The command is taken from the documents, not rewritten here."""

from __future__ import annotations

import json
import re
import urllib.request
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.urls import reverse
from django.utils import timezone

from jobs.models import EventKind, LaunchList, NotificationEvent
from jobs.progress.reader import read_cluster_progress
from jobs.records.status import sync_submitted_jobs
from rlark_site.foundation.tenancy.models import Team
from tests.conftest import DEMO_FLEET
from tests.jobs.observe_support import running_job
from tests.jobs.test_progress_pass import eager, pass_until, progress_of

pytestmark = pytest.mark.django_db
__all__ = ["eager"]  # the progress tests' settings and eager Celery, used here too
REPO = Path(__file__).resolve().parents[2]
DOCS = {name: (REPO / name).read_text()
        for name in ("README.md", "docs/walkthrough.md", "docs/progress.md")}
JOB = "ppo-math-7b"
CURL = re.compile(r"curl -s -X POST -H 'Content-Type: application/json' -d '(\{[^']*\})' \\\n"
                  r"\s*http://127\.0\.0\.1:8700(/_control/\S+/progress)")


def _documented_freeze(text: str) -> tuple[dict[str, Any], str]:
    found = CURL.search(text)
    assert found is not None, "the freeze command"
    return json.loads(found.group(1)), found.group(2)


def _post(base_url: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(base_url.rstrip("/") + path, json.dumps(body).encode(),
                                     {"Content-Type": "application/json"}, method="POST")
    with urllib.request.urlopen(request, timeout=10) as answer:
        return dict(json.loads(answer.read()))


def test_the_documents_say_the_same_command_and_limit() -> None:
    commands = {name: _documented_freeze(text) for name, text in DOCS.items()}
    assert len(set(map(json.dumps, commands.values()))) == 1, commands
    body, path = commands["README.md"]
    assert body == {"state": "frozen"}
    assert path == f"/_control/clusters/gpu-a/namespaces/rl-gpu-a/jobs/{JOB}/progress"
    for name, text in DOCS.items():
        assert re.search(r"`stall_after_seconds`\s+(?:is|to)\s+120", text), name


def test_the_documented_freeze_shows_the_stall_and_resuming_recovers(
        demo_simulator: Any, team: Team, owner: Any, admin_user: Any, client: Any,
        django_capture_on_commit_callbacks: Any) -> None:
    record = running_job(demo_simulator, team=team, owner=owner, admin=admin_user,
                         capture=django_capture_on_commit_callbacks, name=JOB)
    LaunchList.objects.filter(team=team).delete()  # the demo's own, as make run seeds it
    call_command("seed_demo", fleet=str(DEMO_FLEET), simulator_url=demo_simulator.base_url,
                 no_poll=True)
    demo = LaunchList.objects.get(team=team, title__startswith="PPO math 7B")
    assert demo.progress["stall_after_seconds"] == 120
    record.launch_list_snapshot["progress"] = demo.progress
    record.save(update_fields=["launch_list_snapshot"])
    sync_submitted_jobs()  # seen Running
    demo_simulator.set_progress("gpu-a", "rl-gpu-a", JOB, step_seconds=0.2)
    pass_until(record, 2)
    client.force_login(owner)
    page = client.get(reverse("jobs:job-detail", args=[JOB])).content.decode()
    assert 'id="job-progress" hx-get="/jobs/records/ppo-math-7b/progress/"' in page
    fragment = client.get(reverse("jobs:run-record-progress", args=[JOB])).content.decode()
    assert 'class="progress-chart"' in fragment and 'id="stalled-badge"' not in fragment

    body, path = _documented_freeze(DOCS["README.md"])
    assert _post(demo_simulator.base_url, path, body)["state"] == "frozen"
    read_cluster_progress(cluster="gpu-a")  # the steps before the freeze
    later = timezone.now() + timedelta(seconds=120)
    with django_capture_on_commit_callbacks(execute=True):
        read_cluster_progress(cluster="gpu-a", now=later)
    fragment = client.get(reverse("jobs:run-record-progress", args=[JOB])).content.decode()
    assert 'id="stalled-badge"' in fragment
    listed = client.get("/jobs/", {"stalled": "on"}).content.decode()
    assert f'data-job="{JOB}"' in listed
    assert NotificationEvent.objects.filter(run_record=record,
                                            kind=EventKind.JOB_STALLED).count() == 1

    assert _post(demo_simulator.base_url, path, {"state": "advancing"})["state"] == "advancing"
    with django_capture_on_commit_callbacks(execute=True):
        pass_until(record, (progress_of(record).step or 0) + 2)
    assert NotificationEvent.objects.filter(run_record=record,
                                            kind=EventKind.JOB_RECOVERED).count() == 1
