"""`rlark_site.foundation.bulk.upsert` and `insert`: one statement whatever the rows,
`bulk_create`'s semantics (defaults for left-out fields, only the named fields updated on
conflict), values refused as a plain INSERT would refuse them, and the audit trail written by
its triggers."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pghistory
import pytest
from django.contrib.auth import get_user_model
from django.db import DataError, transaction
from django.utils import timezone

from jobs.models import CaptureReason, Job, JobState, PodAttempt, RunRecord, StatusChange
from rlark_site.foundation.bulk import insert, upsert
from rlark_site.foundation.tenancy.models import Team

pytestmark = pytest.mark.django_db

UNIQUE = ("run_record_id", "pod_uid")
STARTED = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


@pytest.fixture
def record(team: Team) -> RunRecord:
    user = get_user_model().objects.create(username="bulk")
    job = Job.objects.create(team=team, name="bulk-run", created_by=user)
    return RunRecord.objects.create(
        team=team, job=job, job_name=job.name, cluster="gpu-a", namespace="rl", manifest_yaml="",
        manifest_sha256="", frozen_by=user, state=JobState.RUNNING, submitted_at=timezone.now())


def pod_row(record: RunRecord, index: int, **fields: Any) -> dict[str, Any]:
    return {"run_record_id": record.pk, "pod_uid": f"uid-{index}", "task": "actor",
            "replica": index, "pod_name": f"bulk-run-actor-{index}", "phase": "Running",
            "started_at": STARTED, "captured_at": timezone.now(), **fields}


def test_many_rows_are_one_statement_with_the_defaults_of_left_out_fields(
        record: RunRecord, django_assert_num_queries: Any) -> None:
    rows = [pod_row(record, i) for i in range(300)]
    with django_assert_num_queries(1):
        assert upsert(PodAttempt, rows, unique=UNIQUE, update=("phase",)) == 300
    kept = PodAttempt.objects.get(run_record=record, pod_uid="uid-7")
    assert (kept.replica, kept.pod_name, kept.started_at) == (7, "bulk-run-actor-7", STARTED)
    assert (kept.pod_events, bytes(kept.log_tail), kept.logs_captured, kept.capture_reason,
            kept.exit_code, kept.node) == ([], b"", False, CaptureReason.SEEN, None, "")


def test_a_conflict_updates_only_the_named_fields(record: RunRecord) -> None:
    upsert(PodAttempt, [pod_row(record, 0, node="n1", log_tail=b"kept")], unique=UNIQUE,
           update=())
    events = [{"reason": "OOMKilling", "count": 2}]
    upsert(PodAttempt, [pod_row(record, 0, phase="Failed", node="n2", exit_code=137,
                                pod_events=events)],
           unique=UNIQUE, update=("phase", "exit_code", "pod_events"))
    kept = PodAttempt.objects.get(run_record=record, pod_uid="uid-0")
    assert (kept.phase, kept.exit_code, kept.pod_events) == ("Failed", 137, events)
    assert (kept.node, bytes(kept.log_tail)) == ("n1", b"kept")  # not in `update`: as it was
    assert PodAttempt.objects.count() == 1


def test_values_of_other_types_are_prepared_by_their_field(record: RunRecord) -> None:
    upsert(PodAttempt, [pod_row(record, 0, replica="3", logs_captured=1, pod_events="text")],
           unique=UNIQUE, update=())
    kept = PodAttempt.objects.get()
    assert (kept.replica, kept.logs_captured, kept.pod_events) == (3, True, "text")


def test_a_value_too_long_for_its_column_is_refused_not_cut(record: RunRecord) -> None:
    with pytest.raises(DataError), transaction.atomic():
        upsert(PodAttempt, [pod_row(record, 0, task="t" * 64)], unique=UNIQUE, update=())
    assert not PodAttempt.objects.exists()


def test_unknown_fields_are_refused(record: RunRecord) -> None:
    with pytest.raises(ValueError, match="run_record"):
        upsert(PodAttempt, [{**pod_row(record, 0), "run_record": record}], unique=UNIQUE,
               update=())


def test_inserts_and_updates_are_audited(record: RunRecord) -> None:
    events = PodAttempt.pgh_event_model.objects  # type: ignore[attr-defined]
    upsert(PodAttempt, [pod_row(record, i) for i in range(3)], unique=UNIQUE, update=("phase",))
    upsert(PodAttempt, [pod_row(record, 0, phase="Succeeded"), pod_row(record, 1)],
           unique=UNIQUE, update=("phase",))
    assert sorted(events.values_list("pgh_label", "pod_uid", "phase")) == [
        ("insert", "uid-0", "Running"), ("insert", "uid-1", "Running"),
        ("insert", "uid-2", "Running"), ("update", "uid-0", "Succeeded")]


def test_deletes_and_the_request_context_are_audited_too(record: RunRecord) -> None:
    events = PodAttempt.pgh_event_model.objects  # type: ignore[attr-defined]
    with pghistory.context(task="status-sync"):
        upsert(PodAttempt, [pod_row(record, i) for i in range(2)], unique=UNIQUE, update=())
    PodAttempt.objects.filter(pod_uid="uid-1").delete()
    assert sorted(events.values_list("pgh_label", "pod_uid")) == [
        ("delete", "uid-1"), ("insert", "uid-0"), ("insert", "uid-1")]
    inserted = events.filter(pgh_label="insert")
    assert {e.pgh_context.metadata["task"] for e in inserted} == {"status-sync"}


def test_insert_is_one_statement_and_stamps_auto_now_add_fields(
        record: RunRecord, django_assert_num_queries: Any) -> None:
    before = timezone.now()
    rows = [{"run_record_id": record.pk, "phase": f"Phase{i}"} for i in range(300)]
    with django_assert_num_queries(1):
        assert insert(StatusChange, rows) == 300
    changes = StatusChange.objects.filter(run_record=record)
    assert changes.count() == 300
    assert {(c.reason, c.message) for c in changes} == {("", "")}
    assert len({c.observed_at for c in changes}) == 1
    assert changes.first().observed_at >= before  # type: ignore[union-attr]
