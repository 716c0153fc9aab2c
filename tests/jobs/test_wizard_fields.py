"""Pure parts of the wizard: where findings go, and the YAML highlighting (no database)."""

from __future__ import annotations

import html as htmllib
import re

import pytest

from jobs.wizard.fields import (
    STEP_COMMON,
    STEP_REVIEW,
    STEP_ROLES,
    STEP_WORKERS,
    FieldMap,
    at_row_places,
    field_anchor,
    finding_views,
    parent_paths,
    place_of,
)
from jobs.wizard.review import highlight_yaml
from rlark_site.foundation.findings import Finding


def finding(field: str | None, code: str = "x.y", severity: str = "error") -> Finding:
    return Finding(code=code, severity=severity, message=f"about {field}",  # type: ignore[arg-type]
                   field=field)


@pytest.mark.parametrize(("path", "anchor"), [
    ("name", "f-name"),
    ("roles[0].gpus", "f-roles-0-gpus"),
    ("roles[1].env[2].name", "f-roles-1-env-2-name"),
    ("roles[0].cpu.request", "f-roles-0-cpu-request"),
    ("roles[3].image_digest", "f-roles-3-image_digest"),
    ("ssh_keys[0]", "f-ssh_keys-0"),
])
def test_every_path_has_one_html_id(path: str, anchor: str) -> None:
    assert field_anchor(path) == anchor


def test_parent_paths_run_from_the_field_to_its_role() -> None:
    assert parent_paths("roles[1].mounts[2].target") == [
        "roles[1].mounts[2].target", "roles[1].mounts[2]", "roles[1].mounts", "roles[1]",
        "roles",
    ]
    assert parent_paths("name") == ["name"]


@pytest.mark.parametrize(("path", "step", "role"), [
    ("name", STEP_ROLES, None),
    ("task_type", STEP_ROLES, None),
    ("header_role", STEP_ROLES, None),
    ("roles", STEP_ROLES, None),
    ("roles[2].name", STEP_ROLES, 2),
    ("roles[2].selector", STEP_WORKERS, 2),
    ("roles[0].mounts[1].size", STEP_WORKERS, 0),
    ("ssh_keys[1]", STEP_COMMON, None),
    ("run_script", STEP_COMMON, None),
    ("deployment_parameters", STEP_COMMON, None),
    ("image_compatibility_confirmed", STEP_REVIEW, None),
    (None, STEP_REVIEW, None),
])
def test_each_field_is_edited_on_one_step(path: str | None, step: int, role: int | None) -> None:
    place = place_of(path)
    assert (place.step, place.role) == (step, role)


@pytest.mark.parametrize(("code", "refused_on", "step"), [
    ("manifest.too_large", None, STEP_COMMON),  # the start scripts together
    ("admission.exceeds_quota", None, STEP_WORKERS),  # the whole job against the quota
    ("capacity.will_queue", None, STEP_WORKERS),
    ("refused", STEP_COMMON, STEP_COMMON),  # a save refused with no field: its own step
    ("form.__all__", STEP_ROLES, STEP_ROLES),
    ("some.future_code", None, STEP_REVIEW),  # unknown and refused nowhere: step 4
])
def test_a_finding_without_a_field_belongs_to_the_step_of_its_rule(
        code: str, refused_on: int | None, step: int) -> None:
    assert place_of(None, code=code, step=refused_on) == place_of("", code=code,
                                                                   step=refused_on)
    place = place_of(None, code=code, step=refused_on)
    assert (place.step, place.role) == (step, None)


def test_findings_attach_to_the_longest_registered_prefix() -> None:
    views = finding_views([
        finding("roles[0].devices[3]"), finding("roles[0].gpus"), finding("roles[0].oddity"),
        finding("run_script"),
    ])
    fields = FieldMap(views, ["roles[0]", "roles[0].gpus", "roles[0].devices"])
    assert [f.field for f in fields["roles[0].devices"].findings] == ["roles[0].devices[3]"]
    assert [f.field for f in fields["roles[0]"].findings] == ["roles[0].oddity"]
    assert [f.field for f in fields.general] == ["run_script"]
    assert fields.get("roles[0].image").findings == []


def test_the_first_error_gets_focus_and_the_aria_wiring() -> None:
    views = finding_views([finding("roles[0].image", severity="warning"),
                           finding("roles[0].gpus"), finding("roles[0].image")])
    fields = FieldMap(views, ["roles[0].image", "roles[0].gpus"], hints=["roles[0].gpus"])
    gpus = str(fields["roles[0].gpus"].attrs)
    assert gpus == (' aria-invalid="true" aria-describedby="f-roles-0-gpus-hint '
                    'f-roles-0-gpus-findings" autofocus')
    assert "autofocus" not in str(fields["roles[0].image"].attrs)


def test_a_warning_alone_describes_the_field_without_marking_it_invalid() -> None:
    fields = FieldMap(finding_views([finding("run_script", severity="warning")]), ["run_script"])
    assert str(fields["run_script"].attrs) == ' aria-describedby="f-run_script-findings"'


def test_a_field_without_findings_still_points_at_its_container() -> None:
    """Live answers fill the container later; the input already refers to it."""
    fields = FieldMap([], ["roles[0].env[4].name"])
    assert str(fields["roles[0].env[4].name"].attrs) == (
        ' aria-describedby="f-roles-0-env-4-name-findings"')


def test_body_rows_are_moved_to_their_rows_on_the_page() -> None:
    views = finding_views([
        finding("roles[1].env[0].name"), finding("roles[1].env[1].value"),
        finding("roles[1].mounts[0].target"), finding("roles[1].devices[0]"),
        finding("roles[0].env[0].name"), finding("roles[1].env[7].name"), finding("run_script"),
    ])
    moved = at_row_places(views, {"env": [1, 3], "mounts": [2], "devices": [0]}, role=1)
    assert [f.field for f in moved] == [
        "roles[1].env[1].name", "roles[1].env[3].value", "roles[1].mounts[2].target",
        "roles[1].devices[0]", "roles[0].env[0].name", "roles[1].env[7].name", "run_script",
    ]
    assert moved[1].anchor == "f-roles-1-env-3-value"
    assert moved[1].place == views[1].place


def test_include_limits_a_page_to_its_own_findings() -> None:
    views = finding_views([finding("name"), finding("roles[0].gpus")])
    fields = FieldMap(views, ["name"], include=lambda f: f.place.step == STEP_ROLES)
    assert fields.general == [] and len(fields["name"].findings) == 1


def plain(html: str) -> str:
    return htmllib.unescape(re.sub(r"<[^>]+>", "", html))


def test_highlighting_keeps_the_text_and_escapes_it() -> None:
    text = ("metadata:\n  name: ppo\n  annotations:\n    note: '<script>alert(1)</script>'\n"
            "spec:\n  tasks:\n  - name: actor\n    args:\n    - |\n      echo a: b\n"
            "      cd /w && python x.py\n    head: true\n")
    html = str(highlight_yaml(text))
    assert plain(html) == text
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert '<span class="y-key">name</span>' in html
    assert '<span class="y-str">      echo a: b</span>' in html
    assert '<span class="y-key">head</span>' in html
