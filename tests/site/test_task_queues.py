"""Every task has its queue, named in one place; gunicorn is sized from the CPUs."""

from __future__ import annotations

import importlib
from fnmatch import fnmatch
from pathlib import Path

import pytest
from django.conf import settings

from rlark_site import gunicorn_conf
from rlark_site.celery import app


def rlark_tasks() -> list[str]:
    app.loader.import_default_modules()
    return sorted(name for name in app.tasks if not name.startswith("celery."))


def queue_of(task: str) -> str:
    return str(app.amqp.router.route({}, task)["queue"].name)


def test_every_task_is_routed_on_purpose() -> None:
    patterns = settings.CELERY_TASK_ROUTES
    unrouted = [t for t in rlark_tasks() if not any(fnmatch(t, p) for p in patterns)]
    assert rlark_tasks()
    assert unrouted == []
    assert {queue_of(task) for task in rlark_tasks()} <= set(settings.RLARK_QUEUES)


def test_polls_submissions_and_status_never_share_a_queue() -> None:
    assert queue_of("clusters.tasks.poll_cluster_task") == "inventory"
    assert queue_of("clusters.tasks.poll_due_clusters") == "inventory"
    assert queue_of("jobs.tasks.submit_run_record") == "submission"
    assert queue_of("jobs.tasks.resume_stalled_submissions") == "submission"
    assert queue_of("jobs.tasks.sync_submitted_jobs") == "status"
    assert queue_of("jobs.notifications.notify_owner") == "notifications"


def test_a_worker_without_q_consumes_every_queue() -> None:
    assert sorted(app.amqp.queues) == sorted(settings.RLARK_QUEUES)


@pytest.mark.parametrize(
    ("cpu_max", "expected"),
    [("max 100000\n", 2), ("150000 100000\n", 2), ("50000 100000\n", 1), ("garbage", 2)],
)
def test_cpus_follow_the_cgroup_quota(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu_max: str, expected: int
) -> None:
    monkeypatch.setattr(gunicorn_conf.os, "sched_getaffinity", lambda pid: {0, 1})
    path = tmp_path / "cpu.max"
    path.write_text(cpu_max)
    assert gunicorn_conf.available_cpus(path) == expected


def test_no_quota_file_means_the_affinity(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gunicorn_conf.os, "sched_getaffinity", lambda pid: {0, 1, 2})
    assert gunicorn_conf.available_cpus(Path("/nonexistent/cpu.max")) == 3


def test_workers_and_threads_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLARK_WEB_WORKERS", "3")
    monkeypatch.setenv("RLARK_WEB_THREADS", "6")
    try:
        reloaded = importlib.reload(gunicorn_conf)
        assert (reloaded.workers, reloaded.threads) == (3, 6)
    finally:
        monkeypatch.undo()
        importlib.reload(gunicorn_conf)


def test_default_workers_are_two_per_cpu_plus_one() -> None:
    assert gunicorn_conf.default_workers(gunicorn_conf.available_cpus()) == gunicorn_conf.workers
    assert gunicorn_conf.default_workers(4) == 9
