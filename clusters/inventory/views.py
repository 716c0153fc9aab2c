"""Pages of the cluster registry and the node browser.

Everyone signed in reads; platform admins add and edit clusters, switch polling on and
off and ask for a poll now. Credentials are never rendered back.
"""

from __future__ import annotations

from dataclasses import dataclass

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods, require_POST

from clusters.inventory.forms import (
    AdmissionForm,
    ClusterForm,
    KubeconfigClusterForm,
    NodeFilterForm,
)
from clusters.inventory.selectors import (
    cluster_capacity,
    cluster_get,
    cluster_jobs,
    cluster_list,
    cluster_queues_answer,
    node_capacity_of,
    node_list,
)
from clusters.inventory.services import (
    cluster_create,
    cluster_poll_request,
    cluster_set_enabled,
    cluster_update,
)
from clusters.models import Cluster, Node
from clusters.types import GPU_RESOURCE
from rlark_site.foundation.exceptions import ApplicationError
from rlark_site.foundation.tenancy.access import is_platform_admin, require_platform_admin

NODES_PER_PAGE = 100
JOBS_SHOWN = 200


def _cluster(request: HttpRequest, name: str) -> Cluster:
    return cluster_get(user=request.user, name=name)


def _back(request: HttpRequest) -> HttpResponse:
    """Redirect to the page the form came from (when it is ours), else the cluster list."""
    target = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return redirect(target)
    return redirect("clusters:list")


def _add_service_errors(form: forms.Form, error: ApplicationError) -> None:
    errors = error.extra.get("errors") or {None: [error.message]}
    for field, texts in errors.items():
        for text in texts:
            form.add_error(field if field in form.fields else None, text)


@login_required
def cluster_list_view(request: HttpRequest) -> HttpResponse:
    clusters = list(cluster_list(user=request.user))
    capacity = cluster_capacity(clusters)
    return render(request, "clusters/inventory/cluster_list.html", {
        "rows": [(cluster, capacity[cluster.id]) for cluster in clusters],
        "is_admin": is_platform_admin(request.user),
    })


@login_required
def cluster_detail_view(request: HttpRequest, name: str) -> HttpResponse:
    cluster = _cluster(request, name)
    return render(request, "clusters/inventory/cluster_detail.html", {
        "cluster": cluster,
        "capacity": cluster_capacity([cluster])[cluster.id],
        "queues": cluster_queues_answer(user=request.user, cluster=cluster),
        "storage_classes": cluster.storage_classes.order_by("name"),
        "network_domains": cluster.network_domains.order_by("name"),
        "jobs": cluster_jobs(user=request.user, cluster=cluster)[:JOBS_SHOWN],
        "is_admin": is_platform_admin(request.user),
    })


@login_required
@require_http_methods(["GET", "POST"])
def cluster_add_view(request: HttpRequest) -> HttpResponse:
    require_platform_admin(request.user)
    form = ClusterForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            cluster = cluster_create(**form.create_arguments())
        except ApplicationError as exc:
            _add_service_errors(form, exc)
        else:
            messages.success(request, _("Cluster %(name)s added.") % {"name": cluster.name})
            return redirect("clusters:detail", name=cluster.name)
    return render(request, "clusters/inventory/cluster_form.html", {"form": form})


@login_required
@require_http_methods(["GET", "POST"])
def cluster_add_kubeconfig_view(request: HttpRequest) -> HttpResponse:
    require_platform_admin(request.user)
    form = KubeconfigClusterForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            cluster = cluster_create(**form.create_arguments())
        except ApplicationError as exc:
            _add_service_errors(form, exc)
        else:
            messages.success(request, _("Cluster %(name)s added.") % {"name": cluster.name})
            return redirect("clusters:detail", name=cluster.name)
    return render(request, "clusters/inventory/cluster_kubeconfig_form.html", {"form": form})


