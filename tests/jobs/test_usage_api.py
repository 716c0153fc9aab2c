"""`GET usage/` on stored timelines worked out by hand: the sums per job, user, day and week,
tenancy (your teams only; another team's slug is 404; platform admins see every team), the
window's bounds and validation, and a query count that does not grow with the runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from jobs.models import GpuIdleEpisode, JobState, RunRecord
from rlark_site.foundation.tenancy.models import Team
from tests.conftest import make_user
from tests.jobs.usage_support import at, stored_run

pytestmark = pytest.mark.django_db
URL = "/api/v1/usage/"
WINDOW = "from=2026-11-01&to=2026-11-30"


def h(gpu_minutes: float) -> float:
    return round(gpu_minutes / 60, 3)


@pytest.fixture
def runs(team: Team, other_team: Team, owner: Any, member: Any, outsider: Any) -> None:
    # Bound at 0, Running at 5, stalled 20-40, succeeded at 60; 8 GPUs (the rollout has none):
    # partial 8 x 5, stalled 8 x 20, productive 8 x 35 GPU-minutes.
    stored_run(team=team, user=owner, name="stalling", roles={"Actor": 8, "Rollout": 0},
               pods=[("actor", 0, 0, 60, "Succeeded"), ("rollout", 0, 0, 60, "Succeeded")],
               phases=[(0, "Pending"), (5, "Running"), (60, "Succeeded")], stalls=[(20, 40)])
    # Actor 4 GPUs, rollout 2 x 2 GPUs, Running at 0; rollout-1 fails at 40, the actor at 44,
    # the Job is seen Failed at 45 with rollout-0 still Running: productive 8 x 40, failed
    # 4 x 4 + 2 x 5.
    stored_run(team=team, user=member, name="failing", roles={"Actor": 4, "Rollout": 2},
               pods=[("actor", 0, 0, 44, "Failed"), ("rollout", 0, 0, None, "Running"),
                     ("rollout", 1, 0, 40, "Failed")],
               phases=[(0, "Running"), (45, "Failed")], state=JobState.FAILED)
    # Another team's run: one GPU for an hour.
    stored_run(team=other_team, user=outsider, name="theirs", roles={"Actor": 1},
               pods=[("actor", 0, 0, 60, "Succeeded")],
               phases=[(0, "Running"), (60, "Succeeded")])


def get(client: APIClient, query: str) -> dict[str, Any]:
    response = client.get(f"{URL}?{query}")
    assert response.status_code == 200, response.content
    return dict(response.json())


def test_per_job_sums_match_the_hand_computed_timelines(
        runs: None, member: Any, api_client_for: Callable[[Any], APIClient]) -> None:
    body = get(api_client_for(member), f"{WINDOW}&group_by=job")
    assert body["teams"] == ["vision-rl"] and body["runs"] == 2
    assert body["total"] == {"productive": h(280 + 320), "stalled": h(160), "failed": h(26),
                             "pending_partial": h(40), "reserved": h(480 + 346), "idle": None}
    assert body["groups"] == [
        {"key": "stalling", "team": "vision-rl", "user": "owner", "state": "succeeded",
         "productive": h(280), "stalled": h(160), "failed": 0.0, "pending_partial": h(40),
         "reserved": 8.0, "idle": None},
        {"key": "failing", "team": "vision-rl", "user": "member", "state": "failed",
         "productive": h(320), "stalled": 0.0, "failed": h(26), "pending_partial": 0.0,
         "reserved": h(346), "idle": None},
    ]


def test_per_user_day_and_week(runs: None, member: Any,
                               api_client_for: Callable[[Any], APIClient]) -> None:
    client = api_client_for(member)
    users = get(client, f"{WINDOW}&group_by=user")["groups"]
    assert [(g["key"], g["reserved"]) for g in users] == [("owner", 8.0), ("member", h(346))]
    days = get(client, f"{WINDOW}&group_by=day")["groups"]
    assert [(g["key"], g["reserved"]) for g in days] == [("2026-11-02", h(480 + 346))]
    weeks = get(client, f"{WINDOW}&group_by=week")
    assert [(g["key"], g["reserved"]) for g in weeks["groups"]] == [("2026-11-02", h(826))]
    assert (weeks["from"], weeks["to"]) == ("2026-11-01T00:00:00Z", "2026-12-01T00:00:00Z")


def test_a_window_cuts_the_runs(runs: None, member: Any,
                                api_client_for: Callable[[Any], APIClient]) -> None:
    """10:20-10:30: the stalling run is stalled (8 x 10), the failing one productive (8 x 10)."""
    body = get(api_client_for(member), "from=2026-11-02T10:20:00Z&to=2026-11-02T10:30:00Z")
    assert body["total"] == {"productive": h(80), "stalled": h(80), "failed": 0.0,
                             "pending_partial": 0.0, "reserved": h(160), "idle": None}
    empty = get(api_client_for(member), "from=2026-11-03&to=2026-11-04")
    assert (empty["runs"], empty["total"]["reserved"], empty["groups"]) == (0, 0.0, [])


def test_a_team_by_slug_another_teams_is_404_and_admins_see_every_team(
        runs: None, member: Any, admin_user: Any,
        api_client_for: Callable[[Any], APIClient]) -> None:
    client = api_client_for(member)
    assert get(client, f"{WINDOW}&team=vision-rl")["total"]["reserved"] == h(826)
    for slug in ("nlp-rl", "no-such-team", "x" * 300):
        response = client.get(f"{URL}?{WINDOW}&team={slug}")
        assert response.status_code == 404
        assert "theirs" not in response.content.decode()
    admin = api_client_for(admin_user)
    every = get(admin, f"{WINDOW}&group_by=job")
    assert every["teams"] == ["nlp-rl", "vision-rl"]
    assert sorted(g["key"] for g in every["groups"]) == ["failing", "stalling", "theirs"]
    assert get(admin, f"{WINDOW}&team=nlp-rl")["total"]["reserved"] == 1.0
    loner = make_user("loner")
    assert get(api_client_for(loner), WINDOW)["teams"] == []


@pytest.mark.parametrize(("query", "field"), [
    ("from=yesterday", "from"),
    ("to=2026-13-01", "to"),
    ("from=2026-02-30", "from"),
    ("from=2026-11-10&to=2026-11-01", "from"),
    ("from=2026-11-10T00:00:00Z&to=2026-11-10T00:00:00Z", "from"),
    ("from=2025-01-01&to=2026-11-01", "from"),
    ("group_by=month", "group_by"),
    ("group_by=" + "x" * 500, "group_by"),
])
def test_bad_queries_are_400_naming_the_field(
        member: Any, api_client_for: Callable[[Any], APIClient], query: str, field: str) -> None:
    response = api_client_for(member).get(f"{URL}?{query}")
    assert response.status_code == 400
    body = response.json()
    assert body["field"] == field and body["detail"]
    assert "x" * 50 not in body["detail"]


def test_nul_and_control_bytes_are_400_json(member: Any,
                                            api_client_for: Callable[[Any], APIClient]) -> None:
    for query in ("team=a%00b", "from=2026-11-01%00", "group_by=day%0D%0A"):
        response = api_client_for(member).get(f"{URL}?{query}")
        assert response.status_code == 400
        assert response["Content-Type"].startswith("application/json")


def test_no_query_is_the_last_30_days(member: Any,
                                      api_client_for: Callable[[Any], APIClient]) -> None:
    body = get(api_client_for(member), "")
    assert body["group_by"] == "day" and body["runs"] == 0


def test_the_queries_do_not_grow_with_the_runs(
        team: Team, owner: Any, api_client_for: Callable[[Any], APIClient]) -> None:
    """2 runs, then 22: the same statements (runs, pods, history, stalls, roles; plus the
    request's authentication and team), never one per run."""
    client = api_client_for(owner)

    def add(count: int, offset: int) -> None:
        for index in range(count):
            stored_run(team=team, user=owner, name=f"run-{offset + index}",
                       roles={"Actor": 1}, pods=[("actor", 0, 0, 60, "Succeeded")],
                       phases=[(0, "Running"), (60, "Succeeded")], stalls=[(10, 20)])

    add(2, 0)
    client.get(f"{URL}?{WINDOW}")  # the token's first use records when it was used
    counts = []
    for more in (0, 20):
        add(more, 100)
        with CaptureQueriesContext(connection) as context:
            body = get(client, f"{WINDOW}&group_by=job")
        counts.append(len(context))
        assert body["total"]["reserved"] == float(2 + more)
        assert body["total"]["stalled"] == round((2 + more) * 10 / 60, 3)
        assert len(body["groups"]) == 2 + more
    assert counts[0] == counts[1] and 5 <= counts[0] <= 12, counts


def test_idle_comes_from_the_gpu_idle_episodes_when_prometheus_is_configured(
        runs: None, member: Any, settings: Any,
        api_client_for: Callable[[Any], APIClient]) -> None:
    """The stalling run (8 GPUs held 0-60) was idle 15-30 by its episode: 8 x 15 idle, the
    split unchanged; without Prometheus idle is null (not measured), not 0."""
    record = RunRecord.objects.get(job_name="stalling")
    GpuIdleEpisode.objects.create(
        run_record=record, number=1, started_at=at(15), detected_at=at(16),
        last_idle_at=at(30), ended_at=at(31), threshold=0.05, window_seconds=900, gpus=8,
        idle_seconds=900, idle_gpu_seconds=7200)
    client = api_client_for(member)
    unmeasured = get(client, f"{WINDOW}&group_by=job")
    assert (unmeasured["idle_measured"], unmeasured["total"]["idle"]) == (False, None)
    settings.RLARK_PROMETHEUS_URL = "http://127.0.0.1:9/"  # read only by the status pass
    body = get(client, f"{WINDOW}&group_by=job")
    assert body["idle_measured"] is True
    assert body["total"]["idle"] == h(120)
    assert [(g["key"], g["idle"]) for g in body["groups"]] == [("stalling", h(120)),
                                                               ("failing", 0.0)]
    assert body["total"]["reserved"] == h(826) and body["total"]["stalled"] == h(160)


def test_format_csv_is_the_page_s_export_and_errors_stay_json(
        runs: None, member: Any, api_client_for: Callable[[Any], APIClient]) -> None:
    """A token gets the usage page's CSV (`?format=csv`), the same bytes as its export; a bad
    query or another team's slug is still JSON naming the field (what the CLI reads)."""
    from django.test import Client

    client = api_client_for(member)
    response = client.get(f"{URL}?{WINDOW}&group_by=job&format=csv")
    assert response.status_code == 200, response.content
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    text = response.content.decode()
    assert text.splitlines() == [
        "job,team,user,state,reserved_gpu_hours,productive_gpu_hours,stalled_gpu_hours,"
        "failed_gpu_hours,pending_partial_gpu_hours",
        f"stalling,vision-rl,owner,succeeded,8.0,{h(280)},{h(160)},0.0,{h(40)}",
        f"failing,vision-rl,member,failed,{h(346)},{h(320)},0.0,{h(26)},0.0",
        f"total,,,,{h(826)},{h(600)},{h(160)},{h(26)},{h(40)}"]
    page = Client()
    page.force_login(member)
    assert page.get(f"/jobs/usage/export.csv?{WINDOW}&group_by=job&team=").content.decode() \
        == text
    for query, status, field in (("group_by=month", 400, "group_by"),
                                 ("from=yesterday", 400, "from"), ("team=nlp-rl", 404, None)):
        bad = client.get(f"{URL}?{query}&format=csv")
        assert bad.status_code == status
        assert bad["Content-Type"].startswith("application/json")
        assert bad.json().get("field") == field and bad.json()["detail"]
