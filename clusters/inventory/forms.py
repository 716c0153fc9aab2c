"""Forms of the cluster and node pages: they check shape; the services check the rules.

Credentials are write-only: their inputs never render a stored or submitted value back.
"""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.utils.text import format_lazy
from django.utils.translation import gettext_lazy as _

from clusters.access import (
    MAX_TEMPLATE,
    PLACEHOLDERS,
    validate_command_template,
    validate_url_template,
)
from clusters.inventory.selectors import LabelFilter, label_filter_from_text
from clusters.k8s import KubeconfigContext, KubeconfigError, read_context
from clusters.models import AdmissionMode, Cluster
from clusters.validators import validate_api_url

SELECTOR_EXAMPLE = "rlinf.io/gpu-model=a100, rlinf.io/zone=zone-1"
MAX_KUBECONFIG = 256 * 1024  # characters; real kubeconfigs of one context are a few KiB


class SecretTextarea(forms.Textarea):
    """A textarea that never renders its value (like `PasswordInput(render_value=False)`)."""

    def get_context(self, name: str, value: Any, attrs: dict[str, Any] | None) -> dict[str, Any]:
        return super().get_context(name, None, attrs)


ACCESS_HELP = format_lazy(
    _("Shown as a link on the pages of this cluster's jobs. Placeholders: {placeholders} "
      "(the head pod's; values are URL-encoded). Blank: kubectl port-forward."),
    placeholders=", ".join(f"{{{name}}}" for name in PLACEHOLDERS),
)


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
    client_cert = forms.CharField(
        label=_("Client certificate (PEM)"), required=False, strip=False,
        widget=SecretTextarea(attrs={"rows": 4, "autocomplete": "off"}),
        help_text=_("With its key below: RLark signs in with this certificate."),
    )
    client_key = forms.CharField(
        label=_("Client key (PEM)"), required=False, strip=False,
        widget=SecretTextarea(attrs={"rows": 4, "autocomplete": "off"}),
    )
    clear_client_certificate = forms.BooleanField(
        label=_("Remove the stored client certificate and key"), required=False)
    verify_tls = forms.BooleanField(label=_("Verify the server's TLS certificate"), required=False)
    enabled = forms.BooleanField(label=_("Poll this cluster"), required=False)
    tensorboard_url_template = forms.CharField(
        label=_("TensorBoard URL template"), required=False, max_length=MAX_TEMPLATE,
        validators=[validate_url_template],
        widget=forms.TextInput(attrs={"placeholder": "https://tb.example.com/{namespace}/{job}"}),
        help_text=ACCESS_HELP,
    )
    ray_dashboard_url_template = forms.CharField(
        label=_("Ray dashboard URL template"), required=False, max_length=MAX_TEMPLATE,
        validators=[validate_url_template],
        widget=forms.TextInput(attrs={"placeholder": "https://ray.example.com/{namespace}/{pod}"}),
        help_text=ACCESS_HELP,
    )
    exec_command_template = forms.CharField(
        label=_("Shell command template"), required=False, max_length=MAX_TEMPLATE,
        validators=[validate_command_template],
        widget=forms.TextInput(attrs={
            "placeholder": "ssh -t jump.example.com kubectl -n {namespace} exec -it {pod} bash"}),
        help_text=_("How to open a shell in the head pod, e.g. through a jump host. Values are "
                    "shell-quoted: put placeholders outside quotes. Blank: kubectl exec."),
    )

    TEMPLATES = ("tensorboard_url_template", "ray_dashboard_url_template", "exec_command_template")

    def __init__(self, *args: Any, cluster: Cluster | None = None, **kwargs: Any) -> None:
        self.cluster = cluster
        if cluster is not None:
            kwargs.setdefault("initial", {
                "name": cluster.name, "namespace": cluster.namespace, "api_url": cluster.api_url,
                "verify_tls": cluster.verify_tls, "enabled": cluster.enabled,
                **{field: getattr(cluster, field) for field in self.TEMPLATES},
            })
        else:
            kwargs.setdefault("initial", {"verify_tls": True, "enabled": True})
        super().__init__(*args, **kwargs)
        if cluster is None:
            del self.fields["clear_token"], self.fields["clear_ca_cert"]
            del self.fields["clear_client_certificate"]
        else:
            self.fields["name"].disabled = True
            stored = _("A value is stored; leave blank to keep it.")
            if cluster.token_encrypted:
                self.fields["token"].help_text = stored
            if cluster.ca_cert_encrypted:
                self.fields["ca_cert"].help_text = stored
            if cluster.client_cert_encrypted:
                self.fields["client_cert"].help_text = _(
                    "A certificate and its key are stored; leave both blank to keep them, or "
                    "enter both to replace them.")

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        problems = client_certificate_problems(
            cleaned.get("client_cert") or "", cleaned.get("client_key") or "",
            clearing=bool(cleaned.get("clear_client_certificate")))
        for field, message in problems.items():
            self.add_error(field, message)
        return cleaned

    def _client_certificate(self) -> dict[str, str | None]:
        """The new certificate and key: both to store, both "" to remove, both None to keep."""
        data = self.cleaned_data
        if self.cluster is not None and data.get("clear_client_certificate"):
            return {"client_cert": "", "client_key": ""}
        cert, key = data.get("client_cert") or "", data.get("client_key") or ""
        if self.cluster is not None and not cert:
            return {"client_cert": None, "client_key": None}
        return {"client_cert": cert, "client_key": key}

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
            **{field: data[field] for field in self.TEMPLATES},
            **{k: v or "" for k, v in self._client_certificate().items()},
        }

    def update_arguments(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "namespace": data["namespace"], "api_url": data["api_url"],
            "token": self._secret("token"), "ca_cert": self._secret("ca_cert"),
            "verify_tls": data["verify_tls"], "enabled": data["enabled"],
            **{field: data[field] for field in self.TEMPLATES},
            **self._client_certificate(),
        }


