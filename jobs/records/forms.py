"""Forms of the record pages (shape only; the services check links and ownership)."""

from __future__ import annotations

from typing import Any

import yaml
from django import forms
from django.db.models import QuerySet
from django.utils.translation import gettext_lazy as _

from clusters.models import Verification
from jobs.core.findings.base import ROLE_NAME
from jobs.core.progress import (
    PATTERN_MAX,
    STALL_AFTER_DEFAULT,
    STALL_AFTER_MAX,
    STALL_AFTER_MIN,
    pattern_problem,
    progress_settings,
)
from jobs.models import DeploymentParameters, Job, LaunchList
from jobs.observe.patterns import pattern_problem as signal_pattern_problem
from jobs.records.checklist import ANSWERS, CHECKLIST
from jobs.records.serializers import (
    MAX_IMAGE_REFERENCE,
    MAX_TEXT,
    RoleConstraintSerializer,
    errors_detail,
    image_reference_problem,
    role_images_problem,
)
from rlark_site.foundation.validators import no_control_characters

_TEXTAREA = {"rows": 3, "spellcheck": "false"}


def _text(label: Any, *, rows: int = 3, help_text: Any = "") -> forms.CharField:
    return forms.CharField(
        label=label, required=False, max_length=MAX_TEXT, strip=False, help_text=help_text,
        widget=forms.Textarea(attrs={**_TEXTAREA, "rows": rows}),
    )


def signals_as_text(signals: list[dict[str, Any]]) -> str:
    lines = []
    for item in signals or []:
        minutes = item.get("within_minutes")
        columns = [str(item.get("signal", "")), str(item.get("where", "")),
                   "" if minutes is None else str(minutes)]
        if item.get("pattern"):
            columns.append(str(item["pattern"]))
        lines.append(" | ".join(columns))
    return "\n".join(lines)


def _parse_signal(number: int, line: str) -> dict[str, Any]:
    parts = [part.strip() for part in line.split("|", 3)]
    if not 2 <= len(parts) <= 4 or not parts[0] or not parts[1]:
        raise forms.ValidationError(
            _("Line %(n)d: write “what | where | minutes” (what and where are required, "
              "separated by “|”; minutes are optional).") % {"n": number}
        )
    where = parts[1]
    minutes_text = parts[2] if len(parts) > 2 else ""
    minutes = None
    if minutes_text:
        if not minutes_text.isdecimal() or int(minutes_text) < 1:
            raise forms.ValidationError(
                _("Line %(n)d: minutes must be a whole number above 0.") % {"n": number}
            )
        minutes = int(minutes_text)
    signal: dict[str, Any] = {"signal": parts[0], "where": where, "within_minutes": minutes}
    if len(parts) > 3 and parts[3]:
        problem = signal_pattern_problem(parts[3])
        if problem is not None:
            raise forms.ValidationError(
                _("Line %(n)d: %(problem)s") % {"n": number, "problem": problem})
        signal["pattern"] = parts[3]
    return signal


def role_images_as_text(role_images: dict[str, str]) -> str:
    return "\n".join(f"{role}: {reference}" for role, reference in (role_images or {}).items())


def _parse_role_images(text: str) -> dict[str, str]:
    role_images: dict[str, str] = {}
    for number, line in enumerate((ln for ln in text.splitlines() if ln.strip()), start=1):
        role, colon, reference = (part.strip() for part in line.partition(":"))
        if not colon or not ROLE_NAME.fullmatch(role) or not reference:
            raise forms.ValidationError(
                _("Line %(n)d: write “role: image reference” (a role name is letters, digits "
                  "or '-').") % {"n": number})
        if role in role_images:
            raise forms.ValidationError(
                _("Line %(n)d: role %(role)s is listed twice.") % {"n": number, "role": role})
        role_images[role] = reference
    problem = role_images_problem(role_images)
    if problem is not None:
        raise forms.ValidationError(problem)
    return role_images


