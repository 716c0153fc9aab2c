"""The wizard's row tags write what the template loops they replaced wrote, escaping included."""

from __future__ import annotations

import pytest
from django.template import engines
from django.utils import translation
from django.utils.safestring import mark_safe

from jobs.templatetags.wizard_html import field_findings, label_options, node_rows, plain_options
from jobs.wizard.fields import FieldState, FindingView, Place
from jobs.wizard.presenters import LabelOption, LabelSelect, NodeRow

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