def client_certificate_problems(cert: str, key: str, *, clearing: bool = False
                                ) -> dict[str, Any]:
    """What is wrong with a client certificate and key given together (field: message); the
    page and the API alike. Both or neither; PEM blocks of the right kind."""
    if clearing:
        if cert or key:
            return {"clear_client_certificate": _(
                "Either remove the stored certificate or enter a new one, not both.")}
        return {}
    if not cert and not key:
        return {}
    if not cert:
        return {"client_cert": _("A client key needs its certificate.")}
    if not key:
        return {"client_key": _("A client certificate needs its key.")}
    problems: dict[str, Any] = {}
    if "-----BEGIN CERTIFICATE-----" not in cert:
        problems["client_cert"] = _("Paste a PEM certificate (-----BEGIN CERTIFICATE-----).")
    if not ("-----BEGIN " in key and "PRIVATE KEY-----" in key):
        problems["client_key"] = _("Paste a PEM private key (-----BEGIN ... PRIVATE KEY-----).")
    return problems


_SUPPORTED_USERS = _("a bearer token (token) or a client certificate and key "
                     "(client-certificate-data and client-key-data)")
_KUBECONFIG_REASONS = {
    "not_yaml": _("it is not a YAML document (%(detail)s)."),
    "not_kubeconfig": _("it is not a kubeconfig: it has no list of contexts."),
    "undefined_context": _("the context %(name)s is not defined in it."),
    "undefined_cluster": _("the cluster %(name)s is not defined in it."),
    "undefined_user": _("the user %(name)s is not defined in it."),
    "file_reference": _("%(field)s names a file; embed it as %(field)s-data "
                        "(kubectl config view --flatten --minify)."),
    "not_base64": _("%(field)s is not base64-encoded PEM."),
    "unsupported_user": _("users with %(kind)s are not supported; use %(supported)s."),
    "token_file_or_basic_auth": _("token files and basic auth are not supported; "
                                  "use %(supported)s."),
    "half_certificate": _("a client certificate needs its key (and a key its certificate)."),
    "no_credentials": _("the user has no credentials; use %(supported)s."),
    "choose_context": _("it has no current context; choose one of: %(names)s."),
    "no_contexts": _("it defines no context."),
    "no_such_context": _("it has no context %(name)s; its contexts: %(names)s."),
    "no_server": _("the cluster %(name)s has no server URL."),
}


def kubeconfig_reason(error: KubeconfigError) -> str:
    """Why a kubeconfig cannot be used, in the user's language (the page and the API)."""
    template = _KUBECONFIG_REASONS.get(error.code)
    if template is None:
        return str(error)
    return str(template) % {"supported": _SUPPORTED_USERS, **error.params}


def kubeconfig_refusal(error: KubeconfigError) -> str:
    return str(_("This kubeconfig cannot be used: %(reason)s") % {
        "reason": kubeconfig_reason(error)})


