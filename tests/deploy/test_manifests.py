"""The kustomize base and overlays render, every object passes the Kubernetes schemas offline,
and the rendered workloads have the shape docs/deploy.md promises."""

from __future__ import annotations

import re
from typing import Any

import kubernetes_validate
import pytest
from django.conf import settings

from tests.deploy.conftest import OVERLAYS, REPO, RLARK, TARGET_CLUSTER, by_kind, render

KUBERNETES_VERSION = "1.30.0"
# Settings of README's table that only `make run` / the test launcher read.
LOCAL_ONLY = {"RLARK_STATE_DIR", "RLARK_WEB_PORT", "RLARK_SIMULATOR_PORT"}
SECRET_KEYS = {"DATABASE_URL", "REDIS_URL", "SECRET_KEY", "RLARK_CREDENTIAL_KEYS",
               "RLARK_OIDC_CLIENT_SECRET", "RLARK_METRICS_TOKEN"}


@pytest.fixture(scope="module", params=sorted(OVERLAYS))
def rendered(request: pytest.FixtureRequest) -> list[dict[str, Any]]:
    return render(OVERLAYS[request.param])


def _containers(obj: dict[str, Any]) -> list[dict[str, Any]]:
    spec = obj["spec"]["template"]["spec"]
    return [*spec.get("initContainers", []), *spec["containers"]]


def _workloads(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] in {"Deployment", "Job"}]


def test_every_rendered_object_passes_the_kubernetes_schema(rendered: list[dict[str, Any]]) -> None:
    for obj in rendered:
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_the_target_cluster_rbac_passes_the_kubernetes_schema() -> None:
    for obj in render(TARGET_CLUSTER):
        kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_a_broken_object_is_rejected_by_the_validation() -> None:
    broken = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
              "spec": {"replicas": "three"}}
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(broken, KUBERNETES_VERSION, strict=True)


def test_the_processes_are_web_two_worker_groups_beat_and_a_migration_job(
    rendered: list[dict[str, Any]],
) -> None:
    assert set(by_kind(rendered, "Deployment")) == {
        "rlark-web", "rlark-worker-inventory", "rlark-worker-submission", "rlark-worker-status",
        "rlark-beat"}
    assert set(by_kind(rendered, "Job")) == {"rlark-migrate"}
    assert by_kind(rendered, "Job")["rlark-migrate"]["spec"]["template"]["spec"]["containers"][0][
        "args"] == ["migrate"]


def test_one_image_runs_every_process(rendered: list[dict[str, Any]]) -> None:
    images = {c["image"] for o in _workloads(rendered) for c in _containers(o)}
    assert len(images) == 1


def test_beat_is_a_single_recreated_pod(rendered: list[dict[str, Any]]) -> None:
    beat = by_kind(rendered, "Deployment")["rlark-beat"]
    assert beat["spec"]["replicas"] == 1
    assert beat["spec"]["strategy"] == {"type": "Recreate"}


def test_web_probes_use_the_health_endpoints(rendered: list[dict[str, Any]]) -> None:
    web = by_kind(rendered, "Deployment")["rlark-web"]["spec"]["template"]["spec"]["containers"][0]
    assert web["readinessProbe"]["httpGet"]["path"] == "/health/ready"
    assert web["livenessProbe"]["httpGet"]["path"] == "/health/live"
    assert web["args"] == ["web"]


