"""The wizard's forms: they check the shape of what was posted and build draft bodies.

Rules about the values themselves (a GPU count of "eight", an unknown cluster) are the
findings engine's: the forms keep such input as typed so the draft never loses it. A form
refuses only what cannot be stored at all (text too long for its column, a manual
selector line that is not ``key=value``); the page is then shown again with the input.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms
from django.utils.translation import gettext_lazy as _

from clusters.labels import parse_selector_text

__all__ = [
    "BasicsForm",
    "CommonForm",
    "Goto",
    "ReviewForm",
    "RoleForm",
    "RoleRow",
    "parse_goto",
]

_DIGITS = frozenset("0123456789")
ROLE_NAME_MAX = 255  # the column; the engine reports anything longer than 63


def _posted_list(data: Any, name: str) -> list[str]:
    """All values posted under `name` (a QueryDict list; one value from a plain mapping)."""
    if hasattr(data, "getlist"):
        return [str(v) for v in data.getlist(name)]
    value = data.get(name)
    return [] if value is None else [str(value)]


def _newlines(text: str) -> str:
    """Browsers send CRLF from text areas; scripts run on Linux."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _count(text: str) -> int | str:
    """A whole number when `text` is one, else the text as typed (the engine reports it)."""
    stripped = text.strip()
    if stripped and set(stripped) <= _DIGITS and len(stripped) < 10:
        return int(stripped)
    return stripped


def _record_id(text: str) -> int | None:
    stripped = text.strip()
    return int(stripped) if stripped and set(stripped) <= _DIGITS and len(stripped) < 10 else None


@dataclass(frozen=True)
class Goto:
    """Where a submit button leads after the step is saved."""

    kind: str  # "next" | "back" | "stay" | "step" | "role"
    number: int = 0


def parse_goto(value: str) -> Goto:
    kind, _sep, number = value.partition("-")
    if kind in {"step", "role"} and number.isdecimal():
        return Goto(kind, int(number))
    if kind in {"next", "back"}:
        return Goto(kind)
    return Goto("stay")


# -- step 1 ----------------------------------------------------------------------------------


@dataclass
class RoleRow:
    name: str
    origin: int | None  # position of the stored role this row edits; None for a new role


class BasicsForm(forms.Form):
    """Step 1: name, type, the role list and the Header role.

    Role rows come as parallel lists ``role_name`` / ``role_origin``; the Header radio
    names a row (not a role name), so renaming the Header role keeps it the Header.
    """

    name = forms.CharField(required=False, max_length=255, label=_("Job name"))
    task_type = forms.CharField(required=False, max_length=40, label=_("Job type"))
    previous_task_type = forms.CharField(required=False, max_length=40)
    header = forms.CharField(required=False, max_length=10)
    new_role = forms.CharField(required=False, max_length=255, label=_("New role"))
    action = forms.CharField(required=False, max_length=40)
    goto = forms.CharField(required=False, max_length=20)

    def rows(self) -> list[RoleRow]:
        names = _posted_list(self.data, "role_name")
        origins = _posted_list(self.data, "role_origin")
        rows = []
        for index, name in enumerate(names):
            origin = origins[index] if index < len(origins) else ""
            rows.append(RoleRow(name=name.strip(), origin=_record_id(origin)))
        return rows

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        if any(len(row.name) > ROLE_NAME_MAX for row in self.rows()):
            raise forms.ValidationError(
                _("A role name cannot be longer than %(max)d characters."),
                params={"max": ROLE_NAME_MAX}, code="role_name",
            )
        return data

    def header_row(self, rows: list[RoleRow]) -> int | None:
        """The row chosen as Header (read from the raw input: valid or not, it is kept)."""
        value = _record_id(str(self.data.get("header", "")))
        return value if value is not None and value < len(rows) else None

    def type_changed(self) -> bool:
        previous = self.cleaned_data.get("previous_task_type", "")
        return bool(previous) and previous != self.cleaned_data.get("task_type", "")


