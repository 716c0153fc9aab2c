"""Wizard step 1 (name, type, roles, Header role), the live name check and tenancy (404)."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from jobs.drafts.services import job_create
from jobs.models import Job
from rlark_site.foundation.tenancy.models import Team
from tests.factories import load_fleet_rows

pytestmark = pytest.mark.django_db

NEW = "/jobs/wizard/new/"


@pytest.fixture
def web(client: Client, member: Any) -> Client:
    client.force_login(member)
    return client


def step(name: str, number: int) -> str:
    return reverse("jobs:wizard-step", kwargs={"name": name, "step": number})


def basics(name: str, roles: list[str], *, header: int | None = 0, task_type: str = "rl",
           previous: str | None = None, origins: list[str] | None = None,
           **extra: str) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": name, "task_type": task_type, "previous_task_type": previous or task_type,
        "role_name": roles, "role_origin": origins or [""] * len(roles), **extra,
    }
    if header is not None:
        data["header"] = str(header)
    return data


def test_a_new_job_starts_with_the_rl_roles(web: Client) -> None:
    html = web.get(NEW).content.decode()
    for role in ("Actor", "Rollout", "Environment"):
        assert f'name="role_name" value="{role}"' in html
    assert 'for="f-name"' in html and 'id="f-name"' in html
    assert 'lang="en"' in html


def test_next_creates_the_draft_and_opens_step_2(web: Client, team: Team, member: Any) -> None:
    response = web.post(NEW, basics("ppo-math", ["Actor", "Rollout", "Environment"],
                                     goto="next"))
    assert response.status_code == 302
    assert response["Location"] == step("ppo-math", 2)
    job = Job.objects.get(name="ppo-math")
    assert job.team == team and job.created_by == member
    assert [r.name for r in job.roles.all()] == ["Actor", "Rollout", "Environment"]
    assert job.header_role == "Actor" and job.wizard_step == 2


def test_a_taken_name_is_refused_next_to_the_field_keeping_the_input(
    web: Client, other_team: Team, outsider: Any
) -> None:
    job_create(team=other_team, user=outsider, data={"name": "taken-name"})
    response = web.post(NEW, basics("taken-name", ["Actor", "Learner"], header=1, goto="next",
                                     new_role="Critic"))
    html = response.content.decode()
    assert response.status_code == 400
    assert 'value="taken-name"' in html and 'value="Learner"' in html and 'value="Critic"' in html
    assert 'aria-invalid="true" aria-describedby="f-name-hint f-name-findings" autofocus' in html
    assert '<div id="f-name-findings" class="field-findings"><p class="finding error">' in html
    assert "job.name.taken" in html
    assert 'value="1" id="header-1" checked' in html
    assert Job.objects.filter(name="taken-name").count() == 1


def test_a_malformed_name_is_kept_and_reported_by_the_engine(web: Client) -> None:
    response = web.post(NEW, basics("Bad_Name", ["Actor"], goto="stay"))
    assert response["Location"] == step("Bad_Name", 1)
    html = web.get(step("Bad_Name", 1)).content.decode()
    assert 'value="Bad_Name"' in html and "job.name.invalid" in html
    assert 'id="f-name" name="name" value="Bad_Name"' in html


def test_changing_the_type_of_a_new_draft_resets_the_roles(web: Client) -> None:
    response = web.post(NEW, basics("typed", ["Actor", "Rollout", "Environment"],
                                     task_type="evaluation", previous="rl",
                                     action="change-type"))
    html = response.content.decode()
    assert response.status_code == 200
    assert 'name="role_name" value="Rollout"' in html
    assert 'name="role_name" value="Environment"' in html
    assert 'value="Actor"' not in html
    assert 'value="typed"' in html
    assert not Job.objects.exists()


def test_apply_type_keeps_the_name_error_of_a_new_draft(
    web: Client, team: Team, member: Any
) -> None:
    job_create(team=team, user=member, data={"name": "taken-name"})
    for name, code in (("Bad_Name", "job.name.invalid"), ("taken-name", "job.name.taken")):
        html = web.post(NEW, basics(name, ["Actor", "Rollout", "Environment"],
                                    task_type="evaluation", previous="rl",
                                    action="change-type")).content.decode()
        assert code in html.split('id="f-name-findings"')[1].split("</div>")[0]
    fine = web.post(NEW, basics("free-name", ["Actor"], task_type="evaluation", previous="rl",
                                action="change-type")).content.decode()
    assert "job.name." not in fine.split('id="f-name-findings"')[1].split("</div>")[0]


def test_changing_the_type_keeps_roles_that_are_configured(
    web: Client, team: Team, member: Any
) -> None:
    job_create(team=team, user=member, data={"name": "kept", "task_type": "rl", "roles": [
        {"name": "Actor", "cluster": "gpu-a"}, {"name": "Rollout"}]})
    response = web.post(step("kept", 1), basics(
        "kept", ["Actor", "Rollout"], task_type="custom", previous="rl", origins=["0", "1"],
        goto="next"), follow=True)
    job = Job.objects.get(name="kept")
    assert job.task_type == "custom"
    assert [r.name for r in job.roles.all()] == ["Actor", "Rollout"]
    assert "the roles were kept" in response.content.decode()


def test_changing_the_type_of_an_unconfigured_draft_resets_its_roles(
    web: Client, team: Team, member: Any
) -> None:
    job_create(team=team, user=member, data={"name": "fresh", "task_type": "rl"})
    web.post(step("fresh", 1), basics("fresh", ["Actor", "Rollout", "Environment"],
                                       task_type="data_collection", previous="rl",
                                       origins=["0", "1", "2"], goto="next"))
    assert [r.name for r in Job.objects.get(name="fresh").roles.all()] == ["Environment"]


def test_roles_are_added_renamed_and_removed_keeping_their_configuration(
    web: Client, team: Team, member: Any
) -> None:
    job_create(team=team, user=member, data={
        "name": "edit-roles", "task_type": "custom", "header_role": "Actor",
        "roles": [{"name": "Actor", "cluster": "gpu-a", "gpus": 8}, {"name": "Rollout"},
                  {"name": "Env", "image": "img@sha256:" + "a" * 64}],
    })
    web.post(step("edit-roles", 1), basics(
        "edit-roles", ["Learner", "Rollout", "Env"], task_type="custom",
        origins=["0", "1", "2"], header=0, action="remove-role-1"))
    job = Job.objects.get(name="edit-roles")
    roles = list(job.roles.all())
    assert [(r.name, r.cluster, r.gpus) for r in roles] == [("Learner", "gpu-a", 8), ("Env", "", 0)]
    assert roles[1].image.startswith("img@") and job.header_role == "Learner"
    web.post(step("edit-roles", 1), basics(
        "edit-roles", ["Learner", "Env"], task_type="custom", origins=["0", "1"], header=1,
        action="add-role", new_role="Critic"))
    job = Job.objects.get(name="edit-roles")
    assert [r.name for r in job.roles.all()] == ["Learner", "Env", "Critic"]
    assert job.header_role == "Env" and job.wizard_step == 1


def test_a_role_name_too_long_to_store_is_refused_keeping_the_input(web: Client) -> None:
    long_name = "R" * 300
    response = web.post(NEW, basics("long-roles", ["Actor", long_name], header=1, goto="next"))
    html = response.content.decode()
    assert response.status_code == 400
    assert f'value="{long_name}"' in html and 'value="long-roles"' in html
    assert 'id="f-roles-findings" class="field-findings"><p class="finding error">' in html
    assert 'value="1" id="header-1" checked' in html
    assert not Job.objects.exists()


def test_adding_a_role_without_a_name_asks_for_one(web: Client) -> None:
    response = web.post(NEW, basics("x", ["Actor"], action="add-role", new_role=" "))
    html = response.content.decode()
    assert response.status_code == 400
    assert 'id="f-new_role-findings" class="field-findings"><p class="finding error">' in html


def test_step_1_shows_role_and_header_findings_beside_their_fields(
    web: Client, team: Team, member: Any
) -> None:
    job_create(team=team, user=member, data={
        "name": "dupes", "task_type": "custom", "roles": [{"name": "Actor"}, {"name": "actor"}],
    })
    html = web.get(step("dupes", 1)).content.decode()
    assert 'id="f-roles-1-name-findings" class="field-findings"><p class="finding error">' in html
    assert "role.name.duplicate" in html
    assert 'id="f-header_role-findings" class="field-findings"><p class="finding error">' in html
    assert "header.missing" in html


LIVE = "/jobs/wizard/basics-findings/"


def live_findings(html: str, field: str) -> str:
    """The out-of-band findings container of `field` in a live answer."""
    opened = f'<div id="f-{field}-findings" class="field-findings" hx-swap-oob="true">'
    assert html.count(opened) == 1, field
    return html.split(opened)[1].split("</div>")[0]


def step_badge(html: str, number: int) -> str:
    """The error badge of step `number`'s button ('' when it has none)."""
    button = html.split(f'id="wizard-step-{number}"')[1].split("</button>")[0]
    return button.split('class="badge error">')[1].split("<")[0] if "badge error" in button else ""


