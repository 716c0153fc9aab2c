"""Forms of the SSH key page (shape only; the service validates the key itself)."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from jobs.core.sshkeys import MAX_KEY_LENGTH
from jobs.drafts.selectors import JobListQuery
from jobs.drafts.services import SSH_KEY_NAME_MAX_LENGTH
from jobs.models import JobState


class SSHKeyForm(forms.Form):
    name = forms.CharField(
        label=_("Name"), max_length=SSH_KEY_NAME_MAX_LENGTH,
        help_text=_("How you will pick the key in the wizard, e.g. alice-laptop."),
    )
    public_key = forms.CharField(
        label=_("Public key"), max_length=MAX_KEY_LENGTH, strip=False,
        widget=forms.Textarea(attrs={"rows": 4, "spellcheck": "false"}),
        help_text=_("One OpenSSH public key line, e.g. the contents of ~/.ssh/id_ed25519.pub."),
    )


class JobListForm(forms.Form):
    """The job list's query string (page and API): search, filters, sort, page, team."""

    q = forms.CharField(label=_("Name contains"), required=False, max_length=63)
    state = forms.ChoiceField(label=_("State"), required=False,
                              choices=[("", _("any state")), *JobState.choices])
    cluster = forms.CharField(label=_("Cluster"), required=False, max_length=63)
    creator = forms.CharField(label=_("Created by"), required=False, max_length=150)
    pending = forms.BooleanField(label=_("Pending too long only"), required=False)
    stalled = forms.BooleanField(label=_("Stalled only"), required=False)
    team = forms.CharField(label=_("Team"), required=False, max_length=50)
    sort = forms.ChoiceField(label=_("Sort"), required=False, choices=[
        ("-updated", _("last change, newest first")), ("updated", _("last change, oldest first")),
        ("-created", _("created, newest first")), ("created", _("created, oldest first")),
        ("name", _("name, A to Z")), ("-name", _("name, Z to A")), ("state", _("state")),
    ])

    def query(self) -> JobListQuery:
        data = self.cleaned_data
        return JobListQuery(
            search=data["q"].strip(), state=data["state"], cluster=data["cluster"].strip(),
            creator=data["creator"].strip(), pending_flagged=data["pending"],
            stalled=data["stalled"], sort=data["sort"] or "-updated",
        )
