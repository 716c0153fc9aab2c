"""The query-count fixtures fail when the queries they bound ran where they cannot see them."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from django.db import connection

from rlark_site.foundation.tenancy.models import Team


def _query_in_another_thread() -> None:
    def work() -> None:
        try:
            assert Team.objects.count() >= 0
        finally:
            connection.close()
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()


@pytest.mark.django_db
def test_an_upper_bound_over_queries_run_elsewhere_fails(
    django_assert_max_num_queries: Any,
) -> None:
    with pytest.raises(pytest.fail.Exception, match="Captured no queries"):
        with django_assert_max_num_queries(5):
            _query_in_another_thread()


@pytest.mark.django_db
def test_bounds_still_count_and_report_queries_in_this_thread(
    django_assert_max_num_queries: Any, django_assert_num_queries: Any
) -> None:
    with django_assert_max_num_queries(1) as captured:
        Team.objects.count()
    assert len(captured) == 1
    with pytest.raises(pytest.fail.Exception, match="Expected to perform 1 or less queries but 2"):
        with django_assert_max_num_queries(1):
            Team.objects.count()
            Team.objects.exists()
    with pytest.raises(pytest.fail.Exception, match="Expected to perform 2 queries but 1"):
        with django_assert_num_queries(2):
            Team.objects.count()
    with django_assert_num_queries(0):
        pass
