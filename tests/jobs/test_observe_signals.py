"""First-signal detection: patterns (validated, bounded in time), the incremental scan of the
Head Task's log, and the first-run check prefilled with the evidence."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from jobs.models import NotificationEvent, RunRecord, SignalState, SignalWatch
from jobs.observe import patterns
from jobs.observe.patterns import find_line, parse_pattern, pattern_problem
from jobs.observe.signals import scan_first_signals
from jobs.records.forms import LaunchListForm
from jobs.records.selectors import deployment_parameters_for_team
from rlark_site.foundation.tenancy.models import Team
from tests.cache_support import OBSERVE_PREFIX, clear_prefix
from tests.jobs.observe_support import CLUSTER, HEAD_POD, NAMESPACE, running_job

SIGNAL = "first rollout batch with reward mean"


def test_text_and_slash_delimited_regular_expressions() -> None:
    assert parse_pattern("reward mean") == patterns.Pattern("reward mean", False)
    assert parse_pattern(r"/reward=\d+/") == patterns.Pattern(r"reward=\d+", True)
    assert find_line(parse_pattern(r"/reward=0\.\d+/"), ["noise", "step 3 reward=0.42"]) == 1
    assert find_line(parse_pattern("reward=0."), ["noise", "step 3 reward=0.42"]) == 1
    assert find_line(parse_pattern(r"/^step 9/"), ["step 3", "step 4"]) is None


def test_invalid_patterns_are_refused() -> None:
    assert pattern_problem("/reward=(/") is not None
    assert pattern_problem("//") is not None
    assert pattern_problem("x" * 501) is not None
    assert pattern_problem(r"/reward=\d+/") is None


def test_a_catastrophic_regular_expression_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(patterns, "MATCH_TIMEOUT", 0.05)
    with pytest.raises(TimeoutError):
        find_line(parse_pattern("/(a|aa)+$/"), ["a" * 4000 + "!"])


@pytest.mark.django_db
def test_the_launch_list_form_takes_a_fourth_pattern_column(team: Team) -> None:
    def form(line: str) -> LaunchListForm:
        return LaunchListForm({"title": "t", "expected_signals": line},
                              parameters=deployment_parameters_for_team(team))

    good = form(r"reward | head log | 20 | /reward=\d+|loss/")
    assert good.is_valid(), good.errors
    assert good.cleaned_data["expected_signals"] == [
        {"signal": "reward", "where": "head log", "within_minutes": 20,
         "pattern": r"/reward=\d+|loss/"}]
    assert not form("reward | head log | 20 | /(/").is_valid()


@pytest.mark.django_db
def test_the_api_refuses_an_invalid_pattern(owner: Any, api_client_for: Any) -> None:
    body = {"title": "t", "expected_signals": [{"signal": "s", "where": "w", "pattern": "/(/"}]}
    answer = api_client_for(owner).post(reverse("api:launch-list-list"), body, format="json")
    assert answer.status_code == 400
    assert "pattern" in str(answer.json())


@pytest.fixture
def watched(demo_simulator: Any, team: Team, owner: Any, admin_user: Any, settings: Any,
            django_capture_on_commit_callbacks: Any, db: None) -> Iterator[RunRecord]:
    settings.RLARK_SUBMIT_RETRY_BASE = 0
    settings.RLARK_KUBE_TIMEOUT = 5.0
    clear_prefix(OBSERVE_PREFIX)
    record = running_job(demo_simulator, team=team, owner=owner, admin=admin_user,
                         capture=django_capture_on_commit_callbacks)
    from jobs.records.status import sync_submitted_jobs

    sync_submitted_jobs()  # records Running
    record.launch_list_snapshot["expected_signals"] = [
        {"signal": SIGNAL, "where": "head log", "within_minutes": 10,
         "pattern": r"/reward mean=-?\d+\.\d+/"}]
    record.save(update_fields=["launch_list_snapshot"])
    yield record
    clear_prefix(OBSERVE_PREFIX)


def watch_of(record: RunRecord) -> SignalWatch:
    return SignalWatch.objects.get(run_record=record, index=0)


@pytest.mark.django_db
def test_the_signal_is_found_in_the_head_log_incrementally(demo_simulator: Any,
                                                           watched: RunRecord) -> None:
    assert scan_first_signals() == 1
    assert watch_of(watched).state == SignalState.WATCHING
    first_until = watch_of(watched).scanned_until
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, HEAD_POD,
                                  ["step 1 loss=3.1", "step 1 reward mean=0.125"])
    scan_first_signals()
    watch = watch_of(watched)
    assert (watch.state, watch.pod, watch.line) == (SignalState.SEEN, HEAD_POD,
                                                     "step 1 reward mean=0.125")
    assert watch.seen_at is not None and first_until is not None
    assert watch.seen_at > first_until
    event = NotificationEvent.objects.get(kind="signal_seen")
    assert event.key == f"signal_seen:{watched.pk}:0"
    assert "step 1 reward mean=0.125" in event.payload["evidence"]
    since = [r["query"].get("sinceTime") for r in demo_simulator.requests(CLUSTER)
             if r["path"].endswith(f"{HEAD_POD}/log")]
    assert since[0] is None and since[1] is not None


@pytest.mark.django_db
def test_a_signal_not_seen_in_time_is_missed(demo_simulator: Any, watched: RunRecord) -> None:
    scan_first_signals()
    scan_first_signals(now=timezone.now() + timedelta(minutes=11))
    assert watch_of(watched).state == SignalState.MISSED
    assert NotificationEvent.objects.filter(kind="signal_missed").count() == 1


@pytest.mark.django_db
def test_the_first_run_check_is_prefilled_with_a_link_to_the_line(
    demo_simulator: Any, watched: RunRecord, client: Client, owner: Any
) -> None:
    demo_simulator.append_pod_log(CLUSTER, NAMESPACE, HEAD_POD, ["step 2 reward mean=0.5"])
    scan_first_signals()
    client.force_login(owner)
    page = client.get(reverse("jobs:job-detail", args=["ppo-run"])).content.decode()
    assert 'data-signal-state="seen"' in page
    assert f"in pod {HEAD_POD}, line: step 2 reward mean=0.5" in page
    assert re.search(r'<input[^>]*value="yes"[^>]*checked', page)
    assert re.search(r"<textarea[^>]*>[^<]*line: step 2 reward mean=0.5", page)
    link = reverse("jobs:job-pod-log", args=["ppo-run", HEAD_POD])
    assert f"{link}?tail=" in page
    log = client.get(link, {"tail": 5000, "q": "step 2 reward mean=0.5"}).content.decode()
    assert "<mark>step 2 reward mean=0.5</mark>" in log
