"""GPU-hours from the command line (SPEC 16 through the REST API): `rlark record` and `rlark
status` show a run's split (and its cause), `rlark usage` prints `GET usage/` (its filters,
-o json|yaml, --csv) and its bad input, as the installed console script against gunicorn, on
runs with stored timelines worked out by hand (tests/jobs/usage_support.py; the same runs as
tests/jobs/test_usage_api.py)."""

from __future__ import annotations

import yaml

from jobs.models import JobState
from tests.cli.conftest import Site, lines
from tests.cli.test_cli_files import one_error_line
from tests.jobs.usage_support import stored_run

WINDOW = ("--from", "2026-11-01", "--to", "2026-11-30")


def h(gpu_minutes: float) -> float:
    return round(gpu_minutes / 60, 3)


def stored_runs(site: Site) -> None:
    team = site.owner.memberships.get().team
    # 8 GPUs bound at 0, Running at 5, stalled 20-40, succeeded at 60: partial 8 x 5,
    # stalled 8 x 20, productive 8 x 35 GPU-minutes.
    stored_run(team=team, user=site.owner, name="stalling", roles={"Actor": 8, "Rollout": 0},
               pods=[("actor", 0, 0, 60, "Succeeded"), ("rollout", 0, 0, 60, "Succeeded")],
               phases=[(0, "Pending"), (5, "Running"), (60, "Succeeded")], stalls=[(20, 40)])
    # 4 + 2 x 2 GPUs Running at 0, a rollout fails at 40, the actor at 44, seen Failed at 45:
    # productive 8 x 40, failed 4 x 4 + 2 x 5 GPU-minutes.
    stored_run(team=team, user=site.owner, name="failing", roles={"Actor": 4, "Rollout": 2},
               pods=[("actor", 0, 0, 44, "Failed"), ("rollout", 0, 0, None, "Running"),
                     ("rollout", 1, 0, 40, "Failed")],
               phases=[(0, "Running"), (45, "Failed")], state=JobState.FAILED)


def test_record_status_and_usage_show_the_gpu_hours(site: Site) -> None:
    from jobs.models import RunRecord

    stored_runs(site)
    RunRecord.objects.filter(job_name="stalling").update(cause={
        "tag": "nccl_timeout", "pod": "stalling-actor-0", "at": "2026-11-02T10:30:00Z",
        "evidence": "Watchdog caught collective operation timeout"})
    split = (f"gpu-hours: 8.0 reserved: productive {h(280)}, stalled {h(160)}, failed 0.0, "
             f"partial {h(40)}; idle not measured")
    for command in ("record", "status"):  # the same SPEC 16 lines from both answers
        shown = site.run(command, "stalling")
        assert shown.code == 0, shown.err
        text = " ".join(shown.out.split())  # `key: value` lines, aligned
        assert split in text
        assert ("cause: nccl_timeout in stalling-actor-0: Watchdog caught collective "
                "operation timeout") in text
    assert site.run("record", "stalling", "-o", "json").json()["gpu_hours"]["stalled"] == h(160)

    table = site.run("usage", "--team", "vision-rl", *WINDOW, "--group-by", "job")
    assert table.code == 0, table.err
    head, header, *rows = lines(table.out)
    assert head.startswith("GPU-hours of vision-rl, 2026-11-01T00:00:00Z to "
                           "2026-12-01T00:00:00Z") and "2 runs, per job" in head
    assert header.split() == ["JOB", "TEAM", "USER", "STATE", "RESERVED", "PRODUCTIVE",
                              "STALLED", "FAILED", "PARTIAL"]
    assert [row.split() for row in rows] == [
        ["stalling", "vision-rl", "owner", "succeeded", "8.0", str(h(280)), str(h(160)), "0.0",
         str(h(40))],
        ["failing", "vision-rl", "owner", "failed", str(h(346)), str(h(320)), "0.0",
         str(h(26)), "0.0"],
        ["total", "-", "-", "-", str(h(826)), str(h(600)), str(h(160)), str(h(26)),
         str(h(40))]]

    weeks = site.run("usage", *WINDOW, "--group-by", "week", "-o", "json").json()
    assert [(g["key"], g["reserved"]) for g in weeks["groups"]] == [("2026-11-02", h(826))]
    as_yaml = yaml.safe_load(site.run("usage", *WINDOW, "-o", "yaml").out)
    assert as_yaml["group_by"] == "day" and as_yaml["total"]["reserved"] == h(826)
    csv = site.run("usage", *WINDOW, "--group-by", "user", "--csv")
    assert csv.code == 0, csv.err
    assert csv.out.splitlines() == [
        "user,reserved_gpu_hours,productive_gpu_hours,stalled_gpu_hours,failed_gpu_hours,"
        "pending_partial_gpu_hours", f"owner,{h(826)},{h(600)},{h(160)},{h(26)},{h(40)}",
        f"total,{h(826)},{h(600)},{h(160)},{h(26)},{h(40)}"]
    empty = site.run("usage", "--from", "2026-10-01", "--to", "2026-10-02")
    assert empty.code == 0 and "no GPU-hours in this window" in empty.out


def test_usage_bad_input_is_one_line_with_its_exit_code(site: Site) -> None:
    theirs = site.run("usage", "--team", "nlp-rl")
    assert theirs.code == 6
    assert one_error_line(theirs) == "error: team 'nlp-rl' not found (no such team of yours)"
    bad_date = site.run("usage", "--from", "yesterday")
    assert bad_date.code == 2 and one_error_line(bad_date) == \
        "error: from must be a date (YYYY-MM-DD) or an ISO 8601 date-time."
    as_csv = site.run("usage", "--csv", "--from", "yesterday")  # errors stay JSON
    assert as_csv.code == 2 and one_error_line(as_csv) == one_error_line(bad_date)
    backwards = site.run("usage", "--from", "2026-11-10", "--to", "2026-11-01")
    assert backwards.code == 2 and "from must be before to" in one_error_line(backwards)
    assert site.run("usage", "--group-by", "month").code == 2  # click's choice
    both = site.run("usage", "--csv", "-o", "json")
    assert both.code == 2 and "--csv" in both.err and not both.out
