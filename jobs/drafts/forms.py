"""Forms of the SSH key page (shape only; the service validates the key itself)."""

from __future__ import annotations

from django import forms
from django.utils.translation import gettext_lazy as _

from jobs.core.sshkeys import MAX_KEY_LENGTH
from jobs.drafts.services import SSH_KEY_NAME_MAX_LENGTH


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
