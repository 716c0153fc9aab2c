"""The wizard's repeated markup, written in Python: findings beside fields, options, node rows.

Each of these stood for a loop or an `{% include %}` per row (step 2 renders some fifty of
them), and Django's template engine spends tens of microseconds on every node of every row.
One tag per list writes the same HTML in plain Python: values are escaped exactly as
``{{ value }}`` escapes them, and translations of fixed text are used as ``{% translate %}`` /
``{% blocktranslate %}`` use them (the same messages, not escaped).
"""

from __future__ import annotations

from collections.abc import Iterable
from html import escape
from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext, ngettext

from jobs.wizard.presenters import LabelSelect, NodeRow

register = template.Library()


def _esc(value: Any) -> str:
    """``{{ value }}``'s escaping (`conditional_escape`), without its per-call wrappers: text
    already marked safe is kept, anything else is escaped."""
    if hasattr(value, "__html__"):
        return str(value.__html__())
    return escape(str(value))


@register.simple_tag
def field_findings(field: Any, oob: Any = False) -> SafeString:
    """The findings container of one field (a `FieldState`), filled with its findings; `oob`:
    swapped out of band by htmx. Ends with a newline, as the include it replaces did."""
    findings = "".join(
        f'<p class="finding {_esc(x.severity)}">{_esc(x.message)} <code>{_esc(x.code)}</code></p>'
        for x in getattr(field, "findings", ()))
    swap = ' hx-swap-oob="true"' if oob else ""
    field_id = _esc(getattr(field, "findings_id", ""))
    html = f'<div id="{field_id}" class="field-findings"{swap}>{findings}</div>\n'
    return mark_safe(html)  # noqa: S308 - every value above is escaped


@register.simple_tag
def plain_options(choices: Iterable[Any], chosen: Any) -> SafeString:
    """``<option>`` elements whose value is their text, `chosen` selected."""
    options = []
    for choice in choices:
        text = _esc(choice)
        selected = " selected" if choice == chosen else ""
        options.append(f'<option value="{text}"{selected}>{text}</option>')
    return mark_safe("".join(options))  # noqa: S308 - every value above is escaped


@register.simple_tag
def label_options(select: LabelSelect) -> SafeString:
    """The options of one label key: ``key=value`` with how many nodes carry it."""
    key = _esc(select.key)
    options = []
    for option in select.options:
        value = _esc(option.value)
        selected = " selected" if option.selected else ""
        nodes = ngettext("%(n)s node", "%(n)s nodes", option.count) % {"n": option.count}
        options.append(f'<option value="{key}={value}"{selected}>{value} ({nodes})</option>')
    return mark_safe("".join(options))  # noqa: S308 - every value above is escaped


@register.simple_tag
def node_rows(nodes: Iterable[NodeRow]) -> SafeString:
    """The matched nodes' table rows: cluster (marked when foreign), name, namespace."""
    foreign = f' <span class="sr-only">({gettext("another cluster")})</span>'
    stale = f' <span class="badge stale">{gettext("not ready")}</span>'
    rows = []
    for n in nodes:
        mark, note = (' class="foreign"', foreign) if n.foreign else ("", "")
        rows.append(f"<tr{mark}><td>{_esc(n.cluster)}{note}</td><td>{_esc(n.name)}"
                    f"{'' if n.ready else stale}</td><td>{_esc(n.namespace)}</td></tr>")
    return mark_safe("".join(rows))  # noqa: S308 - every value above is escaped
