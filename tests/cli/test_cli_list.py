"""`rlark list` as the installed console script against gunicorn: the PENDING and PROGRESS
columns (SPEC 17) from the job list API's `pending`, `pending_flagged` and `progress`."""

from __future__ import annotations

from datetime import UTC, datetime

from tests.cli.conftest import Site, lines
from tests.jobs.test_job_list_answer import PENDING_FACTS

MOMENT = datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC)


def _jobs(site: Site) -> None:
    from jobs.models import Job, JobState, RunProgress
    from tests.jobs.records_support import run_record_for

    team = site.owner.memberships.get().team
    Job.objects.create(team=team, name="a-draft", created_by=site.owner)
    overdue = Job.objects.create(team=team, name="overdue-run", created_by=site.owner)
    run_record_for(overdue, state=JobState.PENDING, pending=PENDING_FACTS, pending_flagged=True,
                   pending_since=MOMENT)
    waiting = Job.objects.create(team=team, name="waiting-run", created_by=site.owner)
    run_record_for(waiting, state=JobState.PENDING, pending=PENDING_FACTS, pending_since=MOMENT)
    stepping = Job.objects.create(team=team, name="stepping-run", created_by=site.owner)
    RunProgress.objects.create(
        run_record=run_record_for(stepping, state=JobState.RUNNING, submitted_at=MOMENT),
        pod="stepping-run-head-0", step=1200, total=5000, last_step_at=MOMENT)


def test_list_shows_pending_and_progress_columns(site: Site) -> None:
    _jobs(site)
    table = site.run("list", "--limit", "10")
    assert table.code == 0, table.err
    header, *rows = lines(table.out)
    assert header.split()[:6] == ["NAME", "TEAM", "STATE", "STALLED", "PENDING", "PROGRESS"]
    by_name = {row.split()[0]: row for row in rows}
    assert set(by_name) == {"a-draft", "overdue-run", "waiting-run", "stepping-run"}
    pending_at = header.index("PENDING")
    progress_at = header.index("PROGRESS")
    created_at = header.index("CREATED BY")
    short = "Rollout: 2 of 4 workers wait for GPUs:…"  # 40 characters

    def cells(name: str) -> tuple[str, str]:
        row = by_name[name]
        return row[pending_at:progress_at].strip(), row[progress_at:created_at].strip()

    assert cells("overdue-run") == (f"overdue: {short}", "-")
    assert cells("waiting-run") == (short, "-")
    assert cells("stepping-run") == ("-", "1200/5000")
    assert cells("a-draft") == ("-", "-")

    answer = site.run("list", "-o", "json")
    assert answer.code == 0, answer.err
    rows_json = {row["name"]: row for row in answer.json()}
    assert rows_json["overdue-run"]["pending_flagged"] is True
    assert rows_json["overdue-run"]["pending"]["summary"].endswith("4 of 8 free, 8 needed.")
    assert rows_json["overdue-run"]["pending"]["since"] == PENDING_FACTS["since"]
    assert rows_json["stepping-run"]["progress"] == {"step": 1200, "total": 5000}
    assert rows_json["a-draft"]["pending"] is None
    assert "_pending" not in rows_json["overdue-run"]  # the table's cells stay out of json