def test_the_live_step_1_speaks_the_engines_findings(
    web: Client, team: Team, member: Any, other_team: Team, outsider: Any
) -> None:
    job_create(team=other_team, user=outsider, data={"name": "theirs"})
    job_create(team=team, user=member, data={"name": "mine"})
    taken = web.post(LIVE, basics("theirs", ["Actor"])).content.decode()
    assert 'id="name-live" aria-live="polite" hx-swap-oob="true"' in taken
    assert "job.name.taken" in taken.split('id="name-live"')[1].split("</div>")[0]
    assert "job.name.invalid" in web.post(LIVE, basics("-bad-", ["Actor"])).content.decode()
    free = web.post(LIVE, basics("free-name", ["Actor"])).content.decode()
    assert "free-name is available." in free
    assert 'class="finding' not in free.split('id="name-live"')[1].split("</div>")[0]
    own = web.post(LIVE, basics("mine", ["Actor"], current_job="mine")).content.decode()
    assert "mine is available." in own
    # Nothing was created or changed.
    assert sorted(Job.objects.values_list("name", flat=True)) == ["mine", "theirs"]


def test_role_errors_of_a_new_draft_show_before_it_is_saved(web: Client) -> None:
    page = web.get(NEW).content.decode()
    assert 'id="f-header_role-findings" class="field-findings"><p class="finding error">' in page
    assert "header.missing" in page
    assert 'id="f-name-findings" class="field-findings"></div>' in page  # nothing typed yet
    typed = web.post(LIVE, basics("new-job", ["Actor", "bad name", "actor"], header=None))
    html = typed.content.decode()
    assert "role.name.invalid" in live_findings(html, "roles-1-name")
    assert "role.name.duplicate" in live_findings(html, "roles-2-name")
    assert "header.missing" in live_findings(html, "header_role")
    assert 'id="wizard-steps"' in html and step_badge(html, 1) == "3 errors"
    fixed = web.post(LIVE, basics("new-job", ["Actor", "Learner"], header=0)).content.decode()
    assert live_findings(fixed, "roles-1-name") == "" and live_findings(fixed, "header_role") == ""
    assert step_badge(fixed, 1) == ""
    assert not Job.objects.exists()


