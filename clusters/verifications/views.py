"""Pages: a team's own verification requests, and the platform admins' queue.

The queue decides without leaving the page: with htmx, a decision re-renders just that
request's panel in its decided state; without JavaScript the form posts and redirects back.
"""

from __future__ import annotations

import functools
import hashlib
import json
from functools import cached_property
from pathlib import Path
from typing import Any

import django
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.paginator import Paginator
from django.db.models import TextField
from django.db.models.functions import MD5, Cast
from django.http import Http404, HttpRequest, HttpResponse
from django.middleware.csrf import get_token
from django.shortcuts import redirect, render
from django.template import Engine
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import get_language
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from clusters.matching import NodeWindow
from clusters.models import Verification
from clusters.verifications.capacity import QueueCapacity, queue_capacities
from clusters.verifications.forms import DecisionForm, QueueFilterForm, VerificationRequestForm
from clusters.verifications.selectors import (
    ResultInputs,
    VerificationResult,
    cluster_generations,
    match_summary,
    result_inputs,
    snapshot_nodes,
    snapshot_nodes_not_ready,
    verification_get,
    verification_list_for_team,
    verification_queue,
    verification_result,
)
from clusters.verifications.services import (
    verification_approve,
    verification_reject,
    verification_request_outcome,
)
from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.tenancy.access import current_team, require_platform_admin

PAGE_SIZE = 25
# A request's panel on the queue is rendered once and its HTML cached under `_panel_key`.
PANEL_FRAGMENT = "verification-panel"
PANEL_SECONDS = 600
PANEL_TEMPLATE = "clusters/verifications/_panel.html"
# What renders the cached fragments of the queue (`_rendering_version`).
QUEUE_TEMPLATES = tuple(f"clusters/verifications/{name}.html" for name in (
    "queue", "_panel", "_result", "_nodes", "_per_cluster", "_decision"))
# Nodes of a snapshot named on a request's panel (its first ones, first ones outside its
# cluster, first NotReady ones): its counts per cluster cover them all, and its node list
# (`verification_nodes`) shows every one, page by page.
PANEL_NODES = NodeWindow(limit=5)
PANEL_NOT_READY = 5
NODES_PER_PAGE = 200
# Cached panels hold this in place of the CSRF token; each page puts its own token in (every
# form of a page posts the same one). Escaped text cannot contain the `<input>` it stands in.
_CSRF_MARK = "csrf-token-of-the-page"
_CSRF_INPUT = '<input type="hidden" name="csrfmiddlewaretoken" value="{}">'
# Where a cached panel takes its capacity panel (`_panel.html`), rendered on every view: the
# pre-flight moves with every occupancy poll and every change of the jobs it is computed for,
# none of which `_panel_key` names. Escaped text cannot contain an HTML comment.
CAPACITY_MARK = "<!--capacity-panel-->"
CAPACITY_TEMPLATE = "clusters/verifications/_capacity.html"


class _Shown:
    """What `_result.html` shows of a request, computed on first use: a panel found in the
    cache (keyed on what it is computed from, `_panel_key`) computes nothing."""

    def __init__(self, verification: Verification, inputs: ResultInputs) -> None:
        self.verification = verification
        self.inputs = inputs

    @cached_property
    def result(self) -> VerificationResult:
        v = self.verification
        return verification_result(v, reached=self.inputs.reached_by(v),
                                   generations=self.inputs.generations)

    @cached_property
    def _nodes(self) -> tuple[list[dict[str, Any]], int | None]:
        return snapshot_nodes(self.verification, PANEL_NODES)

    @property
    def nodes(self) -> list[dict[str, Any]]:
        return self._nodes[0]

    @property
    def more_nodes(self) -> bool:
        return self._nodes[1] is not None

    @property
    def foreign_nodes(self) -> list[dict[str, Any]]:
        return self.result.foreign_nodes[:PANEL_NODES.limit]

    @cached_property
    def _not_ready(self) -> int:
        match = self.result.match
        return match.count - sum(c.ready for c in match.per_cluster)

    @cached_property
    def not_ready_nodes(self) -> list[dict[str, Any]]:
        if not self._not_ready:
            return []
        return snapshot_nodes_not_ready(self.verification, limit=PANEL_NOT_READY)

    @property
    def more_not_ready(self) -> int:
        return self._not_ready - len(self.not_ready_nodes)


def _summary_digest(verification: Verification) -> str:
    """A digest of the stored snapshot's summary: computed by PostgreSQL when the queue
    annotated it (without reading the summary), else from the loaded summary."""
    digest = getattr(verification, "summary_digest", None)
    if digest is not None:
        return f"sql:{digest}"
    text = json.dumps(verification.match_summary, sort_keys=True, default=str)
    return "py:" + hashlib.sha256(text.encode()).hexdigest()


