"""Wizard steps 1-3: an error without a field is shown at the top of the step that refused it
(the error summary, role="alert"), not only in step 4's checklist.

Two sources: the engine's findings of no one field, placed on the step whose inputs the rule
judges (`manifest.too_large`: the start scripts, step 3; the Kueue quota of the whole job,
step 2, in tests/jobs/test_kueue_admission.py), and a save refused with no field (the draft
was submitted from another tab between showing the step and saving it: a real race on the
row lock, two PostgreSQL connections).
"""

from __future__ import annotations

import re
import threading
import time
from typing import Any

import pytest
from django.db import connection, transaction
from django.test import Client
from django.urls import reverse

from jobs.drafts.services import job_create
from jobs.models import Job, JobState, RunRecord
from jobs.records.submission import job_submit
from rlark_site.foundation.tenancy.models import Team
from tests.factories import load_fleet_rows
from tests.jobs.records_support import submittable_job

BIG = "echo " + "x" * 120_000 + "\n"  # one start script fits, nine of them do not
SUMMARY = '<div id="step-findings" class="general-findings" role="alert"'


@pytest.fixture
def web(client: Client, member: Any) -> Client:
    client.force_login(member)
    return client


def url(name: str, number: int) -> str:
    return reverse("jobs:wizard-step", kwargs={"name": name, "step": number})


def summary(page: str) -> str:
    """The step's error summary: the findings without a field on this page ('' when hidden)."""
    assert page.count(SUMMARY) == 1
    opening, rest = page.split(SUMMARY)[1].split(">", 1)
    body = rest.split("</div>")[0]
    assert ("hidden" in opening) == (body == "")
    return body


def step_badge(page: str, number: int) -> str:
    """The error badge of step `number`'s button ('' when it has none)."""
    button = page.split(f'id="wizard-step-{number}"')[1].split("</button>")[0]
    return button.split('class="badge error">')[1].split("<")[0] if "badge error" in button else ""


@pytest.mark.django_db
def test_scripts_too_large_together_are_shown_on_step_3_and_still_on_step_4(
        web: Client, team: Team, member: Any) -> None:
    roles = [{"name": f"Env{i}", "prepare_script": BIG} for i in range(9)]
    job_create(team=team, user=member, data={"name": "big-scripts", "task_type": "custom",
                                             "roles": roles, "header_role": "Env0",
                                             "run_script": "python train.py"})
    common = web.get(url("big-scripts", 3)).content.decode()
    assert "manifest.too_large" in summary(common)
    assert '<p class="finding error">The start scripts add up to ' in summary(common)
    assert step_badge(common, 3) != ""
    for number in (1, 2):
        assert "manifest.too_large" not in summary(web.get(url("big-scripts", number))
                                                   .content.decode())
    review = web.get(url("big-scripts", 4)).content.decode()
    findings = review.split('id="findings"')[1]
    assert "manifest.too_large" in findings
    # The checklist links the finding to the step that shows it.
    assert re.search(r'<a href="' + re.escape(url("big-scripts", 3)) + r'">The start scripts '
                     r'add up to', findings)
    # The live answer of step 3 keeps it at the top too.
    live = web.post(reverse("jobs:wizard-common-findings", kwargs={"name": "big-scripts"}),
                    {"header_role": "Env0", "run_script": "python train.py"}).content.decode()
    assert "manifest.too_large" in live.split(SUMMARY)[1].split("</div>")[0]


def _submit_while_saving(job: Job, user: Any, save: Any) -> Any:
    """Run `save()` (a page's POST) while another connection submits the draft (another tab):
    the submission holds the draft's row until the save waits on it, then commits; the save
    then finds the job no longer a draft."""
    locked, done = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def other_tab() -> None:
        try:
            with transaction.atomic():
                job_submit(job=job, user=user)  # locks the draft's row until the commit
                locked.set()
                deadline = time.monotonic() + 30
                with connection.cursor() as cursor:
                    while time.monotonic() < deadline:  # until the save waits on the row
                        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE "
                                       "wait_event_type = 'Lock' AND datname = "
                                       "current_database()")
                        if cursor.fetchone()[0]:
                            break
                        time.sleep(0.02)
        except BaseException as exc:  # reported by the test below
            errors.append(exc)
            locked.set()
        finally:
            connection.close()
            done.set()

    thread = threading.Thread(target=other_tab)
    thread.start()
    assert locked.wait(30)
    try:
        return save()
    finally:
        assert done.wait(30)
        thread.join()
        assert not errors, errors


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("number", [1, 2, 3])
def test_a_save_refused_without_a_field_is_shown_at_the_top_of_that_step(
        client: Client, team: Team, owner: Any, admin_user: Any, number: int) -> None:
    load_fleet_rows()
    job = submittable_job(team=team, owner=owner, admin=admin_user, name="raced")
    client.force_login(owner)
    posts = {
        1: {"name": "raced", "task_type": "custom", "previous_task_type": "custom",
            "role_name": ["Actor", "Rollout"], "role_origin": ["0", "1"], "header": "0",
            "goto": "next"},
        2: {"role": "0", "goto": "next", "cluster": "gpu-a"},
        3: {"header_role": "Actor", "run_script": "python train.py", "goto": "next"},
    }
    assert client.get(url("raced", number)).status_code == 200
    response = _submit_while_saving(
        job, owner, lambda: client.post(url("raced", number), posts[number]))
    page = response.content.decode()
    assert response.status_code == 400, response.get("Location")
    shown = summary(page)
    assert "This job was submitted; only drafts can be changed or deleted." in shown
    assert '<p class="finding error">' in shown
    # At the top of the form, before any field; never beside one.
    assert page.index(SUMMARY) < page.index('class="wizard-nav"')
    assert "This job was submitted" not in page.replace(shown, "")
    assert Job.objects.get(pk=job.pk).state == JobState.QUEUED
    assert RunRecord.objects.get(job=job).job_name == "raced"