class LaunchListForm(forms.Form):
    title = forms.CharField(label=_("Title"), max_length=200,
                            validators=[no_control_characters])
    entry = _text(_("Entry command or config"),
                  help_text=_("What the run script starts, e.g. python -m rlinf.train --config "
                              "ppo.yaml."))
    datasets = _text(_("Datasets"))
    models_used = _text(_("Models"))
    hyperparameters = _text(_("Hyper-parameters"))
    notes = _text(_("Notes"), rows=4)
    expected_signals = _text(
        _("Expected first valid signals"), rows=4,
        help_text=_("One per line: what | where to look | within how many minutes of Running "
                    "| optionally a pattern RLark looks for in the Head Task's log (text, or a "
                    "regular expression between slashes: /reward=\\d+/). “Running” is a "
                    "scheduling state only: the job page asks whether this signal came."),
    )
    image = forms.CharField(
        label=_("Main container image (all roles)"), required=False,
        max_length=MAX_IMAGE_REFERENCE,
        widget=forms.TextInput(attrs={"spellcheck": "false",
                                      "placeholder": "registry/path@sha256:…"}),
        help_text=_("Pinned: repo@sha256:<64 hex digits>, or an immutable tag with its digest, "
                    "repo:tag@sha256:<64 hex digits>. Each role's image must equal it (step 4 "
                    "of the wizard checks it)."),
    )
    role_images = _text(
        _("Main container image per role"),
        help_text=_("One per line: role: reference (pinned the same way). A role listed here "
                    "takes this image instead of the one for all roles."),
    )
    progress_pattern = forms.CharField(
        label=_("Training step pattern"), required=False, max_length=PATTERN_MAX, strip=False,
        widget=forms.TextInput(attrs={"spellcheck": "false", "class": "mono",
                                      "placeholder": "Global Step: 120/1000"}),
        help_text=_("A regular expression with a named group step (and optionally total) "
                    "matched on the Head Task's log lines, e.g. step (?P<step>\\d+) of "
                    "(?P<total>\\d+). Blank: RLinf's own step lines (the metric table's and "
                    "the progress bar's “Global Step: 120/1000”)."),
    )
    stall_after_seconds = forms.IntegerField(
        label=_("Stalled after (seconds without a new step)"), required=False,
        min_value=STALL_AFTER_MIN, max_value=STALL_AFTER_MAX,
        widget=forms.NumberInput(attrs={"placeholder": str(STALL_AFTER_DEFAULT)}),
        help_text=_("A Running job is stalled when no new step came for this long (before "
                    "its first step: since Running, or the first signal's minutes when shorter). "
                    "Blank: 1800 (30 minutes); at least 60."),
    )
    cancel_after_stalled_seconds = forms.IntegerField(
        label=_("Cancel after being stalled for (seconds)"), required=False,
        min_value=STALL_AFTER_MIN, max_value=STALL_AFTER_MAX,
        help_text=_("Blank: never. Set, RLark cancels a job stalled this long, once (its pods "
                    "captured first), and says so in its status history."),
    )
    deployment_parameters = forms.ModelChoiceField(
        label=_("Deployment parameters"), required=False,
        queryset=DeploymentParameters.objects.none(),
        help_text=_("The two records reference each other."),
    )

    def __init__(self, *args: Any, parameters: QuerySet[DeploymentParameters], **kwargs: Any):
        super().__init__(*args, **kwargs)
        field = self.fields["deployment_parameters"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = parameters

    @staticmethod
    def initial_for(launch_list: LaunchList) -> dict[str, Any]:
        linked = getattr(launch_list, "deployment_parameters", None)
        return {
            "title": launch_list.title, "entry": launch_list.entry,
            "datasets": launch_list.datasets, "models_used": launch_list.models_used,
            "hyperparameters": launch_list.hyperparameters, "notes": launch_list.notes,
            "expected_signals": signals_as_text(launch_list.expected_signals),
            "image": launch_list.image,
            "role_images": role_images_as_text(launch_list.role_images),
            "deployment_parameters": linked.pk if linked is not None else None,
            **_progress_initial(launch_list.progress),
        }

    def clean_progress_pattern(self) -> str:
        value = self.cleaned_data.get("progress_pattern") or ""
        problem = pattern_problem(value)
        if problem is not None:
            raise forms.ValidationError(problem)
        return value

    def clean_expected_signals(self) -> list[dict[str, Any]]:
        text = self.cleaned_data.get("expected_signals") or ""
        lines = [line for line in text.splitlines() if line.strip()]
        return [_parse_signal(number, line) for number, line in enumerate(lines, start=1)]

    def clean_image(self) -> str:
        value = (self.cleaned_data.get("image") or "").strip()
        problem = image_reference_problem(value) if value else None
        if problem is not None:
            raise forms.ValidationError(problem)
        return value

    def clean_role_images(self) -> dict[str, str]:
        return _parse_role_images(self.cleaned_data.get("role_images") or "")

    def fields_for_service(self) -> dict[str, Any]:
        data = dict(self.cleaned_data)
        linked = data.pop("deployment_parameters")
        data["deployment_parameters"] = linked.pk if linked is not None else None
        stall = data.pop("stall_after_seconds")
        data["progress"] = progress_settings({
            "pattern": data.pop("progress_pattern"),
            "stall_after_seconds": STALL_AFTER_DEFAULT if stall is None else stall,
            "cancel_after_stalled_seconds": data.pop("cancel_after_stalled_seconds"),
        }).as_dict()
        return data


def _progress_initial(raw: Any) -> dict[str, Any]:
    settings = progress_settings(raw)
    return {"progress_pattern": settings.pattern,
            "stall_after_seconds": settings.stall_after_seconds,
            "cancel_after_stalled_seconds": settings.cancel_after_stalled_seconds}


class VerificationChoiceField(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: Any) -> str:
        return f"#{obj.pk} {obj.cluster.name}: {obj.selector_key} ({obj.get_state_display()})"


class DeploymentParametersForm(forms.Form):
    title = forms.CharField(label=_("Title"), max_length=200,
                            validators=[no_control_characters])
    launch_list = forms.ModelChoiceField(
        label=_("Launch list"), required=False, queryset=LaunchList.objects.none(),
        help_text=_("The two records reference each other."),
    )
    roles = _text(
        _("Per-role placement and resources (YAML)"), rows=14,
        help_text=_("A list of roles: role, cluster, selector {key: value}, gpus, devices, cpu, "
                    "memory, mounts. “Fill from job draft” writes it for you."),
    )
    network_domain = forms.CharField(label=_("Network domain"), max_length=63, required=False)
    storage_notes = _text(_("Storage constraints"))
    network_notes = _text(_("Network constraints"))
    verifications = VerificationChoiceField(
        label=_("Verifications that confirmed them"), required=False,
        queryset=Verification.objects.none(), widget=forms.CheckboxSelectMultiple,
    )

    def __init__(self, *args: Any, launch_lists: QuerySet[LaunchList],
                 verifications: QuerySet[Verification], **kwargs: Any):
        super().__init__(*args, **kwargs)
        launch_list = self.fields["launch_list"]
        chosen = self.fields["verifications"]
        assert isinstance(launch_list, forms.ModelChoiceField)
        assert isinstance(chosen, forms.ModelMultipleChoiceField)
        launch_list.queryset = launch_lists
        chosen.queryset = verifications

    @staticmethod
    def initial_for(parameters: DeploymentParameters) -> dict[str, Any]:
        roles = parameters.roles or []
        return {
            "title": parameters.title, "launch_list": parameters.launch_list_id,
            "roles": yaml.safe_dump(roles, sort_keys=False, allow_unicode=True) if roles else "",
            "network_domain": parameters.network_domain,
            "storage_notes": parameters.storage_notes, "network_notes": parameters.network_notes,
            "verifications": list(parameters.verifications.values_list("pk", flat=True)),
        }

    def clean_roles(self) -> list[dict[str, Any]]:
        text = self.cleaned_data.get("roles") or ""
        if not text.strip():
            return []
        try:
            document = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise forms.ValidationError(_("Not valid YAML: %(error)s") % {"error": exc}) from exc
        shape = RoleConstraintSerializer(data=document, many=True)
        if not isinstance(document, list) or not shape.is_valid():
            problem = errors_detail(shape.errors) if isinstance(document, list) else _(
                "expected a list of roles"
            )
            raise forms.ValidationError(_("Roles: %(problem)s") % {"problem": problem})
        return [dict(role) for role in shape.validated_data]

    def fields_for_service(self) -> dict[str, Any]:
        data = dict(self.cleaned_data)
        launch_list = data.pop("launch_list")
        data["launch_list"] = launch_list.pk if launch_list is not None else None
        data["verifications"] = [v.pk for v in data.pop("verifications")]
        return data


class FillFromJobForm(forms.Form):
    job = forms.ModelChoiceField(label=_("Job draft"), queryset=Job.objects.none(),
                                 to_field_name="name")

    def __init__(self, *args: Any, jobs: QuerySet[Job], **kwargs: Any):
        super().__init__(*args, **kwargs)
        field = self.fields["job"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = jobs


class FirstRunCheckForm(forms.Form):
    observed = forms.TypedChoiceField(
        label=_("Was the expected first signal observed?"),
        choices=[("yes", _("yes")), ("no", _("no"))], coerce=lambda v: v == "yes",
        widget=forms.RadioSelect,
    )
    evidence = _text(_("Evidence"), help_text=_("A log line, a metric value, a link."))
    notes = _text(_("Notes"))

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        for item in CHECKLIST:
            self.fields[f"answer__{item.code}"] = forms.ChoiceField(
                label=item.question, help_text=item.hint, required=False,
                choices=list(ANSWERS.items()), initial="unchecked",
            )
            self.fields[f"note__{item.code}"] = forms.CharField(
                label=_("Note"), required=False, max_length=2000,
                widget=forms.TextInput(attrs={"placeholder": _("What you saw")}),
            )

    def checklist_rows(self) -> list[tuple[Any, Any, Any]]:
        return [(item, self[f"answer__{item.code}"], self[f"note__{item.code}"])
                for item in CHECKLIST]

    def troubleshooting(self) -> dict[str, dict[str, str]]:
        return {
            item.code: {
                "answer": self.cleaned_data.get(f"answer__{item.code}") or "unchecked",
                "note": self.cleaned_data.get(f"note__{item.code}") or "",
            }
            for item in CHECKLIST
        }


class CloneForm(forms.Form):
    name = forms.CharField(
        label=_("New job name"), max_length=63,
        help_text=_("1–63 lower-case letters, digits or hyphens; unique on every cluster."),
    )
