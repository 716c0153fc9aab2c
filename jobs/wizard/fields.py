"""Where a finding belongs on the page: from the engine's `finding.field` to a form input.

The engine names fields as paths into the SPEC 12 draft body (``name``,
``roles[0].gpus``, ``roles[1].env[2].name``, ``ssh_keys[0]``). Each path has one HTML
anchor (`field_anchor`), used as the input's ``id`` and as the target of the links on
the review step. A page registers the paths it renders; each finding is attached to the
longest registered prefix of its path (``roles[0].devices[3]`` falls back to
``roles[0].devices``, then ``roles[0]``), so nothing the engine reports is ever dropped.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property

from django.utils.safestring import SafeString, mark_safe

from jobs.core.findings.mounts import duplicate_target_message
from rlark_site.foundation.findings import Finding

__all__ = [
    "STEP_COMMON",
    "STEP_REVIEW",
    "STEP_ROLES",
    "STEP_WORKERS",
    "FieldMap",
    "FieldState",
    "FindingView",
    "at_header_choice",
    "at_row_places",
    "field_anchor",
    "finding_views",
    "parent_paths",
    "place_of",
]

STEP_ROLES, STEP_WORKERS, STEP_COMMON, STEP_REVIEW = 1, 2, 3, 4

_ROLE_PATH = re.compile(r"roles\[(\d+)\](?:\.(.+))?")
_LAST_PART = re.compile(r"(?:\.[^.\[\]]+|\[[^\]]*\])$")
_JOB_FIELD_STEPS = {
    "name": STEP_ROLES,
    "team": STEP_ROLES,
    "task_type": STEP_ROLES,
    "roles": STEP_ROLES,
    "header_role": STEP_ROLES,
    "new_role": STEP_ROLES,
    "network_domain": STEP_COMMON,
    "ssh_keys": STEP_COMMON,
    "run_script": STEP_COMMON,
    "tensorboard_log_dir": STEP_COMMON,
    "launch_list": STEP_COMMON,
    "deployment_parameters": STEP_COMMON,
}
# The engine's findings without a field, by the step whose inputs the rule judges: they are
# listed at the top of that step (and still on step 4). A code not listed stays on step 4.
_FIELDLESS_STEPS = {
    # The start scripts together: each role's prepare script (step 2) around the run script
    # (step 3, where `start_script.too_long` is shown too).
    "manifest.too_large": STEP_COMMON,
    # What the roles ask for in all against the Kueue quota: the workers of step 2 (every tab).
    "admission.exceeds_quota": STEP_WORKERS,
    "capacity.will_queue": STEP_WORKERS,
}


def field_anchor(path: str) -> str:
    """The HTML id of the input for `path` (``roles[0].env[2].name`` → ``f-roles-0-env-2-name``)."""
    return "f-" + re.sub(r"[^A-Za-z0-9_]+", "-", path).strip("-")


def parent_paths(path: str) -> list[str]:
    """`path` and each shorter path it lies under, longest first."""
    paths = [path]
    while (shorter := _LAST_PART.sub("", paths[-1])) and shorter != paths[-1]:
        paths.append(shorter)
    return paths


@dataclass(frozen=True)
class Place:
    """The step (and for step 2 the role tab) where a field is edited."""

    step: int
    role: int | None = None


def place_of(path: str | None, *, code: str = "", step: int | None = None) -> Place:
    """Where the input at `path` is edited. Without a path: the step of the engine rule
    `code` (`_FIELDLESS_STEPS`), else `step` (the step whose save refused it), else step 4.
    On step 2 such a finding has no role tab: it is shown on every tab."""
    if not path:
        return Place(_FIELDLESS_STEPS.get(code) or step or STEP_REVIEW)
    role = _ROLE_PATH.fullmatch(path)
    if role is not None:
        index, rest = int(role.group(1)), role.group(2) or ""
        if rest == "name":
            return Place(STEP_ROLES, index)
        return Place(STEP_WORKERS, index)
    top = re.split(r"[.\[]", path, maxsplit=1)[0]
    return Place(_JOB_FIELD_STEPS.get(top, STEP_REVIEW))


@dataclass(frozen=True)
class FindingView:
    """A finding as the page shows it, with where its field is edited."""

    code: str
    severity: str
    message: str
    role: str | None
    field: str | None
    anchor: str
    place: Place
    detail: Mapping[str, object] = dataclasses.field(default_factory=dict)

    @property
    def is_error(self) -> bool:
        return self.severity == "error"


def finding_views(findings: Iterable[Finding]) -> list[FindingView]:
    return [
        FindingView(
            code=f.code, severity=f.severity, message=str(f.message), role=f.role,
            field=f.field, anchor=field_anchor(f.field) if f.field else "",
            place=place_of(f.field, code=f.code), detail=f.detail,
        )
        for f in findings
    ]


HEADER_REPLICAS = "header.replicas"


def at_header_choice(findings: Iterable[FindingView]) -> list[FindingView]:
    """The Header role's replicas are checked wherever the Header role is chosen (steps 1 and
    3): `header.replicas`, about that role's selector (step 2), is shown beside the choice
    too. Its place is kept, so it is still counted on step 2 and links there."""
    return [replace(f, field="header_role", anchor=field_anchor("header_role"))
            if f.code == HEADER_REPLICAS else f for f in findings]


DUPLICATE_TARGET = "mount.target.duplicate"
_ROW_PATH = re.compile(r"(roles\[\d+\]\.(devices|env|mounts))\[(\d+)\](.*)")


def at_row_places(findings: Iterable[FindingView], places: Mapping[str, Sequence[int]], *,
                  role: int) -> list[FindingView]:
    """Findings with their row numbers moved from the body's rows to the page's rows.

    A form drops the blank rows it was posted with, so the engine's ``roles[0].env[1]`` may be
    the page's third row: `places` maps each list ("devices", "env", "mounts") to the page
    row of each body row of role `role` (`RoleForm.row_places`).
    """
    moved = []
    for finding in findings:
        match = _ROW_PATH.fullmatch(finding.field or "")
        if match and match.group(1) != f"roles[{role}].{match.group(2)}":
            match = None
        rows = places.get(match.group(2), ()) if match else ()
        if match and int(match.group(3)) < len(rows):
            path = f"{match.group(1)}[{rows[int(match.group(3))]}]{match.group(4)}"
            finding = replace(finding, field=path, anchor=field_anchor(path))
        other = finding.detail.get("other")
        if (finding.code == DUPLICATE_TARGET and isinstance(other, int)
                and 0 <= other < len(rows)):
            # The earlier mount, named by its page row's label (from 1), not the body's.
            finding = replace(finding, message=duplicate_target_message(
                rows[other] + 1, str(finding.detail.get("target", ""))))
        moved.append(finding)
    return moved


@dataclass
class FieldState:
    """One input's id and the findings shown next to it (with the ARIA wiring)."""

    path: str
    findings: list[FindingView] = field(default_factory=list)
    autofocus: bool = False
    hint: bool = False

    @cached_property
    def id(self) -> str:
        return field_anchor(self.path)

    @property
    def findings_id(self) -> str:
        return f"{self.id}-findings"

    @property
    def hint_id(self) -> str:
        return f"{self.id}-hint"

    @property
    def invalid(self) -> bool:
        return any(f.is_error for f in self.findings)

    @property
    def attrs(self) -> SafeString:
        """``aria-invalid``, ``aria-describedby`` and ``autofocus`` for the input element."""
        # The findings container is always referenced, empty or not: live answers fill and
        # empty it, and `rlark/behaviours.js` finds the inputs to mark by this reference.
        # Ids are made of letters, digits, '_' and '-' only (`field_anchor`): nothing to escape.
        invalid = ' aria-invalid="true"' if self.invalid else ""
        hint = f"{self.hint_id} " if self.hint else ""
        focus = " autofocus" if self.autofocus else ""
        html = f'{invalid} aria-describedby="{hint}{self.findings_id}"{focus}'
        return mark_safe(html)  # noqa: S308 - ids need no escaping (see above)


