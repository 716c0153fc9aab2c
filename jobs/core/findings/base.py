"""What every rule module shares: readers of unchecked input, and one role as the rules see
it. (The finding builder is `rlark_site.foundation.findings.new_finding`, shared with
`clusters`.)"""

from __future__ import annotations

import re
from typing import Any

from clusters.labels import selector_problems
from jobs.core.spec import (
    CheckContext,
    JobSpec,
    SelectorMatch,
    VerificationView,
    as_items,
    field_of,
    header_index,
    role_match,
)
from rlark_site.foundation.findings import Finding, new_finding
from rlark_site.foundation.findings import translate as _

ROLE_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9]*[A-Za-z0-9])?")
NAME_MAX = 63
SHOWN_MAX = 100



def shown(value: object) -> str:
    """A short, JSON-safe rendering of user input for messages and details."""
    if isinstance(value, str):
        return value[:SHOWN_MAX]
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)[:SHOWN_MAX]
    return type(value).__name__


def text_problem(value: object) -> str | None:
    """Why `value` cannot be embedded as text (not a string, NUL, not encodable), or None."""
    if not isinstance(value, str):
        return "not_text"
    if "\x00" in value:
        return "nul_character"
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return "not_encodable"
    return None


def optional_text(value: object) -> object:
    """None stands for an absent optional text."""
    return "" if value is None else value


def normal_path(value: object) -> str | None:
    """The absolute path `value` names, normalised; None unless absolute, clean and without '..'."""
    if text_problem(value) is not None:
        return None
    assert isinstance(value, str)
    if not value.startswith("/") or any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in value):
        return None
    parts = [part for part in value.split("/") if part not in ("", ".")]
    if ".." in parts:
        return None
    return "/" + "/".join(parts)


def within(path: str, directory: str) -> bool:
    return path == directory or path.startswith(directory.rstrip("/") + "/")


def text_reason(reason: str) -> str:
    """The user-facing words for a `text_problem` (or value) reason."""
    reasons = {
        "not_text": _("it is not text"),
        "nul_character": _("it contains a NUL character"),
        "not_encodable": _("it is not valid Unicode text"),
        "too_long": _("it is too long to pass to a process"),
        "not_seconds": _("it must be a whole number of seconds"),
    }
    return reasons.get(reason, reason)


class CheckedRole:
    """One role as the rules read it, with what the context says about it."""

    def __init__(self, *, spec: JobSpec, ctx: CheckContext, index: int, role: object) -> None:
        self.spec = spec
        self.ctx = ctx
        self.index = index
        self.role = role
        name = field_of(role, "name", None)
        self.name = name if isinstance(name, str) else None
        self.label = self.name[:SHOWN_MAX] if self.name is not None else None
        self.is_header = header_index(spec) == index
        cluster = field_of(role, "cluster")
        self.cluster = cluster if isinstance(cluster, str) and cluster in ctx.clusters else None
        self.selector_ok = not selector_problems(field_of(role, "selector", ()))
        self.match = role_match(role, ctx) if self.selector_ok else SelectorMatch(nodes=())
        self.verification = self._verification()

    def field(self, path: str) -> str:
        return f"roles[{self.index}].{path}"

    def finding(self, code: str, message: str, where: str, **kwargs: Any) -> Finding:
        """A finding about this role's input at `where` (a path inside the role)."""
        return new_finding(code, message, role=self.label, field=self.field(where), **kwargs)

    def _verification(self) -> VerificationView | None:
        if self.cluster is None or not self.selector_ok:
            return None
        selector = dict(as_items(field_of(self.role, "selector", ())))
        return self.ctx.verification_for(self.cluster, selector)

    @property
    def confirmed(self) -> VerificationView | None:
        """The verification, when it is approved and still matches today's nodes."""
        view = self.verification
        if view is None or view.state != "approved":
            return None
        if sorted(view.node_signature) != sorted(self.match.signature()):
            return None
        return view
