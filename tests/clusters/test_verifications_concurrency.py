"""Two admins deciding the same request at once: exactly one decision wins."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from django.db import connection, connections, transaction
from pghistory.models import Events

from clusters.models import Cluster, Verification, VerificationState
from clusters.verifications.selectors import selector_key_text
from clusters.verifications.services import (
    lock_combination,
    verification_approve,
    verification_reject,
    verification_request,
    verification_request_outcome,
)
from rlark_site.foundation.exceptions import ApplicationError
from tests.conftest import make_user
from tests.factories import load_fleet_rows

pytestmark = pytest.mark.django_db(transaction=True)

A100_IN_A = {"rlinf.io/gpu-model": "a100", "topology.rlinf.io/cluster": "gpu-a"}


def _decide(kind: str, verification_id: int, admin: Any, outcomes: list[object]) -> None:
    try:
        if kind == "approve":
            verification_approve(verification_id=verification_id, admin=admin,
                                 note=f"approved by {admin.username}")
        else:
            verification_reject(verification_id=verification_id, admin=admin,
                                note=f"rejected by {admin.username}")
        outcomes.append(kind)
    except ApplicationError as exc:
        outcomes.append(exc)
    finally:
        connections.close_all()


def _waiting_on_locks() -> int:
    """Sessions of this database waiting for a lock (pg_stat_activity keeps one snapshot per
    transaction unless it is cleared)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return int(cursor.fetchone()[0])


def _until_both_wait(threads: list[threading.Thread]) -> None:
    """Both deciders are blocked behind the row lock held by the test (a liveness guard, not
    a timing assertion: it only bounds how long a broken test hangs)."""
    deadline = time.monotonic() + 30
    while _waiting_on_locks() < len(threads):
        if time.monotonic() > deadline or not all(t.is_alive() for t in threads):
            raise AssertionError("the deciders did not both reach the row lock")
        time.sleep(0.02)


@pytest.mark.parametrize("second", ["approve", "reject"])
def test_two_concurrent_decisions_leave_exactly_one(team: Any, member: Any, second: str) -> None:
    load_fleet_rows()
    verification = verification_request(
        team=team, user=member, cluster=Cluster.objects.get(name="gpu-a"), selector=A100_IN_A
    )
    admins = [make_user("admin-one", is_staff=True), make_user("admin-two", is_staff=True)]
    outcomes: list[object] = []
    threads = [
        threading.Thread(target=_decide, args=(kind, verification.pk, admin, outcomes))
        for kind, admin in zip(("approve", second), admins, strict=True)
    ]
    with transaction.atomic():
        Verification.objects.select_for_update().get(pk=verification.pk)
        for thread in threads:
            thread.start()
        _until_both_wait(threads)
    for thread in threads:
        thread.join(30)

    wins = [o for o in outcomes if isinstance(o, str)]
    losses = [o for o in outcomes if isinstance(o, ApplicationError)]
    assert len(wins) == 1 and len(losses) == 1
    assert losses[0].status_code == 409
    verification.refresh_from_db()
    expected = VerificationState.APPROVED if wins[0] == "approve" else VerificationState.REJECTED
    assert verification.state == expected
    assert verification.decided_by is not None
    assert losses[0].extra["decided_by"] == verification.decided_by.username
    decisions = Events.objects.references(verification).filter(pgh_label="update")
    assert decisions.count() == 1


def _request(team: Any, user: Any, outcomes: list[object]) -> None:
    try:
        outcomes.append(verification_request_outcome(
            team=team, user=user, cluster=Cluster.objects.get(name="gpu-a"), selector=A100_IN_A,
        ).reused)
    finally:
        connections.close_all()


def test_two_concurrent_identical_requests_create_one(team: Any, member: Any,
                                                      owner: Any) -> None:
    load_fleet_rows()
    gpu_a = Cluster.objects.get(name="gpu-a")
    outcomes: list[object] = []
    threads = [threading.Thread(target=_request, args=(team, user, outcomes))
               for user in (member, owner)]
    with transaction.atomic():
        lock_combination(team, gpu_a, selector_key_text(A100_IN_A))
        for thread in threads:
            thread.start()
        _until_both_wait(threads)
    for thread in threads:
        thread.join(30)
    assert sorted(outcomes, key=str) == [False, True]
    assert Verification.objects.count() == 1