@functools.cache
def _rendering_version() -> str:
    """A digest of what renders the queue's cached fragments besides their data: the
    templates, the project's translation catalogues and Django's version (read once per
    process, so a deployment that changes them does not show fragments cached before)."""
    digest = hashlib.sha256(django.get_version().encode())
    for name in QUEUE_TEMPLATES:
        digest.update(Engine.get_default().get_template(name).source.encode())
    for path in sorted(Path(p) for p in settings.LOCALE_PATHS):
        for catalogue in sorted(path.glob("*/LC_MESSAGES/*.mo")):
            digest.update(catalogue.read_bytes())
    return digest.hexdigest()


# The stored snapshot, keyed by its summary's digest instead (`_panel_key`).
_SNAPSHOT_FIELDS = frozenset({"matches", "match_signature", "match_summary"})


def _panel_key(verification: Verification, inputs: ResultInputs) -> str:
    """Names everything a request's panel is computed from (its HTML is cached under it):
    every field of the request's row (the snapshot by its summary's digest: its node list
    and signature are written only with its summary and generations), the names of its
    team, cluster and users, today's condition clusters of its selector and generations of
    every cluster (a generation moves whenever a node appears, vanishes or is relabelled),
    how many nodes a panel names, the language, the time zone and `_rendering_version`.
    Nothing on a panel depends on which platform admin looks: the queue is theirs alone."""
    v = verification
    row = [[f.attname, getattr(v, f.attname)] for f in Verification._meta.concrete_fields
           if f.attname not in _SNAPSHOT_FIELDS]
    identity = json.dumps([
        "panel", row, _summary_digest(v), v.team.name, v.cluster.name, v.requested_by.username,
        v.decided_by.username if v.decided_by else None,
        [[list(c), sorted(clusters)] for c, clusters in inputs.reached_by(v)],
        sorted(inputs.generations.items()), PANEL_NODES.limit, PANEL_NOT_READY,
        get_language(), timezone.get_current_timezone_name(), _rendering_version(),
    ], sort_keys=True, default=str)
    return f"{PANEL_FRAGMENT}:{hashlib.sha256(identity.encode()).hexdigest()}"


def _render_panel(verification: Verification, inputs: ResultInputs, *,
                  form: DecisionForm | None = None, error: str | None = None) -> str:
    """A request's panel, with `_CSRF_MARK` for the CSRF token (`_with_token` puts it in)."""
    return render_to_string(PANEL_TEMPLATE, {
        "verification": verification, "shown": _Shown(verification, inputs),
        "form": form or DecisionForm(verification=verification), "error": error,
        "csrf_token": _CSRF_MARK,
    })


def _with_token(request: HttpRequest, panels: list[str],
                capacities: list[QueueCapacity | None] | None = None) -> list[SafeString]:
    """Panels as `_render_panel` wrote them, with this page's CSRF token and each one's
    capacity panel rendered now (`CAPACITY_MARK`)."""
    mark = format_html(_CSRF_INPUT, _CSRF_MARK)
    token = format_html(_CSRF_INPUT, get_token(request))
    shown = capacities if capacities is not None else [None] * len(panels)
    return [
        # Rendered by the template engine, which escaped every value it wrote.
        mark_safe(html.replace(mark, token).replace(  # noqa: S308
            CAPACITY_MARK, render_to_string(CAPACITY_TEMPLATE, {
                "capacity": capacity, "verification_id": capacity.verification_id})
            if capacity is not None else "", 1))
        for html, capacity in zip(panels, shown, strict=True)
    ]


def _panels(request: HttpRequest, verifications: list[Verification],
            inputs: ResultInputs) -> list[SafeString]:
    """The panels of a page of requests: those in the cache in one read; for the others, the
    snapshot summaries in one query (rendering reads them), then rendered and cached."""
    keys = [_panel_key(v, inputs) for v in verifications]
    held = cache.get_many(keys)
    missing = {v.pk: v for v, key in zip(verifications, keys, strict=True) if key not in held}
    unread = [pk for pk, v in missing.items() if "match_summary" in v.get_deferred_fields()]
    if unread:
        summaries = Verification.objects.filter(pk__in=unread).values_list("pk", "match_summary")
        for pk, summary in summaries:
            missing[pk].match_summary = summary
    if missing:
        rendered = {key: _render_panel(v, inputs)
                    for v, key in zip(verifications, keys, strict=True) if key not in held}
        cache.set_many(rendered, PANEL_SECONDS)
        held.update(rendered)
    capacities = queue_capacities(verifications)
    return _with_token(request, [held[key] for key in keys],
                       [capacities.get(v.pk) for v in verifications])


