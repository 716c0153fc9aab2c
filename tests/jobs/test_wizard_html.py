"""The wizard's row tags write what the template loops they replaced wrote, escaping included."""

from __future__ import annotations

from dataclasses import replace

import pytest
from django.template import engines
from django.utils import translation
from django.utils.safestring import mark_safe

from jobs.templatetags.wizard_html import (
    env_row,
    env_rows,
    field_findings,
    label_options,
    mount_row,
    mount_rows,
    node_rows,
    plain_options,
)
from jobs.wizard.fields import FieldState, FindingView, Place
from jobs.wizard.presenters import EnvRow, LabelOption, LabelSelect, MountRow, NodeRow

HOSTILE = "<b>\"x\" & 'y'</b>"


def render(source: str, **context: object) -> str:
    return engines["django"].from_string("{% load i18n %}" + source).render(context)


def finding(message: str, severity: str = "error") -> FindingView:
    return FindingView(code=f"c.{severity}", severity=severity, message=message, role=None,
                       field="roles[0].gpus", anchor="f-roles-0-gpus", place=Place(2, 0))


def test_field_findings_escape_text_and_keep_safe_text() -> None:
    field = FieldState(path="roles[0].gpus", findings=[
        finding(HOSTILE), finding(mark_safe("<em>ok</em>"), "warning")])
    assert field_findings(field) == (
        '<div id="f-roles-0-gpus-findings" class="field-findings">'
        '<p class="finding error">&lt;b&gt;&quot;x&quot; &amp; &#x27;y&#x27;&lt;/b&gt; '
        '<code>c.error</code></p>'
        '<p class="finding warning"><em>ok</em> <code>c.warning</code></p></div>\n')
    assert field_findings(FieldState(path="name"), True) == (
        '<div id="f-name-findings" class="field-findings" hx-swap-oob="true"></div>\n')


def test_field_attrs_name_the_hint_and_findings_and_mark_errors() -> None:
    field = FieldState(path="roles[1].env[2].name", findings=[finding("bad")], hint=True,
                       autofocus=True)
    assert field.attrs == (' aria-invalid="true" aria-describedby="f-roles-1-env-2-name-hint '
                           'f-roles-1-env-2-name-findings" autofocus')
    assert FieldState(path="gpus").attrs == ' aria-describedby="f-gpus-findings"'


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_options_and_node_rows_equal_the_template_loops(language: str) -> None:
    select = LabelSelect(key="rlinf.io/<k>", id="role-0-label-0", selected=True, options=(
        LabelOption(HOSTILE, 1, False), LabelOption("a100", 12, True)))
    nodes = [NodeRow(cluster=HOSTILE, name="n-1", namespace="rl", foreign=True, ready=False),
             NodeRow(cluster="gpu-a", name=HOSTILE, namespace="<ns>", foreign=False, ready=True)]
    with translation.override(language):
        assert label_options(select) == render(
            '{% for o in s.options %}<option value="{{ s.key }}={{ o.value }}"'
            '{% if o.selected %} selected{% endif %}>{{ o.value }} ({% blocktranslate count '
            'n=o.count %}{{ n }} node{% plural %}{{ n }} nodes{% endblocktranslate %})</option>'
            '{% endfor %}', s=select)
        assert plain_options(["gpu-a", HOSTILE], HOSTILE) == render(
            '{% for c in choices %}<option value="{{ c }}"{% if c == chosen %} selected'
            '{% endif %}>{{ c }}</option>{% endfor %}', choices=["gpu-a", HOSTILE],
            chosen=HOSTILE)
        assert node_rows(nodes) == render(
            '{% for n in nodes %}<tr{% if n.foreign %} class="foreign"{% endif %}><td>'
            '{{ n.cluster }}{% if n.foreign %} <span class="sr-only">({% translate "another '
            'cluster" %})</span>{% endif %}</td><td>{{ n.name }}{% if not n.ready %} <span '
            'class="badge stale">{% translate "not ready" %}</span>{% endif %}</td><td>'
            '{{ n.namespace }}</td></tr>{% endfor %}', nodes=nodes)


