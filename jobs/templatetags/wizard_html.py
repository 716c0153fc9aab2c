"""The wizard's repeated markup, written in Python: findings beside fields, options, node rows.

Each of these stood for a loop or an `{% include %}` per row (step 2 renders some fifty of
them), and Django's template engine spends tens of microseconds on every node of every row.
One tag per list writes the same HTML in plain Python: values are escaped exactly as
``{{ value }}`` escapes them, and translations of fixed text are used as ``{% translate %}`` /
``{% blocktranslate %}`` use them (the same messages, not escaped).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from html import escape
from typing import Any

from django import template
from django.utils.safestring import SafeString, mark_safe
from django.utils.translation import gettext, gettext_noop, ngettext

from jobs.wizard.presenters import EnvRow, LabelSelect, MountRow, NodeRow

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
    """The options of one label key: ``key=value`` with how many nodes carry it and, when
    known, their free GPUs."""
    key = _esc(select.key)
    options = []
    counted: dict[int, str] = {}  # ngettext costs ~20 us; counts repeat across values
    free: dict[int, str] = {}
    for option in select.options:
        value = _esc(option.value)
        selected = " selected" if option.selected else ""
        if option.count not in counted:
            counted[option.count] = ngettext("%(n)s node", "%(n)s nodes", option.count) % {
                "n": option.count}
        nodes = counted[option.count]
        if option.free_gpu is not None:
            if option.free_gpu not in free:
                free[option.free_gpu] = ngettext(
                    "%(n)s free GPU", "%(n)s free GPUs", option.free_gpu) % {"n": option.free_gpu}
            nodes = f"{nodes}, {free[option.free_gpu]}"
        options.append(f'<option value="{key}={value}"{selected}>{value} ({nodes})</option>')
    return mark_safe("".join(options))  # noqa: S308 - every value above is escaped


@register.simple_tag
def node_rows(nodes: Iterable[NodeRow]) -> SafeString:
    """The matched nodes' table rows: cluster (marked when foreign), name, namespace."""
    # outside the f-strings: xgettext (makemessages) does not read calls inside them
    another, not_ready = gettext("another cluster"), gettext("not ready")
    foreign = f' <span class="sr-only">({another})</span>'
    stale = f' <span class="badge stale">{not_ready}</span>'
    rows = []
    for n in nodes:
        mark, note = (' class="foreign"', foreign) if n.foreign else ("", "")
        rows.append(f"<tr{mark}><td>{_esc(n.cluster)}{note}</td><td>{_esc(n.name)}"
                    f"{'' if n.ready else stale}</td><td>{_esc(n.namespace)}</td></tr>")
    return mark_safe("".join(rows))  # noqa: S308 - every value above is escaped


# marked for makemessages here: xgettext does not read calls inside f-strings
_VARIABLE_NAME = gettext_noop("Variable %(n)s name")
_VARIABLE_VALUE = gettext_noop("Variable %(n)s value")


def _numbered(message: str, number: Any) -> str:
    """``{% blocktranslate with n=n %}`` of `message` (which holds ``%(n)s``)."""
    return gettext(message) % {"n": _esc(number)}


def _env_row(row: EnvRow, number: Any) -> str:
    name, value = row.name_field, row.value_field
    return (
        "      <tr>\n"
        f'        <td><label class="sr-only" for="{_esc(name.id)}">'
        f'{_numbered(_VARIABLE_NAME, number)}</label>\n'
        f'          <input type="text" id="{_esc(name.id)}" name="env_name" '
        f'value="{_esc(row.name)}" spellcheck="false"{name.attrs}>{field_findings(name)}</td>\n'
        f'        <td><label class="sr-only" for="{_esc(value.id)}">'
        f'{_numbered(_VARIABLE_VALUE, number)}</label>\n'
        f'          <input type="text" id="{_esc(value.id)}" name="env_value" '
        f'value="{_esc(row.value)}" spellcheck="false"{value.attrs}>{field_findings(value)}</td>\n'
        "      </tr>\n"
    )


def _numbered_rows(render: Callable[[Any, Any], str], rows: Iterable[Any]) -> SafeString:
    """`render(row, number)` of each row, numbered from 1 for their labels."""
    html = "".join(render(row, number) for number, row in enumerate(rows, start=1))
    return mark_safe(html)  # noqa: S308 - the row renderers escape every value


@register.simple_tag
def env_rows(rows: Iterable[EnvRow]) -> SafeString:
    """The environment variable rows of step 2, numbered from 1 for their labels."""
    return _numbered_rows(_env_row, rows)


@register.simple_tag
def env_row(row: EnvRow, number: Any) -> SafeString:
    """One environment variable row (`number` may be a placeholder the page's script fills)."""
    return mark_safe(_env_row(row, number))  # noqa: S308 - every value is escaped in _env_row


def _mount_kinds(kind: str) -> str:
    known = {"host_path": gettext("host directory"), "object_storage": gettext("object storage")}
    options = "".join(
        f'            <option value="{value}"{" selected" if kind == value else ""}>{label}'
        "</option>\n" for value, label in known.items())
    other = "" if kind in known else f'<option value="{_esc(kind)}" selected>{_esc(kind)}</option>'
    return f"{options}            {other}\n"


def _mount_input(field: Any, name: str, value: str, placeholder: str) -> str:
    return (f'          <input type="text" id="{_esc(field.id)}" name="{name}" '
            f'value="{_esc(value)}" placeholder="{placeholder}"{field.attrs}>'
            f"{field_findings(field)}</td>\n")


def _mount_label(field: Any, message: str, number: Any) -> str:
    return (f'        <td><label class="sr-only" for="{_esc(field.id)}">'
            f"{_numbered(message, number)}</label>\n")


def _mount_row(row: MountRow, number: Any) -> str:
    kind, storage = row.kind_field, row.storage_class_field
    return "".join((
        "      <tr>\n",
        _mount_label(kind, gettext_noop("Mount %(n)s kind"), number),
        f'          <select id="{_esc(kind.id)}" name="mount_kind"{kind.attrs}>\n',
        _mount_kinds(row.kind),
        f"          </select>{field_findings(kind)}</td>\n",
        _mount_label(row.source_field, gettext_noop("Mount %(n)s host directory"), number),
        _mount_input(row.source_field, "mount_source", row.source, "/data/models"),
        _mount_label(storage, gettext_noop("Mount %(n)s storage class"), number),
        f'          <select id="{_esc(storage.id)}" name="mount_storage_class"{storage.attrs}>\n',
        '            <option value="">\u2014</option>\n',
        f"            {plain_options(row.storage_choices, row.storage_class)}\n",
        f"          </select>{field_findings(storage)}</td>\n",
        _mount_label(row.size_field, gettext_noop("Mount %(n)s size"), number),
        _mount_input(row.size_field, "mount_size", row.size, "1Gi"),
        _mount_label(row.target_field, gettext_noop("Mount %(n)s target"), number),
        _mount_input(row.target_field, "mount_target", row.target, "/mnt/models"),
        "      </tr>\n",
    ))


@register.simple_tag
def mount_rows(rows: Iterable[MountRow]) -> SafeString:
    """The storage mount rows of step 2, numbered from 1 for their labels."""
    return _numbered_rows(_mount_row, rows)


@register.simple_tag
def mount_row(row: MountRow, number: Any) -> SafeString:
    """One storage mount row (`number` may be a placeholder the page's script fills)."""
    return mark_safe(_mount_row(row, number))  # noqa: S308 - every value is escaped in _mount_row
