"""The team usage page (GPU-hours per day, week, user or job, with a stacked chart) and its
CSV export: the same query as `GET usage/` (`jobs.usage.selectors`)."""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_GET

from jobs.core.usage import CATEGORIES
from jobs.progress.chart import Layer, stacked_bars_svg
from jobs.usage.export import usage_csv
from jobs.usage.selectors import GROUPS, parse_query, usage_report
from rlark_site.foundation.exceptions import ApplicationError, NotFoundError
from rlark_site.foundation.tenancy.access import current_team, visible_teams

CATEGORY_LABELS = {
    "productive": gettext_lazy("productive"),
    "stalled": gettext_lazy("stalled"),
    "failed": gettext_lazy("failed"),
    "pending_partial": gettext_lazy("partially started"),
}
CATEGORY_COLORS = {"productive": "#15803d", "stalled": "#b45309", "failed": "#b91c1c",
                   "pending_partial": "#64748b"}
GROUP_LABELS = {"day": gettext_lazy("day"), "week": gettext_lazy("week"),
                "user": gettext_lazy("user"), "job": gettext_lazy("job")}


def gpu_hours_rows(body: dict[str, Any] | None) -> list[tuple[str, str, str, float]] | None:
    """A run's `gpu_hours` as the page's rows: (category, label, colour, GPU-hours), in the
    usage page's order and words; None for no run or a run never submitted (the API's null)."""
    if body is None:
        return None
    return [(name, str(CATEGORY_LABELS[name]), CATEGORY_COLORS[name], body[name])
            for name in CATEGORIES]


def _params(request: HttpRequest) -> QueryDict:
    """The page's query: without `team`, the team the user works in (`team=` is all teams)."""
    params = request.GET.copy()
    if "team" not in params:
        team = current_team(request)
        params["team"] = team.slug if team is not None else ""
    return params


def _chart(body: dict[str, Any]) -> str:
    layers = [Layer(name, str(CATEGORY_LABELS[name]), CATEGORY_COLORS[name])
              for name in CATEGORIES]
    bars = [(str(group["key"]), group) for group in body["groups"][:60]]
    description = _("Reserved GPU-hours per %(group)s, stacked by what the GPUs were doing; "
                    "the table below has the figures.") % {
                        "group": GROUP_LABELS[body["group_by"]]}
    return stacked_bars_svg(bars, layers, title=_("GPU-hours"), description=description,
                            unit=_("GPU-hours"))


@login_required
@require_GET
def usage_page(request: HttpRequest) -> HttpResponse:
    params = _params(request)
    context: dict[str, Any] = {
        "teams": list(visible_teams(request.user).order_by("slug")), "groups": GROUPS,
        "group_labels": GROUP_LABELS, "error": None, "body": None, "chart": "",
        "team_value": params.get("team", ""), "group_by_value": params.get("group_by") or "day",
        "from_value": params.get("from", ""), "to_value": params.get("to", ""),
        "categories": [(name, CATEGORY_LABELS[name], CATEGORY_COLORS[name])
                       for name in CATEGORIES],
    }
    status = 200
    try:
        query = parse_query(request.user, params)
    except NotFoundError:
        raise
    except ApplicationError as error:
        context["error"] = error.message
        status = 400
    else:
        body = usage_report(query).as_dict()
        context.update(body=body, chart=_chart(body) if body["groups"] else "",
                       export_query=params.urlencode(),
                       from_value=params.get("from") or query.start.date().isoformat(),
                       to_value=params.get("to") or query.end.date().isoformat())
    return render(request, "jobs/usage/usage.html", context, status=status)


@login_required
@require_GET
def usage_export(request: HttpRequest) -> HttpResponse:
    """The page's report as CSV (an error is the page's 400 with the message)."""
    params = _params(request)
    try:
        query = parse_query(request.user, params)
    except NotFoundError:
        raise
    except ApplicationError as error:
        return HttpResponse(error.message, status=400, content_type="text/plain; charset=utf-8")
    body = usage_report(query).as_dict()
    name = f"gpu-hours-{params.get('team') or 'all'}-{body['from'][:10]}-{body['to'][:10]}.csv"
    response = HttpResponse(usage_csv(body), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response