@login_required
def verification_nodes(request: HttpRequest, verification_id: int) -> HttpResponse:
    """Every node of a verification's snapshot, a page at a time (its team and admins)."""
    verification = verification_get(user=request.user, verification_id=verification_id)
    raw = request.GET.get("page", "")
    number = int(raw) if raw.isdecimal() and int(raw) > 0 else 1
    window = NodeWindow(offset=(number - 1) * NODES_PER_PAGE, limit=NODES_PER_PAGE)
    nodes, next_offset = snapshot_nodes(verification, window)
    summary = match_summary(verification)
    return render(request, "clusters/verifications/nodes.html", {
        "verification": verification, "summary": summary, "nodes": nodes, "page": number,
        "pages": max(1, -(-summary.count // NODES_PER_PAGE)),
        "previous": number - 1 if number > 1 else None,
        "next": number + 1 if next_offset is not None else None,
    })


def _request_outcome_message(request: HttpRequest, reused: bool, updated: bool) -> None:
    if updated:
        messages.success(request, _("Your open request for this combination now asks for "
                                    "these confirmations too."))
    elif reused:
        messages.success(request, _("An open request for this cluster and selector exists "
                                    "already; it is shown below."))
    else:
        messages.success(request, _("Verification requested. An admin will review it."))


def _submit_request(request: HttpRequest, form: VerificationRequestForm) -> bool:
    team = current_team(request)
    if team is None:
        raise Http404(_("Page not found."))
    data = form.cleaned_data
    try:
        outcome = verification_request_outcome(
            team=team, user=request.user, cluster=data["cluster"], selector=data["conditions"],
            for_header_role=data["for_header_role"], requested_gpu=data["requested_gpu"],
            requested_devices=data["requested_devices"],
            requested_host_paths=data["requested_host_paths"], note=data["note"],
        )
    except ApplicationError as exc:
        form.add_error(None, exc.message)
        form.refusal_findings = list(exc.extra.get("findings", []))
        return False
    _request_outcome_message(request, outcome.reused, outcome.updated)
    return True


@login_required
@require_http_methods(["GET", "POST"])
def team_verifications(request: HttpRequest) -> HttpResponse:
    """The current team's requests and outcomes, newest first, with a request form."""
    team = current_team(request)
    form = VerificationRequestForm(request.POST or None)
    if request.method == "POST" and form.is_valid() and _submit_request(request, form):
        return redirect(reverse("clusters:verifications"))
    page = None
    if team is not None:
        page = Paginator(verification_list_for_team(team=team), PAGE_SIZE).get_page(
            request.GET.get("page")
        )
    return render(request, "clusters/verifications/team.html",
                  {"form": form, "team": team, "page": page})


@login_required
def queue(request: HttpRequest) -> HttpResponse:
    """Platform admins' queue: oldest first, filtered by state, cluster and team."""
    require_platform_admin(request.user)
    generations = cluster_generations()
    filters = QueueFilterForm(request.GET or None, clusters=generations)
    # The snapshot's summary is read only for panels not in the cache (`_panels`).
    verifications = verification_queue(user=request.user, **filters.filters()).defer(
        "match_summary").annotate(summary_digest=MD5(Cast("match_summary", TextField())))
    page = Paginator(verifications, PAGE_SIZE).get_page(request.GET.get("page"))
    shown = list(page.object_list)
    panels = _panels(request, shown, result_inputs(shown, generations))
    params = request.GET.copy()
    params.pop("page", None)
    return render(request, "clusters/verifications/queue.html", {
        "filters": filters, "filters_key": f"{filters.rendering_key()}:{_rendering_version()}",
        "page": page, "panels": panels, "query": params.urlencode(),
    })


def _decide(request: HttpRequest, form: DecisionForm) -> str | None:
    """Run the decision; the error message to show on the panel, if any."""
    data = form.cleaned_data
    verification_id = form.verification.pk
    try:
        if data["decision"] == "approve":
            verification_approve(verification_id=verification_id, admin=request.user,
                                 note=data["note"], **form.confirmations())
        else:
            verification_reject(verification_id=verification_id, admin=request.user,
                                note=data["note"])
    except ApplicationError as exc:
        return exc.message
    return None


@login_required
@require_POST
def queue_decide(request: HttpRequest, verification_id: int) -> HttpResponse:
    """Approve or reject one request; answers the re-rendered panel to htmx."""
    require_platform_admin(request.user)
    verification = verification_get(user=request.user, verification_id=verification_id)
    form = DecisionForm(request.POST, verification=verification)
    error = _decide(request, form) if form.is_valid() else _("Choose approve or reject.")
    if not getattr(request, "htmx", False):
        if error:
            messages.error(request, error)
        return redirect(f"{reverse('clusters:queue')}#verification-{verification_id}")
    verification = verification_get(user=request.user, verification_id=verification_id)
    inputs = result_inputs([verification])
    if error:
        panel = _render_panel(verification, inputs, form=form, error=error)
        capacity = queue_capacities([verification]).get(verification.pk)
        return HttpResponse(_with_token(request, [panel], [capacity])[0])
    return HttpResponse(_panels(request, [verification], inputs)[0])
