"""Pages: a team's own verification requests, and the platform admins' queue.

The queue decides without leaving the page: with htmx, a decision re-renders just that
request's panel in its decided state; without JavaScript the form posts and redirects back.
"""

from __future__ import annotations

import hashlib
import json
from functools import cached_property
from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.cache import cache
from django.core.cache.utils import make_template_fragment_key
from django.core.paginator import Paginator
from django.db.models import TextField
from django.db.models.functions import MD5, Cast
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.safestring import mark_safe
from django.utils.translation import get_language
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from clusters.matching import NodeWindow
from clusters.models import Verification
from clusters.verifications.forms import DecisionForm, QueueFilterForm, VerificationRequestForm
from clusters.verifications.selectors import (
    ResultInputs,
    VerificationResult,
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
# `_panel.html` caches a request's automated result under this name and `_result_key`.
RESULT_FRAGMENT = "verification-result"
# Nodes of a snapshot shown on a request's panel, and per page of its node list.
PANEL_NODES = NodeWindow(limit=20)
NODES_PER_PAGE = 200


class _Shown:
    """What `_result.html` shows of a request, computed on first use: a panel whose result
    is in the cache (keyed on what it is computed from, `_result_key`) computes nothing."""

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

    @cached_property
    def _not_ready(self) -> int:
        match = self.result.match
        return match.count - sum(c.ready for c in match.per_cluster)

    @cached_property
    def not_ready_nodes(self) -> list[dict[str, Any]]:
        if not self._not_ready:
            return []
        return snapshot_nodes_not_ready(self.verification, limit=PANEL_NODES.limit)

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


def _result_key(verification: Verification, inputs: ResultInputs) -> str:
    """Names everything `_result.html` is computed from (its rendering is cached under it):
    the request's own fields and stored snapshot (its summary's digest and the generations
    it was taken at: a snapshot's node list follows from them), today's condition clusters of
    its selector and generations of every cluster (a generation moves whenever a node
    appears, vanishes or is relabelled), the language and the time zone. The drift stored
    with a stale approval is written once, when it turns stale: its time stands for it."""
    v = verification
    identity = json.dumps([
        "inputs", v.pk, v.state, str(v.stale_at), v.cluster.name, v.selector,
        v.for_header_role, v.requested_gpu, v.confirmed_gpu, v.requested_devices,
        v.confirmed_devices, v.requested_host_paths, v.confirmed_host_paths,
        v.inventory_generations, _summary_digest(v),
        [[list(c), sorted(clusters)] for c, clusters in inputs.reached_by(v)],
        sorted(inputs.generations.items()),
        get_language(), timezone.get_current_timezone_name(),
    ], sort_keys=True, default=str)
    return hashlib.sha256(identity.encode()).hexdigest()


def _item(verification: Verification, form: DecisionForm | None = None,
          inputs: ResultInputs | None = None) -> dict[str, Any]:
    inputs = inputs or result_inputs([verification])
    return {
        "verification": verification,
        "shown": _Shown(verification, inputs),
        "form": form or DecisionForm(verification=verification),
        "result_key": _result_key(verification, inputs),
    }


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
    filters = QueueFilterForm(request.GET or None)
    # The snapshot's summary is read only for panels not in the cache (`_Shown`).
    verifications = verification_queue(user=request.user, **filters.filters()).defer(
        "match_summary").annotate(summary_digest=MD5(Cast("match_summary", TextField())))
    page = Paginator(verifications, PAGE_SIZE).get_page(request.GET.get("page"))
    shown = list(page.object_list)
    inputs = result_inputs(shown)
    items = [_item(v, inputs=inputs) for v in shown]
    _take_cached_results(items)
    params = request.GET.copy()
    params.pop("page", None)
    return render(request, "clusters/verifications/queue.html", {
        "filters": filters, "page": page, "items": items, "query": params.urlencode(),
    })


def _take_cached_results(items: list[dict[str, Any]]) -> None:
    """The panels' cached results in one cache read (`result_html`, what `_panel.html`'s
    cache tag stored), and in one query the snapshot summaries of the panels the cache does
    not hold (rendering them reads the summary)."""
    keys = {make_template_fragment_key(RESULT_FRAGMENT, [item["result_key"]]): item
            for item in items}
    held = cache.get_many(list(keys))
    for key, html in held.items():
        # The cache tag's own rendering of `_result.html`, stored as rendered (escaped).
        keys[key]["result_html"] = mark_safe(html)  # noqa: S308
    missing = {item["verification"].pk: item["verification"]
               for key, item in keys.items() if key not in held}
    if missing:
        summaries = Verification.objects.filter(pk__in=missing).values_list("pk", "match_summary")
        for pk, summary in summaries:
            missing[pk].match_summary = summary


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
    context = {**_item(verification, form if error else None), "error": error}
    return render(request, "clusters/verifications/_panel.html", context)
