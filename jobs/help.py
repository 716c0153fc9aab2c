"""Help pages: the glossary (术语表) and the runtime environment (运行环境与环境变量).

Both follow the console manual; the wizard's fields link to the entries they explain
(`jobs:help-glossary` + `#term-<slug>`, `jobs:help-runtime` + `#<section>`).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _
from django.views.decorators.http import require_GET

from jobs.core.startscript import RESERVED_ENV_NAMES

__all__ = ["GLOSSARY", "Term", "glossary", "runtime"]


@dataclass(frozen=True)
class Term:
    slug: str
    term: str  # the English word the manifest and the API use
    label: Promise  # the word in the page's language
    meaning: Promise


GLOSSARY: tuple[Term, ...] = (
    Term("cluster", "Cluster", _("Cluster"),
         _("A Kubernetes cluster RLark submits to. Its namespace is where "
           "the Jobs for it are created.")),
    Term("node-inventory", "Node inventory", _("Node inventory"),
         _("Every node of every cluster as last polled: "
         "labels, allocatable GPUs and rlinf.io/* devices, readiness. Selectors are matched "
         "against this global inventory, never against one cluster alone.")),
    Term("role", "Role", _("Role"),
         _("One part of a job (Actor, Rollout, Environment, ...). Each role "
         "becomes one Task; its matched node count becomes the Task's replicas, one Worker "
         "(pod) per matched node.")),
    Term("header-role", "Header role", _("Header role"),
         _("The role chosen as the head. Its Task carries head: "
         "true (the Head Task), starts the Ray head and runs the run script. It is a role, not "
         "a node, and not the first worker; its selector must match exactly 1 node.")),
    Term("task", "Task", _("Task"),
         _("The part of the manifest made from one role: its name is the "
         "lower-cased role name.")),
    Term("worker", "Worker", _("Worker"),
         _("One pod of a Task, on one matched node.")),
    Term("selector", "Selector", _("Selector"),
         _("Single-value key=value label conditions, all of which a "
         "node must carry (AND). At least one condition must on its own match only nodes of "
         "the chosen cluster.")),
    Term("verification", "Verification", _("Verification"),
         _("A platform admin's recorded check of one "
         "(cluster, selector) combination against the global inventory. It goes stale when "
         "the matched nodes change.")),
    Term("launch-list", "Launch list", _("Launch list"),
         _("The run's application inputs and the expected first "
         "valid signals (what, where, within how long).")),
    Term("deployment-parameters", "Deployment parameters", _("Deployment parameters"),
         _("The per-role cluster, "
         "selector, resources, storage and network constraints, referencing the "
         "verifications that confirmed them.")),
    Term("run-record", "Run record", _("Run record"),
         _("Everything about one job name in one place: launch "
         "list, deployment parameters, verifications, frozen YAML, submission attempts, "
         "status history, first-run check, audit events.")),
    Term("network-domain", "Network domain", _("Network domain"),
         _("A group of clusters whose pods reach each "
         "other; required when a job's roles run on more than one cluster.")),
    Term("finding", "Finding", _("Finding"),
         _("The result of one rule of the findings engine: a stable "
         "code, a severity (an error blocks submission, a warning does not), the role and "
         "field it concerns, and a message.")),
)


@login_required
@require_GET
def glossary(request: HttpRequest) -> HttpResponse:
    return render(request, "jobs/help/glossary.html", {"terms": GLOSSARY})


@login_required
@require_GET
def runtime(request: HttpRequest) -> HttpResponse:
    return render(request, "jobs/help/runtime.html", {"reserved": sorted(RESERVED_ENV_NAMES)})
