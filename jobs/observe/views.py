"""Live fragments of the job page: pods and events, and a pod's log (htmx-polled)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.dateparse import parse_datetime
from django.views.decorators.http import require_GET
from rest_framework.exceptions import ValidationError

from jobs.observe import conf, live
from jobs.observe.access import access_entries
from jobs.observe.api import log_options
from jobs.observe.eventgroups import summarize_events
from jobs.observe.selectors import attempt_rows, run_record_for_job
from jobs.observe.states import LIVE_STATES
from jobs.records import selectors as record_selectors
from rlark_site.foundation.exceptions import ApplicationError


def _refresh_seconds() -> int:
    return max(1, round(conf.refresh_interval()))


@login_required
@require_GET
def job_live(request: HttpRequest, name: str) -> HttpResponse:
    """The pods of each Task, then the events (Warnings first, Normal events grouped);
    re-polled every refresh interval."""
    record = run_record_for_job(request.user, name)
    snapshot = live.job_snapshot(record)
    tasks: dict[str, list[dict[str, Any]]] = {}
    for pod in snapshot.pods:
        row = {"pod": pod, "created": parse_datetime(pod.created_at or ""),
               "started": parse_datetime(pod.started_at or "")}
        tasks.setdefault(pod.labels.get("rlinf.io/task", ""), []).append(row)
    phases = Counter(pod.phase for pod in snapshot.pods)
    context = {"job": record.job, "snapshot": snapshot, "tasks": sorted(tasks.items()),
               "phases": sorted(phases.items()), "refresh": _refresh_seconds(),
               "active": record.job.state in LIVE_STATES, "access": access_entries(record),
               "events": summarize_events(snapshot.events)}
    return render(request, "jobs/observe/_live.html", context)


def _marked(text: str, query: str) -> list[tuple[int, str, bool]]:
    """(line number, line, matches) of the shown text; every line when there is no query."""
    needle = query.casefold()
    return [(number, line, bool(needle) and needle in line.casefold())
            for number, line in enumerate(text.splitlines(), start=1)]


@login_required
@require_GET
def pod_log(request: HttpRequest, name: str, pod: str) -> HttpResponse:
    """A pod's log: last N lines, previous container, search, follow (polled), download."""
    record = run_record_for_job(request.user, name)
    try:
        options = log_options(request.GET)
    except ValidationError:
        options = log_options({})
    failure: ApplicationError | None = None
    try:
        result = live.pod_log(record, pod, **options)
    except ApplicationError as exc:
        if exc.status_code == 404:
            raise
        result, failure = live.LogResult(log=None), exc
    error = failure.message if failure is not None else ""
    text = result.log.text if result.log is not None else ""
    if request.GET.get("download") and failure is not None:
        # not an empty file named like the log: the cluster's error, as the API answers it
        return HttpResponse(error, status=failure.status_code,
                            content_type="text/plain; charset=utf-8")
    if request.GET.get("download"):
        response = HttpResponse(text, content_type="text/plain; charset=utf-8")
        suffix = "-previous" if options["previous"] else ""
        response["Content-Disposition"] = f'attachment; filename="{pod}{suffix}.log"'
        return response
    query = request.GET.get("q", "")[:200]
    follow = bool(request.GET.get("follow"))
    lines = _marked(text, query)
    context = {
        "job": record.job, "pod": pod, "options": options, "query": query,
        "lines": [line for line in lines if not query or line[2]] if query else lines,
        "matches": sum(1 for line in lines if line[2]),
        "truncated": result.log is not None and result.log.truncated,
        "missing": result.missing or error, "follow": follow, "refresh": _refresh_seconds(),
        # a cluster that could not be read is asked again at the next interval (the lines
        # come back by themselves); a pod or previous container that is not there is not
        "polling": follow and (not result.missing or bool(error)), "retrying": follow and error,
    }
    return render(request, "jobs/observe/_log.html", context)


@login_required
@require_GET
def record_attempts(request: HttpRequest, name: str) -> HttpResponse:
    """The pod attempts kept in the run record (they outlive the pods)."""
    record = record_selectors.run_record_get_for_user(request.user, name)
    return render(request, "jobs/observe/_attempts.html",
                  {"record": record, "rows": attempt_rows(record)})
