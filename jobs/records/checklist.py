"""The first-run troubleshooting checklist, shown when the expected first signal did not come.

Each item restates one piece of the console manual's advice as a question a user can
answer from the pod logs, the run record and the image. The codes are stored with the
answers (`FirstRunCheck.troubleshooting`), so they are a stable contract like finding codes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.utils.translation import gettext_lazy as _

if TYPE_CHECKING:
    from django_stubs_ext import StrPromise
else:
    from django.utils.functional import Promise as StrPromise

__all__ = [
    "ANSWERS", "CHECKLIST", "ChecklistAnswer", "ChecklistItem", "checklist_answers",
    "checklist_codes",
]


@dataclass(frozen=True)
class ChecklistItem:
    code: str
    question: StrPromise
    hint: StrPromise


ANSWERS: dict[str, StrPromise] = {
    "ok": _("checked, fine"),
    "problem": _("problem found"),
    "unchecked": _("not checked"),
}

CHECKLIST: tuple[ChecklistItem, ...] = (
    ChecklistItem(
        "image.tools",
        _("Does every role's image contain bash, the Ray CLI and an executable named python?"),
        _("RLark replaces the container command with its start script: it runs bash, "
          "`ray start`, and on the Head Task `python` for the cluster check. RLark cannot look "
          "inside images."),
    ),
    ChecklistItem(
        "image.contents",
        _("Does the image hold the role's code, Python environment, system libraries and "
          "device dependencies (RLinf needs Ray >= 2.47)?"),
        _("Long-lived dependencies belong in the image; the prepare script should only "
          "activate, check or prepare files."),
    ),
    ChecklistItem(
        "prepare.before_ray",
        _("Is the environment (venv activation, RLINF_* variables) set in the prepare script, "
          "before Ray starts, and not left to the image's ENTRYPOINT?"),
        _("Ray captures the environment at `ray start`; the image's ENTRYPOINT does not run "
          "because RLark replaces the command."),
    ),
    ChecklistItem(
        "run_script.cd",
        _("Does the run script `cd` into its working directory explicitly?"),
        _("The run script runs on the Head Task after Ray starts; it must not rely on the "
          "image's working directory or ENTRYPOINT side effects."),
    ),
    ChecklistItem(
        "head.one_replica",
        _("Does the Head Task have exactly one replica (one Head pod in the Job)?"),
        _("Every pod of the Head Task starts a Ray head and runs the same run script."),
    ),
    ChecklistItem(
        "cluster_check.warning",
        _("Is there a cluster-check timeout warning in the Head Task's log?"),
        _("The start script waits for the expected number of Ray nodes, logs a warning on "
          "timeout and continues: the run script may have started before all workers joined."),
    ),
    ChecklistItem(
        "mounts.shadowing",
        _("Do the mounts leave the image's code and config directories visible, and do host "
          "directories exist with the right permissions on every matched node?"),
        _("A mount target that covers a code or config directory hides the image's files."),
    ),
    ChecklistItem(
        "placement.selector_namespace",
        _("Did every Task land on the intended cluster and namespace (nodeSelector, matched "
          "nodes and replicas as in the verification on record)?"),
        _("Placement follows nodeSelector only; the namespace is the first matched node's."),
    ),
    ChecklistItem(
        "capacity.devices",
        _("Do the matched nodes really provide the GPUs and rlinf.io/* devices each worker "
          "requests?"),
        _("Compare the requests with the capacity the admin confirmed on the verification."),
    ),
    ChecklistItem(
        "images.compatible",
        _("If roles use different images: do they share the Ray version and protocol, "
          "Python, RLinf, config format and drivers?"),
        _("RLark does not check runtime compatibility between different images."),
    ),
    ChecklistItem(
        "signal.where_when",
        _("Was the signal looked for where the launch list says, after the time it gives?"),
        _("For example the Head Task log or the TensorBoard log directory."),
    ),
)


def checklist_codes() -> tuple[str, ...]:
    return tuple(item.code for item in CHECKLIST)


@dataclass(frozen=True)
class ChecklistAnswer:
    question: StrPromise
    answer: StrPromise
    note: str


def checklist_answers(troubleshooting: Mapping[str, Any]) -> list[ChecklistAnswer]:
    """Stored answers in the checklist's own order (the form's), whatever order JSON kept."""
    answers = []
    for item in CHECKLIST:
        value = troubleshooting.get(item.code)
        if isinstance(value, Mapping):
            label = ANSWERS.get(str(value.get("answer")), ANSWERS["unchecked"])
            answers.append(ChecklistAnswer(item.question, label, str(value.get("note") or "")))
    return answers
