"""`register_fleet` and `poll_clusters`, against the fleet simulator over HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError
from pghistory.models import Events

from clusters.credentials import decrypt
from clusters.models import Cluster, ClusterState, NetworkDomain, Node
from clusters.simulator.testing import InProcessSimulator, run_simulator

pytestmark = pytest.mark.django_db

CLUSTERS: list[dict[str, Any]] = [
    {
        "name": name, "namespace": f"rl-{name}", "token": token,
        "nodes": [{"name": f"{name}-n{i}", "labels": {"pool": name}} for i in range(3)],
    }
    for name, token in (("left", "token-left"), ("right", "token-right"), ("open", None))
]


@pytest.fixture(scope="module")
def module_sim() -> Iterator[InProcessSimulator]:
    with run_simulator({"clusters": CLUSTERS}) as handle:
        yield handle


@pytest.fixture
def sim(module_sim: InProcessSimulator) -> Iterator[InProcessSimulator]:
    yield module_sim
    module_sim.reset()


def fleet_file(tmp_path: Path, **extra: Any) -> str:
    path = tmp_path / "fleet.yaml"
    path.write_text(yaml.safe_dump({"clusters": CLUSTERS, **extra}))
    return str(path)


def register(path: str, url: str, *flags: str) -> str:
    out = StringIO()
    call_command(
        "register_fleet", "--fleet", path, "--simulator-url", url, *flags,
        stdout=out, stderr=out,
    )
    return out.getvalue()


def test_register_fleet_registers_every_cluster_under_the_simulator(
    sim: InProcessSimulator, tmp_path: Path,
) -> None:
    register(fleet_file(tmp_path), sim.base_url + "/")
    clusters = {c.name: c for c in Cluster.objects.all()}
    assert sorted(clusters) == ["left", "open", "right"]
    left = clusters["left"]
    assert (left.api_url, left.namespace, left.verify_tls) == (
        f"{sim.base_url}/left", "rl-left", False,
    )
    assert decrypt(left.token_encrypted) == "token-left"
    assert clusters["open"].token_encrypted == ""
    assert clusters["left"].state == ClusterState.NEVER_POLLED


def test_register_fleet_is_idempotent(sim: InProcessSimulator, tmp_path: Path) -> None:
    path = fleet_file(tmp_path, network_domains=[{"name": "fabric", "clusters": ["left"]}])
    register(path, sim.base_url)
    events = Events.objects.count()
    register(path, sim.base_url)
    assert Cluster.objects.count() == 3
    assert NetworkDomain.objects.count() == 1
    assert Events.objects.count() == events


def test_register_fleet_creates_the_network_domains_of_the_file(
    sim: InProcessSimulator, tmp_path: Path,
) -> None:
    domains = [{"name": "fabric", "clusters": ["left", "right"]}]
    register(fleet_file(tmp_path, network_domains=domains), sim.base_url)
    domain = NetworkDomain.objects.get(name="fabric")
    assert sorted(domain.clusters.values_list("name", flat=True)) == ["left", "right"]


def test_register_fleet_refuses_a_domain_naming_an_unknown_cluster(
    sim: InProcessSimulator, tmp_path: Path,
) -> None:
    domains = [{"name": "fabric", "clusters": ["left", "nowhere"]}]
    with pytest.raises(CommandError, match="'nowhere' is not a cluster of this fleet"):
        register(fleet_file(tmp_path, network_domains=domains), sim.base_url)
    assert not Cluster.objects.exists()


def test_register_fleet_reports_an_invalid_fleet(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"clusters": [{"name": "Bad Name", "namespace": "x"}]}))
    with pytest.raises(CommandError, match="must be a DNS label"):
        register(str(path), "http://127.0.0.1:8700")


def test_register_fleet_polls_when_asked(sim: InProcessSimulator, tmp_path: Path) -> None:
    output = register(fleet_file(tmp_path), sim.base_url, "--poll")
    assert Node.objects.count() == 9
    assert set(Cluster.objects.values_list("state", flat=True)) == {ClusterState.OK}
    assert "polled left: ok, 3 nodes" in output


def test_poll_clusters_polls_every_enabled_cluster(
    sim: InProcessSimulator, tmp_path: Path,
) -> None:
    register(fleet_file(tmp_path), sim.base_url)
    Cluster.objects.filter(name="open").update(enabled=False)
    call_command("poll_clusters", stdout=StringIO())
    assert set(Node.objects.values_list("cluster__name", flat=True)) == {"left", "right"}


def test_poll_clusters_polls_one_cluster_by_name(sim: InProcessSimulator, tmp_path: Path) -> None:
    register(fleet_file(tmp_path), sim.base_url)
    out = StringIO()
    call_command("poll_clusters", "--cluster", "right", stdout=out)
    assert set(Node.objects.values_list("cluster__name", flat=True)) == {"right"}
    assert out.getvalue().startswith("right: ok, 3 nodes in 1 pages")


def test_poll_clusters_refuses_an_unknown_cluster(sim: InProcessSimulator) -> None:
    with pytest.raises(CommandError, match="No cluster named 'nowhere'"):
        call_command("poll_clusters", "--cluster", "nowhere")


def test_poll_clusters_fails_when_a_poll_fails(
    sim: InProcessSimulator, tmp_path: Path, settings: Any,
) -> None:
    settings.RLARK_INVENTORY_READ_ATTEMPTS = 1
    register(fleet_file(tmp_path), sim.base_url)
    sim.set_faults("left", error_rate=1)
    with pytest.raises(CommandError, match="Not polled: left"):
        call_command("poll_clusters", stdout=StringIO(), stderr=StringIO())
    assert Node.objects.filter(cluster__name="right").count() == 3
