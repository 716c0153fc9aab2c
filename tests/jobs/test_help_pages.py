"""The glossary and the runtime-environment pages: both languages, linked from the wizard."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from jobs.core.startscript import RESERVED_ENV_NAMES
from jobs.drafts.services import job_create
from jobs.help import GLOSSARY
from rlark_site.foundation.tenancy.models import Team

pytestmark = pytest.mark.django_db


@pytest.fixture
def web(client: Client, member: Any) -> Client:
    client.force_login(member)
    return client


def test_the_glossary_lists_every_term_with_an_anchor(web: Client) -> None:
    html = web.get(reverse("jobs:help-glossary")).content.decode()
    for term in GLOSSARY:
        assert f'<dt id="term-{term.slug}"><strong>{term.term}</strong></dt>' in html
    chinese_html = web.get(reverse("jobs:help-glossary"), HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert ('<dt id="term-header-role"><strong>Header 角色</strong> '
            '<span class="muted">Header role</span></dt>') in chinese_html.content.decode()
    chinese = web.get(reverse("jobs:help-glossary"), HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "术语表" in chinese.content.decode()
    assert "Header 角色" in chinese.content.decode()


def test_the_runtime_page_lists_every_reserved_name_and_ray_temp_dir(web: Client) -> None:
    html = web.get(reverse("jobs:help-runtime")).content.decode()
    assert ", ".join(sorted(RESERVED_ENV_NAMES)) in html
    assert 'id="ray-temp-dir"' in html and "env.ray_temp_dir" in html
    chinese = web.get(reverse("jobs:help-runtime"), HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert "运行环境与环境变量" in chinese.content.decode()


def test_the_wizard_links_the_fields_to_their_help(web: Client, team: Team, owner: Any) -> None:
    job_create(team=team, user=owner, data={"name": "helped", "task_type": "rl"})
    glossary = reverse("jobs:help-glossary")
    step = {n: web.get(reverse("jobs:wizard-step", kwargs={"name": "helped", "step": n}))
            .content.decode() for n in (1, 2, 3)}
    assert f'href="{glossary}#term-header-role"' in step[1]
    assert f'href="{glossary}#term-selector"' in step[2]
    assert f'href="{reverse("jobs:help-runtime")}#reserved"' in step[2]
    assert f'href="{glossary}#term-network-domain"' in step[3]


def test_help_pages_need_a_login(client: Client) -> None:
    assert client.get(reverse("jobs:help-glossary")).status_code == 302
