"""Forms of the verification pages: they check shape only; the services check the rules."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sized
from typing import Any, TypeVar

from django import forms
from django.utils.translation import get_language
from django.utils.translation import gettext_lazy as _

from clusters.matching import SelectorInputError, parse_selector_input
from clusters.models import Cluster, Verification
from clusters.verifications.selectors import OPEN, STATE_FILTERS
from rlark_site.foundation.limits import MAX_DEVICE_KINDS, MAX_FORM_TEXT, MAX_HOST_PATHS
from rlark_site.foundation.tenancy.models import Team
from rlark_site.foundation.widgets import PlainSelect

_Sized = TypeVar("_Sized", bound=Sized)

_STATE_LABELS = {
    OPEN: _("open (pending and stale)"),
    "pending": _("pending"),
    "approved": _("approved"),
    "rejected": _("rejected"),
    "stale": _("stale"),
    "all": _("all"),
}


def _lines(text: str) -> list[str]:
    return [part.strip() for line in text.splitlines() for part in line.split(",")
            if part.strip()]


def _at_most(items: _Sized, limit: int) -> _Sized:
    if len(items) > limit:
        raise forms.ValidationError(
            _("Enter at most %(max)s entries, one per line.") % {"max": limit}
        )
    return items


def _choices_of(field: forms.Field) -> list[tuple[Any, Any]]:
    """A choice field's (value, label) pairs (normalized by Django when set)."""
    return list(getattr(field, "choices", []))


class VerificationRequestForm(forms.Form):
    # The findings a refused request was answered with (shown under the form's errors).
    refusal_findings: list[dict[str, Any]] = []

    cluster = forms.ModelChoiceField(
        queryset=Cluster.objects.order_by("name"), to_field_name="name", label=_("Cluster"),
    )
    conditions = forms.CharField(
        max_length=MAX_FORM_TEXT,
        label=_("Node selector"), widget=forms.Textarea(attrs={"rows": 3}),
        help_text=_("key=value conditions, one per line or separated by commas; each key once."),
    )
    for_header_role = forms.BooleanField(
        required=False, label=_("For the Header role (must match exactly 1 node)"),
    )
    requested_gpu = forms.IntegerField(
        required=False, min_value=0, label=_("GPUs per worker (optional)"),
    )
    requested_devices = forms.CharField(
        required=False, max_length=MAX_FORM_TEXT, label=_("Device resources (optional)"),
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text=_("name=count, for example rlinf.io/rdma=1"),
    )
    requested_host_paths = forms.CharField(
        required=False, max_length=MAX_FORM_TEXT, label=_("Host directories to confirm (optional)"),
        widget=forms.Textarea(attrs={"rows": 2}), help_text=_("Absolute paths, one per line."),
    )
    note = forms.CharField(required=False, label=_("Note for the admins"),
                           widget=forms.Textarea(attrs={"rows": 2}), max_length=4000)

    def clean_conditions(self) -> dict[str, str]:
        try:
            return parse_selector_input(self.cleaned_data["conditions"], field="conditions")
        except SelectorInputError as exc:
            raise forms.ValidationError([p.message for p in exc.problems]) from exc

    def clean_requested_devices(self) -> dict[str, int]:
        devices: dict[str, int] = {}
        for part in _lines(self.cleaned_data["requested_devices"]):
            name, _sep, count = part.partition("=")
            if not count.strip().isdecimal():
                raise forms.ValidationError(
                    _("%(part)s is not name=count.") % {"part": part[:100]}
                )
            devices[name.strip()] = int(count)
        return _at_most(devices, MAX_DEVICE_KINDS)

    def clean_requested_host_paths(self) -> list[str]:
        return _at_most([line.strip() for line
                         in self.cleaned_data["requested_host_paths"].splitlines()
                         if line.strip()], MAX_HOST_PATHS)


class DecisionForm(forms.Form):
    """Approve or reject one pending request, confirming what it asked for."""

    decision = forms.ChoiceField(choices=[("approve", _("Approve")), ("reject", _("Reject"))])
    note = forms.CharField(required=False, max_length=4000, label=_("Note"),
                           widget=forms.Textarea(attrs={"rows": 2}))
    confirm_gpu = forms.BooleanField(required=False)
    confirm_devices = forms.MultipleChoiceField(required=False,
                                                widget=forms.CheckboxSelectMultiple)
    confirm_host_paths = forms.MultipleChoiceField(required=False,
                                                   widget=forms.CheckboxSelectMultiple)

    def __init__(self, *args: Any, verification: Verification, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.verification = verification
        self._choices("confirm_devices", [
            (name, f"{name} × {count}")
            for name, count in sorted(verification.requested_devices.items())
        ])
        self._choices("confirm_host_paths",
                      [(path, path) for path in verification.requested_host_paths])

    def _choices(self, name: str, choices: list[tuple[str, str]]) -> None:
        field = self.fields[name]
        assert isinstance(field, forms.ChoiceField)
        field.choices = choices

    def confirmations(self) -> dict[str, Any]:
        """The service's confirm_* arguments: what was asked, for the boxes ticked."""
        data = self.cleaned_data
        asked = self.verification.requested_devices
        return {
            "confirm_gpu": self.verification.requested_gpu if data["confirm_gpu"] else None,
            "confirm_devices": {name: asked[name] for name in data["confirm_devices"]},
            "confirm_host_paths": list(data["confirm_host_paths"]),
        }


class QueueFilterForm(forms.Form):
    # PlainSelect: the cluster and team choices list the whole installation (same HTML).
    state = forms.ChoiceField(
        required=False, label=_("State"), widget=PlainSelect,
        choices=[(value, _STATE_LABELS[value]) for value in STATE_FILTERS],
    )
    cluster = forms.ChoiceField(required=False, label=_("Cluster"), widget=PlainSelect)
    team = forms.ChoiceField(required=False, label=_("Team"), widget=PlainSelect)

    def __init__(self, *args: Any, clusters: Iterable[str] | None = None, **kwargs: Any) -> None:
        """`clusters`: every cluster's name in name order, when the caller read them already."""
        super().__init__(*args, **kwargs)
        everyone = [("", _("all"))]
        cluster, team = self.fields["cluster"], self.fields["team"]
        assert isinstance(cluster, forms.ChoiceField) and isinstance(team, forms.ChoiceField)
        if clusters is None:
            clusters = Cluster.objects.order_by("name").values_list("name", flat=True)
        cluster.choices = everyone + [(name, name) for name in clusters]
        team.choices = everyone + [
            (slug, name) for slug, name in Team.objects.order_by("slug").values_list("slug", "name")
        ]

    def rendering_key(self) -> str:
        """Names everything the form's HTML shows (it is cached under it): each field's
        choices and value, and the language (the labels are translated)."""
        shown = [[field.name, [[str(v), str(label)] for v, label in _choices_of(field.field)],
                  field.value()] for field in self]
        identity = json.dumps([shown, get_language()], default=str)
        return hashlib.sha256(identity.encode()).hexdigest()

    def filters(self) -> dict[str, str | None]:
        data = self.cleaned_data if self.is_valid() else {}
        return {
            "state": data.get("state") or OPEN,
            "cluster": data.get("cluster") or None,
            "team": data.get("team") or None,
        }
