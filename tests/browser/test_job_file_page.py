""""New job from file" in a real browser: a pasted file with a wrong key shows the problem with
its line and column; the corrected file lands on the wizard of the new draft; an uploaded file
works the same. Screenshots go to test-artifacts/."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from jobs.models import Job
from tests.browser.conftest import assets_loaded, login, screenshot

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

FILE = """apiVersion: rlark.io/v1
kind: Job
metadata:
  name: pasted-job
spec:
  task_type: rl
  roles:
  - name: Actor
    gpus: 2
"""


def test_paste_see_the_problem_fix_it_and_land_on_the_wizard(
    page: Page, live_server: Any, member: Any, tmp_path: Path
) -> None:
    login(page, live_server, member)
    page.goto(f"{live_server.url}/jobs/")
    with page.expect_navigation():
        page.click("#new-from-file")
    assert assets_loaded(page)
    page.fill("#id_content", FILE.replace("gpus: 2", "gpu: 2"))
    with page.expect_navigation():
        page.click("#job-file-form button[type=submit]")
    problems = page.locator("#file-problems")
    expect(problems).to_contain_text("line 9, column 5")
    expect(problems).to_contain_text("spec.roles[0].gpu")
    expect(problems).to_contain_text("did you mean gpus?")
    screenshot(page, "job-file-problem")
    page.fill("#id_content", FILE)
    with page.expect_navigation():
        page.click("#job-file-form button[type=submit]")
    assert "/jobs/wizard/pasted-job/" in page.url
    assert Job.objects.filter(name="pasted-job").exists()
    upload = tmp_path / "job.yaml"
    upload.write_text(FILE.replace("pasted-job", "uploaded-job"), encoding="utf-8")
    page.goto(f"{live_server.url}/jobs/new/from-file/")
    page.set_input_files("#id_file", str(upload))
    with page.expect_navigation():
        page.click("#job-file-form button[type=submit]")
    assert "/jobs/wizard/uploaded-job/" in page.url