def test_the_live_step_1_of_a_saved_draft_keeps_each_role_s_configuration(
    web: Client, team: Team, member: Any
) -> None:
    job_create(team=team, user=member, data={"name": "mine", "header_role": "Actor", "roles": [
        {"name": "Actor", "gpus": "eight"}, {"name": "Rollout"}]})
    html = web.post(LIVE, basics("mine", ["Actor", "Rollout"], origins=["0", "1"], header=0,
                                 current_job="mine")).content.decode()
    assert step_badge(html, 2) != ""  # the stored role's gpu.invalid still counts
    renamed = web.post(LIVE, basics("mine", ["Actor", "Rollout"], origins=["0", "1"], header=None,
                                    current_job="mine")).content.decode()
    assert "header.missing" in live_findings(renamed, "header_role")
    assert Job.objects.get(name="mine").header_role == "Actor"


def test_step_1_checks_the_replicas_of_the_role_chosen_as_header_there(
    web: Client, team: Team, member: Any
) -> None:
    load_fleet_rows()
    job_create(team=team, user=member, data={
        "name": "header-pick", "task_type": "custom", "header_role": "Head", "roles": [
            {"name": "Head", "cluster": "gpu-a",
             "selector": {"kubernetes.io/hostname": "a-head-01"}},
            {"name": "Pool", "cluster": "cpu-c", "selector": {"rlinf.io/pool": "env-c"}},
        ]})
    posted = basics("header-pick", ["Head", "Pool"], origins=["0", "1"], task_type="custom",
                    current_job="header-pick")
    fine = web.post(LIVE, {**posted, "header": "0"}).content.decode()
    assert "header.replicas" not in live_findings(fine, "header_role")
    switched = web.post(LIVE, {**posted, "header": "1"}).content.decode()
    assert "header.replicas" in live_findings(switched, "header_role")
    assert "it matches 10." in live_findings(switched, "header_role")
    assert step_badge(switched, 1) == "" and step_badge(switched, 2) != ""
    assert Job.objects.get(name="header-pick").header_role == "Head"


def test_the_live_step_1_does_not_reveal_another_teams_draft(
    web: Client, other_team: Team, outsider: Any
) -> None:
    job_create(team=other_team, user=outsider, data={"name": "theirs"})
    response = web.post(LIVE, basics("x", ["Actor"], current_job="theirs"))
    assert response.status_code == 404


