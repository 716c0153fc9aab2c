"""Query-count assertions that cannot pass vacuously.

pytest-django's `django_assert_num_queries` / `django_assert_max_num_queries` count what
CaptureQueriesContext sees on one connection in the test's thread. Code that runs its queries on
another connection or thread (a live server, a worker thread, a persistent connection opened
elsewhere) leaves that list empty, and an upper bound then checks nothing. These versions keep the
same call shape and additionally fail when a block that expects queries captured none."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
from django.db import connection as default_connection
from django.db import connections
from django.test.utils import CaptureQueriesContext


def bounded_queries(exact: bool) -> Callable[..., AbstractContextManager[CaptureQueriesContext]]:
    @contextmanager
    def check(num: int, connection: Any = None, info: str | None = None, *,
              using: str | None = None) -> Iterator[CaptureQueriesContext]:
        conn = connection or (connections[using] if using else default_connection)
        with CaptureQueriesContext(conn) as context:
            yield context
        done = len(context)
        where = f"\n{info}" if info else ""
        sql = "\n\n".join(q["sql"] for q in context.captured_queries)
        if num > 0 and done == 0:
            pytest.fail("Captured no queries, so the bound checks nothing: the code under test ran "
                        f"its queries on another connection or thread{where}")
        if (done != num) if exact else (done > num):
            bound = f"{num}" if exact else f"{num} or less"
            pytest.fail(f"Expected to perform {bound} queries but {done} were done{where}"
                        f"\n\nQueries:\n========\n\n{sql}")
    return check