class KubeconfigClusterForm(forms.Form):
    """Add a cluster from a kubeconfig (uploaded or pasted) and one of its contexts.

    The context's server URL, CA bundle and user credentials (a bearer token, or a client
    certificate and key) are taken; users with exec plugins or auth providers are refused.
    """

    name = forms.SlugField(label=_("Name"), max_length=63)
    kubeconfig_file = forms.FileField(label=_("Kubeconfig file"), required=False)
    kubeconfig = forms.CharField(
        label=_("or paste the kubeconfig"), required=False, strip=False, max_length=MAX_KUBECONFIG,
        widget=SecretTextarea(attrs={"rows": 8, "autocomplete": "off"}),
        help_text=_("Everything embedded: kubectl config view --flatten --minify."),
    )
    context = forms.CharField(
        label=_("Context"), required=False, max_length=253,
        help_text=_("Blank: the kubeconfig's current context."),
    )
    namespace = forms.CharField(
        label=_("Namespace"), required=False, max_length=63,
        help_text=_("Where Jobs for this cluster are created. Blank: the context's namespace."),
    )
    enabled = forms.BooleanField(label=_("Poll this cluster"), required=False, initial=True)

    def _kubeconfig_text(self) -> str:
        upload = self.cleaned_data.get("kubeconfig_file")
        pasted = self.cleaned_data.get("kubeconfig") or ""
        if upload and pasted.strip():
            raise forms.ValidationError(_("Upload a file or paste the kubeconfig, not both."))
        if upload:
            if upload.size > MAX_KUBECONFIG:
                raise forms.ValidationError(_("The kubeconfig file is too large."))
            try:
                return str(upload.read().decode("utf-8"))
            except UnicodeDecodeError as exc:
                raise forms.ValidationError(_("The kubeconfig file is not UTF-8 text.")) from exc
        if not pasted.strip():
            raise forms.ValidationError(_("Upload a kubeconfig file or paste one."))
        return pasted

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if self.errors:
            return cleaned
        try:
            chosen = read_context(self._kubeconfig_text(), cleaned.get("context") or None)
        except KubeconfigError as exc:
            raise forms.ValidationError(kubeconfig_refusal(exc)) from exc
        cleaned["chosen"] = chosen
        if not (cleaned.get("namespace") or chosen.namespace):
            self.add_error("namespace", _("The context names no namespace; enter one."))
        return cleaned

    def create_arguments(self) -> dict[str, Any]:
        data = self.cleaned_data
        chosen: KubeconfigContext = data["chosen"]
        return kubeconfig_create_arguments(
            name=data["name"], namespace=data["namespace"] or chosen.namespace,
            chosen=chosen, enabled=data["enabled"])


def kubeconfig_create_arguments(*, name: str, namespace: str, chosen: KubeconfigContext,
                                enabled: bool) -> dict[str, Any]:
    """`cluster_create`'s arguments for a kubeconfig context (the page and the API alike)."""
    credentials = chosen.credentials
    return {
        "name": name, "namespace": namespace, "api_url": credentials.api_url,
        "token": credentials.token or "", "ca_cert": credentials.ca_cert or "",
        "client_cert": credentials.client_cert or "", "client_key": credentials.client_key or "",
        "verify_tls": credentials.verify_tls, "enabled": enabled,
    }


MAX_QUEUE_MAP_TEXT = 64 * 1024  # characters of the team → LocalQueue lines


class AdmissionForm(forms.Form):
    """A cluster's admission and its team → LocalQueue map, one `team=queue` per line.

    The form parses the lines; the service checks the rules (known teams, DNS-label queues,
    the size limit), so the page and the API refuse the same maps with the same words.
    """

    admission = forms.ChoiceField(
        label=_("Admission"), choices=AdmissionMode.choices,
        help_text=_("Kueue: every pod of this cluster's Jobs names the team's LocalQueue, and "
                    "Kueue admits the Job when its ClusterQueue has quota for all of it."),
    )
    kueue_queues = forms.CharField(
        label=_("Team → LocalQueue"), required=False, strip=True, max_length=MAX_QUEUE_MAP_TEXT,
        widget=forms.Textarea(attrs={"rows": 6, "placeholder": "vision-rl=vision-rl-queue"}),
        help_text=_("One team=LocalQueue per line. The LocalQueue must exist in the namespace "
                    "the team's Jobs run in."),
    )

    def __init__(self, *args: Any, cluster: Cluster, **kwargs: Any) -> None:
        queues = cluster.kueue_queues if isinstance(cluster.kueue_queues, dict) else {}
        kwargs.setdefault("initial", {
            "admission": cluster.admission,
            "kueue_queues": "\n".join(f"{team}={queue}" for team, queue in queues.items()),
        })
        super().__init__(*args, **kwargs)

    def clean_kueue_queues(self) -> dict[str, str]:
        queues: dict[str, str] = {}
        for number, line in enumerate(self.cleaned_data.get("kueue_queues", "").splitlines(), 1):
            if not line.strip():
                continue
            team, sep, queue = line.partition("=")
            if not sep:
                raise forms.ValidationError(
                    _("Line %(number)d is not team=LocalQueue.") % {"number": number})
            if team.strip() in queues:
                raise forms.ValidationError(
                    _("Team %(team)s is mapped twice.") % {"team": team.strip()[:100]})
            queues[team.strip()] = queue.strip()
        return queues

    def update_arguments(self) -> dict[str, Any]:
        return {"admission": self.cleaned_data["admission"],
                "kueue_queues": self.cleaned_data["kueue_queues"]}


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