@pytest.mark.parametrize("jobs", [1, 40])
def test_the_live_step_1_is_bounded_in_queries(
    web: Client, team: Team, member: Any, jobs: int, django_assert_max_num_queries: Any
) -> None:
    for n in range(jobs):
        job_create(team=team, user=member, data={"name": f"other-{n:03d}"})
    job_create(team=team, user=member, data={"name": "target", "header_role": "Actor"})
    with django_assert_max_num_queries(16):
        assert web.post(LIVE, basics("target", ["Actor", "Rollout", "Environment"],
                                     origins=["0", "1", "2"], current_job="target"),
                        ).status_code == 200
    with django_assert_max_num_queries(10):
        assert web.post(LIVE, basics("brand-new", ["Actor", "Rollout"])).status_code == 200


@pytest.mark.parametrize("path", [
    "jobs:wizard", "step-1", "step-2", "step-3", "step-4", "jobs:wizard-manifest",
])
def test_another_teams_draft_answers_404(
    web: Client, other_team: Team, outsider: Any, path: str
) -> None:
    job_create(team=other_team, user=outsider, data={"name": "secret-job"})
    if path.startswith("step-"):
        url = step("secret-job", int(path[-1]))
    else:
        url = reverse(path, kwargs={"name": "secret-job"})
    assert web.get(url).status_code == 404


@pytest.mark.parametrize("route", [
    "jobs:wizard-submit", "jobs:wizard-matches", "jobs:wizard-verification", "step-2",
])
def test_another_teams_draft_refuses_posts_with_404(
    web: Client, other_team: Team, outsider: Any, route: str
) -> None:
    job = job_create(team=other_team, user=outsider, data={"name": "secret-job"})
    if route == "step-2":
        url = step("secret-job", 2)
    elif route == "jobs:wizard-submit":
        url = reverse(route, kwargs={"name": "secret-job"})
    else:
        url = reverse(route, kwargs={"name": "secret-job", "index": 0})
    assert web.post(url, {"cluster": "gpu-a", "goto": "stay"}).status_code == 404
    job.refresh_from_db()
    assert job.state == "draft" and [r.cluster for r in job.roles.all()] == ["", "", ""]


@pytest.mark.parametrize("jobs", [1, 40])
def test_step_1_loads_and_saves_in_a_bounded_number_of_queries(
    web: Client, team: Team, member: Any, jobs: int, django_assert_max_num_queries: Any
) -> None:
    for n in range(jobs):
        job_create(team=team, user=member, data={"name": f"other-{n:03d}"})
    job_create(team=team, user=member, data={"name": "target", "header_role": "Actor"})
    with django_assert_max_num_queries(14):
        assert web.get(step("target", 1)).status_code == 200
    with django_assert_max_num_queries(30):
        response = web.post(step("target", 1), basics(
            "target", ["Actor", "Rollout", "Environment"], origins=["0", "1", "2"], goto="next"))
    assert response.status_code == 302


def step_findings(html: str) -> str:
    """The out-of-band list of the step's findings without a field on the page."""
    opened = '<div id="step-findings" class="general-findings" role="alert"'
    assert html.count(opened) == 1
    rest = html.split(opened)[1]
    assert rest.split(">")[0].endswith('hx-swap-oob="true"')
    return rest.split(">", 1)[1].split("</div>")[0]


def test_the_live_answers_refresh_the_step_level_findings(
    web: Client, team: Team, member: Any
) -> None:
    job_create(team=team, user=member, data={"name": "mine", "roles": [{"name": "Actor"}],
                                             "header_role": "Actor"})
    page = web.get(step("mine", 1)).content.decode()
    assert '<div id="step-findings" class="general-findings" role="alert" hidden>' in page
    # A team slug from before the slug rule (written directly): the engine's job.team.invalid
    # has no field on step 1, so it is listed at the top of the step, live.
    slug = team.slug
    Team.objects.filter(pk=team.pk).update(slug="Legacy Team")
    caused = web.post(LIVE, basics("mine", ["Actor"], current_job="mine")).content.decode()
    assert "job.team.invalid" in step_findings(caused)
    assert step_badge(caused, 1) == "1 error"
    Team.objects.filter(pk=team.pk).update(slug=slug)
    fixed = web.post(LIVE, basics("mine", ["Actor"], current_job="mine")).content.decode()
    assert step_findings(fixed) == "" and "job.team.invalid" not in fixed
    assert ('<div id="step-findings" class="general-findings" role="alert" hidden '
            'hx-swap-oob="true">') in fixed
    assert step_badge(fixed, 1) == ""
    # Steps 2 and 3 answer the list too (nothing there without a field on those steps).
    common = reverse("jobs:wizard-common-findings", kwargs={"name": "mine"})
    assert step_findings(web.post(common, {"header_role": "Actor"}).content.decode()) == ""
    matches = reverse("jobs:wizard-matches", kwargs={"name": "mine", "index": 0})
    assert step_findings(web.post(matches, {"role": "0"}).content.decode()) == ""