class FieldMap:
    """The fields one page renders, each with the findings attached to it.

    `fields.get(path)` answers for any path (a path not registered has no findings);
    templates read registered ones as ``f.name``.
    """

    def __init__(self, findings: Sequence[FindingView], paths: Iterable[str], *,
                 hints: Iterable[str] = (), include: Callable[[FindingView], bool] | None = None,
                 ) -> None:
        hinted = set(hints)
        self._states = {p: FieldState(path=p, hint=p in hinted) for p in paths}
        self.general: list[FindingView] = []  # this page's findings without a field here
        for finding in findings:
            if include is not None and not include(finding):
                continue
            state = self._state_for(finding.field)
            if state is None:
                self.general.append(finding)
            else:
                state.findings.append(finding)
        self._focus_first_error(findings)

    def _state_for(self, path: str | None) -> FieldState | None:
        if not path:
            return None
        for candidate in parent_paths(path):
            if candidate in self._states:
                return self._states[candidate]
        return None

    def _focus_first_error(self, findings: Sequence[FindingView]) -> None:
        for finding in findings:
            state = self._state_for(finding.field) if finding.is_error else None
            if state is not None and state.invalid:
                state.autofocus = True
                return

    def states(self) -> list[FieldState]:
        """Every registered field, in registration order."""
        return list(self._states.values())

    def __getitem__(self, path: str) -> FieldState:
        """A registered field (KeyError otherwise, so templates fall back to attributes)."""
        return self._states[path]

    def get(self, path: str) -> FieldState:
        """The field at `path`; one without findings when the page did not register it."""
        return self._states.get(path) or FieldState(path=path)
