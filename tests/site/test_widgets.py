"""`PlainSelect` writes exactly the HTML Django's `forms.Select` renders from its templates."""

from __future__ import annotations

from typing import Any

import pytest
from django import forms
from django.utils.safestring import mark_safe
from django.utils.translation import gettext_lazy, override

from clusters.verifications.forms import QueueFilterForm
from rlark_site.foundation.tenancy.models import Team
from rlark_site.foundation.widgets import PlainSelect

CHOICES: list[tuple[Any, Any]] = [
    ("", "all"),
    ("a&b", 'Team "<A>" & \'B\''),
    (7, 7000),
    (None, "none"),
    ("safe", mark_safe("<b>kept</b>")),
    ("lazy", gettext_lazy("pending")),
    ("Group <1>", [("g1", "first"), ("g2", "second <2>")]),
]


@pytest.mark.parametrize("value", [None, "", "a&b", "7", "g2", ["a&b", "g1"], "missing"])
@pytest.mark.parametrize("attrs", [None, {"id": "id_team", "required": True},
                                   {"disabled": False, "data-x": 'q"<'}])
def test_plain_select_renders_what_select_renders(value: Any, attrs: Any) -> None:
    args = ("team", value, attrs)
    assert PlainSelect(choices=CHOICES).render(*args) == forms.Select(choices=CHOICES).render(*args)


@pytest.mark.django_db
@pytest.mark.parametrize("data", [None, {"state": "all", "team": "t-<1>", "cluster": "nope"}])
def test_the_queue_filter_renders_as_before(data: Any) -> None:
    Team.objects.create(slug="t-<1>", name='Team "one" & <two>')
    Team.objects.create(slug="t-2", name="Two")
    form = QueueFilterForm(data)
    for name in ("state", "cluster", "team"):
        field = form.fields[name]
        assert isinstance(field.widget, PlainSelect)
        with override("zh-hans"):
            plain = str(form[name])
            field.widget = forms.Select(choices=field.choices)
            assert plain == str(form[name])
    assert 'Team &quot;one&quot; &amp; &lt;two&gt;' in plain