@login_required
@require_http_methods(["GET", "POST"])
def cluster_edit_view(request: HttpRequest, name: str) -> HttpResponse:
    require_platform_admin(request.user)
    cluster = _cluster(request, name)
    form = ClusterForm(request.POST or None, cluster=cluster)
    if request.method == "POST" and form.is_valid():
        try:
            cluster_update(cluster=cluster, **form.update_arguments())
        except ApplicationError as exc:
            _add_service_errors(form, exc)
        else:
            messages.success(request, _("Cluster %(name)s saved.") % {"name": cluster.name})
            return redirect("clusters:detail", name=cluster.name)
    return render(request, "clusters/inventory/cluster_form.html", {
        "form": form, "cluster": cluster,
    })


@login_required
@require_http_methods(["GET", "POST"])
def cluster_admission_view(request: HttpRequest, name: str) -> HttpResponse:
    """A cluster's admission (none or Kueue) and its team → LocalQueue map (platform admins)."""
    require_platform_admin(request.user)
    cluster = _cluster(request, name)
    form = AdmissionForm(request.POST or None, cluster=cluster)
    if request.method == "POST" and form.is_valid():
        try:
            cluster_update(cluster=cluster, **form.update_arguments())
        except ApplicationError as exc:
            _add_service_errors(form, exc)
        else:
            messages.success(request, _("Admission of %(name)s saved.") % {"name": cluster.name})
            return redirect("clusters:detail", name=cluster.name)
    return render(request, "clusters/inventory/cluster_admission.html", {
        "form": form, "cluster": cluster,
    })


@login_required
@require_POST
def cluster_enabled_view(request: HttpRequest, name: str) -> HttpResponse:
    require_platform_admin(request.user)
    cluster = _cluster(request, name)
    enabled = request.POST.get("enabled") == "1"
    cluster_set_enabled(cluster=cluster, enabled=enabled)
    text = _("Polling of %(name)s resumed.") if enabled else _("Polling of %(name)s stopped.")
    messages.success(request, text % {"name": cluster.name})
    return _back(request)


@login_required
@require_POST
def cluster_poll_view(request: HttpRequest, name: str) -> HttpResponse:
    require_platform_admin(request.user)
    cluster = _cluster(request, name)
    try:
        cluster_poll_request(cluster=cluster)
    except ApplicationError as exc:
        text, ok = exc.message, False
    else:
        text, ok = _("A poll of %(name)s is queued.") % {"name": cluster.name}, True
    if getattr(request, "htmx", False):
        return render(request, "clusters/inventory/_poll_queued.html", {"text": text, "ok": ok})
    (messages.success if ok else messages.error)(request, text)
    return _back(request)


@login_required
def node_list_view(request: HttpRequest) -> HttpResponse:
    form = NodeFilterForm(request.GET or None)
    nodes = Node.objects.none()
    if not form.is_bound:
        nodes = node_list(user=request.user)
    elif form.is_valid():
        data = form.cleaned_data
        try:
            nodes = node_list(
                user=request.user, cluster=data["cluster"] or None,
                selector=data["selector"].selector, include_gone=data["include_gone"],
            )
        except ApplicationError as exc:
            form.add_error("cluster", exc.message)
    query = request.GET.copy()
    query.pop("page", None)
    page = Paginator(nodes, NODES_PER_PAGE).get_page(request.GET.get("page"))
    return render(request, "clusters/inventory/node_list.html", {
        "form": form, "page": page, "query": query.urlencode(),
        "rows": [_node_row(node) for node in page],
    })


@dataclass(frozen=True)
class FreeAmount:
    """What the nodes page shows of one GPU or device resource of a node."""

    resource: str
    allocatable: int | None  # None: the node does not say
    free: int | None  # None: not counted (or the allocatable is unknown)


def _node_row(node: Node) -> tuple[Node, FreeAmount, list[FreeAmount]]:
    """A node with its GPUs and each rlinf.io/* device as allocatable and free."""
    capacity = node_capacity_of(node)
    free = capacity.free

    def amount(resource: str) -> FreeAmount:
        allocatable = capacity.allocatable.get(resource)
        return FreeAmount(resource, allocatable,
                          free.get(resource) if capacity.counted else None)

    devices = node.devices if isinstance(node.devices, dict) else {}
    return node, amount(GPU_RESOURCE), [amount(name) for name in sorted(devices)]
