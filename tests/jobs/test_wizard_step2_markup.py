"""Step 2's form as users get it: every control, label, option and finding of a job with several
roles, in English and Chinese, against a golden file written before its rows were rendered in
Python (`jobs/templatetags/wizard_html.py`).

Regenerate after an intended change of the page with
``RLARK_UPDATE_GOLDEN=1 .venv/bin/pytest tests/jobs/test_wizard_step2_markup.py`` and review
the diff.
"""

from __future__ import annotations

import json
import os
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from clusters.models import Cluster, Node
from jobs.drafts.services import job_create
from rlark_site.foundation.tenancy.models import Team
from tests.factories import load_fleet_rows

pytestmark = pytest.mark.django_db

GOLDEN = Path(__file__).parent / "golden" / "wizard-step2-form.json"
CONTROLS = {"input", "select", "textarea", "button", "option", "label", "form", "fieldset",
            "template"}
SKIPPED = {"csrfmiddlewaretoken"}  # a new token on every page


class FormOutline(HTMLParser):
    """The page's controls with all their attributes, the text of labels, options, buttons and
    findings, and the rows of the matched-nodes table, in document order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.items: list[list[Any]] = []
        self._open: list[list[Any]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("name") in SKIPPED:
            return
        classes = str(found.get("class") or "").split()
        if tag in CONTROLS or (tag == "p" and "finding" in classes) or tag == "tr" or (
                tag == "div" and ("field-findings" in classes or found.get("hx-post"))):
            item: list[Any] = [tag, sorted((k, v or "") for k, v in attrs), ""]
            self.items.append(item)
            if tag not in {"input"}:
                self._open.append(item)

    def handle_endtag(self, tag: str) -> None:
        for index in range(len(self._open) - 1, -1, -1):
            if self._open[index][0] == tag:
                del self._open[index:]
                return

    def handle_data(self, data: str) -> None:
        if self._open and data.strip():
            self._open[-1][2] += " ".join(data.split())


def outline(html: str) -> list[list[Any]]:
    """The outline of the page without its header (the site's navigation is not step 2's)."""
    parser = FormOutline()
    start, end = html.find('<header class="top">'), html.find("</header>")
    parser.feed(html if start < 0 else html[:start] + html[end:])
    return parser.items


@pytest.fixture
def pages(client: Client, member: Any, team: Team) -> dict[str, list[list[Any]]]:
    """Step 2 of a three-role job (findings on many fields, rows of every list, matches in
    several clusters) and its live answers, in both languages."""
    load_fleet_rows()
    gpu_a = Cluster.objects.get(name="gpu-a")
    Node.objects.bulk_create(
        Node(cluster=gpu_a, name=f"bulk-{n:02d}", namespace=gpu_a.namespace, gpu=8,
             labels={"kubernetes.io/hostname": f"bulk-{n:02d}", "rlinf.io/zone": "zone-1",
                     "topology.rlinf.io/cluster": "gpu-a"},
             devices={"rlinf.io/rdma": 4}, ready=n % 7 != 0)
        for n in range(8))
    job_create(team=team, user=member, data={"name": "ppo-run", "task_type": "rl",
                                             "header_role": "Actor"})
    client.force_login(member)
    step2 = reverse("jobs:wizard-step", kwargs={"name": "ppo-run", "step": 2})
    saved = client.post(step2, {
        "role": "0", "goto": "stay", "cluster": "gpu-a",
        "label": ["rlinf.io/zone=zone-1", "rlinf.io/pool=a100-a"],
        "selector_text": "foo=bar\nrlinf.io/gpu-model=a100", "gpus": "eight",
        "device_name": ["rlinf.io/rdma", "rlinf.io/unknown"], "device_count": ["9", "1"],
        "env_name": ["1BAD", "HF_HOME", "", "PATH"], "env_value": ["x", "/mnt/<hf>", "", "y"],
        "mount_kind": ["host_path", "object_storage"], "mount_source": ["relative", ""],
        "mount_target": ["/mnt/a", "/etc"], "mount_storage_class": ["", "nope"],
        "mount_size": ["", "1Gi"], "cpu_request": "4", "cpu_limit": "2",
        "image": "repo/img:latest", "prepare_script": 'echo <hi> & "quoted"'})
    assert saved.status_code == 302
    saved = client.post(step2, {"role": "1", "goto": "stay", "cluster": "gpu-a",
                                "selector_text": "rlinf.io/gpu-model=a100", "gpus": "2"})
    assert saved.status_code == 302
    live = reverse("jobs:wizard-matches", kwargs={"name": "ppo-run", "index": 0})
    answers = {}
    for language in ("en", "zh-hans"):
        client.cookies["django_language"] = language
        for role in (0, 1, 2):
            answers[f"{language} role {role}"] = client.get(f"{step2}?role={role}")
        answers[f"{language} live"] = client.post(live, {
            "role": "0", "cluster": "gpu-a", "label": ["rlinf.io/zone=zone-1"], "gpus": "99",
            "env_name": ["1X", "", "", "", "OK"], "env_value": ["", "", "", "", "v"]})
    assert {answer.status_code for answer in answers.values()} == {200}
    return {name: outline(answer.content.decode()) for name, answer in answers.items()}


def test_step_2_shows_the_same_form_as_before(pages: dict[str, list[list[Any]]]) -> None:
    text = "{\n" + ",\n".join(
        f"{json.dumps(name)}: [\n" + ",\n".join(json.dumps(item, ensure_ascii=False)
                                                for item in items) + "\n]"
        for name, items in pages.items()) + "\n}\n"
    if os.environ.get("RLARK_UPDATE_GOLDEN"):
        GOLDEN.write_text(text, encoding="utf-8")
    assert json.loads(text) == json.loads(GOLDEN.read_text(encoding="utf-8"))