# -- step 2 ----------------------------------------------------------------------------------


class RoleForm(forms.Form):
    """Step 2, one role: placement, resources, image, scripts, env, mounts.

    List inputs are parallel lists: ``label`` (chosen ``key=value``), ``device_name`` /
    ``device_count``, ``env_name`` / ``env_value``, ``mount_kind`` / ``mount_source`` /
    ``mount_target`` / ``mount_storage_class`` / ``mount_size``. Blank rows are dropped.
    """

    cluster = forms.CharField(required=False, max_length=63, label=_("Cluster"))
    selector_text = forms.CharField(required=False, strip=False,
                                    label=_("Other conditions (key=value)"))
    gpus = forms.CharField(required=False, max_length=100, label=_("GPUs per worker"))
    image = forms.CharField(required=False, max_length=2000, label=_("Image"))
    image_digest = forms.CharField(required=False, max_length=255, label=_("Recorded digest"))
    prepare_script = forms.CharField(required=False, strip=False, label=_("Prepare script"))
    cpu_request = forms.CharField(required=False, max_length=100)
    cpu_limit = forms.CharField(required=False, max_length=100)
    memory_request = forms.CharField(required=False, max_length=100)
    memory_limit = forms.CharField(required=False, max_length=100)
    goto = forms.CharField(required=False, max_length=20)

    def clean_selector_text(self) -> str:
        text = _newlines(self.cleaned_data.get("selector_text", ""))
        _pairs, unparseable = parse_selector_text(text)
        if unparseable:
            raise forms.ValidationError(
                _("Write each condition as key=value; not understood: %(parts)s"),
                params={"parts": ", ".join(unparseable)},
                code="selector_text",
            )
        return text

    def selector(self) -> list[list[str]]:
        """Chosen labels, then the parseable manual conditions, as typed (duplicates kept)."""
        pairs: list[list[str]] = []
        for choice in _posted_list(self.data, "label"):
            key, equals, value = choice.partition("=")
            if equals:
                pairs.append([key, value])
        manual, _unparseable = parse_selector_text(_newlines(self.data.get("selector_text", "")))
        pairs.extend([key, value] for key, value in manual)
        return pairs

    def _positioned(self, *names: str, preset: int = 0) -> list[tuple[int, tuple[str, ...]]]:
        """Parallel lists as (place on the page, row); a row is dropped when every cell after
        the first `preset` (the ones the page fills in itself, like a device name or a mount
        kind) is blank."""
        columns = [_posted_list(self.data, name) for name in names]
        length = max((len(c) for c in columns), default=0)
        rows = [tuple(c[i] if i < len(c) else "" for c in columns) for i in range(length)]
        return [(i, row) for i, row in enumerate(rows)
                if any(cell.strip() for cell in row[preset:])]

    def _device_rows(self) -> list[tuple[int, tuple[str, ...]]]:
        return [
            (i, (name, count))
            for i, (name, count) in self._positioned("device_name", "device_count", preset=1)
            if name.strip() and count.strip() != "0"
        ]

    def _env_rows(self) -> list[tuple[int, tuple[str, ...]]]:
        return self._positioned("env_name", "env_value")

    def _mount_rows(self) -> list[tuple[int, tuple[str, ...]]]:
        return self._positioned("mount_kind", "mount_source", "mount_target",
                                "mount_storage_class", "mount_size", preset=1)

    def devices(self) -> list[list[Any]]:
        return [[name.strip(), _count(count)] for _i, (name, count) in self._device_rows()]

    def env(self) -> list[dict[str, str]]:
        return [{"name": name.strip(), "value": _newlines(value)}
                for _i, (name, value) in self._env_rows()]

    def mounts(self) -> list[dict[str, str]]:
        """Mount rows; the kind select alone does not make a row (it always has a value)."""
        mounts = []
        for _i, (kind, *cells) in self._mount_rows():
            source, target, storage_class, size = (cell.strip() for cell in cells)
            mount = {"kind": kind.strip(), "target": target}
            if kind.strip() == "object_storage":
                mount.update(storage_class=storage_class, size=size)
            else:
                mount["source"] = source
            mounts.append(mount)
        return mounts

    def row_places(self) -> dict[str, list[int]]:
        """For each list of the body, the place on the page of each of its rows: the body
        drops blank rows, the page keeps them, so body row k is page row ``places[k]``."""
        return {"devices": [i for i, _row in self._device_rows()],
                "env": [i for i, _row in self._env_rows()],
                "mounts": [i for i, _row in self._mount_rows()]}

    def posted_rows(self) -> dict[str, int]:
        """How many rows of each list the page posted, blank ones included."""
        return {"devices": len(_posted_list(self.data, "device_name")),
                "env": len(_posted_list(self.data, "env_name")),
                "mounts": len(_posted_list(self.data, "mount_kind"))}

    def _raw(self, name: str) -> str:
        value = self.data.get(name, "")
        return value if isinstance(value, str) else ""

    def body(self, *, name: str) -> dict[str, Any]:
        """The role exactly as posted, as a draft-body role.

        Built from the raw input, valid or not: a form shown again, and the live match
        panel, use it too. Save it only when `is_valid()`.
        """
        raw = self._raw
        gpus = _count(raw("gpus"))
        return {
            "name": name,
            "cluster": raw("cluster").strip(),
            "selector": self.selector(),
            "gpus": 0 if gpus == "" else gpus,
            "devices": self.devices(),
            "cpu": {"request": raw("cpu_request").strip(), "limit": raw("cpu_limit").strip()},
            "memory": {"request": raw("memory_request").strip(),
                       "limit": raw("memory_limit").strip()},
            "image": raw("image").strip(),
            "image_digest": raw("image_digest").strip(),
            "prepare_script": _newlines(raw("prepare_script")),
            "env": self.env(),
            "mounts": self.mounts(),
        }


