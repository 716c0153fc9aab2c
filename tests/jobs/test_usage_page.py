"""The team usage page and its CSV export: the same figures as `GET usage/`, the stacked chart,
both languages, a clear 400 on a bad date (the form kept), another team's 404, and a CSV with
its headers whose job and user names cannot run as spreadsheet formulas."""

from __future__ import annotations

import csv
import io
from typing import Any

import pytest
from django.test import Client

from jobs.models import JobState
from jobs.usage.export import csv_cell
from rlark_site.foundation.tenancy.models import Team
from tests.conftest import make_user
from tests.jobs.usage_support import stored_run

pytestmark = pytest.mark.django_db
PAGE = "/jobs/usage/"
EXPORT = "/jobs/usage/export.csv"
WINDOW = "from=2026-11-01&to=2026-11-30"


def client_for(user: Any, language: str = "en") -> Client:
    client = Client(HTTP_ACCEPT_LANGUAGE=language)
    client.force_login(user)
    return client


@pytest.fixture
def runs(team: Team, other_team: Team, owner: Any, outsider: Any) -> None:
    # 8 GPUs bound at 0, Running at 5, stalled 20-40, succeeded at 60 (partial 40, stalled
    # 160, productive 280 GPU-minutes); a user whose name starts like a formula runs 2 GPUs
    # for 30 minutes, its job failing at the end.
    stored_run(team=team, user=owner, name="stalling", roles={"Actor": 8},
               pods=[("actor", 0, 0, 60, "Succeeded")],
               phases=[(0, "Pending"), (5, "Running"), (60, "Succeeded")], stalls=[(20, 40)])
    hostile = make_user("=cmd|' /C calc'!A0", team=team)
    stored_run(team=team, user=hostile, name="formula", roles={"Actor": 2},
               pods=[("actor", 0, 0, 30, "Failed")], phases=[(0, "Running"), (30, "Failed")],
               state=JobState.FAILED)
    stored_run(team=other_team, user=outsider, name="theirs", roles={"Actor": 1},
               pods=[("actor", 0, 0, 60, "Succeeded")],
               phases=[(0, "Running"), (60, "Succeeded")])


def test_the_page_shows_the_totals_the_chart_and_the_groups(runs: None, owner: Any) -> None:
    response = client_for(owner).get(f"{PAGE}?{WINDOW}&group_by=job")
    assert response.status_code == 200
    page = response.content.decode()
    assert 'data-reserved="9.0"' in page  # 8 + 2 x 0.5
    assert 'class="usage-chart"' in page and 'data-bars="2"' in page
    for layer in ("productive", "stalled", "pending_partial"):
        assert f'data-layer="{layer}"' in page
    assert "stalling" in page and "formula" in page and "theirs" not in page
    assert 'href="/jobs/records/stalling/"' in page
    assert 'id="usage-csv" href="/jobs/usage/export.csv?' in page


def test_the_page_defaults_to_the_current_team_and_speaks_chinese(runs: None,
                                                                  owner: Any) -> None:
    page = client_for(owner, "zh-hans").get(f"{PAGE}?from=2026-11-01&to=2026-11-30")
    text = page.content.decode()
    assert page.status_code == 200
    assert '<option value="vision-rl" selected>' in text
    assert "GPU 小时" in text and "下载 CSV" in text and "停滞" in text
    assert "2 次运行占用了 GPU" in text


def test_a_bad_window_is_a_400_that_keeps_the_form(runs: None, owner: Any) -> None:
    for query, message in (("from=2026-11-30&to=2026-11-01", "from must be before to"),
                           ("from=someday", "from must be a date"),
                           ("from=2024-01-01&to=2026-11-01", "longer than 366 days"),
                           ("group_by=month", "Unknown group_by")):
        response = client_for(owner).get(f"{PAGE}?{query}")
        assert response.status_code == 400, query
        page = response.content.decode()
        assert message in page and 'id="usage-error"' in page and 'id="id_from"' in page
        assert client_for(owner).get(f"{EXPORT}?{query}").status_code == 400


def test_another_teams_usage_is_404_on_the_page_and_the_export(runs: None, owner: Any) -> None:
    for url in (PAGE, EXPORT):
        response = client_for(owner).get(f"{url}?{WINDOW}&team=nlp-rl")
        assert response.status_code == 404
        assert "theirs" not in response.content.decode()


def test_the_csv_has_headers_figures_and_no_formula(runs: None, owner: Any) -> None:
    response = client_for(owner).get(f"{EXPORT}?{WINDOW}&group_by=job&team=vision-rl")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == (
        'attachment; filename="gpu-hours-vision-rl-2026-11-01-2026-12-01.csv"')
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert rows[0] == ["job", "team", "user", "state", "reserved_gpu_hours",
                       "productive_gpu_hours", "stalled_gpu_hours", "failed_gpu_hours",
                       "pending_partial_gpu_hours"]
    assert rows[1] == ["stalling", "vision-rl", "owner", "succeeded", "8.0", "4.667", "2.667",
                       "0.0", "0.667"]
    assert rows[2] == ["formula", "vision-rl", "'=cmd|' /C calc'!A0", "failed", "1.0", "1.0",
                       "0.0", "0.0", "0.0"]
    assert rows[3] == ["total", "", "", "", "9.0", "5.667", "2.667", "0.0", "0.667"]
    days = list(csv.reader(io.StringIO(
        client_for(owner).get(f"{EXPORT}?{WINDOW}&group_by=day").content.decode())))
    assert days[0][0] == "day" and days[1][:2] == ["2026-11-02", "9.0"]


@pytest.mark.parametrize(("value", "written"), [
    ("=1+1", "'=1+1"), ("+1", "'+1"), ("-1", "'-1"), ("@SUM(A1)", "'@SUM(A1)"),
    ("\tx", "'\tx"), ("\rx", "'\rx"), ("ppo-run", "ppo-run"), (1.5, 1.5), (None, ""),
])
def test_cells_that_start_like_a_formula_are_quoted(value: Any, written: Any) -> None:
    assert csv_cell(value) == written


def test_the_navigation_links_the_page(owner: Any) -> None:
    page = client_for(owner).get("/jobs/").content.decode()
    assert 'href="/jobs/usage/"' in page