@pytest.mark.parametrize("language", ["en", "zh-hans"])
def test_env_and_mount_rows_equal_the_includes_they_replaced(language: str) -> None:
    def field(path: str, *messages: str) -> FieldState:
        return FieldState(path=path, findings=[finding(m) for m in messages])

    env = EnvRow(name=HOSTILE, value="/mnt/<hf>", name_field=field("roles[0].env[0].name", "x"),
                 value_field=field("roles[0].env[0].value"))
    mount = MountRow(
        kind="weird<kind>", source=HOSTILE, target="/mnt/a", storage_class="nope", size="1Gi",
        kind_field=field("roles[0].mounts[0].kind"), source_field=field(
            "roles[0].mounts[0].source", HOSTILE), target_field=field("roles[0].mounts[0].target"),
        storage_class_field=field("roles[0].mounts[0].storage_class"),
        size_field=field("roles[0].mounts[0].size"), storage_choices=("fast", "nope"))
    with translation.override(language):
        assert env_row(env, "__NUM__") == render(ENV_ROW, e=env, n="__NUM__")
        assert env_rows([env, env]) == render(ENV_ROW, e=env, n=1) + render(ENV_ROW, e=env, n=2)
        for kind in ("host_path", "object_storage", "weird<kind>"):
            row = replace(mount, kind=kind)
            assert mount_row(row, "__NUM__") == render(MOUNT_ROW, m=row, n="__NUM__")
            assert mount_rows([row]) == render(MOUNT_ROW, m=row, n=1)


# The row templates as they were (templates/jobs/wizard/_env_row.html and _mount_row.html).
ENV_ROW = """{% load wizard_html %}      <tr>
        <td><label class="sr-only" for="{{ e.name_field.id }}">{% blocktranslate with n=n %}Variable {{ n }} name{% endblocktranslate %}</label>
          <input type="text" id="{{ e.name_field.id }}" name="env_name" value="{{ e.name }}" spellcheck="false"{{ e.name_field.attrs }}>{% field_findings e.name_field %}</td>
        <td><label class="sr-only" for="{{ e.value_field.id }}">{% blocktranslate with n=n %}Variable {{ n }} value{% endblocktranslate %}</label>
          <input type="text" id="{{ e.value_field.id }}" name="env_value" value="{{ e.value }}" spellcheck="false"{{ e.value_field.attrs }}>{% field_findings e.value_field %}</td>
      </tr>
"""  # noqa: E501
MOUNT_ROW = """{% load wizard_html %}      <tr>
        <td><label class="sr-only" for="{{ m.kind_field.id }}">{% blocktranslate with n=n %}Mount {{ n }} kind{% endblocktranslate %}</label>
          <select id="{{ m.kind_field.id }}" name="mount_kind"{{ m.kind_field.attrs }}>
            <option value="host_path"{% if m.kind == "host_path" %} selected{% endif %}>{% translate "host directory" %}</option>
            <option value="object_storage"{% if m.kind == "object_storage" %} selected{% endif %}>{% translate "object storage" %}</option>
            {% if m.kind != "host_path" and m.kind != "object_storage" %}<option value="{{ m.kind }}" selected>{{ m.kind }}</option>{% endif %}
          </select>{% field_findings m.kind_field %}</td>
        <td><label class="sr-only" for="{{ m.source_field.id }}">{% blocktranslate with n=n %}Mount {{ n }} host directory{% endblocktranslate %}</label>
          <input type="text" id="{{ m.source_field.id }}" name="mount_source" value="{{ m.source }}" placeholder="/data/models"{{ m.source_field.attrs }}>{% field_findings m.source_field %}</td>
        <td><label class="sr-only" for="{{ m.storage_class_field.id }}">{% blocktranslate with n=n %}Mount {{ n }} storage class{% endblocktranslate %}</label>
          <select id="{{ m.storage_class_field.id }}" name="mount_storage_class"{{ m.storage_class_field.attrs }}>
            <option value="">—</option>
            {% for c in m.storage_choices %}<option value="{{ c }}"{% if c == m.storage_class %} selected{% endif %}>{{ c }}</option>{% endfor %}
          </select>{% field_findings m.storage_class_field %}</td>
        <td><label class="sr-only" for="{{ m.size_field.id }}">{% blocktranslate with n=n %}Mount {{ n }} size{% endblocktranslate %}</label>
          <input type="text" id="{{ m.size_field.id }}" name="mount_size" value="{{ m.size }}" placeholder="1Gi"{{ m.size_field.attrs }}>{% field_findings m.size_field %}</td>
        <td><label class="sr-only" for="{{ m.target_field.id }}">{% blocktranslate with n=n %}Mount {{ n }} target{% endblocktranslate %}</label>
          <input type="text" id="{{ m.target_field.id }}" name="mount_target" value="{{ m.target }}" placeholder="/mnt/models"{{ m.target_field.attrs }}>{% field_findings m.target_field %}</td>
      </tr>
"""  # noqa: E501