# -- step 3 ----------------------------------------------------------------------------------


class CommonForm(forms.Form):
    """Step 3: Header role, network domain, SSH keys, run script, TensorBoard, records."""

    header_role = forms.CharField(required=False, max_length=255, label=_("Header role"))
    network_domain = forms.CharField(required=False, max_length=255,
                                     label=_("Network domain"))
    run_script = forms.CharField(required=False, strip=False, label=_("Run script"))
    tensorboard_log_dir = forms.CharField(required=False, max_length=4096,
                                          label=_("TensorBoard log directory"))
    launch_list = forms.CharField(required=False, max_length=12, label=_("Launch list"))
    deployment_parameters = forms.CharField(required=False, max_length=12,
                                            label=_("Deployment parameters"))
    goto = forms.CharField(required=False, max_length=20)

    def _clean_record(self, field: str) -> int | None:
        text = self.cleaned_data.get(field, "")
        value = _record_id(text)
        if text.strip() and value is None:
            raise forms.ValidationError(_("Choose one of the listed records."), code="record")
        return value

    def clean_launch_list(self) -> int | None:
        return self._clean_record("launch_list")

    def clean_deployment_parameters(self) -> int | None:
        return self._clean_record("deployment_parameters")

    def body(self) -> dict[str, Any]:
        data = self.cleaned_data
        return {
            "header_role": data.get("header_role", ""),
            "network_domain": data.get("network_domain", "").strip(),
            "ssh_keys": [n for n in dict.fromkeys(_posted_list(self.data, "ssh_keys")) if n],
            "run_script": _newlines(data.get("run_script", "")),
            "tensorboard_log_dir": data.get("tensorboard_log_dir", "").strip(),
            "launch_list": data.get("launch_list"),
            "deployment_parameters": data.get("deployment_parameters"),
        }


# -- step 4 ----------------------------------------------------------------------------------


class ReviewForm(forms.Form):
    image_compatibility_confirmed = forms.BooleanField(
        required=False, label=_("The roles' runtimes are compatible")
    )
    goto = forms.CharField(required=False, max_length=20)