def test_every_container_requests_resources_and_runs_unprivileged(
    rendered: list[dict[str, Any]],
) -> None:
    for obj in _workloads(rendered):
        pod = obj["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["automountServiceAccountToken"] is False
        for container in _containers(obj):
            assert {"cpu", "memory"} <= set(container["resources"]["requests"]), container["name"]
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
            assert container["securityContext"]["readOnlyRootFilesystem"] is True


def test_web_and_workers_wait_for_migrations_before_starting(
    rendered: list[dict[str, Any]],
) -> None:
    for name, deployment in by_kind(rendered, "Deployment").items():
        init = deployment["spec"]["template"]["spec"]["initContainers"]
        assert [c["args"] for c in init] == [["wait-for-migrations"]], name


def test_disruption_budgets_and_network_policies_cover_the_serving_pods(
    rendered: list[dict[str, Any]],
) -> None:
    budgets = by_kind(rendered, "PodDisruptionBudget")
    covered = {b["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"]
               for b in budgets.values()}
    assert covered == {"web", "worker-inventory", "worker-submission", "worker-status"}
    policies = by_kind(rendered, "NetworkPolicy")
    deny = policies["rlark-default-deny-ingress"]["spec"]
    assert deny["policyTypes"] == ["Ingress"] and "ingress" not in deny
    web = policies["rlark-web-ingress"]["spec"]
    assert web["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "web"
    assert [p["port"] for rule in web["ingress"] for p in rule["ports"]] == [8000]


def test_service_and_ingress_reach_the_web_pods(rendered: list[dict[str, Any]]) -> None:
    service = by_kind(rendered, "Service")["rlark-web"]
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "web"
    backend = by_kind(rendered, "Ingress")["rlark"]["spec"]["rules"][0]["http"]["paths"][0]
    assert backend["backend"]["service"]["name"] == "rlark-web"


def test_postgres_and_redis_are_external(rendered: list[dict[str, Any]]) -> None:
    assert not [o for o in rendered if o["kind"] == "StatefulSet"]
    assert not [c for o in _workloads(rendered) for c in _containers(o)
                if re.search(r"postgres|redis", c["image"])]


def test_every_workload_reads_the_config_map_and_the_secret(rendered: list[dict[str, Any]]) -> None:
    for obj in _workloads(rendered):
        for container in _containers(obj):
            sources = container["envFrom"]
            assert {"configMapRef": {"name": "rlark-config"}} in sources
            assert {"secretRef": {"name": "rlark-secrets"}} in sources


def test_every_setting_of_the_readme_is_in_the_config_map_or_the_secret() -> None:
    readme = (REPO / "README.md").read_text()
    table = readme.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for row in table.splitlines():
        cell = row.split("|")[1] if row.startswith("|") else ""
        names.update(re.findall(r"`([A-Z][A-Z0-9_]+)`", cell))
        names.update(f"{prefix}{suffix}" for prefix, suffix in
                     re.findall(r"`([A-Z][A-Z0-9_]+_)[A-Z0-9]+` / `_([A-Z0-9]+)`", cell))
    config = by_kind(render(OVERLAYS["base"]), "ConfigMap")["rlark-config"]["data"]
    secret = {line.split("=", 1)[0] for line in
              (RLARK / "secret.example.env").read_text().splitlines()
              if line and not line.startswith("#")}
    assert secret == SECRET_KEYS
    missing = names - LOCAL_ONLY - set(config) - secret
    assert not missing, (f"README settings missing from deploy/rlark/base/configmap.yaml "
                         f"(or secret.example.env for secrets): {sorted(missing)}")


def test_the_worker_groups_consume_every_queue_celery_routes_to() -> None:
    deployments = by_kind(render(OVERLAYS["base"]), "Deployment")
    consumed: set[str] = set()
    for deployment in deployments.values():
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            for env in container.get("env", []):
                if env["name"] == "RLARK_WORKER_QUEUES":
                    consumed.update(env["value"].split(","))
    routes: Any = getattr(settings, "CELERY_TASK_ROUTES", None) or {}
    routed = {route["queue"] for route in routes.values()} if isinstance(routes, dict) else set()
    routed.add(getattr(settings, "CELERY_TASK_DEFAULT_QUEUE", "celery"))
    assert routed <= consumed, f"queues no worker consumes: {sorted(routed - consumed)}"


def test_the_production_overlay_serves_its_public_host_with_sso() -> None:
    objects = render(OVERLAYS["production"])
    assert {o["metadata"].get("namespace") for o in objects} == {"rlark"}
    config = by_kind(objects, "ConfigMap")["rlark-config"]["data"]
    assert "localhost" in config["ALLOWED_HOSTS"].split(",")
    assert config["RLARK_OIDC_ENABLED"] == "1"
    ingress = by_kind(objects, "Ingress")["rlark"]["spec"]
    assert ingress["tls"][0]["hosts"] == [ingress["rules"][0]["host"]]
    assert by_kind(objects, "Deployment")["rlark-web"]["spec"]["replicas"] == 3
