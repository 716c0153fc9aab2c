"""Query parameters of the pod, log and event reads: label and field selectors, log options."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from clusters.simulator.objects import ApiError
from clusters.simulator.pods import format_time, parse_time

_LABEL_TERM = re.compile(
    r"^(?P<neg>!)?(?P<key>[A-Za-z0-9./_-]+)"
    r"(?:\s*(?P<op>==|=|!=)\s*(?P<value>[A-Za-z0-9._-]*))?$"
)
_EVENT_FIELDS = {
    "involvedObject.name": ("involvedObject", "name"),
    "involvedObject.kind": ("involvedObject", "kind"),
    "involvedObject.uid": ("involvedObject", "uid"),
    "involvedObject.namespace": ("involvedObject", "namespace"),
    "type": ("type",),
    "reason": ("reason",),
}
_POD_FIELDS = {
    "metadata.name": ("metadata", "name"),
    "metadata.namespace": ("metadata", "namespace"),
    "spec.nodeName": ("spec", "nodeName"),
    "spec.schedulerName": ("spec", "schedulerName"),
    "status.phase": ("status", "phase"),
}
_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")


@dataclass(frozen=True)
class _LabelTerm:
    key: str
    op: str  # "exists", "absent", "=" or "!="
    value: str = ""

    def holds(self, labels: Mapping[str, str]) -> bool:
        if self.op == "exists":
            return self.key in labels
        if self.op == "absent":
            return self.key not in labels
        return (labels.get(self.key) == self.value) == (self.op == "=")


def parse_label_selector(text: str) -> Callable[[Mapping[str, str]], bool]:
    """Equality-based selectors (`k=v`, `k==v`, `k!=v`, `k`, `!k`, comma-separated)."""
    terms: list[_LabelTerm] = []
    for term in filter(None, (part.strip() for part in text.split(","))):
        match = _LABEL_TERM.match(term)
        if match is None or (match["neg"] and match["op"]):
            raise ApiError(400, f"unable to parse requirement: {term!r} (the simulator supports "
                                "=, ==, != and existence)")
        op = match["op"]
        if op is None:
            terms.append(_LabelTerm(match["key"], "absent" if match["neg"] else "exists"))
        else:
            terms.append(_LabelTerm(match["key"], "!=" if op == "!=" else "=",
                                    match["value"] or ""))
    return lambda labels: all(term.holds(labels) for term in terms)


def parse_event_field_selector(text: str) -> Callable[[Mapping[str, Any]], bool]:
    """`field=value` / `field!=value` terms over `involvedObject.*`, `type` and `reason`."""
    terms: list[tuple[tuple[str, ...], str, bool]] = []
    for term in filter(None, (part.strip() for part in text.split(","))):
        negated = "!=" in term
        field, sep, value = term.partition("!=" if negated else "=")
        value = value[1:] if value.startswith("=") else value
        if not sep or field not in _EVENT_FIELDS:
            raise ApiError(400, f'"{field}" is not a known field selector: only '
                                + ", ".join(sorted(_EVENT_FIELDS)))
        terms.append((_EVENT_FIELDS[field], value, negated))
    return lambda event: all((_get(event, path) == value) != negated
                             for path, value, negated in terms)


@dataclass(frozen=True)
class PodFieldSelector:
    """A parsed pod `fieldSelector`: `node` when it pins `spec.nodeName` to one value (the
    list then reads that node's pods only), and the whole selector as `matches`."""

    node: str | None
    terms: tuple[tuple[tuple[str, ...], str, bool], ...]

    def matches(self, pod: Mapping[str, Any]) -> bool:
        return all((_field(pod, path) == value) != negated for path, value, negated in self.terms)


def _field(pod: Mapping[str, Any], path: tuple[str, ...]) -> str:
    value = _get(pod, path)
    if path == ("spec", "schedulerName"):
        value = value or "default-scheduler"
    return "" if value is None else str(value)


def parse_pod_field_selector(text: str) -> PodFieldSelector:
    """`field=value`, `field==value` and `field!=value` terms, comma-separated, over the
    fields the API server supports for pods (those of `_POD_FIELDS`)."""
    terms: list[tuple[tuple[str, ...], str, bool]] = []
    node: str | None = None
    for term in filter(None, (part.strip() for part in text.split(","))):
        negated = "!=" in term
        field, sep, value = term.partition("!=" if negated else "=")
        value = value[1:] if not negated and value.startswith("=") else value
        field = field.strip()
        if not sep:
            raise ApiError(400, f"invalid field selector: {term!r}: an operator is required")
        if field not in _POD_FIELDS:
            raise ApiError(400, f"field label not supported: {field}")
        terms.append((_POD_FIELDS[field], value.strip(), negated))
        if field == "spec.nodeName" and not negated and node is None:
            node = value.strip()
    return PodFieldSelector(node=node, terms=tuple(terms))


def _get(document: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = document
    for key in path:  # a dict first: the ABC check costs a microsecond, on every pod listed
        value = value.get(key) if isinstance(value, dict) or isinstance(value, Mapping) else None
    return value


def _int(query: Mapping[str, str], key: str, *, minimum: int) -> int | None:
    text = query.get(key)
    if not text:
        return None
    try:
        value = int(text)
    except ValueError as exc:
        raise ApiError(400, f"{key} must be an integer, not {text!r}") from exc
    if value < minimum:
        raise ApiError(422, f"{key}: Invalid value: {value}: must be at least {minimum}",
                       reason="Invalid")
    return value


def _bool(query: Mapping[str, str], key: str) -> bool:
    return query.get(key, "").lower() in ("true", "1")


@dataclass(frozen=True)
class LogOptions:
    """`PodLogOptions` as the simulator reads them from a log request's query."""

    container: str
    tail_lines: int | None
    since_seconds: int | None
    since_time: datetime | None
    previous: bool
    follow: bool
    timestamps: bool
    limit_bytes: int | None

    @classmethod
    def from_query(cls, query: Mapping[str, str]) -> LogOptions:
        since_text = query.get("sinceTime", "")
        if since_text and not _TIME.match(since_text):
            raise ApiError(400, f"sinceTime must be an RFC 3339 time, not {since_text!r}")
        options = cls(
            container=query.get("container", ""),
            tail_lines=_int(query, "tailLines", minimum=0),
            since_seconds=_int(query, "sinceSeconds", minimum=1),
            # The API server passes sinceTime on to the kubelet as RFC 3339 without the
            # fraction (pkg/registry/core/pod: `SinceTime.Format(time.RFC3339)`): a read
            # since 10:00:00.7 starts with the lines of 10:00:00.
            since_time=_precise_time(since_text).replace(microsecond=0) if since_text else None,
            previous=_bool(query, "previous"),
            follow=_bool(query, "follow"),
            timestamps=_bool(query, "timestamps"),
            limit_bytes=_int(query, "limitBytes", minimum=1),
        )
        if options.since_seconds is not None and options.since_time is not None:
            raise ApiError(422, "at most one of sinceTime or sinceSeconds may be specified",
                           reason="Invalid")
        return options

    def since(self, now: datetime) -> datetime | None:
        """The first moment a read returns lines of (None: from the container's start)."""
        if self.since_seconds is not None:
            return now - timedelta(seconds=self.since_seconds)
        return self.since_time

    def render(self, lines: list[tuple[datetime, str]], *, now: datetime,
               tail: bool = True) -> str:
        """The selected lines as the kubelet answers them (one `\\n`-terminated line each):
        `tailLines` picks the last lines, of those the ones at or after the since moment,
        each with its timestamp when asked, cut at `limitBytes` (also inside a line)."""
        since = self.since(now)
        chosen = lines
        if tail and self.tail_lines is not None:
            chosen = chosen[max(0, len(chosen) - self.tail_lines):] if self.tail_lines else []
        chosen = [(moment, line) for moment, line in chosen if since is None or moment >= since]
        text = "".join(
            (format_time(moment, nano=True) + " " if self.timestamps else "") + line + "\n"
            for moment, line in chosen
        )
        if self.limit_bytes is not None:
            text = text.encode()[: self.limit_bytes].decode(errors="ignore")
        return text


def _precise_time(text: str) -> datetime:
    moment = parse_time(text[:19])
    fraction = text[19:-1]
    if fraction.startswith("."):
        moment += timedelta(microseconds=int((fraction[1:] + "000000")[:6]))
    return moment
