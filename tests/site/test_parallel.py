"""pytest-xdist's workers stay apart (tests/parallel.py), and `make test` spreads the suite
over them unless told otherwise (rlark_site/devservices.py)."""

from __future__ import annotations

import os
from types import SimpleNamespace
from typing import Any

import pytest
from django.conf import settings
from django.core.cache import cache

from rlark_site import devservices
from rlark_site.celery import app
from tests import parallel
from tests.parallel import worker_redis_url


@pytest.mark.parametrize(("url", "worker", "dbs", "expected"), [
    ("redis://127.0.0.1:6390/0", "gw0", "", "redis://127.0.0.1:6390/0"),
    ("redis://127.0.0.1:6390/0", "gw1", "", "redis://127.0.0.1:6390/1"),
    ("redis://127.0.0.1:6379/2", "gw3", "", "redis://127.0.0.1:6379/5"),
    ("redis://127.0.0.1:6379", "gw1", "", "redis://127.0.0.1:6379/1"),
    ("redis://:pw@redis:6379/2", "gw1", "2, 12", "redis://:pw@redis:6379/12"),
    ("redis://127.0.0.1:6379/2", "", "", "redis://127.0.0.1:6379/2"),
    ("redis://127.0.0.1:6379/2", "master", "7,8", "redis://127.0.0.1:6379/2"),
])
def test_each_worker_has_its_own_redis_database(url: str, worker: str, dbs: str,
                                                expected: str) -> None:
    assert worker_redis_url(url, worker, dbs) == expected


def test_too_few_databases_for_the_workers_is_a_usage_error() -> None:
    with pytest.raises(pytest.UsageError, match="not enough for worker gw2"):
        worker_redis_url("redis://127.0.0.1:6379/2", "gw2", "2,12")


def test_this_process_uses_its_workers_database_everywhere() -> None:
    url = worker_redis_url(parallel.given_redis_url, os.environ.get("PYTEST_XDIST_WORKER", ""),
                           os.environ.get(parallel.WORKER_DBS, ""))
    db = int(url.rsplit("/", 1)[-1])
    assert os.environ["REDIS_URL"] == settings.REDIS_URL == settings.CELERY_BROKER_URL == url
    assert settings.CACHES["default"]["LOCATION"] == url
    assert app.conf.broker_url == url
    cache.get("parallel-probe")
    pools = cache._cache._pools.values()  # type: ignore[attr-defined]
    assert pools and all(pool.connection_kwargs["db"] == db for pool in pools)


@pytest.mark.parametrize(("args", "workers", "expected"), [
    ([], "2", ["--durations=25", "-n", "2", "--dist", "loadscope", "--no-loadscope-reorder"]),
    (["tests/jobs", "-x"], "3", ["--durations=25", "-n", "3", "--dist", "loadscope",
                                 "--no-loadscope-reorder", "tests/jobs", "-x"]),
    (["-n", "0", "tests/jobs"], "2", ["--durations=25", "-n", "0", "tests/jobs"]),
    (["-n4"], "2", ["--durations=25", "-n4"]),
    (["--dist", "worksteal"], "2", ["--durations=25", "--dist", "worksteal"]),
    (["-p", "no:xdist"], "2", ["--durations=25", "-p", "no:xdist"]),
    (["-k", "x"], "1", ["--durations=25", "-k", "x"]),
    (["-k", "x"], "0", ["--durations=25", "-k", "x"]),
])
def test_make_test_runs_on_every_cpu_unless_told(args: list[str], workers: str,
                                                 expected: list[str]) -> None:
    command = devservices.pytest_command(args, {"RLARK_TEST_WORKERS": workers})
    assert command[1:3] == ["-m", "pytest"]
    assert command[3:] == expected


def test_the_default_worker_count_is_the_cpus_this_process_may_use() -> None:
    assert devservices.pytest_workers({}) == min(8, len(os.sched_getaffinity(0)))
    assert devservices.pytest_workers({"RLARK_TEST_WORKERS": " 5 "}) == 5


def test_the_heavy_modules_exist_and_are_collected_first() -> None:
    for module in parallel.HEAVY_MODULES:
        assert (devservices.BASE_DIR / module).is_file(), module

    class Item:
        def __init__(self, nodeid: str, browser: bool = False) -> None:
            self.nodeid, self.browser = nodeid, browser

        def get_closest_marker(self, name: str) -> object:
            return object() if self.browser and name == "browser" else None

    items = [Item("tests/clusters/test_a.py::test_1"), Item("tests/clusters/test_a.py::test_2"),
             Item("tests/browser/test_b.py::test_1", browser=True),
             Item(f"{parallel.HEAVY_MODULES[1]}::test_x"),
             Item(f"{parallel.HEAVY_MODULES[0]}::test_y[1]"),
             Item(f"{parallel.HEAVY_MODULES[0]}::test_y[2]"),
             Item("tests/site/test_c.py::test_1")]
    ordered = [item.nodeid for item in parallel.heaviest_first(items)]  # type: ignore[arg-type]
    assert ordered == [f"{parallel.HEAVY_MODULES[0]}::test_y[1]",
                       f"{parallel.HEAVY_MODULES[0]}::test_y[2]",
                       f"{parallel.HEAVY_MODULES[1]}::test_x",
                       "tests/browser/test_b.py::test_1",
                       "tests/clusters/test_a.py::test_1", "tests/clusters/test_a.py::test_2",
                       "tests/site/test_c.py::test_1"]


def _config(worker: bool = False, **option: Any) -> Any:
    defaults = {"dist": "loadscope", "numprocesses": 2, "reuse_db": False, "create_db": False,
                "nomigrations": False, "collectonly": False}
    config = SimpleNamespace(option=SimpleNamespace(**{**defaults, **option}))
    if worker:
        config.workerinput = {}
    return config


@pytest.mark.parametrize(("config", "early"), [
    (_config(), True),
    (_config(reuse_db=True, create_db=True), True),
    (_config(worker=True), False),
    (_config(dist="no", numprocesses=None), False),
    (_config(numprocesses=1), False),
    (_config(reuse_db=True), False),
    (_config(nomigrations=True), False),
    (_config(collectonly=True), False),
])
def test_the_controller_builds_the_template_only_when_the_workers_will_clone_it(
        config: Any, early: bool) -> None:
    assert parallel.builds_template_early(config) is early


def test_the_controller_and_the_workers_name_the_same_template() -> None:
    assert parallel.template_name("test_rlark") == "test_rlark_template"
    assert parallel.template_name("test_rlark_gw1", "gw1") == "test_rlark_template"
