"""`rlark match --need`: a worker's needs beyond GPUs (cpu, memory, devices, pods: SPEC 15's
`needs` of `POST selector-matches/`) sent to the server's pre-flight, as the installed console
script against gunicorn and the demo fleet (gpu-a's pool cpu-a: 4 nodes of 64 CPUs, 256Gi)."""

from __future__ import annotations

from tests.cli.conftest import Site
from tests.cli.test_cli_files import one_error_line

POOL = ("--cluster", "gpu-a", "rlinf.io/pool=cpu-a", "topology.rlinf.io/cluster=gpu-a")


def test_needs_beyond_gpus_are_judged_by_the_server(site: Site) -> None:
    from clusters.inventory.services import poll_cluster
    from clusters.models import Cluster

    poll_cluster(cluster_id=Cluster.objects.get(name="gpu-a").pk)  # the occupancy, over HTTP
    fits = site.run("match", *POOL, "--need", "cpu=16", "--need", "memory=64Gi", "-o", "json")
    assert fits.code == 0, fits.err
    answer = fits.json()
    assert (answer["verdict"], answer["fits_now"], answer["fits_ever"]) == ("fits_now", 4, 4)
    assert answer["needs"] == {"cpu": "16", "memory": "64Gi", "pods": "1"}
    too_big = site.run("match", *POOL, "--need", "memory=300Gi", "--gpus", "0", "-o", "json")
    assert too_big.code == 0 and too_big.json()["fits_ever"] == 0
    assert "fits_ever: 0" in site.run("match", *POOL, "--need", "cpu=65").out
    unknown = site.run("match", *POOL, "--need", "ephemeral-storage=1Gi")
    assert unknown.code == 2
    assert "is not a resource RLark counts" in one_error_line(unknown)
    assert site.run("match", *POOL, "--need", "cpu").code == 2  # not RESOURCE=QUANTITY
