"""The "New job from file" page (Django test client): paste or upload a file, see its problems
with line and column, or land on the wizard of the new draft; both languages; and the job-file
downloads on wizard step 4 and on the run record page."""

from __future__ import annotations

from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from jobs.models import Job, JobState
from rlark_site.foundation.tenancy.models import Team
from tests.conftest import PASSWORD
from tests.jobs.records_support import run_record_for

pytestmark = pytest.mark.django_db
URL = "/jobs/new/from-file/"
FILE = """apiVersion: rlark.io/v1
kind: Job
metadata:
  name: from-file
spec:
  task_type: rl
  header_role: Actor
  roles:
  - name: Actor
    gpus: 2
  run_script: cd /w && python train.py
"""


def _client(user: Any) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD)
    return client


def test_the_page_offers_upload_and_paste_in_both_languages(member: Any) -> None:
    client = _client(member)
    page = client.get(URL)
    assert page.status_code == 200
    assert b'type="file"' in page.content and b"<textarea" in page.content
    chinese = client.get(URL, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "从文件新建作业" in chinese.content.decode()
    assert b'id="new-from-file"' in client.get("/jobs/").content


def test_a_pasted_file_makes_a_draft_and_lands_on_the_wizard(member: Any, team: Team) -> None:
    response = _client(member).post(URL, {"content": FILE})
    assert response.status_code == 302
    assert response["Location"] == "/jobs/wizard/from-file/"
    job = Job.objects.get(name="from-file")
    assert (job.team, job.created_by, job.run_script) == (team, member, "cd /w && python train.py")
    assert list(job.roles.values_list("name", "gpus")) == [("Actor", 2)]


def test_an_uploaded_file_makes_a_draft(member: Any) -> None:
    upload = SimpleUploadedFile("job.yaml", FILE.replace("from-file", "uploaded").encode(),
                                content_type="application/yaml")
    response = _client(member).post(URL, {"file": upload})
    assert response.status_code == 302
    assert Job.objects.filter(name="uploaded").exists()


def test_problems_are_shown_with_line_and_column_and_nothing_is_stored(member: Any) -> None:
    response = _client(member).post(URL, {"content": FILE.replace("gpus: 2", "gpu: 2")})
    assert response.status_code == 400
    text = response.content.decode()
    assert "schema.unknown_key" in text and "line 10, column 5" in text
    assert "spec.roles[0].gpu" in text and "did you mean gpus?" in text
    chinese = _client(member).post(URL, {"content": "a: &x 1\n"}, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "第 1 行，第 4 列" in chinese.content.decode()
    binary = SimpleUploadedFile("job.bin", b"\x00\x01\x02", content_type="application/x-binary")
    assert "file.nul" in _client(member).post(URL, {"file": binary}).content.decode()
    assert not Job.objects.exists()


def test_a_name_in_use_or_another_teams_team_is_refused(member: Any, outsider: Any,
                                                        team: Team) -> None:
    Job.objects.create(team=team, name="from-file", created_by=member)
    taken = _client(member).post(URL, {"content": FILE})
    assert taken.status_code == 400 and "already has a job named from-file" in \
        taken.content.decode()
    theirs = _client(outsider).post(URL, {"content": FILE.replace(
        "name: from-file", "name: fresh\n  team: vision-rl")})
    assert theirs.status_code == 400 and not Job.objects.filter(name="fresh").exists()


def test_step_4_and_the_run_record_offer_the_job_file(member: Any, team: Team) -> None:
    client = _client(member)
    client.post(URL, {"content": FILE})
    job = Job.objects.get(name="from-file")
    step4 = client.get("/jobs/wizard/from-file/step-4/")
    assert b'href="/api/v1/jobs/from-file/job-file/"' in step4.content
    download = client.get("/api/v1/jobs/from-file/job-file/")
    assert download.status_code == 200
    assert download["Content-Disposition"] == 'attachment; filename="from-file.rlark.yaml"'
    run_record_for(job, state=JobState.RUNNING)
    record = client.get("/jobs/records/from-file/")
    assert record.status_code == 200
    assert b'id="download-job-file" href="/api/v1/jobs/from-file/job-file/"' in record.content
