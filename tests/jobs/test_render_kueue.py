"""The manifest on a Kueue cluster (SPEC 15): every Task's pod template joins Kueue's plain pod
group of the Job, in the team's LocalQueue; a cluster without Kueue renders exactly what it
rendered before (the golden file of test_render.py is untouched)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from jobs.core.findings import check, has_errors
from jobs.core.render import build_manifest, render_manifest
from jobs.core.spec import CheckContext, JobSpec
from tests.jobs.fleet_context import ALICE_KEY, BOB_KEY, clean_context, clean_spec
from tests.jobs.test_render import CRD_VALIDATOR, GOLDEN, crd_schema, undeclared_fields

KUEUE_GOLDEN = Path(__file__).parent / "golden" / "rl-3role-kueue.yaml"
QUEUE = "vision-rl-queue"


def kueue_context(spec: JobSpec, *, queues: tuple[tuple[str, str], ...] = (
        ("nlp-rl", "nlp-queue"), ("vision-rl", QUEUE))) -> CheckContext:
    """The clean context with the Header role's cluster (gpu-a) admitting through Kueue."""
    ctx = clean_context(spec)
    facts = replace(ctx.clusters["gpu-a"], admission="kueue", kueue_queues=queues)
    return replace(ctx, clusters={**ctx.clusters, "gpu-a": facts})


def clean() -> tuple[JobSpec, CheckContext]:
    spec = clean_spec(ssh_keys=(ALICE_KEY, BOB_KEY))
    return spec, kueue_context(spec)


def test_the_clean_job_on_a_kueue_cluster_renders_its_golden_file() -> None:
    spec, ctx = clean()
    assert not has_errors(check(spec, ctx))
    text = build_manifest(spec, ctx).yaml
    if os.environ.get("RLARK_UPDATE_GOLDEN"):
        KUEUE_GOLDEN.write_text(text, encoding="utf-8")
    assert text == KUEUE_GOLDEN.read_text(encoding="utf-8")


def test_every_pod_template_joins_the_jobs_pod_group_in_the_teams_queue() -> None:
    spec, ctx = clean()
    tasks = render_manifest(spec, ctx)["spec"]["tasks"]
    total = sum(task["replicas"] for task in tasks)
    assert total == 23
    for task in tasks:
        metadata = task["template"]["metadata"]
        assert metadata["labels"] == {
            "rlinf.io/job": "ppo-math-7b", "rlinf.io/task": task["name"],
            "kueue.x-k8s.io/queue-name": QUEUE,
            "kueue.x-k8s.io/pod-group-name": "ppo-math-7b",
        }
        assert metadata["annotations"] == {"kueue.x-k8s.io/pod-group-total-count": "23"}


def test_a_cluster_without_kueue_renders_byte_for_byte_what_it_did() -> None:
    spec = clean_spec(ssh_keys=(ALICE_KEY, BOB_KEY))
    ctx = clean_context(spec)
    off = replace(ctx.clusters["gpu-a"], admission="none", kueue_queues=(("vision-rl", QUEUE),))
    for context in (ctx, replace(ctx, clusters={**ctx.clusters, "gpu-a": off})):
        assert build_manifest(spec, context).yaml == GOLDEN.read_text(encoding="utf-8")


def test_only_the_header_roles_cluster_decides() -> None:
    """The Job is created on the Header role's cluster; Kueue elsewhere changes nothing."""
    spec = clean_spec(ssh_keys=(ALICE_KEY, BOB_KEY))
    ctx = clean_context(spec)
    other = replace(ctx.clusters["gpu-b"], admission="kueue", kueue_queues=(("vision-rl", "q"),))
    context = replace(ctx, clusters={**ctx.clusters, "gpu-b": other})
    assert build_manifest(spec, context).yaml == GOLDEN.read_text(encoding="utf-8")


def test_a_team_without_a_queue_gets_no_kueue_labels() -> None:
    """(`admission.no_queue` blocks its submission; the preview still renders.)"""
    spec = clean_spec()
    manifest = render_manifest(spec, kueue_context(spec, queues=(("nlp-rl", "nlp-queue"),)))
    for task in manifest["spec"]["tasks"]:
        assert "kueue.x-k8s.io/queue-name" not in task["template"]["metadata"]["labels"]
        assert "annotations" not in task["template"]["metadata"]


def test_the_kueue_manifest_validates_against_the_crd() -> None:
    spec, ctx = clean()
    manifest = render_manifest(spec, ctx)
    assert not list(CRD_VALIDATOR.iter_errors(manifest))
    assert undeclared_fields(manifest, crd_schema()) == []


def test_rendering_on_a_kueue_cluster_is_deterministic() -> None:
    spec, ctx = clean()
    assert build_manifest(spec, ctx).yaml == build_manifest(spec, kueue_context(spec)).yaml
