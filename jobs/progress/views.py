"""The progress region of the job page and the run record: chart, text, stalled badge.

Read from the database only (the progress pass fills it), re-polled by htmx while the run is
Running, like the live pods region.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.dateparse import parse_datetime
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET

from jobs.gpu import conf as gpu_conf
from jobs.gpu.selectors import gpu_body
from jobs.models import JobState
from jobs.observe import conf as observe_conf
from jobs.progress.chart import progress_svg
from jobs.progress.selectors import progress_view
from jobs.records.selectors import run_record_get_for_user


def _summary(body: dict[str, object]) -> str:
    """The chart's text alternative: step N of M, rate and ETA, in the page's language."""
    if body["step"] is None:
        return _("No training step read from the Head Task's log yet.")
    parts = [_("Step %(step)s of %(total)s (%(percent)s %%)") % body if body["total"]
             else _("Step %(step)s") % body]
    if body["steps_per_hour"]:
        parts.append(_("%(rate)s steps per hour") % {"rate": body["steps_per_hour"]})
    if body["eta"]:
        eta = parse_datetime(str(body["eta"]))
        parts.append(_("expected to finish at %(eta)s") % {
            "eta": eta.strftime("%Y-%m-%d %H:%M UTC") if eta else body["eta"]})
    return "; ".join(parts) + "."


@login_required
@require_GET
def run_progress(request: HttpRequest, name: str) -> HttpResponse:
    record = run_record_get_for_user(request.user, name)
    body, points = progress_view(record)
    summary = _summary(body)
    gpu = gpu_body(record)
    context = {
        "gpu": gpu, "gpu_shown": bool(gpu_conf.prometheus_url()) or gpu["checked_at"] is not None,
        "idle_since": parse_datetime(str(gpu["idle_since"] or "")),
        "as_of": parse_datetime(str(gpu["as_of"] or "")),
        "tensor_percent": None if gpu["tensor_active"] is None
        else round(gpu["tensor_active"] * 100, 1),
        "threshold_percent": round(gpu["threshold"] * 100, 1),
        "window_minutes": round(gpu["window_seconds"] / 60, 1),
        "idle_gpu_hours": round(gpu["idle_gpu_seconds"] / 3600, 2),
        "record": record, "progress": body, "summary": summary,
        "last_step_at": parse_datetime(str(body["last_step_at"] or "")),
        "stalled_since": parse_datetime(str(body["stalled_since"] or "")),
        "chart": progress_svg(points, total=body["total"], title=_("Training step over time"),
                              description=summary) if points else "",
        "live": record.state == JobState.RUNNING,
        "refresh": int(observe_conf.refresh_interval()),
    }
    return render(request, "jobs/progress/_progress.html", context)
