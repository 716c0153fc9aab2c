"""Forms of the cluster and node pages: they check shape; the services check the rules.

Credentials are write-only: their inputs never render a stored or submitted value back.
"""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.utils.translation import gettext_lazy as _

from clusters.inventory.selectors import LabelFilter, label_filter_from_text
from clusters.models import Cluster
from clusters.validators import validate_api_url

SELECTOR_EXAMPLE = "rlinf.io/gpu-model=a100, rlinf.io/zone=zone-1"


class SecretTextarea(forms.Textarea):
    """A textarea that never renders its value (like `PasswordInput(render_value=False)`)."""

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        return super().get_context(name, None, attrs)


class ClusterForm(forms.Form):
    """Add or edit a cluster. On edit, a blank credential keeps the stored one."""

    name = forms.SlugField(label=_("Name"), max_length=63)
    namespace = forms.SlugField(
        label=_("Namespace"), max_length=63, help_text=_("Where Jobs for this cluster are created.")
    )
    api_url = forms.CharField(
        label=_("API server URL"), max_length=500, validators=[validate_api_url],
        help_text=_("For the fleet simulator: http://HOST:PORT/<cluster name>."),
    )
    token = forms.CharField(
        label=_("Bearer token"), required=False, strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
    )
    clear_token = forms.BooleanField(label=_("Remove the stored token"), required=False)
    ca_cert = forms.CharField(
        label=_("CA certificate (PEM)"), required=False, strip=False,
        widget=SecretTextarea(attrs={"rows": 4, "autocomplete": "off"}),
    )
    clear_ca_cert = forms.BooleanField(label=_("Remove the stored CA certificate"), required=False)
    verify_tls = forms.BooleanField(label=_("Verify the server's TLS certificate"), required=False)
    enabled = forms.BooleanField(label=_("Poll this cluster"), required=False)

    def __init__(self, *args: Any, cluster: Cluster | None = None, **kwargs: Any) -> None:
        self.cluster = cluster
        if cluster is not None:
            kwargs.setdefault("initial", {
                "name": cluster.name, "namespace": cluster.namespace, "api_url": cluster.api_url,
                "verify_tls": cluster.verify_tls, "enabled": cluster.enabled,
            })
        else:
            kwargs.setdefault("initial", {"verify_tls": True, "enabled": True})
        super().__init__(*args, **kwargs)
        if cluster is None:
            del self.fields["clear_token"], self.fields["clear_ca_cert"]
        else:
            self.fields["name"].disabled = True
            stored = _("A value is stored; leave blank to keep it.")
            if cluster.token_encrypted:
                self.fields["token"].help_text = stored
            if cluster.ca_cert_encrypted:
                self.fields["ca_cert"].help_text = stored

    def _secret(self, field: str) -> str | None:
        """The new value of a credential: text to store, "" to remove, None to keep."""
        value = self.cleaned_data.get(field) or ""
        if self.cluster is None:
            return value
        if self.cleaned_data.get(f"clear_{field}"):
            return ""
        return value or None

    def create_arguments(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "name": data["name"], "namespace": data["namespace"], "api_url": data["api_url"],
            "token": self._secret("token") or "", "ca_cert": self._secret("ca_cert") or "",
            "verify_tls": data["verify_tls"], "enabled": data["enabled"],
        }

    def update_arguments(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "namespace": data["namespace"], "api_url": data["api_url"],
            "token": self._secret("token"), "ca_cert": self._secret("ca_cert"),
            "verify_tls": data["verify_tls"], "enabled": data["enabled"],
        }


class NodeFilterForm(forms.Form):
    cluster = forms.ChoiceField(label=_("Cluster"), required=False)
    selector = forms.CharField(
        label=_("Label conditions"), required=False, max_length=4000,
        widget=forms.TextInput(attrs={"placeholder": SELECTOR_EXAMPLE}),
        help_text=_("key=value conditions separated by commas; a node must carry all of them."),
    )
    include_gone = forms.BooleanField(label=_("Include vanished nodes"), required=False)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        names = Cluster.objects.order_by("name").values_list("name", flat=True)
        cluster_field = cast(forms.ChoiceField, self.fields["cluster"])
        cluster_field.choices = [("", _("all clusters")), *((n, n) for n in names)]

    def clean_selector(self) -> LabelFilter:
        label_filter = label_filter_from_text(self.cleaned_data.get("selector", ""))
        if label_filter.problems:
            raise forms.ValidationError([p.message for p in label_filter.problems])
        return label_filter
